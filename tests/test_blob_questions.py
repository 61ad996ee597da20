"""When a writer asks the store which blobs it holds (its dedup check): once per appended line,
earlier for an effect begun with ``waiting=True``, and never for a result recorded as
``unseen`` (an upstream's answer) — with the same record and the same blobs stored once. The
index is looked up for blobs of ``INDEX_QUESTION_MIN`` bytes or more only; a smaller one is
known only if this process's writers stored it, and is otherwise stored again."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rar.errors import AppendError
from rar.redaction import Redactor
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store.store import Store
from rar.store.verify import verify_store
from rar.store.writer import INDEX_QUESTION_MIN

QUIET = Redactor(env={})
SYSTEM = {"role": "system", "content": "You answer in one sentence. " * 40}  # over 1 KiB


class Questions:
    """Counts the store's known_blobs calls and the digests each looked up in the index."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[list[str]] = []
        original = store.known_blobs

        def counting(digests: list[str], *, index_for: Any = None) -> set[str]:
            self.asked.append(list(digests if index_for is None else index_for))
            return original(digests, index_for=index_for)

        monkeypatch.setattr(store, "known_blobs", counting)


def answer(i: int) -> dict[str, Any]:
    return {"http": {"status": 200, "body": f"answer {i} " + "y" * 600}, "cached": False}


def call(run: Run, i: int, **finish: Any) -> dict[str, Any]:
    effect = run.begin_effect(
        "llm",
        {"model": "m", "messages": [SYSTEM, {"role": "user", "content": f"q{i} " + "x" * 400}]},
        waiting=bool(finish.pop("waiting", False)),
    )
    result: dict[str, Any] = effect.finish(answer(i), **finish)
    return result


def test_an_effect_begun_waiting_asks_before_its_answer_and_not_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("asks early", store=store, redactor=QUIET)
    questions = Questions(store, monkeypatch)
    effect = run.begin_effect("llm", {"model": "m", "messages": [SYSTEM]}, waiting=True)
    assert len(questions.asked) == 1, "the request's blobs are asked about while waiting"
    early = set(questions.asked[0])
    effect.finish(answer(0))
    later = {d for asked in questions.asked[1:] for d in asked}
    assert not early & later, "a blob asked about early is not asked about again"
    run.finish()
    assert verify_store(store, [run.id]).ok


def test_an_unseen_result_is_not_asked_about_and_reads_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("unseen", store=store, redactor=QUIET)
    questions = Questions(store, monkeypatch)
    served = call(run, 1, waiting=True, read_back=False, unseen=True)
    run.finish()
    assert questions.asked == [questions.asked[0]], "one question, before the answer"
    event = next(e for e in store.events(run.id) if e.get("type") == "effect")
    assert event["result"]["digest"] not in questions.asked[0]
    assert store.resolve_payload(event["result"]) == served == answer(1)
    assert verify_store(store, [run.id]).ok


def _carried(store: Store, run_id: str) -> dict[str, str]:
    lines = store.run_dir(run_id).joinpath("events.jsonl").read_bytes().splitlines()
    effect = orjson.loads(next(line for line in lines if b'"type":"effect"' in line))
    carried: dict[str, str] = effect.get("carry", {})
    return carried


def test_large_blobs_another_run_stored_are_not_stored_again_small_ones_are(
    store: Store,
) -> None:
    first = record("first", store=store, redactor=QUIET)
    call(first, 1, waiting=True)
    first.finish()
    elsewhere = Store(store.root)  # another process: it knows only what the index holds
    second = record("second", store=elsewhere, redactor=QUIET)
    call(second, 1, waiting=True)  # the same request and answer: every blob is in the store
    second.finish()
    first_carried, second_carried = _carried(store, first.id), _carried(store, second.id)
    large = {d for d, text in first_carried.items() if len(text.encode()) >= INDEX_QUESTION_MIN}
    small = set(first_carried) - large
    assert large and small, "the request has blobs of both kinds"
    assert not large & set(second_carried), "a large blob the index knows travels again"
    assert small <= set(second_carried), "a small blob is stored again, not looked up"
    assert verify_store(Store(store.root)).ok


