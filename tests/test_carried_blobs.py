"""Small blobs carried in the log line of the event that first needs them (one fsync per effect).

See ``rar.store._carried``: a durable effect's new small JSON blobs travel in its own line, so
the line and its blobs become durable with one fsync; larger and binary blobs stay in packs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from rar.errors import AppendError, CorruptionError
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store import writer as writer_module
from rar.store._carried import CARRY_LIMIT, is_log_pack
from rar.store.blobs import CODEC_CARRIED
from rar.store.catalog import ReadOnlyStore
from rar.store.store import Store
from rar.store.verify import verify_store

QUIET = Redactor(env={})
REPLY = {"role": "assistant", "content": "a reply long enough to be a blob. " * 20}


def conversation(run: Run, steps: int = 6) -> str:
    messages: list[dict[str, Any]] = []
    answer: dict[str, Any] = {}
    for i in range(steps):
        messages.append({"role": "user", "content": f"question {i} " + "x" * 300})
        answer = run.effect(
            "llm",
            {"model": "m", "messages": messages},
            lambda i=i: {**REPLY, "content": f"{i}: {REPLY['content']}"},
        )
        messages.append(answer)
    return str(answer["content"])


def _lines(store: Store, run_id: str) -> list[dict[str, Any]]:
    data = (store.run_dir(run_id) / "events.jsonl").read_bytes()
    return [orjson.loads(line) for line in data.splitlines()]


def _pack_records(store: Store) -> int:
    reader = store.reader
    return sum(
        len(reader.scan(name).records) for name in reader.iter_pack_names() if not is_log_pack(name)
    )


def test_a_durable_effect_costs_one_fsync(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run = record("fsyncs", store=store, redactor=QUIET)
    run.effect("tool", {"warm": 1}, lambda: "up")  # the run's files exist already
    calls: list[str] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    before = _pack_records(store)  # the workspace snapshot taken at the start
    monkeypatch.setattr(os, "fsync", counted)
    result = run.effect("llm", {"model": "m", "messages": [{"role": "user", "content": "q" * 900}]},
                        lambda: REPLY)  # fmt: skip
    monkeypatch.setattr(os, "fsync", real)
    packed = _pack_records(store)
    run.finish()
    assert result == REPLY
    assert len(calls) == 1 and calls[0].endswith("events.jsonl"), calls
    effect = [e for e in _lines(store, run.id) if e.get("kind") == "llm"][0]
    # the message, its chain node and the reply were new: all three travel in the effect's line
    assert effect["result"]["digest"] in effect["carry"]
    assert len(effect["carry"]) == 3
    assert packed == before


def test_blobs_in_packs_cost_two_fsyncs(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout before carried blobs, still used for large and binary blobs: the comparison
    that makes the test above mean something."""
    monkeypatch.setattr(writer_module, "CARRY_LIMIT", 0)
    run = record("fsyncs", store=store, redactor=QUIET)
    run.effect("tool", {"warm": 1}, lambda: "up")
    calls: list[str] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                  real(fd))[1])  # fmt: skip
    run.effect("tool", {"n": 1}, lambda: REPLY)
    monkeypatch.setattr(os, "fsync", real)
    run.finish()
    assert [c.rsplit(".", 1)[-1] for c in calls] == ["pack", "jsonl"]


def test_large_and_binary_blobs_stay_in_packs(store: Store) -> None:
    run = record("big", store=store, redactor=QUIET)
    run.effect("tool", {"n": 1}, lambda: "z" * (CARRY_LIMIT + 10))
    run.artifact("data.bin", bytes(range(256)) * 8)
    run.finish()
    lines = _lines(store, run.id)
    assert not any("carry" in line for line in lines if line.get("kind") == "tool")
    assert _pack_records(store) >= 2
    assert verify_store(Store(store.root), [run.id]).ok


def test_carried_blobs_read_back_everywhere(store: Store) -> None:
    run = execute(conversation, store=store, redactor=QUIET)
    run_id = run.id
    effects = [e for e in store.events(run_id) if e["type"] == "effect"]
    assert all("carry" not in e for e in effects)  # readers never see the carried bytes
    last = effects[-1]
    want = {**REPLY, "content": f"5: {REPLY['content']}"}
    # a fresh store object, with the index
    fresh = Store(store.root)
    location = fresh.locate_blob(last["result"]["digest"])
    assert location is not None and location.codec == CODEC_CARRIED
    assert fresh.resolve_payload(last["result"]) == want
    assert len(fresh.resolve_payload(last["request"])["messages"]) == 11
    fresh.close()
    # without any index: found by scanning the logs, and the index is rebuilt with them
    (store.root / "index.sqlite").unlink()
    rebuilt = Store(store.root)
    assert rebuilt.resolve_payload(last["result"]) == want
    assert rebuilt.locate_blob(last["result"]["digest"]) == location
    rebuilt.close()
    # a reader that writes nothing
    assert ReadOnlyStore(store.root).resolve_payload(last["request"])["messages"][-1]["content"]
    report = verify_store(Store(store.root), [run_id])
    assert report.ok, report.problems
    assert verify_store(Store(store.root)).ok
    again = replay(run_id, store=Store(store.root), redactor=QUIET)
    assert again.replay_status == "reproducible"


