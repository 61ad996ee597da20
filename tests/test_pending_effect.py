"""``Run.begin_effect``: an effect whose place is taken at once and whose result comes later."""

from __future__ import annotations

from typing import Any

import pytest

from rar.errors import RunClosedError
from rar.redaction import Redactor
from rar.replay import NondeterminismError, execute, replay
from rar.replay.source import RecordedEffects
from rar.runtime.run import Run
from rar.store.store import Store

QUIET = Redactor(env={})
SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"


def streamed(run: Run, chunks: list[str]) -> dict[str, Any]:
    """A stream whose answer is whole only at its end, with a clock read while it arrives."""
    effect = run.begin_effect("llm", {"model": "m", "prompt": "tell me"})
    recorded = effect.served()
    during = run.now().isoformat()  # takes the span's next ordinal, after the stream's
    if recorded is None:
        recorded = effect.finish({"text": "".join(chunks)})
    return {"text": recorded["text"], "during": during}


def failing(run: Run) -> str:
    effect = run.begin_effect("tool", {"name": "flaky"})
    if effect.served() is None:
        try:
            raise ConnectionError("the upstream closed the stream")
        except ConnectionError as exc:
            effect.fail(exc)
            raise
    return "unreachable"


def test_a_begun_effect_is_recorded_in_its_place_and_replays_strictly(store: Store) -> None:
    run = execute(streamed, inputs={"chunks": ["a", "b", "c"]}, store=store, redactor=QUIET)
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    # the stream took ordinal 0 when it began, although its event was written after the clock's
    assert [(e["kind"], e["ordinal"]) for e in effects] == [("clock", 1), ("llm", 0)]
    assert store.resolve_payload(effects[1]["result"]) == {"text": "abc"}
    report = replay(run.id, store=store, redactor=QUIET)
    assert report.replay_status == "reproducible", report.as_dict()
    assert report.served == 2 and report.live == 0


def test_a_changed_request_through_begin_effect_is_caught(store: Store) -> None:
    run = execute(streamed, inputs={"chunks": ["x"]}, store=store, redactor=QUIET)

    def changed(run: Run, chunks: list[str]) -> dict[str, Any]:
        effect = run.begin_effect("llm", {"model": "m", "prompt": "tell me more"})
        effect.served()
        return {}

    report = replay(run.id, store=store, function=changed, redactor=QUIET)
    assert report.replay_status == "non-reproducible"
    assert report.first_divergence is not None
    assert report.first_divergence["kind"] == "llm"
    assert "different request" in report.first_divergence["reason"]
    assert report.first_divergence["differences"] == [
        {"field": "prompt", "expected": "tell me", "actual": "tell me more"}
    ]


def test_a_failed_effect_records_its_error_and_replays_it(store: Store) -> None:
    with pytest.raises(ConnectionError):
        execute(failing, store=store, redactor=QUIET)
    run_id = store.list_runs()[0].run_id
    (effect,) = [e for e in store.events(run_id) if e["type"] == "effect"]
    assert effect["error"]["type"] == "ConnectionError"
    report = replay(run_id, store=store, redactor=QUIET)
    # the recorded error is raised again in the replay, at the same place
    assert report.served == 1 and report.mismatched == 0
    assert report.error is not None and report.error["type"] == "ConnectionError"


def test_finish_is_redacted_durable_and_only_once(store: Store) -> None:
    with _recording(store) as run:
        effect = run.begin_effect("llm", {"model": "m"})
        recorded = effect.finish({"text": f"the key is {SECRET}"})
        assert SECRET not in recorded["text"]  # the agent gets what the record holds
        with pytest.raises(RuntimeError, match="already recorded"):
            effect.finish({"text": "again"})
        effect.fail(ValueError("late"))  # after finish: nothing more is recorded
        assert effect.event() is not None and effect.event()["ordinal"] == 0
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    assert len(effects) == 1 and "error" not in effects[0]
    assert SECRET.encode() not in (run.dir / "events.jsonl").read_bytes()


def test_serve_from_is_set_once_and_not_on_a_finished_run(store: Store) -> None:
    source_run = execute(streamed, inputs={"chunks": ["a"]}, store=store, redactor=QUIET)
    source = RecordedEffects.load(store, source_run.id, "strict")
    with _recording(store) as run:
        assert run.mode == "record"
        run.serve_from(source)
        assert run.mode == "strict"
        with pytest.raises(RuntimeError, match="already served"):
            run.serve_from(source)
        with pytest.raises(NondeterminismError):  # the record's first effect is an llm call
            run.effect("tool", {"name": "other"}, lambda: 1)
    with pytest.raises(RunClosedError):
        run.serve_from(source)


def _recording(store: Store) -> Run:
    from rar.runtime.start import record

    return record("begin_effect test", store=store, redactor=Redactor(env={}))