def test_small_blobs_are_never_looked_up_in_the_index(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("both sizes", store=store, redactor=QUIET)
    questions = Questions(store, monkeypatch)
    effect = run.begin_effect("llm", {"model": "m", "messages": [SYSTEM]}, waiting=True)
    effect.finish(answer(0))
    small = run.begin_effect(
        "llm", {"model": "m", "messages": [{"role": "user", "content": "short"}]}, waiting=True
    )
    small.finish(answer(1))
    run.finish()
    looked_up = {d for asked in questions.asked for d in asked}
    lines = store.run_dir(run.id).joinpath("events.jsonl").read_bytes().splitlines()
    carried = {d: t for line in lines for d, t in orjson.loads(line).get("carry", {}).items()}
    small = {d for d, text in carried.items() if len(text.encode()) < 1024}
    large = set(carried) - small
    assert small and large
    assert large <= looked_up, "a blob of 1 KiB or more is looked up"
    assert not small & looked_up, "a smaller one is not"
    assert verify_store(store, [run.id]).ok


def test_an_unseen_result_the_store_holds_is_a_second_copy_and_verifies(store: Store) -> None:
    first = record("first", store=store, redactor=QUIET)
    call(first, 1, read_back=False, unseen=True)
    first.finish()
    second = record("second", store=store, redactor=QUIET)
    call(second, 1, read_back=False, unseen=True)  # the very same answer, told unseen
    second.finish()
    effects = [
        next(e for e in store.events(r) if e.get("type") == "effect") for r in (first.id, second.id)
    ]
    assert effects[0]["result"]["digest"] == effects[1]["result"]["digest"]
    assert all(store.resolve_payload(e["result"]) == answer(1) for e in effects)
    assert verify_store(store).ok


def test_a_carried_blob_is_readable_before_its_line_is_settled_and_indexed_after(
    store: Store,
) -> None:
    """``append`` leaves locating a line's carried blobs for later (``settle``, which the
    proxy calls once its answer is sent, and every later append or close does first)."""
    run = record("settled later", store=store, redactor=QUIET)
    served = call(run, 3, read_back=False, unseen=True)
    writer = run._writer
    assert writer._unlocated, "the line's carried blobs are located later"
    event = next(e for e in store.events(run.id) if e.get("type") == "effect")
    assert store.resolve_payload(event["result"]) == served  # readable meanwhile
    run.settle()
    assert not writer._unlocated
    run.finish()
    reread = Store(store.root)
    assert reread.locate_blob(event["result"]["digest"]) is not None
    assert verify_store(reread, [run.id]).ok


def test_a_staged_hook_runs_after_the_write_and_before_the_fsync_and_never_fails_the_record(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import rar.store._fs as fs

    order: list[str] = []
    real_fsync = fs.os.fsync
    starts: list[tuple[int, int]] = []

    def fsync(fd: int) -> None:
        order.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(fs.os, "fsync", fsync)
    monkeypatch.setitem(
        fs._libc, "sync_file_range", lambda fd, at, n, flags: starts.append((at, n))
    )
    run = record("staged", store=store, redactor=QUIET)
    log_path = store.run_dir(run.id) / "events.jsonl"
    order.clear()
    seen: list[Any] = []

    def staged(recorded: Any) -> None:
        order.append("staged")
        seen.append((recorded, log_path.stat().st_size))
        raise RuntimeError("the caller's hook failed")

    size_before = log_path.stat().st_size
    effect = run.begin_effect("tool", {"name": "t"})
    result = effect.finish({"value": "x" * 300}, staged=staged)
    assert order[:2] == ["staged", "fsync"], "after the write, before it is durable"
    assert seen[0][0] == result and seen[0][1] > size_before, "the line was written first"
    assert starts and starts[0][0] == size_before, "writeback of the new line was started"
    assert "hook" in caplog.text and "failed" in caplog.text
    run.finish()
    assert verify_store(store, [run.id]).ok


def test_what_the_staged_hook_returns_runs_once_the_record_is_durable_never_if_it_fails(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rar.store._fs as fs

    order: list[str] = []
    real_fsync = fs.os.fsync
    failing = {"on": False}

    def fsync(fd: int) -> None:
        order.append("fsync")
        if failing["on"]:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(fs.os, "fsync", fsync)
    run = record("completed", store=store, redactor=QUIET)

    def staged(recorded: Any) -> Any:
        order.append("staged")
        return lambda: order.append("durable")

    order.clear()
    run.begin_effect("tool", {"name": "t"}).finish({"value": "x" * 300}, staged=staged)
    assert order == ["staged", "fsync", "durable"]
    order.clear()
    failing["on"] = True
    effect = run.begin_effect("tool", {"name": "t2"})
    with pytest.raises(AppendError):
        effect.finish({"value": "y" * 300}, staged=staged)
    assert order[:2] == ["staged", "fsync"] and "durable" not in order, order
