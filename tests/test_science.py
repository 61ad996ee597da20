"""The science runtime answers a research question with anchored evidence, offline."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.evidence import Corpus, EvidenceAnchor, demo_corpus_path, verify_anchors
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.replay import execute, replay, resume
from rar.science import protocol as p
from rar.science.orchestrator import Orchestrator
from rar.science.runtime import ask_question
from rar.store.store import Store

PROSE = "Why do narrow temperature ranges make Arrhenius estimates uncertain?"
SPECS = Path(__file__).resolve().parents[1] / "src" / "rar" / "science" / "specs"
needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_a_question_is_answered_with_cited_verifiable_evidence(store: Store) -> None:
    result = ask_question(PROSE, store=store)
    assert result.status == "completed" and result.audit["passed"]
    assert "[1]" in result.answer and result.anchors
    anchors = [EvidenceAnchor.model_validate(a) for a in result.anchors]
    assert verify_anchors(anchors, Corpus.load(demo_corpus_path())) == []
    kinds = {e["type"] for e in store.events(result.run_id)}
    assert {"message", "bdi.update", "evidence", "audit", "effect"} <= kinds


def test_the_record_shows_contract_net_rounds(store: Store) -> None:
    result = ask_question(PROSE, store=store)
    performatives = [e["performative"] for e in store.events(result.run_id)
                     if e["type"] == "message"]
    for expected in ("CFP", "BID", "AWARD", "REJECT", "REPORT"):
        assert expected in performatives


def test_the_same_question_twice_gives_the_same_answer_and_effects(store_path: Path) -> None:
    a = ask_question(PROSE, store=store_path, seed=5)
    b = ask_question(PROSE, store=store_path, seed=5)
    assert a.answer == b.answer and a.anchors == b.anchors
    store = Store(store_path)

    def digests(run_id: str) -> list[tuple[str, str]]:
        return [(e["request"]["digest"], e["result"]["digest"])
                for e in store.events(run_id) if e["type"] == "effect"]

    assert digests(a.run_id) == digests(b.run_id)
    assert rar(store_path, "diff", a.run_id, b.run_id)[0] == 0
    assert replay(a.run_id, store=store).reproducible


def test_it_works_on_a_corpus_it_has_never_seen(tmp_path: Path, store: Store) -> None:
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "glaciers.md").write_text(
        "# Glacier retreat\n\nAlpine glaciers retreat because summer melt exceeds winter "
        "accumulation.\n\nDebris cover slows melting by insulating the ice surface.\n")
    (corpus / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (corpus / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    result = ask_question("Why do alpine glaciers retreat?", corpus=corpus, store=store)
    assert result.status in ("completed", "completed_with_warnings")
    assert any(a["doc_id"] == "glaciers" for a in result.anchors)
    reasons = {s["path"]: s["reason"] for s in result.corpus_skipped}
    assert "not UTF-8" in reasons["latin1.txt"] and "image.png" in reasons


def test_owl_full_adds_an_argumentation_graph(store: Store) -> None:
    result = ask_question(PROSE, mode="owl_full", store=store)
    assert result.argumentation is not None and "grounded" in result.argumentation


def test_rar_run_json_has_the_documented_fields(store_path: Path) -> None:
    code, out, _ = rar(store_path, "run", PROSE, "--json")
    assert code == 0
    data = orjson.loads(out)
    assert {"run_id", "status", "answer", "anchors", "audit"} <= set(data)


def test_the_result_renders_in_jupyter(store: Store) -> None:
    result = ask_question(PROSE, store=store)
    markdown = result._repr_markdown_()
    assert result.run_id in markdown and "| 1 |" in markdown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", ""], "question is empty"),
        (["run", "x", "--corpus", "/no/such/dir"], "/no/such/dir"),
        (["run", "x", "--model", "nosuchprofile"], "unknown model or profile"),
        (["run"], "give a QUESTION or --spec"),
    ],
)
def test_bad_input_is_a_clear_error(store_path: Path, args: list[str], message: str) -> None:
    code, _, err = rar(store_path, *args)
    assert code == 2 and message in err


def test_an_invalid_spec_names_the_field(store_path: Path, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("task: hi\nmode: owl_huge\n")
    code, _, err = rar(store_path, "run", "--spec", str(spec))
    assert code == 2 and "'mode'" in err and str(spec) in err


def test_an_empty_corpus_is_refused(store_path: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = rar(store_path, "run", "anything", "--corpus", str(empty))
    assert code == 2 and str(empty) in err


def waiting_agent(run: Any, question: str, wait: dict[str, Any] | None = None) -> dict[str, Any]:
    wait = wait or {"name": p.WAIT_SECONDS, "seconds": 3600}
    arguments = {k: v for k, v in wait.items() if k != "name"}
    script = [
        Message.assistant(tool_calls=[tool_call(wait["name"], "w1", reason="data", **arguments)]),
        Message.assistant(tool_calls=[tool_call(
            p.FINALIZE, "f1", answer_markdown="Done after waiting.", confidence=0.5)]),
    ]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    orchestrator = Orchestrator(run, client, research=lambda q, k: {"anchors": []},
                                execute=lambda code: {"status": "ok"}, mode="owl_lite",
                                max_steps=4)
    return orchestrator.answer(question).result


def test_waiting_stops_the_run_and_resume_before_the_deadline_says_when_it_is_due(
    store: Store,
) -> None:
    from rar.replay.engine import ReplayRefusedError

    run = execute(waiting_agent, inputs={"question": "q"}, store=store)
    assert store.manifest(run.id).status == "waiting"
    events_before = len(store.events(run.id))
    due = r"waiting until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((59 min \d+ s|1 h 0 min) from now\)"
    with pytest.raises(ReplayRefusedError, match=due + ".*--now"):
        resume(run.id, store=store, function=waiting_agent)
    assert len(store.events(run.id)) == events_before  # a refused resume writes nothing
    assert store.manifest(run.id).status == "waiting"
    report = resume(run.id, store=store, function=waiting_agent, early=True)
    assert report.first_divergence is None
    assert store.manifest(run.id).status in ("completed", "completed_with_warnings")
    events = store.events(run.id)
    assert events[-1]["type"] == "run.finished"
    final = store.resolve_payload(events[-1]["result"])
    assert final["answer"] == "Done after waiting."
    notes = [e["text"] for e in events if e["type"] == "note"]
    assert any("resumed before its deadline" in text for text in notes)


def test_a_deadline_in_the_past_continues_at_once(store: Store) -> None:
    wait = {"name": p.WAIT_UNTIL, "until": "2020-01-01T00:00:00Z"}
    run = execute(waiting_agent, inputs={"question": "q", "wait": wait}, store=store)
    assert store.manifest(run.id).status != "waiting"
    events = store.events(run.id)
    assert not [e for e in events if e["type"] == "checkpoint"]
    assert store.resolve_payload(events[-1]["result"])["answer"] == "Done after waiting."


def test_a_run_resumes_without_now_once_its_deadline_has_passed(store: Store) -> None:
    import time

    wait = {"name": p.WAIT_SECONDS, "seconds": 1}
    run = execute(waiting_agent, inputs={"question": "q", "wait": wait}, store=store)
    assert store.manifest(run.id).status == "waiting"
    time.sleep(1.2)
    report = resume(run.id, store=store, function=waiting_agent)
    assert report.first_divergence is None
    assert store.manifest(run.id).status in ("completed", "completed_with_warnings")
    assert not [e for e in store.events(run.id) if e["type"] == "note"]


def test_rar_resume_of_a_run_not_yet_due_names_the_time_and_now_resumes_it(
    store_path: Path,
) -> None:
    store = Store(store_path, create=True)
    run = execute("test_science:waiting_agent", inputs={"question": "q"}, store=store)
    store.close()
    code, _, err = rar(store_path, "resume", run.id)
    assert code == 2 and "waiting until" in err and f"rar resume {run.id} --now" in err
    code, out, err = rar(store_path, "resume", run.id, "--now", "--json")
    assert code == 0, err
    assert json.loads(out)["first_divergence"] is None


def test_an_unreadable_deadline_goes_back_to_the_model_as_an_error(store: Store) -> None:
    wait = {"name": p.WAIT_UNTIL, "until": "tomorrow-ish"}
    run = execute(waiting_agent, inputs={"question": "q", "wait": wait}, store=store)
    tool_messages = [
        e for e in store.events(run.id) if e["type"] == "effect" and e["kind"] == "llm"
    ]
    second = store.resolve_payload(tool_messages[1]["request"])
    last = second["request"]["messages"][-1]
    assert last["role"] == "tool" and "ISO 8601" in last["content"]


@needs_sandbox
@pytest.mark.parametrize(("spec", "expected"), [("arrhenius.yaml", 102.9),
                                                 ("kissinger.yaml", 125.1)])
def test_numeric_questions_are_computed_in_the_sandbox(
    store_path: Path, spec: str, expected: float
) -> None:
    code, out, err = rar(store_path, "run", "--spec", str(SPECS / spec), "--json")
    assert code == 0, err
    data = orjson.loads(out)
    value = re.search(r"Ea = (\d+\.\d+) ± (\d+\.\d+) kJ/mol", data["answer"])
    assert value, data["answer"]
    assert abs(float(value.group(1)) - expected) < 0.05 and float(value.group(2)) < 1


def test_verify_reports_a_changed_passage_the_run_cites(store_path: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "notes"
    corpus.mkdir()
    doc = corpus / "glaciers.md"
    doc.write_text("# Glacier retreat\n\nAlpine glaciers retreat because summer melt exceeds "
                   "winter accumulation.\n")
    result = ask_question("Why do alpine glaciers retreat?", corpus=corpus, store=store_path)
    assert rar(store_path, "verify", result.run_id)[0] == 0
    doc.write_text("# Glacier retreat\n\nAlpine glaciers advance.\n")
    code, out, _ = rar(store_path, "verify", result.run_id)
    assert code == 1 and "anchor" in out


def challenging_agent(run: Any, question: str) -> dict[str, Any]:
    """A planner whose claim lacks evidence: the auditor challenges, the planner justifies."""
    claim = {"text": "Ea = 50 kJ/mol", "anchors": []}
    script = [
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_AUDIT, "a1", draft="Ea is 50 kJ/mol",
                                                claims=[claim])]),
        Message.assistant(tool_calls=[tool_call(p.REQUEST_MORE_EVIDENCE, "r1",
                                                claim=claim["text"], query="activation energy")]),
        Message.assistant(tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="Unsure.",
                                                claims=[], confidence=0.2)]),
    ]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    anchor = {"doc_id": "d", "doc_title": "D", "location": "paragraph_1",
              "content_hash": "sha256:" + "b" * 64, "snippet": "Ea was measured.",
              "relevance_score": 0.9}
    orchestrator = Orchestrator(run, client, research=lambda q, k: {"anchors": [anchor]},
                                execute=lambda code: {"status": "ok"}, mode="owl_dl",
                                max_steps=5)
    return orchestrator.answer(question).result


def test_a_challenge_is_answered_with_justify_and_a_dropped_claim_retracted(
    store: Store,
) -> None:
    run = execute(challenging_agent, inputs={"question": "q"}, store=store)
    performatives = [e["performative"] for e in store.events(run.id) if e["type"] == "message"]
    assert "CHALLENGE" in performatives and "JUSTIFY" in performatives
    assert "RETRACT" in performatives
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert "the audit did not pass" in result["warnings"]
    # the RETRACT says why the claim was challenged (the auditor's reasons)
    retract = next(
        e for e in store.events(run.id)
        if e["type"] == "message" and e["performative"] == "RETRACT"
    )
    reason = store.resolve_payload(retract["content"])["content"]["reason"]
    assert isinstance(reason, str) and reason and reason != "challenged"


@needs_sandbox
def test_contract_net_reports_say_whether_the_work_succeeded(store_path: Path) -> None:
    code, _out, err = rar(store_path, "run", "--spec", str(SPECS / "kissinger.yaml"), "--json")
    assert code == 0, err
    store = Store(store_path)
    run_id = store.list_runs()[0].run_id
    reports = {}
    for event in store.events(run_id):
        if event["type"] == "message" and event["performative"] == "REPORT":
            content = store.resolve_payload(event["content"])["content"]
            reports[event["sender"]] = content["success"]
    assert reports == {"researcher": True, "executor": True, "auditor": True}, reports


def planning_agent(run: Any, question: str) -> dict[str, Any]:
    """A planner whose first plan is invalid: it is told why, and plans again."""
    seen: list[Any] = []

    def model(request: Any) -> Any:
        seen.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            return Message.assistant(tool_calls=[tool_call(p.PLAN, "p1", goal="g", steps=[])])
        if turn == 1:
            return Message.assistant(tool_calls=[tool_call(
                p.PLAN, "p2", goal="g", steps=[{"action": p.FINALIZE, "purpose": "answer"}])])
        return Message.assistant(tool_calls=[tool_call(
            p.FINALIZE, "f1", answer_markdown="Planned answer.", confidence=0.4)])

    client = Client(ScriptedModel(model), run=run, profiles=Profiles())
    orchestrator = Orchestrator(run, client, research=lambda q, k: {"anchors": []},
                                execute=lambda code: {"status": "ok"}, mode="owl_lite",
                                max_steps=5)
    result = orchestrator.answer(question).result
    result["repair"] = seen[1].messages[-1].content
    return result


def test_an_invalid_plan_is_repaired_and_the_valid_one_recorded(store: Store) -> None:
    run = execute(planning_agent, inputs={"question": "q"}, store=store)
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert "does not match the Plan schema" in result["repair"]
    plans = [e for e in store.events(run.id) if e["type"] == "bdi.update" and e["key"] == "plan"]
    assert len(plans) == 1
    assert result["answer"] == "Planned answer."


def test_a_real_model_drives_the_same_loop_through_a_provider(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers.openai_server import Answer, Call, OpenAIServer

    with OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "x" * 24)
        server.script(
            Answer(tool_calls=[Call("c1", p.DELEGATE_RESEARCH,
                                    '{"query": "narrow temperature range uncertainty", "k": 5}')]),
            Answer(tool_calls=[Call("c2", p.FINALIZE, orjson.dumps({
                "answer_markdown": "A narrow range makes the slope uncertain [1].",
                "claims": [{"text": "A narrow range makes the slope uncertain.",
                            "anchors": ["uncertainty-and-error-sources#paragraph_4"]}],
                "evidence_used": ["uncertainty-and-error-sources#paragraph_4"],
                "confidence": 0.7}).decode())]),
        )
        result = ask_question(PROSE, model="openai:gpt-test", store=store_path)
        tools_sent = [t["function"]["name"] for t in server.received[0].body["tools"]]
        tool_reply = server.received[1].body["messages"][-1]
    assert result.answer == "A narrow range makes the slope uncertain [1]."
    assert [a["location"] for a in result.anchors] == ["paragraph_4"]
    assert p.DELEGATE_RESEARCH in tools_sent and p.FINALIZE in tools_sent
    assert tool_reply["role"] == "tool" and "uncertainty-and-error-sources" in tool_reply["content"]
    # this model skipped the audit it could ask for; what it delivered is audited all the same
    assert [c["name"] for c in result.audit["checks"]][-2:] == ["support", "answers_question"]
    assert result.audit["passed"], result.audit


def test_without_a_sandbox_the_code_is_refused_and_the_run_still_answers(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rar.sandbox
    from rar.sandbox import SandboxUnavailableError

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise SandboxUnavailableError("bubblewrap (bwrap) is not installed")

    monkeypatch.setattr(rar.sandbox, "Sandbox", unavailable)
    result = ask_question("What activation energy do the Kissinger DSC data in the corpus give?",
                          store=store)
    assert result.status == "completed_with_warnings" and result.answer
    assert "Ea =" not in result.answer
    cells = [store.resolve_payload(e["result"]) for e in store.events(result.run_id)
             if e["type"] == "effect" and e["kind"] == "tool"
             and store.resolve_payload(e["request"])["name"] == "python"]
    assert cells and "apt-get install bubblewrap" in cells[0]["error"]["message"]


def failing_code_agent(run: Any, question: str) -> dict[str, Any]:
    """A planner whose computation raises: recorded, audited, and still finalized."""
    from rar.sandbox import Sandbox

    script = [
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_EXECUTE, "e1", code="x = 1 / 0",
                                                purpose="divide")]),
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_AUDIT, "a1", draft="x is finite",
                                                claims=[{"text": "x is finite"}])]),
        Message.assistant(tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="Could not "
                                                "compute x.", confidence=0.1)]),
    ]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    with Sandbox(run.workspace) as box:
        orchestrator = Orchestrator(
            run, client, research=lambda q, k: {"anchors": []},
            execute=lambda code: run.effect("tool", {"name": "python", "args": {"code": code}},
                                            lambda: box.run_cell(code).as_dict()),
            mode="owl_lite", max_steps=5)
        return orchestrator.answer(question).result


@needs_sandbox
def test_code_that_raises_in_the_sandbox_is_recorded_challenged_and_the_run_finalizes(
    store: Store,
) -> None:
    run = execute(failing_code_agent, inputs={"question": "q"}, store=store)
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert result["answer"] == "Could not compute x."
    checks = {c["name"]: c["passed"] for c in result["audit"]["checks"]}
    assert checks["runtime_errors"] is False
    cell = next(store.resolve_payload(e["result"]) for e in store.events(run.id)
                if e["type"] == "effect" and e["kind"] == "tool")
    assert cell["status"] == "error" and cell["error"]["type"] == "ZeroDivisionError"


def missing_numpy_agent(run: Any, question: str) -> dict[str, Any]:
    message = "numpy is not installed in the Python environment running RAR (/v): pip install numpy"
    script = [
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_EXECUTE, "e1", code="import numpy")]),
        Message.assistant(tool_calls=[tool_call(
            p.FINALIZE, "f1", answer_markdown="Nothing computed.", confidence=0.2)]),
    ]
    cell = {"status": "error", "variables": {},
            "error": {"type": "ModuleNotFoundError", "message": message, "traceback": "",
                      "missing_library": "numpy"}}  # fmt: skip
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    orchestrator = Orchestrator(run, client, research=lambda q, k: {"anchors": []},
                                execute=lambda code: cell, mode="owl_lite", max_steps=4)
    return orchestrator.answer(question).result


def test_a_missing_scientific_library_is_said_plainly_in_the_warnings(store: Store) -> None:
    run = execute(missing_numpy_agent, inputs={"question": "q"}, store=store)
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert "numpy is not installed in the Python environment running RAR (/v): pip install numpy" \
        in result["warnings"]


@pytest.mark.parametrize(("seconds", "said"), [(1e308, "up to"), ("soon", "up to"), (-5, None)])
def test_a_wait_the_runtime_cannot_keep_goes_back_to_the_model(
    store: Store, seconds: Any, said: str | None
) -> None:
    wait = {"name": p.WAIT_SECONDS, "seconds": seconds}
    run = execute(waiting_agent, inputs={"question": "q", "wait": wait}, store=store)
    assert store.manifest(run.id).status != "waiting"  # a negative wait is no wait at all
    llm = [e for e in store.events(run.id) if e["type"] == "effect" and e["kind"] == "llm"]
    reply = store.resolve_payload(llm[1]["request"])["request"]["messages"][-1]
    assert reply["role"] == "tool"
    if said is None:
        assert orjson.loads(reply["content"]) == {"seconds": -5.0, "waited": False}
    else:
        assert said in reply["content"] and reply.get("is_error") is True