def test_a_flipped_byte_in_a_carried_blob_is_caught(store: Store) -> None:
    run = execute(conversation, store=store, redactor=QUIET)
    effect = [e for e in store.events(run.id) if e["type"] == "effect"][2]
    digest = effect["result"]["digest"]
    location = store.locate_blob(digest)
    assert location is not None and location.codec == CODEC_CARRIED
    store.close()
    log = store.run_dir(run.id) / "events.jsonl"
    data = bytearray(log.read_bytes())
    at = location.offset + location.stored_size // 2
    assert data[at : at + 1].isalpha()
    data[at] ^= 0x20  # a letter's case: the line still parses
    log.write_bytes(bytes(data))
    fresh = Store(store.root)
    with pytest.raises(CorruptionError, match="does not match its digest"):
        fresh.get_blob(digest)
    report = verify_store(Store(store.root), [run.id])
    whats = {p.what for p in report.problems}
    assert not report.ok
    assert "blob-corrupt" in whats or "blob-missing" in whats, report.problems
    print(report.problems)
    assert "chain" in whats, report.problems


def test_a_failed_carrying_append_loses_no_blob(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("append fails", store=store, redactor=QUIET)
    run.effect("tool", {"warm": 1}, lambda: "up")
    log = run._writer.log  # the one place the test reaches inside: to make one write fail
    real = log._file.write
    fired: list[int] = []

    def failing(data: bytes, *, sync: bool = False, while_syncing: Any = None) -> None:
        if not fired:
            fired.append(len(data))
            raise AppendError(log.path, "injected: no space left on device")
        real(data, sync=sync, while_syncing=while_syncing)

    monkeypatch.setattr(log._file, "write", failing)
    with pytest.raises(AppendError):
        run.effect("tool", {"n": 2}, lambda: REPLY)
    assert fired, "the fault did not fire"
    # the same payload again: its blob was not lost with the failed line
    assert run.effect("tool", {"n": 3}, lambda: REPLY) == REPLY
    run.finish()
    fresh = Store(store.root)
    report = verify_store(fresh, [run.id])
    assert report.ok, report.problems
    ref = [e for e in fresh.events(run.id) if e.get("kind") == "tool"][-1]["result"]
    assert fresh.resolve_payload(ref) == REPLY


def test_runs_share_carried_blobs(store: Store) -> None:
    first = execute(conversation, store=store, redactor=QUIET)
    second = execute(conversation, store=store, redactor=QUIET)
    carried = [digest for line in _lines(store, second.id) for digest in line.get("carry", {})]
    assert carried == []  # every blob the second run needs was carried by the first
    assert replay(second.id, store=Store(store.root), redactor=QUIET).replay_status == (
        "reproducible"
    )
    assert verify_store(Store(store.root), [first.id, second.id]).ok


def test_a_copied_run_reads_its_carried_blobs(store: Store, tmp_path: Path) -> None:
    """A run directory copied into another store (with no packs) keeps its small blobs."""
    run = execute(conversation, store=store, redactor=QUIET)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copytree(store.run_dir(run.id), other / run.id)
    copy = Store(other)
    effect = [e for e in copy.events(run.id) if e["type"] == "effect"][-1]
    assert copy.resolve_payload(effect["result"])["content"].startswith("5: ")


def test_the_last_line_of_a_run_carries_nothing(store: Store) -> None:
    """`rar list` reads a run's last line from the end of its log: it stays short."""

    def agent(run: Run) -> dict[str, str]:
        return {"answer": "a long final answer. " * 1000}

    run = execute(agent, store=store, redactor=QUIET)
    last = _lines(store, run.id)[-1]
    assert last["type"] == "run.finished" and "carry" not in last
    assert len(orjson.dumps(last)) < 2048
    assert Store(store.root).resolve_payload(last["result"])["answer"].startswith("a long")


def test_a_bad_carry_limit_is_refused_before_anything_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rar.errors import ConfigError

    monkeypatch.setenv("RAR_CARRY_LIMIT", "lots")
    root = tmp_path / "runs"
    with pytest.raises(ConfigError, match="RAR_CARRY_LIMIT is 'lots'"):
        record("refused", store=root, redactor=QUIET)
    assert not root.exists() or [p.name for p in root.iterdir() if p.is_dir()] in ([], ["blobs"])


def test_a_run_without_fsync_does_not_keep_its_carried_blobs_in_memory(store: Store) -> None:
    run = record("no fsync", store=store, durable=False, redactor=QUIET)
    for i in range(50):
        run.effect("tool", {"i": i}, lambda i=i: {**REPLY, "i": i})
    assert len(store.pending_blobs) <= 2  # each carried blob is handed over once written
    run.finish()
    assert verify_store(Store(store.root), [run.id]).ok
