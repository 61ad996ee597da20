"""The Run context records every effect through one door."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import orjson
import pytest

from rar.errors import CanonicalizationError, RunClosedError, RunLockedError
from rar.hashing import Canonical, digest_value
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.blobs import CODEC_ZSTD, PackReader
from rar.store.events import EVENT_ADAPTER
from rar.store.store import Store
from rar.store.verify import verify_store


def _record(store: Store, **kwargs: object):  # type: ignore[no-untyped-def]
    kwargs.setdefault("redactor", Redactor(env={}))
    kwargs.setdefault("seed", 3)
    return record("goal", store=store, **kwargs)  # type: ignore[arg-type]


def test_an_effect_is_performed_once_and_recorded_with_request_and_result(store: Store) -> None:
    calls = []
    with _record(store) as run:
        value = run.effect("tool", {"name": "add", "args": [2, 3]}, lambda: calls.append(1) or 5)
    assert value == 5 and calls == [1]
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    assert len(effects) == 1
    event = effects[0]
    assert event["kind"] == "tool" and event["span"] == "run" and event["ordinal"] == 0
    assert event["request"]["value"] == {"name": "add", "args": [2, 3]}
    assert event["request"]["digest"] == digest_value({"name": "add", "args": [2, 3]})
    assert event["result"]["value"] == 5


def test_every_written_event_validates_against_the_event_union(store: Store) -> None:
    with _record(store) as run:
        with run.span("agent", agent="a"):
            run.effect("llm", {"messages": [{"role": "user", "content": "x"}]}, lambda: "y")
            run.log_event(
                "message",
                performative="INFORM",
                sender="a",
                receivers=["b"],
                content={"text": "hello"},
            )
            run.log_event("bdi.update", component="beliefs", op="add", key="k", value=1)
            run.log_event("note", text="a note")
        run.artifact("out/table.csv", b"a,b\n1,2\n", media_type="text/csv")
        run.now()
    for event in store.events(run.id):
        EVENT_ADAPTER.validate_python(event)


def test_a_large_payload_is_a_blob_and_a_small_one_is_inline(store: Store) -> None:
    big = {"text": "x" * 5000}
    with _record(store) as run:
        run.effect("tool", {"name": "big"}, lambda: big)
    event = [e for e in store.events(run.id) if e["type"] == "effect"][0]
    assert "value" in event["request"]
    assert "value" not in event["result"]
    assert store.get_json(event["result"]["digest"]) == big
    assert store.resolve_payload(event["result"]) == big


def test_an_exception_is_recorded_as_an_error_value_and_reraised(store: Store) -> None:
    def boom() -> None:
        raise ZeroDivisionError("division by zero")

    with pytest.raises(ZeroDivisionError), _record(store) as run:
        run.effect("tool", {"name": "div"}, boom)
    event = [e for e in store.events(run.id) if e["type"] == "effect"][0]
    assert event["error"] == {
        "type": "ZeroDivisionError",
        "message": "division by zero",
        "module": "builtins",
    }
    assert "result" not in event
    assert store.manifest(run.id).status == "failed"


def test_a_result_that_is_not_json_is_an_error_in_the_record(store: Store) -> None:
    with _record(store) as run, pytest.raises(CanonicalizationError, match="cannot be recorded"):
        run.effect("tool", {"name": "bytes"}, lambda: b"raw")
    event = [e for e in store.events(run.id) if e["type"] == "effect"][0]
    assert event["error"]["type"] == "CanonicalizationError"


def test_clock_random_and_ids_go_through_the_record_and_follow_the_seed(store: Store) -> None:
    values = []
    for _ in range(2):
        with _record(store, seed=42) as run:
            values.append((run.random(), run.randint(1, 6), run.uuid()))
            run.now()
        kinds = [e["kind"] for e in store.events(run.id) if e["type"] == "effect"]
        assert kinds == ["random", "random", "uuid", "clock"]
    assert values[0] == values[1]
    assert isinstance(values[0][2], uuid.UUID) and values[0][2].version == 4
    with _record(store, seed=43) as other:
        assert other.random() != values[0][0]


def test_span_paths_are_stable_and_ordinals_count_per_span(store: Store) -> None:
    with _record(store) as run:
        run.effect("tool", {"i": 0}, lambda: 0)
        with run.span("planner"):
            with run.span("research"):
                run.effect("llm", {"i": 1}, lambda: 1)
            with run.span("research"):
                run.effect("llm", {"i": 2}, lambda: 2)
                run.effect("llm", {"i": 3}, lambda: 3)
        run.effect("tool", {"i": 4}, lambda: 4)
    effects = [(e["span"], e["ordinal"]) for e in store.events(run.id) if e["type"] == "effect"]
    assert effects == [
        ("run", 0),
        ("run/planner/research", 0),
        ("run/planner/research#2", 0),
        ("run/planner/research#2", 1),
        ("run", 1),
    ]


def test_parallel_asyncio_branches_keep_their_own_span_and_ordinals(store: Store) -> None:
    async def branch(run, name: str, delays: list[float]):  # type: ignore[no-untyped-def]
        with run.span(name):
            for i, delay in enumerate(delays):

                async def call(i: int = i, delay: float = delay) -> str:
                    await asyncio.sleep(delay)
                    return f"{name}-{i}"

                await run.aeffect("llm", {"branch": name, "i": i}, call)

    async def main(run) -> None:  # type: ignore[no-untyped-def]
        await asyncio.gather(branch(run, "a", [0.02, 0.0, 0.01]), branch(run, "b", [0.0, 0.015]))

    with _record(store) as run:
        asyncio.run(main(run))
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    by_span = {(e["span"], e["ordinal"]): e["result"]["value"] for e in effects}
    assert by_span == {
        ("run/a", 0): "a-0",
        ("run/a", 1): "a-1",
        ("run/a", 2): "a-2",
        ("run/b", 0): "b-0",
        ("run/b", 1): "b-1",
    }


def test_the_manifest_records_environment_config_and_finish(store: Store) -> None:
    with _record(
        store,
        inputs={"question": "why?"},
        config={"mode": "owl_lite"},
        models=[{"provider": "scripted", "model": "m"}],
        tools=[{"name": "calc", "version": "1"}],
        secrets=["env:OPENAI_API_KEY"],
    ) as run:
        run.effect("tool", {}, lambda: 1)
    manifest = store.manifest(run.id)
    assert manifest.status == "completed" and manifest.finished_at
    assert manifest.config == {"seed": 3, "durable": True, "mode": "owl_lite"}
    assert manifest.inputs["question"].digest == digest_value("why?")
    assert manifest.environment["python"] and manifest.environment["rar"]
    assert manifest.secrets == ["env:OPENAI_API_KEY"]
    events = store.events(run.id)
    assert manifest.events == len(events) and manifest.head
    assert manifest.stats["effects"] == {"tool": 1}


def test_workspace_is_snapshotted_and_the_state_diff_recorded(store: Store, tmp_path: Path) -> None:
    space = tmp_path / "ws"
    space.mkdir()
    (space / "keep.txt").write_text("same")
    (space / "change.txt").write_text("old")
    (space / "gone.txt").write_text("bye")
    with _record(store, workspace=space) as run:

        def work() -> str:
            (space / "change.txt").write_text("new")
            (space / "gone.txt").unlink()
            (space / "sub").mkdir()
            (space / "sub" / "new.txt").write_text("hello")
            return "done"

        run.effect("tool", {"name": "work"}, work)
    finished = store.events(run.id)[-1]
    assert finished["type"] == "run.finished"
    assert finished["state_diff"] == {
        "added": ["sub/new.txt"],
        "changed": ["change.txt"],
        "removed": ["gone.txt"],
    }
    snapshots = [e for e in store.events(run.id) if e["type"] == "snapshot"]
    assert [s["phase"] for s in snapshots] == ["before", "after"]
    tree = store.get_json(snapshots[1]["tree"])
    assert store.get_blob(tree["entries"]["sub/new.txt"]["digest"]) == b"hello"


def test_a_second_writer_on_the_same_run_gets_a_lock_error(store: Store) -> None:
    from rar.store.writer import RunWriter

    with _record(store) as run:
        with pytest.raises(RunLockedError, match="being written by another process"):
            RunWriter(store, run.id, redactor=Redactor(env={}), create=False)
        run.effect("tool", {}, lambda: 1)
    assert verify_store(store, [run.id]).ok


def test_effects_after_finish_are_refused(store: Store) -> None:
    with _record(store) as run:
        pass
    with pytest.raises(RunClosedError, match="already finished"):
        run.effect("tool", {}, lambda: 1)


@pytest.mark.usefixtures("blobs_in_packs")
def test_secrets_are_redacted_everywhere_before_anything_is_written(store: Store) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    filler = "the quick brown fox jumps over the lazy dog " * 40

    def leaky() -> dict[str, str]:
        return {"echo": f"your key is {key}"}

    def failing() -> None:
        raise RuntimeError(f"401 for key {key}")

    with record(
        f"goal mentioning {key}",
        store=store,
        redactor=Redactor(env={}),
        inputs={"prompt": f"use {key}"},
        tags={"note": key},
        models=[{"provider": "openai", "model": "gpt", "api_key": key}],
        config={"base_url": f"https://user:{key}@example.org/v1"},
        authority=f"ci with {key}",
    ) as run:
        with run.span("agent", token_hint=key):
            run.log_event("note", text=f"saw {key}")
        got = run.effect(
            "llm",
            {
                "headers": {"Authorization": f"Bearer {key}"},
                "messages": [
                    {"role": "user", "content": key * 30},
                    # large and repetitive: stored zstd-compressed, where a leaked key would
                    # not show in the pack's raw bytes
                    {"role": "user", "content": f"{filler} token {key} {filler}"},
                ],
            },
            leaky,
        )
        with pytest.raises(RuntimeError):
            run.effect("tool", {"name": "x"}, failing)
    assert key not in got["echo"] and "[REDACTED:" in got["echo"]
    leaked = []
    compressed: list[bytes] = []
    for path in store.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".pack":
                reader = PackReader(path.parent)
                records = reader.scan(path.stem).records
                decoded = [reader.read(r.digest, r.location) for r in records]
                reader.close()
                compressed += [
                    raw
                    for r, raw in zip(records, decoded, strict=True)
                    if r.location.codec == CODEC_ZSTD
                ]
                # compressed: only decoding shows what the pack holds
                assert filler.encode() not in data, f"{path.name} stores the message raw"
                data += b"".join(decoded)  # the stored bytes and what they decode to
            if key.encode() in data:
                leaked.append(path)
    assert leaked == []
    # the long message really went through the compressed path, redacted before it was packed
    (message,) = [raw for raw in compressed if filler.encode() in raw]
    assert orjson.loads(message)["content"].startswith(f"{filler} token [REDACTED:")


def test_the_log_is_canonical_json_lines(store: Store) -> None:
    with _record(store) as run:
        run.effect("tool", {"b": 1, "a": [1.0, "é"]}, lambda: {"z": 0.5})
    from rar.hashing import canonical

    for line in (store.run_dir(run.id) / "events.jsonl").read_bytes().splitlines():
        assert canonical(orjson.loads(line)) == line


def test_messages_given_as_canonical_or_plain_dicts_hash_the_same(store: Store) -> None:
    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    wrapped = {"model": "m", "messages": [Canonical({"role": "user", "content": "hi"})]}
    with _record(store) as run:
        run.effect("llm", plain, lambda: 1)
        run.effect("llm", wrapped, lambda: 1)
    a, b = [e["request"]["digest"] for e in store.events(run.id) if e["type"] == "effect"]
    assert a == b
