"""The viewer's flow answer, ``/api/runs/{id}/flow``: a run's agentic flows (``flow.step``,
``flow.merge``, ``flow.end`` events) grouped by flow walk, each node with the events of its span,
the statistics read from their payload, and malformed flow events skipped with a reason.

The runs here imitate what ``rar.flow`` records: CodeSummarizer → FeatureIdentifier → five
FeatureAnalyzer splits (the third retried, then failed) → a 5↣1 merge → AnswerGenerator. The
browser tests of the Flow panel (``test_viewer_flow_browser.py``) draw the same runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from browser import ViewerServer
from rar.export.html import export_data
from rar.redaction import Redactor
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store.store import Store
from rar.viewer.flows import flow_document

XSS = '<img src=x onerror="window.__xss=1">'
GRAPH = (
    "M, CodeSummarizer, ↴, M, FeatureIdentifier, →, ⇉ 1/5, M, FeatureAnalyzer, 5↣1, →, M, "
    "AnswerGenerator"
)
FAILED_GRAPH = "M, CodeSummarizer, ↴, M, FeatureIdentifier, →, ⇉ 3/5, M, FeatureAnalyzer, ⚠, ☢"
REPORT = {
    "requests": 9,
    "cached": 1,
    "input_tokens": 5210,
    "output_tokens": 1432,
    "request_duration_s": 12.5,
    "effective_duration_s": 4.25,
    "tps": 531.2,
    "output_tps": 113.0,
    "cost": 0.0123,
}
ERROR_SPLIT = 3


def _step(
    run: Run,
    flow: str,
    agent: str,
    *,
    parents: list[str],
    agent_type: str = "CONVERSATION",
    split: list[int] | None = None,
    status: str = "ok",
    attempts: int = 1,
    symbols: list[str] | None = None,
    next_agent: str | None = None,
    error: dict[str, Any] | None = None,
    grade: bool | None = None,
) -> str:
    """One agent on one context, in its own span: its model calls, then its ``flow.step``."""
    with run.span(agent, agent=agent):
        node = run.span_path
        for attempt in range(attempts):
            run.effect(
                "llm",
                {"model": "fake", "agent": agent, "attempt": attempt, "split": split},
                lambda a=attempt: {"content": f"{agent} answer {a}"},
            )
        run.log_event(
            "flow.step",
            flow=flow,
            node=node,
            agent=agent,
            agent_type=agent_type,
            category="M",
            parents=parents,
            split=split,
            status=status,
            attempts=attempts,
            grade=grade,
            next=next_agent,
            symbols=symbols if symbols is not None else ["M", agent],
            error=error,
        )
    return node


def walk_feature_flow(run: Run, flow: str = "qa", *, splits: int = 5) -> dict[str, Any]:
    """The feature flow, recorded under a span ``flow-{flow}``; returns its nodes."""
    with run.span(f"flow-{flow}"):
        summarizer = _step(
            run,
            flow,
            "CodeSummarizer",
            parents=[],
            agent_type="START_CONVERSATION_WITH_SYSTEM_PROMPT",
            symbols=["M", "CodeSummarizer", "↴"],
            next_agent="FeatureIdentifier",
        )
        identifier = _step(
            run,
            flow,
            "FeatureIdentifier",
            parents=[summarizer],
            symbols=["M", "FeatureIdentifier", "→"],
            next_agent="FeatureAnalyzer",
        )
        analyzers = []
        for index in range(1, splits + 1):
            failed = index == ERROR_SPLIT
            analyzers.append(
                _step(
                    run,
                    flow,
                    "FeatureAnalyzer",
                    parents=[identifier],
                    agent_type="COMPLETION",
                    split=[index, splits],
                    status="error" if failed else "ok",
                    attempts=2 if failed else 1,
                    symbols=[f"⇉ {index}/{splits}", "M", "FeatureAnalyzer"]
                    + (["⚠", "☢"] if failed else []),
                    next_agent=None if failed else "AnswerGenerator",
                    error=(
                        {"type": "ValueError", "message": "the answer is not JSON"}
                        if failed
                        else None
                    ),
                )
            )
        with run.span("merge"):
            merge = run.span_path
            run.log_event(
                "flow.merge",
                flow=flow,
                node=merge,
                agent="FeatureAnalyzer",
                parents=analyzers,
                inputs=splits,
                outputs=1,
                errored=1,
            )
        answer = _step(
            run,
            flow,
            "AnswerGenerator",
            parents=[merge],
            agent_type="START_CONVERSATION",
            symbols=[f"{splits}↣1", "→", "M", "AnswerGenerator"],
            grade=True,
        )
        run.log_event(
            "flow.end",
            flow=flow,
            graphs=[GRAPH.replace("5↣1", f"{splits}↣1"), FAILED_GRAPH],
            report={**REPORT, "requests": splits + 4},
            contexts=2,
            errored=1,
        )
    return {
        "summarizer": summarizer,
        "identifier": identifier,
        "analyzers": analyzers,
        "merge": merge,
        "answer": answer,
    }


def record_flow_run(store: Store, *, splits: int = 5, goal: str = "feature flow") -> str:
    run = record(goal, store=store, seed=21, durable=False, redactor=Redactor(env={}))
    with run:
        walk_feature_flow(run, splits=splits)
        run.finish(result={"answer": "The features are A, B, C and D."})
    return run.id


def record_plain_run(store: Store) -> str:
    run = record("no flow here", store=store, seed=22, durable=False, redactor=Redactor(env={}))
    with run:
        run.effect("tool", {"name": "t", "args": {}}, lambda: 1)
        run.finish(result={"answer": "plain"})
    return run.id


def record_many_flows_run(store: Store) -> str:
    """Two flows (``alpha`` walked twice, ``beta`` once, one agent named with markup) among
    malformed and unknown flow events."""
    run = record("two flows", store=store, seed=23, durable=False, redactor=Redactor(env={}))
    with run:
        first = _step(run, "alpha", "Reader", parents=[], agent_type="START_CONVERSATION")
        beta = _step(run, "beta", XSS, parents=[], agent_type="COMPLETION")
        _step(run, "alpha", "Writer", parents=[first, "run/nowhere"], status="skipped")
        _step(run, "beta", "Checker", parents=[beta], grade=False, symbols=["M", "Checker", "✗"])
        run.log_event("flow.step", flow="beta", agent="NoNode")  # node and agent_type missing
        run.log_event(
            "flow.step",
            flow="beta",
            node="run/bad-split",
            agent="X",
            agent_type="COMPLETION",
            split=[0, 5],
        )
        run.log_event("flow.merge", flow="beta", node="run/m", agent="X")  # no inputs / outputs
        run.log_event(
            "flow.step", flow="alpha", node=first, agent="Again", agent_type="COMPLETION"
        )  # the same node twice in one walk
        run._emit({"type": "flow.future", "flow": "beta", "what": "a newer writer"})
        run.log_event("flow.end", flow="beta", graphs=["M, Checker, ✗"], contexts=1)
        run.log_event("flow.end", flow="alpha", graphs=["M, Reader, ○"], contexts=1)
        _step(run, "alpha", "Reader", parents=[], agent_type="START_CONVERSATION")  # walk 2
        run.finish(result={"answer": "two flows"})
    return run.id


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer-flow") / "runs"
    store = Store(root, create=True)
    ids = {
        "flow": record_flow_run(store),
        "plain": record_plain_run(store),
        "many": record_many_flows_run(store),
    }
    store.list_runs()
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        yield {"store": store, "ids": ids, "client": client}
    store.close()


def _flow(world: dict[str, Any], name: str) -> dict[str, Any]:
    answer = world["client"].get(f"/api/runs/{world['ids'][name]}/flow")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_flow_run_answers_its_steps_merge_and_end(world: dict[str, Any]) -> None:
    run_id = world["ids"]["flow"]
    body = _flow(world, "flow")
    assert body["id"] == run_id and body["skipped"] == []
    [flow] = body["flows"]
    assert flow["name"] == "qa" and flow["walk"] == 1
    agents = [s["agent"] for s in flow["steps"]]
    assert agents == [
        "CodeSummarizer",
        "FeatureIdentifier",
        *["FeatureAnalyzer"] * 5,
        "AnswerGenerator",
    ]
    summarizer, identifier, *rest = flow["steps"]
    analyzers, answer = rest[:5], rest[5]
    assert summarizer["parents"] == [] and identifier["parents"] == [summarizer["node"]]
    assert summarizer["node"] == "run/flow-qa/CodeSummarizer"
    assert summarizer["agent_type"] == "START_CONVERSATION_WITH_SYSTEM_PROMPT"
    assert [a["split"] for a in analyzers] == [[i, 5] for i in range(1, 6)]
    assert len({a["node"] for a in analyzers}) == 5
    assert all(a["parents"] == [identifier["node"]] for a in analyzers)
    failed = analyzers[ERROR_SPLIT - 1]
    assert failed["status"] == "error" and failed["attempts"] == 2
    assert failed["symbols"][-2:] == ["⚠", "☢"]
    assert failed["error"] == {
        "type": "ValueError",
        "message": "the answer is not JSON",
        "module": None,
    }
    assert [a["status"] for a in analyzers].count("ok") == 4
    [merge] = flow["merges"]
    assert merge["parents"] == [a["node"] for a in analyzers]
    assert (merge["inputs"], merge["outputs"], merge["errored"]) == (5, 1, 1)
    assert answer["parents"] == [merge["node"]] and answer["grade"] is True
    end = flow["end"]
    assert end["graphs"] == [GRAPH, FAILED_GRAPH]
    assert end["report"] == {**REPORT, "requests": 9} and end["report_error"] is None
    assert (end["contexts"], end["errored"]) == (2, 1)

    # each node's events: those recorded in its span, from its span.start to its span.end
    events = world["store"].events(run_id)
    for item in (*flow["steps"], merge):
        mine = [
            e["seq"]
            for e in events
            if e["span"] == item["node"] or e["span"].startswith(item["node"] + "/")
        ]
        assert item["events"] == {"first": mine[0], "last": mine[-1], "count": len(mine)}
        first = next(e for e in events if e["seq"] == mine[0])
        assert first["type"] == "span.start"
        assert mine[0] < item["seq"] < mine[-1]  # the flow.step event is inside its span
    assert failed["events"]["count"] == 5  # span.start, two model calls, flow.step, span.end
    detail = world["client"].get(f"/api/runs/{run_id}").json()
    assert detail["links"]["flow"] == f"/api/runs/{run_id}/flow"
    assert detail["summary"]["event_types"]["flow.step"] == 8


def test_a_run_without_flow_events_answers_no_flows(world: dict[str, Any]) -> None:
    body = _flow(world, "plain")
    assert body == {"id": world["ids"]["plain"], "flows": [], "skipped": []}
    missing = world["client"].get("/api/runs/no-such-run/flow")
    assert missing.status_code == 404 and missing.json()["error"] == "run-not-found"


def test_several_flows_and_malformed_events(world: dict[str, Any]) -> None:
    body = _flow(world, "many")
    flows = body["flows"]
    assert [(f["name"], f["walk"]) for f in flows] == [("alpha", 1), ("beta", 1), ("alpha", 2)]
    alpha, beta, again = flows
    assert [s["agent"] for s in alpha["steps"]] == ["Reader", "Writer"]
    assert alpha["steps"][1]["status"] == "skipped"
    assert alpha["steps"][1]["parents"] == [alpha["steps"][0]["node"], "run/nowhere"]
    assert [s["agent"] for s in beta["steps"]] == [XSS, "Checker"]
    assert beta["steps"][1]["grade"] is False
    assert alpha["end"]["graphs"] == ["M, Reader, ○"] and alpha["end"]["report"] is None
    assert beta["end"]["graphs"] == ["M, Checker, ✗"]
    assert [s["agent"] for s in again["steps"]] == ["Reader"] and again["end"] is None
    assert again["steps"][0]["node"] == "run/Reader#2"
    skipped = {(s["type"], s["flow"]): s["reason"] for s in body["skipped"]}
    assert len(body["skipped"]) == 5
    reasons = [s["reason"] for s in body["skipped"]]
    assert "node: Field required" in reasons[0] and "agent_type: Field required" in reasons[0]
    assert "split must be [index, total]" in reasons[1]
    assert "inputs: Field required" in skipped[("flow.merge", "beta")]
    assert "already in this flow" in reasons[3]
    assert skipped[("flow.future", "beta")] == "unknown flow event type 'flow.future'"
    assert all(isinstance(s["seq"], int) for s in body["skipped"])


def test_the_html_export_embeds_the_flow_answer(world: dict[str, Any]) -> None:
    for name in ("flow", "many", "plain"):
        data = export_data(world["store"], world["ids"][name])
        assert data["flow"] == _flow(world, name)


def test_flow_document_reads_odd_events_without_failing(world: dict[str, Any]) -> None:
    events: list[dict[str, Any]] = [
        {"seq": 1, "type": "flow.step"},  # nothing else
        {
            "seq": "2",
            "type": "flow.step",
            "flow": "f",
            "node": "n",
            "agent": "A",
            "agent_type": "COMPLETION",
            "span": 7,
        },  # odd seq and span types
        {
            "seq": 3,
            "type": "flow.step",
            "flow": "f",
            "node": "",
            "agent": "A",
            "agent_type": "COMPLETION",
        },
        {
            "seq": 4,
            "type": "flow.step",
            "flow": "f",
            "node": "m",
            "agent": "B",
            "agent_type": "COMPLETION",
            "status": "weird",
        },
        {
            "seq": 5,
            "type": "flow.end",
            "flow": "f",
            "report": {"digest": "sha256:" + "0" * 64, "size": 10},
        },
        {
            "seq": 6,
            "type": "flow.merge",
            "flow": "g",
            "node": "run/x",
            "agent": "C",
            "inputs": 2,
            "outputs": 1,
            "span": "run/x",
            "extra": "ignored",
        },
        {"seq": 7, "type": "note", "span": "run/x/y"},
        {"seq": "8", "type": "note", "span": "run/x"},
    ]
    doc = flow_document(world["store"], events)
    assert [s["seq"] for s in doc["skipped"]] == [1, "2", 3, 4]
    [f, g] = doc["flows"]
    assert f["steps"] == [] and f["end"]["report"] is None and f["end"]["report_error"]
    assert g["merges"][0]["events"] == {"first": 6, "last": 7, "count": 2}
