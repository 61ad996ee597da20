"""`rar.replay.diff` and `rar diff`: step alignment, the first divergence, answers, evidence,
usage and manifest differences, exit codes and the JSON shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.redaction import Redactor
from rar.replay.diff import STATUSES, RunDiff, diff_runs
from rar.runtime.start import record
from rar.store.store import Store
from rar.tools import calculator

QUESTION = "What is (8.4e-3 / 2.1e-3) squared?"
SCRIPT: list[str | Message] = [
    Message.assistant("First the ratio.", [tool_call("calculator", "c1", expression="8.4/2.1")]),
    Message.assistant("Now square it.", [tool_call("calculator", "c2", expression="4.0**2")]),
    "The answer is 16.",
]


def record_agent(
    store: Store, script: Sequence[str | Message] = SCRIPT, *, cache: bool = False, seed: int = 7
) -> str:
    """The scripted agent with the calculator, recorded through the real client and loop."""
    run = record(QUESTION, store=store, seed=seed, redactor=Redactor(env={}))
    with run:
        client = Client(
            ScriptedModel(list(script), model="m"), run=run, profiles=Profiles(), cache=cache
        )
        with run.span("agent", agent="assistant"):
            result = Agent(client, [calculator], max_steps=5).run(QUESTION, run=run)
        run.finish(result={"answer": result.text, "stop_reason": result.stop_reason.value})
    return run.id


Work = Callable[[Any], None]


def record_work(store: Store, work: Work, *, answer: Any = "done", seed: int = 1) -> str:
    """A run whose body is ``work(run)``, finished with ``{"answer": answer}``."""
    run = record("work", store=store, seed=seed, durable=False, redactor=Redactor(env={}))
    with run:
        work(run)
        run.finish(result={"answer": answer})
    return run.id


def tools(*names: str, fail: str | None = None) -> Work:
    """Tool effects in the root span, one per name; ``fail`` raises instead of answering."""

    def work(run: Any) -> None:
        for name in names:
            if name == fail:
                with pytest.raises(RuntimeError):
                    run.effect("tool", {"name": name}, _boom)
            else:
                run.effect("tool", {"name": name}, lambda name=name: {"ok": True, "value": name})

    return work


def _boom() -> Any:
    raise RuntimeError("the service is down")


def statuses(diff: RunDiff) -> list[str]:
    return [step.status for step in diff.steps]


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_two_recordings_of_the_same_agent_are_equivalent(store: Store, store_path: Path) -> None:
    a, b = record_agent(store), record_agent(store)
    events_a, events_b = store.events(a), store.events(b)
    assert [e["ts"] for e in events_a] != [e["ts"] for e in events_b]
    diff = diff_runs(store, a, b)
    assert diff.equivalent and diff.first_divergence is None
    assert statuses(diff) == ["same"] * 5
    assert [s.step.kind for s in diff.steps] == ["llm", "tool", "llm", "tool", "llm"]
    code, out, _ = rar(store_path, "diff", a, b)
    assert code == 0 and "equivalent" in out and "5 same" in out


def test_a_different_model_answer_at_step_2_is_the_first_divergence(store: Store) -> None:
    changed = [SCRIPT[0], Message.assistant("Square it now.", SCRIPT[1].tool_calls), SCRIPT[2]]
    a, b = record_agent(store), record_agent(store, changed)  # type: ignore[union-attr]
    diff = diff_runs(store, a, b)
    assert not diff.equivalent
    first = diff.first_divergence
    assert first is not None and first.index == 2
    assert first.aligned.status == "different-response" and first.compared == "result"
    a_step, b_step = first.aligned.a, first.aligned.b
    assert a_step is not None and b_step is not None
    assert (a_step.span, a_step.kind, a_step.ordinal) == ("run/agent/step#2", "llm", 0)
    assert a_step.seq == b_step.seq == store.events(a)[a_step.seq - 1]["seq"]
    assert [f.path for f in first.fields] == ["response.content"]
    assert (first.fields[0].a, first.fields[0].b) == ("Now square it.", "Square it now.")
    # the tool call after it is the same; the next model request carries the changed message
    assert statuses(diff) == ["same", "same", "different-response", "same", "different-request"]
    assert diff.answer.equal


def test_a_different_request_names_the_field_that_changed(store: Store) -> None:
    def ask(temperature: float) -> Work:
        def work(run: Any) -> None:
            client = Client(
                ScriptedModel(["hi"], model="m"), run=run, profiles=Profiles(), cache=False
            )
            client.complete(messages=[Message.user("hello")], temperature=temperature)

        return work

    a, b = record_work(store, ask(0.2)), record_work(store, ask(0.7))
    first = diff_runs(store, a, b).first_divergence
    assert first is not None and first.aligned.status == "different-request"
    assert first.compared == "request"
    assert [(f.path, f.a, f.b) for f in first.fields] == [("request.temperature", 0.2, 0.7)]


def test_an_inserted_tool_call_is_extra_in_b_and_the_steps_after_it_still_align(
    store: Store,
) -> None:
    a = record_work(store, tools("search", "fetch", "summarize"))
    b = record_work(store, tools("search", "lookup", "fetch", "summarize"))
    diff = diff_runs(store, a, b)
    assert statuses(diff) == ["same", "extra-in-b", "same", "same"]
    first = diff.first_divergence
    assert first is not None and first.index == 1 and first.aligned.a is None
    assert first.aligned.b is not None and first.aligned.b.ordinal == 1
    assert first.detail is not None and "lookup" in first.detail
    assert not diff.equivalent and diff.answer.equal


def test_a_removed_step_is_extra_in_a(store: Store) -> None:
    a = record_work(store, tools("search", "fetch", "summarize"))
    b = record_work(store, tools("search", "summarize"))
    diff = diff_runs(store, a, b)
    assert statuses(diff) == ["same", "extra-in-a", "same"]
    assert diff.counts == {**dict.fromkeys(STATUSES, 0), "same": 2, "extra-in-a": 1}


def test_an_error_in_one_run_only_is_error_differs(store: Store) -> None:
    a = record_work(store, tools("search", "fetch"))
    b = record_work(store, tools("search", "fetch", fail="fetch"))
    diff = diff_runs(store, a, b)
    assert statuses(diff) == ["same", "error-differs"]
    first = diff.first_divergence
    assert first is not None and first.compared == "error" and "in B only" in first.reason
    by_path = {f.path: f for f in first.fields}
    assert by_path["result"].change == "removed" and by_path["error"].change == "added"
    assert by_path["error"].b["message"] == "the service is down"


def test_the_final_answers_are_shown_as_a_unified_diff(store: Store) -> None:
    a = record_work(store, tools("search"), answer="Ea is 55.3 kJ/mol.\nConfidence: high")
    b = record_work(store, tools("search"), answer="Ea is 55.3 kJ/mol.\nConfidence: low")
    diff = diff_runs(store, a, b)
    assert statuses(diff) == ["same"] and diff.first_divergence is None
    assert not diff.answer.equal and not diff.equivalent
    assert "-Confidence: high" in diff.answer.diff and "+Confidence: low" in diff.answer.diff
    assert diff.answer.diff[0] == f"--- a/{a}"


def test_evidence_anchors_added_removed_and_changed(store: Store) -> None:
    def anchor(doc: str, where: str, content: str) -> dict[str, Any]:
        return {
            "doc_id": doc,
            "location": where,
            "content_hash": f"sha256:{content}",
            "snippet": f"text of {doc}",
            "relevance_score": 0.9,
        }

    def cite(*anchors: dict[str, Any]) -> Work:
        return lambda run: run.log_event("evidence", anchors=list(anchors))

    kept, moved = anchor("paper-1", "p3", "aa"), anchor("paper-2", "p7", "bb")
    a = record_work(store, cite(kept, moved))
    b = record_work(store, cite(anchor("paper-1", "p3", "cc"), anchor("paper-3", "p1", "dd")))
    diff = diff_runs(store, a, b)
    assert statuses(diff) == ["different-result"]
    assert [x["doc_id"] for x in diff.evidence.added] == ["paper-3"]
    assert [x["doc_id"] for x in diff.evidence.removed] == ["paper-2"]
    assert diff.evidence.changed == (
        {
            "doc_id": "paper-1",
            "doc_title": None,  # these anchors were recorded without a title
            "location": "p3",
            "a": "sha256:aa",
            "b": "sha256:cc",
            "snippet": "text of paper-1",
        },
    )
    same = diff_runs(store, a, record_work(store, cite(moved, kept)))
    assert not same.evidence  # the same anchors cited in another order


def test_usage_and_cache_hits_are_reported_without_breaking_equivalence(store: Store) -> None:
    a = record_agent(store, cache=True)
    b = record_agent(store, cache=True)  # served from the cache a filled
    diff = diff_runs(store, a, b)
    assert diff.equivalent
    metrics = {m.name: m for m in diff.metrics}
    assert (metrics["llm.cached_calls"].a, metrics["llm.cached_calls"].b) == (0, 3)
    assert metrics["llm.cached_calls"].delta == 3
    assert metrics["llm.cache_hit_rate"].b == 1.0
    assert metrics["llm.input_tokens"].delta == 0 and "wall_time_us" in metrics


def test_manifest_differences_are_reported_and_do_not_count_by_themselves(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rar.runtime import start as run_module

    a = record_work(store, tools("search"), seed=1)
    real = run_module.environment_fingerprint
    monkeypatch.setattr(
        run_module,
        "environment_fingerprint",
        lambda: {**real(), "python": "3.99.0", "git": {"commit": "abc123", "dirty": True}},
    )
    b = record_work(store, tools("search"), seed=2)
    diff = diff_runs(store, a, b)
    assert diff.equivalent
    fields = {f.path: f for f in diff.manifest}
    assert (fields["config.seed"].a, fields["config.seed"].b) == (1, 2)
    assert fields["environment.python"].b == "3.99.0"
    assert "environment.git" in fields or "environment.git.commit" in fields
    assert not any(path.startswith(("run_id", "created_at", "workspace")) for path in fields)


def test_rar_diff_of_a_run_with_itself_is_bad_input(store: Store, store_path: Path) -> None:
    a = record_work(store, tools("search"))
    code, out, err = rar(store_path, "diff", a, a.rsplit("-", 1)[1])
    assert code == 2 and out == ""
    assert f"both arguments name run {a}; give two different runs" in err
    assert diff_runs(store, a, a).equivalent  # the library allows it


def test_rar_diff_of_an_unknown_run_exits_2(store: Store, store_path: Path) -> None:
    a = record_work(store, tools("search"))
    code, _, err = rar(store_path, "diff", a, "nosuchrun")
    assert code == 2 and "nosuchrun" in err


def test_rar_diff_exits_1_and_explains_the_first_divergence(store: Store, store_path: Path) -> None:
    changed = [SCRIPT[0], Message.assistant("Square it now.", SCRIPT[1].tool_calls), SCRIPT[2]]
    a, b = record_agent(store), record_agent(store, changed)  # type: ignore[union-attr]
    code, out, _ = rar(store_path, "diff", a, b)
    assert code == 1
    assert "different" in out and "first divergence at step 3 of 5: different-response" in out
    assert "run/agent/step#2" in out and "response.content" in out
    assert "Now square it." in out and "Square it now." in out
    assert "3 same not shown" in out and "manifest differences" in out


def test_rar_diff_json_has_the_documented_shape(store: Store, store_path: Path) -> None:
    a = record_work(store, tools("search", "fetch"))
    b = record_work(store, tools("search", "lookup", "fetch"), answer="other", seed=2)
    code, out, _ = rar(store_path, "diff", a, b, "--json")
    data = orjson.loads(out)
    assert code == 1
    assert set(data) == {
        "a",
        "b",
        "equivalent",
        "counts",
        "first_divergence",
        "steps",
        "answer",
        "evidence",
        "metrics",
        "manifest",
        "manifest_omitted",
    }
    assert set(data["a"]) == {"run_id", "goal", "status", "events", "steps"}
    assert data["equivalent"] is False and set(data["counts"]) == set(STATUSES)
    assert set(data["first_divergence"]) == {
        "index",
        "status",
        "span",
        "kind",
        "a",
        "b",
        "reason",
        "compared",
        "fields",
        "fields_omitted",
        "detail",
    }
    assert data["steps"][1] == {
        "index": 1,
        "status": "extra-in-b",
        "span": "run",
        "kind": "tool",
        "a": None,
        "b": {"seq": data["steps"][1]["b"]["seq"], "ordinal": 1},
    }
    assert set(data["answer"]) == {"equal", "a", "b", "status_a", "status_b", "diff"}
    assert set(data["evidence"]) == {"added", "removed", "changed"}
    assert set(data["metrics"][0]) == {"name", "a", "b", "delta"}
    assert set(data["manifest"][0]) == {"path", "change", "a", "b"}
