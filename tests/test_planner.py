"""The rule-based planner drives the orchestrator's protocol from the conversation alone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from rar.llm import Message, Request, ToolCall
from rar.science import protocol as p
from rar.science.planner import RuleBasedPlanner, planner_message
from rar.science.tables import analysis_code, parse_tables

TABLE = {
    "doc_id": "arrhenius-worked-example",
    "location": "paragraph_4",
    "columns": ["T (K)", "k (s^-1)"],
    "rows": [[300.0, 2.1e-3], [310.0, 4.3e-3], [320.0, 8.4e-3]],
}
ANCHOR = {
    "doc_id": "arrhenius-worked-example",
    "doc_title": "A worked Arrhenius example",
    "location": "paragraph_4",
    "content_hash": "sha256:" + "a" * 64,
    "snippet": "Rate constants were measured at three temperatures. They rise fast.",
    "relevance_score": 0.8,
}


def conversation(question: str, *results: tuple[str, dict[str, Any]]) -> Request:
    messages = planner_message(question, "owl_lite")
    if results and results[0][0] != p.PLAN:
        results = ((p.PLAN, {"accepted": True}), *results)
    for step, (name, result) in enumerate(results, start=1):
        # the planner reads only the results; the calls' arguments do not matter here
        tool_call = ToolCall(id=f"call_{step}_{name}", name=name, arguments="{}")
        messages.append(Message.assistant(tool_calls=[tool_call]))
        messages.append(Message.tool(tool_call, orjson.dumps(result).decode()))
    return Request(model="rule-based", messages=tuple(messages), tools=p.TOOLS)


def next_call(request: Request) -> tuple[str, dict[str, Any]]:
    response = RuleBasedPlanner().complete(request)
    (call,) = response.tool_calls
    return call.name, call.parsed_arguments()


QUESTION = "What activation energy do the measured rate constants give?"


def test_the_planner_states_a_plan_first_then_researches() -> None:
    name, args = next_call(conversation(QUESTION))
    assert name == p.PLAN
    plan = p.Plan.model_validate(args)
    assert [s.action for s in plan.steps] == [
        p.DELEGATE_RESEARCH,
        p.DELEGATE_EXECUTE,
        p.DELEGATE_AUDIT,
        p.FINALIZE,
    ]
    name, args = next_call(conversation(QUESTION, (p.PLAN, {"accepted": True})))
    assert name == p.DELEGATE_RESEARCH and args["query"] == QUESTION


def test_a_numeric_question_with_a_table_is_computed_in_the_sandbox() -> None:
    name, args = next_call(
        conversation(QUESTION, (p.DELEGATE_RESEARCH, {"anchors": [ANCHOR], "tables": [TABLE]}))
    )
    assert name == p.DELEGATE_EXECUTE
    assert "def _line(" in args["code"] and "arrhenius-worked-example" in args["purpose"]
    assert "report['source'] = 'arrhenius-worked-example#paragraph_4'" in args["code"]


REPORT = {
    "analysis": "arrhenius",
    "method": "Arrhenius plot",
    "fit": "ln k against 1/T",
    "n": 3,
    "r_squared": 0.9998,
    "data_range": {"column": "T (K)", "min": 300.0, "max": 320.0, "unit": "K"},
    "results": [
        {"name": "Ea", "label": "activation energy", "value": 55.31, "stderr": 0.12,
         "unit": "kJ/mol"},
    ],
    "source": "arrhenius-worked-example#paragraph_4",
}  # fmt: skip
EXECUTED = {"status": "ok", "variables": {"report": REPORT, "Ea_kJ_per_mol": 55.31}}
CLAIM = (
    "Ea = 55.31 ± 0.12 kJ/mol (activation energy; Arrhenius plot of ln k against 1/T, "
    "R² = 0.9998, n = 3, T 300–320 K)"
)


def test_then_the_draft_is_audited_with_the_computed_claim() -> None:
    name, args = next_call(
        conversation(
            QUESTION,
            (p.DELEGATE_RESEARCH, {"anchors": [ANCHOR], "tables": [TABLE]}),
            (p.DELEGATE_EXECUTE, EXECUTED),
            (p.DELEGATE_RESEARCH, {"anchors": []}),  # the search for the method's passage
        )
    )
    assert name == p.DELEGATE_AUDIT
    assert args["claims"][0]["text"] == CLAIM
    assert args["claims"][0]["anchors"] == ["arrhenius-worked-example#paragraph_4"]


def test_a_challenge_is_answered_with_more_evidence_then_audited_again_then_finalized() -> None:
    audit = {"passed": False, "challenges": [{"claim": CLAIM, "resolve": "JUSTIFY",
                                              "checks": ["evidence_quantity"]}]}  # fmt: skip
    results = [
        (p.DELEGATE_RESEARCH, {"anchors": [ANCHOR], "tables": [TABLE]}),
        (p.DELEGATE_EXECUTE, EXECUTED),
        (p.DELEGATE_RESEARCH, {"anchors": []}),
        (p.DELEGATE_AUDIT, audit),
    ]
    name, args = next_call(conversation(QUESTION, *results))
    assert name == p.REQUEST_MORE_EVIDENCE and args["claim"] == CLAIM
    assert "55.31" not in args["query"]  # the question's terms, not the claim's
    results.append((p.REQUEST_MORE_EVIDENCE, {"anchors": []}))
    name, args = next_call(conversation(QUESTION, *results))
    assert name == p.DELEGATE_AUDIT  # the draft with the new evidence is audited again
    results.append((p.DELEGATE_AUDIT, {"passed": True, "challenges": []}))
    name, args = next_call(conversation(QUESTION, *results))
    assert name == p.FINALIZE
    final = p.Finalize.model_validate(args)
    assert f"{CLAIM} [1]" in final.answer_markdown
    assert final.evidence_used == ["arrhenius-worked-example#paragraph_4"]
    assert "standard error" in final.uncertainty


def test_a_claim_the_audit_found_unsupported_is_left_out_after_a_replan() -> None:
    unsupported = {"passed": False, "challenges": [{"claim": CLAIM, "resolve": "JUSTIFY",
                                                    "checks": ["support"]}]}  # fmt: skip
    results = [
        (p.DELEGATE_RESEARCH, {"anchors": [ANCHOR], "tables": [TABLE]}),
        (p.DELEGATE_EXECUTE, EXECUTED),
        (p.DELEGATE_RESEARCH, {"anchors": []}),
        (p.DELEGATE_AUDIT, unsupported),
        (p.REQUEST_MORE_EVIDENCE, {"anchors": []}),
        (p.DELEGATE_AUDIT, unsupported),
    ]
    name, args = next_call(conversation(QUESTION, *results))
    assert name == p.PLAN and "drop" in args["steps"][0]["purpose"]
    results.append((p.PLAN, {"accepted": True, "revision": 1}))
    name, args = next_call(conversation(QUESTION, *results))
    assert name == p.FINALIZE
    assert all(c["text"] != CLAIM for c in args["claims"])


def test_the_planner_is_a_pure_function_of_the_conversation() -> None:
    request = conversation(QUESTION, (p.DELEGATE_RESEARCH, {"anchors": [ANCHOR]}))
    assert RuleBasedPlanner().complete(request) == RuleBasedPlanner().complete(request)


def test_tables_are_parsed_and_fitted() -> None:
    text = "| T (K) | k (s^-1) |\n|---|---|\n| 300 | 2.1e-3 |\n| 320 | 8.4e-3 |\n"
    (table,) = parse_tables(text)
    assert table.columns == ("T (K)", "k (s^-1)") and len(table.rows) == 2
    purpose, code = analysis_code(table)  # type: ignore[misc]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the sandbox runs it in the runtime; here we check the maths
    assert abs(namespace["Ea_kJ_per_mol"] - 55.3) < 0.1
    assert "Arrhenius" in purpose


def test_claim_sentences_leave_headings_and_tables_out() -> None:
    from rar.science.compose import sentences

    passage = "# Worked example\n\nThis example applies the method. It has two sentences."
    assert sentences(passage) == ["This example applies the method.", "It has two sentences."]
    table = "Data: peak temperatures.\n\n| rate | Tp |\n|---|---|\n| 2 | 412.4 |\n| 5 | 422.5 |"
    assert sentences(table) == ["Data: peak temperatures."]
    assert sentences("# Only a heading here") == []


def test_a_claim_cites_each_passage_once(tmp_path: Path) -> None:
    from rar.science.runtime import ask_question

    question = "What activation energy do the Kissinger DSC data in the corpus give?"
    result = ask_question(question, store=tmp_path / "runs")
    cited = {f"{a['doc_id']}#{a['location']}" for a in result.anchors}
    assert result.claims, result.answer
    for claim in result.claims:
        assert claim["anchors"], claim  # every claim is cited ...
        assert len(claim["anchors"]) == len(set(claim["anchors"])), claim  # ... once per passage
        assert set(claim["anchors"]) <= cited, claim  # by passages the answer lists as sources
    # the computed value cites its data table and the other passages found, the table once
    # although it is both the table the value was computed from and a passage found
    (value,) = [c for c in result.claims if c["text"].startswith("Ea = ")]
    pattern = r"Ea = \d+\.\d+ ± \d+\.\d+ kJ/mol \(activation energy; Kissinger"
    assert re.match(pattern, value["text"]), value
    assert len(value["anchors"]) >= 2 and any("kissinger" in ref for ref in value["anchors"])
    # the rendered answer: each claim's line carries each source number once
    claims_part = result.answer.split("**Sources.**")[0]
    lines = [line for line in claims_part.splitlines() if line.startswith("- ")]
    assert len(lines) == len(result.claims), result.answer
    for line in lines:
        numbers = re.findall(r"\[(\d+)\]", line)
        assert numbers and len(numbers) == len(set(numbers)), line
