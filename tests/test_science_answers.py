"""Science answers that answer the question, and an audit that passes only what is supported.

Judged on the question set `tests/data/science_questions.yaml`: the demo corpus, two corpora in
other fields (materials testing, pharmacokinetics) with data tables, and off-topic questions.
The grading is `rar.science.evaluation` (the same as `bench/science.py`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.replay import replay
from rar.replay.engine import execute
from rar.science import ask_question
from rar.science import protocol as p
from rar.science.evaluation import grade, load_questions
from rar.science.orchestrator import MAX_REPLANS, Orchestrator
from rar.science.protocols import Mode
from rar.store.store import Store

QUESTIONS = Path(__file__).parent / "data" / "science_questions.yaml"
ENTRIES = {entry.id: entry for entry in load_questions(QUESTIONS)}
needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)
COMPUTED = [e for e in ENTRIES.values() if e.expect.get("computed")]
OFF_TOPIC = [e for e in ENTRIES.values() if e.kind == "off_topic"]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("answers") / "store")


@needs_sandbox
@pytest.mark.parametrize("entry", COMPUTED, ids=[e.id for e in COMPUTED])
def test_a_value_the_data_give_is_computed_with_its_uncertainty(
    entry: Any, shared_store: Store
) -> None:
    result = ask_question(entry.question, corpus=entry.corpus, store=shared_store)
    graded = grade(entry, result)
    assert graded.passed, (graded.problems, result.answer)
    assert result.executions >= 1
    headline = next(c["text"] for c in result.claims if " ± " in c["text"])
    assert "R² = " in headline and "n = " in headline  # how it was obtained, with the fit's quality
    # it cites the passage holding the data table
    table_docs = {ref.partition("#")[0] for c in result.claims for ref in c["anchors"]}
    assert table_docs & set(entry.expect.get("source_docs", []))
    assert result.audit["passed"] and result.status == "completed"
    figures = [e for e in shared_store.events(result.run_id) if e["type"] == "artifact"]
    assert any(f["name"].startswith("figures/") for f in figures)  # the fit as a figure


@pytest.mark.parametrize("entry", OFF_TOPIC, ids=[e.id for e in OFF_TOPIC])
@pytest.mark.parametrize("mode", ["owl_lite", "owl_full"])
def test_an_off_topic_question_is_answered_honestly(
    entry: Any, mode: str, shared_store: Store
) -> None:
    result = ask_question(entry.question, corpus=entry.corpus, mode=mode, store=shared_store)
    graded = grade(entry, result)
    assert graded.passed, graded.problems
    assert result.status == "completed_with_warnings" and not result.audit["passed"]
    assert "The corpus does not answer this question" in result.answer
    check = next(c for c in result.audit["checks"] if c["name"] == "answers_question")
    assert not check["passed"] and "does not answer" in check["detail"]
    assert result.confidence is not None and result.confidence <= 0.2


def test_the_methods_question_names_the_methods(shared_store: Store) -> None:
    entry = ENTRIES["demo-activation-energy-methods"]
    result = ask_question(entry.question, store=shared_store)
    text = result.answer
    for name in ("Kissinger", "Ozawa–Flynn–Wall", "Friedman", "nudged elastic band",
                 "Arrhenius plot", "Eyring plot", "two-point method"):  # fmt: skip
        assert name in text, text  # the two-point method by its section: "## The two-point method"
    assert result.audit["passed"]


def test_the_hardness_methods_of_an_unseen_corpus_are_named(shared_store: Store) -> None:
    entry = ENTRIES["materials-hardness-methods"]
    result = ask_question(entry.question, corpus=entry.corpus, store=shared_store)
    assert grade(entry, result).passed, result.answer


@pytest.mark.parametrize(
    "entry_id",
    ["materials-work-hardening-why", "pk-half-life-dose-why", "demo-compensation-artefact-why"],
)
def test_a_why_question_gets_the_sentences_that_state_causes(
    entry_id: str, shared_store: Store
) -> None:
    entry = ENTRIES[entry_id]
    result = ask_question(entry.question, corpus=entry.corpus, store=shared_store)
    assert grade(entry, result).passed, result.answer
    check = next(c for c in result.audit["checks"] if c["name"] == "answers_question")
    assert check["passed"]


@needs_sandbox
def test_every_run_of_the_set_replays_reproducible(shared_store: Store) -> None:
    for entry_id in (
        "demo-kissinger-value",
        "materials-youngs-modulus-value",
        "demo-offtopic-quantum-cryptography",
        "demo-activation-energy-methods",
    ):
        entry = ENTRIES[entry_id]
        result = ask_question(
            entry.question, corpus=entry.corpus, mode="owl_dl", store=shared_store
        )
        report = replay(result.run_id, store=shared_store)
        assert report.replay_status == "reproducible", report.first_divergence


# --- the audit vouches only for what is supported -----------------------------------------------

PASSAGE = "The Kissinger analysis of the DSC data gives Ea = 125.1 kJ/mol for the decomposition."


def _anchor(n: int) -> dict[str, Any]:
    return {
        "doc_id": "kissinger",
        "doc_title": "Kissinger",
        "location": f"paragraph_{n}",
        "content_hash": "sha256:" + f"{n:02d}" * 32,
        "snippet": PASSAGE,
        "relevance_score": 0.9,
    }


ANCHORS = [_anchor(n) for n in (1, 2, 3)]  # three passages state it: enough for owl_full
REFS = [f"kissinger#paragraph_{n}" for n in (1, 2, 3)]
REF = REFS[0]


def _research(query: str, k: int) -> dict[str, Any]:
    return {"anchors": ANCHORS, "passages": dict.fromkeys(REFS, PASSAGE)}


def fabricating_agent(run: Any, question: str, mode: str) -> dict[str, Any]:
    """A planner that finalizes with one supported claim and one it made up."""
    claims = [
        {
            "text": "The Kissinger analysis of the DSC data gives Ea = 125.1 kJ/mol.",
            "anchors": REFS,
        },
        {"text": "The reaction also releases 999 kJ/mol of heat in a plasma.", "anchors": REFS},
    ]
    script = [
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_RESEARCH, "r1", query=question)]),
        Message.assistant(
            tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="Both claims.", claims=claims,
                                  evidence_used=REFS, confidence=0.9)]
        ),
    ]  # fmt: skip
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    orchestrator = Orchestrator(
        run, client, research=_research, execute=lambda code: {}, mode=mode, max_steps=4
    )
    return orchestrator.answer(question).result


QUESTION = "What activation energy does the Kissinger analysis give?"


@pytest.mark.parametrize("mode", ["owl_dl", "owl_full"])
def test_in_owl_dl_and_full_an_unsupported_claim_leaves_the_answer(store: Store, mode: str) -> None:
    run = execute(fabricating_agent, inputs={"question": QUESTION, "mode": mode}, store=store)
    result = store.resolve_payload(
        next(e for e in store.events(run.id) if e["type"] == "run.finished")["result"]
    )
    texts = [c["text"] for c in result["claims"]]
    assert not any("999" in t for t in texts) and "999" not in result["answer"]
    [rejected] = result["rejected"]
    assert "999" in rejected["claim"] and any(
        "neither in the cited" in r for r in rejected["reasons"]
    )
    retracts = [
        store.resolve_payload(e["content"])["content"]
        for e in store.events(run.id)
        if e["type"] == "message" and e["performative"] == "RETRACT"
    ]
    assert any("999" in r["claim"] for r in retracts)
    finals = [e for e in store.events(run.id) if e["type"] == "audit" and e.get("stage") == "final"]
    assert len(finals) == 2  # the delivered draft, then what is left of it
    if mode == "owl_full":  # rejected in the argumentation graph: attacked, not accepted
        graph = result["argumentation"]
        rejected_id = next(a["id"] for a in graph["arguments"] if "999" in a["claim"])
        assert rejected_id not in graph["grounded"]
    assert replay(run.id, store=store, function=fabricating_agent).reproducible


def test_in_owl_lite_an_unsupported_claim_stays_but_the_audit_does_not_pass(store: Store) -> None:
    run = execute(fabricating_agent, inputs={"question": QUESTION, "mode": "owl_lite"}, store=store)
    result = store.resolve_payload(
        next(e for e in store.events(run.id) if e["type"] == "run.finished")["result"]
    )
    assert any("999" in c["text"] for c in result["claims"]) and result["rejected"] == []
    assert not result["audit"]["passed"] and "the audit did not pass" in result["warnings"]
    assert result["confidence"] <= 0.5


def test_a_search_for_more_evidence_never_uses_the_claims_own_words(store: Store) -> None:
    queries: list[str] = []

    def research(query: str, k: int) -> dict[str, Any]:
        queries.append(query)
        return _research(query, k)

    def agent(run: Any, question: str) -> dict[str, Any]:
        claim = "The decomposition liberates nitrogen dioxide abundantly."
        script = [
            Message.assistant(tool_calls=[tool_call(p.REQUEST_MORE_EVIDENCE, "m1", claim=claim,
                                                    query=f"{claim} heating rate")]),
            Message.assistant(tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="-",
                                                    confidence=0.1)]),
        ]  # fmt: skip
        client = Client(ScriptedModel(script), run=run, profiles=Profiles())
        orch = Orchestrator(run, client, research=research, execute=lambda c: {}, mode="owl_lite",
                            max_steps=3)  # fmt: skip
        return orch.answer(question).result

    execute(agent, inputs={"question": QUESTION}, store=store)
    [query] = queries
    assert query.startswith(QUESTION) and "heating rate" in query
    for word in ("liberates", "nitrogen", "dioxide", "abundantly"):
        assert word not in query


def test_replanning_is_recorded_and_bounded(store: Store) -> None:
    plan = {"goal": "g", "steps": [{"action": "finalize", "purpose": "answer"}]}
    script = [Message.assistant(tool_calls=[tool_call(p.PLAN, f"p{i}", **plan)]) for i in range(5)]
    script.append(
        Message.assistant(
            tool_calls=[tool_call(p.FINALIZE, "f", answer_markdown="-", confidence=0.1)]
        )
    )
    seen: list[dict[str, Any]] = []

    def agent(run: Any, question: str) -> dict[str, Any]:
        client = Client(ScriptedModel(script), run=run, profiles=Profiles())
        orch = Orchestrator(run, client, research=_research, execute=lambda c: {}, mode="owl_lite",
                            max_steps=8)  # fmt: skip
        outcome = orch.answer(question)
        seen.append(outcome.result)
        return outcome.result

    run = execute(agent, inputs={"question": QUESTION}, store=store)
    replans = [e for e in store.events(run.id) if e["type"] == "replan"]
    assert [e["revision"] for e in replans] == list(range(1, MAX_REPLANS + 1))
    tool_results = [
        e for e in store.events(run.id) if e["type"] == "effect" and e.get("kind") == "llm"
    ]
    assert len(tool_results) == 6  # every plan call was answered; the extra ones refused
    last_request = store.resolve_payload(tool_results[-1]["request"])
    assert "already revised" in str(last_request)


# --- the model-driven auditor -------------------------------------------------------------------


def _auditor_turns(*answers: str) -> list[Message]:
    return [Message.assistant(content=a) for a in answers]


def model_audited_agent(run: Any, question: str, auditor_answers: list[str]) -> dict[str, Any]:
    claims = [{"text": "The Kissinger analysis of the DSC data gives Ea = 125.1 kJ/mol.",
               "anchors": REFS}]  # fmt: skip
    script = [
        Message.assistant(tool_calls=[tool_call(p.DELEGATE_RESEARCH, "r1", query=question)]),
        Message.assistant(tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="Ea.",
                                                claims=claims, confidence=0.8)]),
    ]  # fmt: skip
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    auditor = Client(ScriptedModel(_auditor_turns(*auditor_answers), model="auditor"), run=run,
                     profiles=Profiles())  # fmt: skip
    orch = Orchestrator(run, client, research=_research, execute=lambda c: {}, mode="owl_dl",
                        max_steps=4, auditor=auditor)  # fmt: skip
    return orch.answer(question).result


def test_the_model_auditor_answers_in_the_audit_schema_with_one_repair(store: Store) -> None:
    good = (
        '{"approved": true, "addresses_question": true, '
        '"claims": [{"claim": 1, "supported": true}]}'
    )
    run = execute(
        model_audited_agent,
        inputs={"question": QUESTION, "auditor_answers": ["not json at all", good]},
        store=store,
    )
    result = store.resolve_payload(
        next(e for e in store.events(run.id) if e["type"] == "run.finished")["result"]
    )
    review = next(c for c in result["audit"]["checks"] if c["name"] == "model_review")
    assert review["passed"]
    calls = [e for e in store.events(run.id) if e["type"] == "effect" and e.get("kind") == "llm"]
    assert len(calls) == 2 + 2  # the planner's two turns, the auditor's two attempts
    assert replay(run.id, store=store, function=model_audited_agent).reproducible


def test_a_model_auditor_that_rejects_a_claim_removes_it_in_owl_dl(store: Store) -> None:
    verdict = (
        '{"approved": false, "addresses_question": true, '
        '"claims": [{"claim": 1, "supported": false, "reason": "the passage gives another value"}]}'
    )
    run = execute(
        model_audited_agent,
        inputs={"question": QUESTION, "auditor_answers": [verdict, verdict]},
        store=store,
    )
    result = store.resolve_payload(
        next(e for e in store.events(run.id) if e["type"] == "run.finished")["result"]
    )
    assert result["claims"] == [] and result["rejected"]
    assert "The corpus does not answer this question" in result["answer"]
    assert not result["audit"]["passed"]


def test_the_success_check_does_not_pass_when_nothing_was_done() -> None:
    from rar.science.protocols.audit import Draft, check_success

    check = check_success(Draft(), Mode.OWL_LITE)
    assert not check.passed and "no work to check" in check.detail


# --- files a cell writes --------------------------------------------------------------------------


def test_a_cell_that_writes_a_file_leaves_it_as_an_artifact(store: Store) -> None:
    """Files a cell writes become artifacts (cells/<n>/<path>), also in a replay that did not
    run the cell."""
    written = b"T,k\n300,0.1\n"

    def agent(run: Any, question: str) -> dict[str, Any]:
        def cell(code: str) -> dict[str, Any]:
            def work() -> dict[str, Any]:
                (run.workspace / "out.csv").write_bytes(written)
                from rar.hashing import digest_bytes

                return {"status": "ok", "variables": {}, "error": None,
                        "artifacts": [{"path": "out.csv", "size": len(written),
                                       "digest": digest_bytes(written),
                                       "media_type": "text/csv"}]}  # fmt: skip

            return run.effect("tool", {"name": "python", "args": {"code": code}}, work)

        script = [
            Message.assistant(tool_calls=[tool_call(p.DELEGATE_EXECUTE, "e1", code="write()",
                                                    purpose="write a file")]),
            Message.assistant(tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="-",
                                                    confidence=0.1)]),
        ]  # fmt: skip
        client = Client(ScriptedModel(script), run=run, profiles=Profiles())
        orch = Orchestrator(run, client, research=_research, execute=cell, mode="owl_lite",
                            max_steps=3)  # fmt: skip
        return orch.answer(question).result

    run = execute(agent, inputs={"question": QUESTION}, store=store)
    [artifact] = [e for e in store.events(run.id) if e["type"] == "artifact"]
    assert artifact["name"] == "cells/1/out.csv" and artifact["media_type"] == "text/csv"
    assert (store.run_dir(run.id) / "artifacts" / "cells/1/out.csv").read_bytes() == written
    reports = [e for e in store.events(run.id) if e["type"] == "message"
               and e["performative"] == "REPORT"]  # fmt: skip
    executor = [e for e in reports if e.get("agent") == "executor"]
    assert executor[-1].get("artifacts") == ["cells/1/out.csv"]  # the REPORT names what it made
    report = replay(run.id, store=store, function=agent)
    assert report.reproducible, report.first_divergence
    [again] = [e for e in store.events(report.replay_run) if e["type"] == "artifact"]
    assert again["digest"] == artifact["digest"]


def test_a_question_for_a_kind_of_method_lists_only_methods_the_corpus_says_are_of_it(
    shared_store: Store,
) -> None:
    """ "Which isoconversional methods …": OFW, Friedman and KAS (the corpus calls each so), not
    the Kissinger method, which a sentence mentions next to the word but is not one."""
    entry = ENTRIES["demo-isoconversional-methods"]
    result = ask_question(entry.question, store=shared_store)
    names = [c["text"].split(":")[0] for c in result.claims]
    for expected in ("Ozawa–Flynn–Wall", "Friedman", "Kissinger–Akahira–Sunose"):
        assert any(expected in n for n in names), names
    assert not any(n.startswith("Kissinger method") for n in names), names


def test_rar_run_says_plainly_when_the_corpus_does_not_answer(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rar.cli import cli

    question = ENTRIES["demo-offtopic-quantum-cryptography"].question
    outcome = CliRunner().invoke(cli, ["--store", str(tmp_path / "runs"), "run", question])
    assert outcome.exit_code == 0, outcome.output  # answered, with warnings
    text = " ".join(outcome.output.split())
    assert "The corpus does not answer this question" in text
    assert "Evidence: no passage is cited." in text
    assert "Audit did not pass" in text and "(completed_with_warnings)" in text
