"""The rule-based planner: an offline model provider that drives the science runtime.

It is a provider like any other (``complete(request) -> Response``), so the orchestrator has one
code path for it and for real models. Its answer is a function of the conversation alone: it
reads the question and the tool results so far and calls the next tool:

1. ``delegate_research`` for the question;
2. ``delegate_execute`` when the question asks for a number and the evidence holds a table it
   knows how to fit (Arrhenius: rate constants against temperature; Kissinger: peak temperatures
   against heating rates);
3. ``delegate_audit`` on the draft;
4. ``request_more_evidence`` once for the first claim the auditor challenged;
5. ``finalize`` with a cited answer, its claims, the evidence used, a confidence and what is
   uncertain.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from rar.llm.types import FinishReason, Message, Request, Response, ToolCall, Usage
from rar.science import protocol as p
from rar.science.tables import Table, analysis_code

_NUMERIC_QUESTION = re.compile(
    r"\b(what|which|estimate|compute|calculate|determine|how (large|high|much))\b.*\b"
    r"(activation energy|ea|value|energy|rate)\b",
    re.IGNORECASE | re.DOTALL,
)


def _results(request: Request) -> dict[str, list[dict[str, Any]]]:
    """Tool results so far, by tool name, oldest first (content is JSON from the orchestrator)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for message in request.messages:
        if message.role == "tool" and message.name:
            try:
                value = orjson.loads(message.content or "null")
            except orjson.JSONDecodeError:
                value = {"error": message.content}
            found.setdefault(message.name, []).append(value if isinstance(value, dict) else {})
    return found


def _question(request: Request) -> str:
    return next((m.content or "" for m in request.messages if m.role == "user"), "")


def _call(name: str, step: int, **arguments: Any) -> ToolCall:
    text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return ToolCall(id=f"call_{step}_{name}", name=name, arguments=text)


def _anchors(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    anchors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name in (p.DELEGATE_RESEARCH, p.REQUEST_MORE_EVIDENCE):
        for result in results.get(name, []):
            for anchor in result.get("anchors", []):
                key = f"{anchor.get('doc_id')}#{anchor.get('location')}"
                if key not in seen:
                    seen.add(key)
                    anchors.append(anchor)
    return anchors


def _tables(results: dict[str, list[dict[str, Any]]]) -> list[tuple[dict[str, Any], Table]]:
    tables = []
    for result in results.get(p.DELEGATE_RESEARCH, []):
        for found in result.get("tables", []):
            table = Table(tuple(found["columns"]), tuple(tuple(row) for row in found["rows"]))
            tables.append((found, table))
    return tables


class RuleBasedPlanner:
    """The embedded default planner (``planner:rule-based``), offline and deterministic."""

    name = "planner"
    base_url = None

    def __init__(self, model: str = "rule-based") -> None:
        self.model = model

    def complete(self, request: Request) -> Response:
        results = _results(request)
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        question = _question(request)
        call = self._next(question, results, step)
        return Response(
            content=None if call.name != p.FINALIZE else "Finalizing.",
            tool_calls=(call,),
            finish_reason=FinishReason.TOOL_CALLS,
            usage=Usage(
                input_tokens=sum(len(m.content or "") for m in request.messages) // 4,
                output_tokens=len(call.arguments) // 4,
            ),
            model=self.model,
            provider=self.name,
        )

    def _next(self, question: str, results: dict[str, list[dict[str, Any]]], step: int) -> ToolCall:
        if p.PLAN not in results:
            steps = [{"action": p.DELEGATE_RESEARCH, "purpose": "find passages that answer it"}]
            if _NUMERIC_QUESTION.search(question):
                steps.append({"action": p.DELEGATE_EXECUTE,
                              "purpose": "compute the value from a data table in the evidence"})
            steps += [{"action": p.DELEGATE_AUDIT, "purpose": "check evidence, errors and units"},
                      {"action": p.FINALIZE, "purpose": "answer with cited claims"}]
            return _call(p.PLAN, step, goal=question, steps=steps,
                         success_criteria="every claim cited by passages above the mode's "
                         "relevance threshold; the audit passes")
        if p.DELEGATE_RESEARCH not in results:
            return _call(p.DELEGATE_RESEARCH, step, query=question, k=8)
        if p.DELEGATE_EXECUTE not in results and _NUMERIC_QUESTION.search(question):
            for found, table in _tables(results):
                plan = analysis_code(table)
                if plan is not None:
                    purpose, code = plan
                    source = f"{found.get('doc_id')}#{found.get('location')}"
                    return _call(
                        p.DELEGATE_EXECUTE, step, code=code, purpose=f"{purpose} (data: {source})"
                    )
        draft, claims = self._draft(question, results)
        if p.DELEGATE_AUDIT not in results:
            return _call(p.DELEGATE_AUDIT, step, draft=draft, claims=claims)
        challenges = results[p.DELEGATE_AUDIT][-1].get("challenges", [])
        if challenges and p.REQUEST_MORE_EVIDENCE not in results:
            claim = str(challenges[0].get("claim", question))
            return _call(p.REQUEST_MORE_EVIDENCE, step, claim=claim, query=f"{question} {claim}")
        return self._finalize(question, results, step)

    def _computed(self, results: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
        for result in results.get(p.DELEGATE_EXECUTE, []):
            variables = result.get("variables") or {}
            if result.get("status") == "ok" and "Ea_kJ_per_mol" in variables:
                return variables
        return None

    def _draft(
        self, question: str, results: dict[str, list[dict[str, Any]]]
    ) -> tuple[str, list[dict[str, Any]]]:
        anchors = _anchors(results)[:3]
        refs = [f"{a['doc_id']}#{a['location']}" for a in anchors]
        claims: list[dict[str, Any]] = []
        computed = self._computed(results)
        if computed is not None:
            value = float(computed["Ea_kJ_per_mol"])
            table_refs = [
                f"{t['doc_id']}#{t['location']}"
                for t in (
                    r
                    for result in results.get(p.DELEGATE_RESEARCH, [])
                    for r in result.get("tables", [])
                )
            ]
            cited = list(dict.fromkeys(table_refs[:1] + refs))[:3]  # each passage once
            claims.append({"text": f"Ea = {value:.1f} kJ/mol", "anchors": cited})
        for anchor in anchors:
            sentence = _first_sentence(str(anchor.get("snippet", "")))
            if sentence:
                claims.append(
                    {"text": sentence, "anchors": [f"{anchor['doc_id']}#{anchor['location']}"]}
                )
        draft = " ".join(claim["text"] for claim in claims) or f"No evidence found for: {question}"
        return draft, claims

    def _finalize(
        self, question: str, results: dict[str, list[dict[str, Any]]], step: int
    ) -> ToolCall:
        _, claims = self._draft(question, results)
        audit = (results.get(p.DELEGATE_AUDIT) or [{}])[-1]
        retracted = {
            str(c.get("claim"))
            for c in audit.get("challenges", [])
            if c.get("resolve") == "RETRACT"
        }
        kept = [c for c in claims if c["text"] not in retracted]
        numbers: dict[str, int] = {}
        for claim in kept:  # sources numbered in order of first citation
            for ref in claim["anchors"]:
                numbers.setdefault(ref, len(numbers) + 1)
        lines = [f"**Question.** {question}", ""]
        for claim in kept:
            cites = "".join(f"[{numbers[ref]}]" for ref in claim["anchors"] if ref in numbers)
            lines.append(f"- {claim['text']} {cites}".rstrip())
        if not kept:
            lines.append("- The corpus holds no passage that answers this question.")
        lines += ["", "**Sources.**"]
        lines += [f"- [{n}] {ref.split('#')[0]}, {ref.split('#')[1]}" for ref, n in numbers.items()]
        computed = self._computed(results)
        confidence = 0.2 if not kept else (0.8 if audit.get("passed") else 0.5)
        uncertainty = (
            "the value rests on one small table; a wider temperature range would narrow it"
            if computed
            else "the answer summarises passages; nothing was computed"
        )
        return _call(
            p.FINALIZE,
            step,
            answer_markdown="\n".join(lines),
            claims=kept,
            evidence_used=list(numbers),
            confidence=confidence,
            uncertainty=uncertainty,
        )


_TABLE_RULE = re.compile(r"\|?[\s:|-]+\|?")


def _first_sentence(text: str) -> str:
    """The first sentence of a passage's prose: headings left out, a table summarised."""
    prose: list[str] = []
    heading = ""
    rows = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            rows += 0 if _TABLE_RULE.fullmatch(stripped) else 1
        elif stripped.startswith("#"):
            heading = heading or stripped.lstrip("#").strip()
        elif stripped:
            prose.append(stripped)
    body = " ".join(" ".join(prose).split()) or heading
    if rows > 1 and body:  # a caption over a table: say what the table holds
        return f"{body.rstrip(' :.')} (a table of {rows - 1} rows)."
    match = re.search(r"(.{20,}?[.!?])(\s|$)", body)
    return (match.group(1) if match else body[:200]).strip()


def planner_message(question: str, mode: str) -> list[Message]:
    """The conversation a planner starts from."""
    return [
        Message.system(
            f"You are the planner of a research team working in mode {mode}. Use the tools: "
            "research the question, compute what it asks for in the sandbox, have the auditor "
            "check the draft, answer every challenge, then finalize with cited claims."
        ),
        Message.user(question),
    ]
