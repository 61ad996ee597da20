"""The rule-based planner: an offline model provider that drives the science runtime.

It is a provider like any other (``complete(request) -> Response``), so the orchestrator has one
code path for it and for real models. Its answer is a function of the conversation alone: it
reads the question and the tool results so far and calls the next tool.

1. ``plan`` for the kind of question (:func:`rar.science.questions.classify`): a value to
   compute or look up, methods, an explanation, a comparison, a definition;
2. ``delegate_research`` for the question;
3. ``delegate_execute`` when the question asks for a value and a passage holds a data table an
   analysis of :mod:`rar.science.analyses` applies to (chosen by the table's columns and the
   question's words), then ``delegate_research`` for the passage describing that method when
   none was found yet;
4. ``delegate_audit`` on a draft composed for the question (:mod:`rar.science.compose`):
   a computed value with its standard error, R², n and data range; values the corpus states;
   methods by name with one line each; the sentences that state causes; both sides of a
   comparison — each claim citing the passages it came from;
5. ``request_more_evidence`` (the question's terms) for the first challenged claim, and a second
   audit; if challenges remain, a revised ``plan`` that drops the claims the evidence does not
   support (the orchestrator bounds revisions);
6. ``finalize`` with the cited answer, its claims, the evidence used, a confidence and what is
   uncertain — or, when no passage addresses the question, an answer that says so.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rar.evidence.analysis import tokenize
from rar.llm.types import FinishReason, Message, Request, Response, ToolCall, Usage
from rar.science import protocol as p
from rar.science.analyses import Analysis, analyses_for
from rar.science.answer import render_answer
from rar.science.compose import addresses, select
from rar.science.protocols.support import WORD_SHARE, unsupported_numbers, word_share
from rar.science.questions import Question, classify
from rar.science.tables import Table

MAX_CLAIMS = 5
MAX_METHODS = 10  # a methods question lists up to this many, one line each
Results = dict[str, list[dict[str, Any]]]


def _results(request: Request) -> Results:
    """Tool results so far, by tool name, oldest first (content is JSON from the orchestrator)."""
    found: Results = {}
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


def _mode(request: Request) -> str:
    system = next((m.content or "" for m in request.messages if m.role == "system"), "")
    return next((mode for mode in WORD_SHARE if f"mode {mode}" in system), "owl_lite")


def _call(name: str, step: int, **arguments: Any) -> ToolCall:
    text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return ToolCall(id=f"call_{step}_{name}", name=name, arguments=text)


def _ref(item: dict[str, Any]) -> str:
    return f"{item.get('doc_id')}#{item.get('location')}"


class Evidence:
    """What the searches found so far: anchors (best first), passage texts, data tables."""

    def __init__(self, results: Results) -> None:
        self.anchors: dict[str, dict[str, Any]] = {}
        self.passages: dict[str, str] = {}
        self.tables: list[tuple[str, Table]] = []
        for name in (p.DELEGATE_RESEARCH, p.REQUEST_MORE_EVIDENCE):
            for result in results.get(name, []):
                texts = result.get("passages") or {}
                for anchor in result.get("anchors", []):
                    ref = _ref(anchor)
                    if ref not in self.anchors:
                        self.anchors[ref] = anchor
                        self.passages[ref] = str(texts.get(ref) or anchor.get("snippet", ""))
                for found in result.get("tables", []):
                    ref = _ref(found)
                    table = Table(
                        tuple(found["columns"]),
                        tuple(tuple(row) for row in found["rows"]),
                        str(found.get("caption", "")),
                    )
                    if ref in self.anchors and all(ref != r for r, _ in self.tables):
                        self.tables.append((ref, table))

    def relevance(self, ref: str) -> float:
        return float(self.anchors.get(ref, {}).get("relevance_score", 0.0))

    def ranked(self) -> list[str]:
        return sorted(self.anchors, key=lambda ref: (-self.relevance(ref), ref))


def _analysis(question: Question, evidence: Evidence) -> tuple[str, Analysis] | None:
    """The table and analysis that answer the question: the method it names first, then the
    most relevant table with an analysis reporting the asked quantity."""
    candidates: list[tuple[int, float, str, Analysis]] = []
    for ref, table in evidence.tables:
        # the data must be what the question is about: its passage (caption included) covers
        # the question's key terms; a table that merely has the right columns is not enough
        about = _about_data(question, evidence.passages.get(ref, "") + " " + table.caption)
        for rank, analysis in enumerate(
            analyses_for(table, question.text, quantity=question.quantity)
        ):
            named = question.method is not None and (
                coverage_of(question.method, analysis.method + " " + analysis.kind) > 0
            )
            if question.method is not None and not named and about < 0.75:
                continue  # the question asks for another method than this table's analysis
            if not named and about < 0.4:
                continue
            candidates.append((0 if named else 1 + rank, -evidence.relevance(ref), ref, analysis))
    if not candidates:
        return None
    _order, _score, ref, analysis = min(candidates, key=lambda c: (c[0], c[1], c[2]))
    return ref, analysis


# what the data table of a method or a quantity holds, in the words its caption would use
_DATA_WORDS: dict[str, str] = {
    "ozawa": "heating rates temperatures conversion",
    "flynn": "heating rates temperatures conversion",
    "friedman": "heating rates conversion rate temperatures",
    "kissinger": "heating rates peak temperatures",
    "arrhenius": "rate constants temperatures",
    "eyring": "rate constants temperatures",
    "michaelis": "substrate concentration rate",
    "lineweaver": "substrate concentration rate",
    "half-life": "concentration time",
    "half life": "concentration time",
    "decay": "concentration time",
    "elimination": "concentration time",
    "activation energy": "rate constants temperatures",
    "enthalpy of activation": "rate constants temperatures",
    "entropy of activation": "rate constants temperatures",
    "rate constant": "concentration time",
    "modulus": "stress strain",
    "km": "substrate concentration rate",
    "vmax": "substrate concentration rate",
}


def _data_words(method: str) -> str:
    lowered = method.casefold()
    return next((words for key, words in _DATA_WORDS.items() if key in lowered), "")


def _about_data(question: Question, text: str) -> float:
    """The share of the question's terms — other than the asked quantity's, which the data
    need not name — found in a table's passage: what the data are of ("turnover numbers of
    the hydrolase", "the intravenous bolus study"). 1.0 when the question names nothing else."""
    asked = set(tokenize(question.quantity or ""))
    words = [w for w in question.terms if w not in asked and not w.replace(".", "").isdigit()]
    if not words:
        return 1.0
    have = set(tokenize(text))
    return sum(w in have for w in words) / len(words)


def _method_name(method: str) -> str:
    """The distinctive words of a method's name ("Kissinger method" → "Kissinger")."""
    return " ".join(w for w in method.split() if w.lower() not in {"method", "fit", "plot"})


def coverage_of(phrase: str, text: str) -> float:
    words = set(tokenize(phrase))
    return len(words & set(tokenize(text))) / len(words) if words else 0.0


def _fmt(value: float, stderr: float | None) -> tuple[str, str]:
    """Value and standard error to the same place: the error's first one or two significant
    digits; e-notation (``2.07e13``) outside 0.001–100000, which the unit checker reads."""
    if not math.isfinite(value):
        return str(value), ""
    if stderr is None or not math.isfinite(stderr) or stderr <= 0:
        return f"{value:.4g}", ""
    digits = 2 if f"{stderr:e}"[0] in "12" else 1
    scale = math.floor(math.log10(abs(value))) if value else 0
    place = max(math.floor(math.log10(stderr)) - digits + 1, scale - 5)
    if -3 <= scale < 5:
        decimals = max(0, -place)
        return f"{value:.{decimals}f}", f"{stderr:.{decimals}f}"
    decimals = max(0, scale - place)
    return (
        f"{value / 10**scale:.{decimals}f}e{scale}",
        f"{stderr / 10**scale:.{decimals}f}e{scale}",
    )


def _r2(value: float) -> str:
    shown = f"{value:.4f}"
    return f"{value:.6f}" if shown in ("1.0000", "-1.0000") else shown


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _value_claims(
    report: dict[str, Any], table_ref: str, method_ref: str | None
) -> list[dict[str, Any]]:
    """One claim per computed result: value ± SE unit, then what it is and how it was obtained
    (method, fit, R², n, range of the data), in the words of the computation's report."""
    from rar.science.tables import split_header

    cite = [table_ref] + ([method_ref] if method_ref and method_ref != table_ref else [])
    r2, n = _number(report.get("r_squared")), report.get("n")
    span = report.get("data_range") or {}
    lo, hi = _number(span.get("min")), _number(span.get("max"))
    how = [str(report.get("method") or "least-squares fit")]
    if report.get("fit"):
        how[0] += f" of {report['fit']}"
    if r2 is not None:
        how.append(f"R² = {_r2(r2)}")
    if isinstance(n, int) and not isinstance(n, bool):
        how.append(f"n = {n}")
    if lo is not None and hi is not None:
        column, unit = split_header(str(span.get("column") or ""))
        unit = str(span.get("unit") or unit)
        how.append(f"{column or 'data'} {lo:g}–{hi:g} {unit}".rstrip())
    claims = []
    for item in report.get("results", []):
        value = _number(item.get("value"))
        if value is None:
            continue
        shown, error = _fmt(value, _number(item.get("stderr")))
        name, unit = str(item.get("name") or "value"), str(item.get("unit") or "")
        label = str(item.get("label") or "")
        quantity = f"{name} = {shown}" + (f" ± {error}" if error else "") + f" {unit}".rstrip()
        what = f"{label}; " if label else ""
        claims.append({"text": f"{quantity} ({what}{', '.join(how)})", "anchors": list(cite)})
    return claims


def _corroborate_computed(
    claim: dict[str, Any], evidence: Evidence, method: str, table_ref: str, need: int
) -> None:
    """A computed claim is backed by its table and by passages that describe its method (or
    the same data set): most relevant first, until it cites ``need``."""
    name = _method_name(method)
    document = table_ref.partition("#")[0]
    for ref in evidence.ranked():
        if len(claim["anchors"]) >= need:
            return
        if ref in claim["anchors"]:
            continue
        text = evidence.passages.get(ref, "")
        if coverage_of(name or method, text) >= 0.5 or ref.partition("#")[0] == document:
            claim["anchors"].append(ref)


def _what(text: str) -> str:
    """The name and label of a computed claim (``k = … (first-order rate constant; …``)."""
    name = text.partition(" = ")[0]
    label = text.partition("(")[2].partition(";")[0]
    return f"{name} {label}"


def _corroborate(claim: dict[str, Any], evidence: Evidence, need: int, mode: str) -> None:
    """Add anchors until the claim cites ``need``: passages that hold its words as well."""
    share = WORD_SHARE.get(mode, 0.5)
    for ref in evidence.ranked():
        if len(claim["anchors"]) >= need:
            return
        if ref in claim["anchors"]:
            continue
        text = evidence.passages.get(ref, "")
        if word_share(claim["text"], [text])[0] >= share and not unsupported_numbers(
            claim["text"], [text], []
        ):
            claim["anchors"].append(ref)


_NEEDED = {"owl_lite": 1, "owl_dl": 2, "owl_full": 3}


class RuleBasedPlanner:
    """The embedded default planner (``planner:rule-based``), offline and deterministic."""

    name = "planner"
    base_url = None

    def __init__(self, model: str = "rule-based") -> None:
        self.model = model

    def complete(self, request: Request) -> Response:
        results = _results(request)
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        call = self._next(_question(request), _mode(request), results, step)
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

    def finalize_call(self, request: Request) -> ToolCall:
        """The ``finalize`` call for the conversation as it stands (for a run out of steps)."""
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        question = classify(_question(request))
        return self._finalize(question, _mode(request), _results(request), step)

    # --- the next step ---------------------------------------------------------------------

    def _next(self, text: str, mode: str, results: Results, step: int) -> ToolCall:
        question = classify(text)
        if p.PLAN not in results:
            return _call(p.PLAN, step, **_plan(question))
        if p.DELEGATE_RESEARCH not in results:  # a list of methods draws on more passages
            return _call(
                p.DELEGATE_RESEARCH, step, query=text, k=20 if question.kind == "methods" else 8
            )
        evidence = Evidence(results)
        if question.kind == "value" and p.DELEGATE_EXECUTE not in results:
            chosen = _analysis(question, evidence)
            if chosen is not None:
                ref, analysis = chosen
                code = f"{analysis.code.rstrip()}\nreport['source'] = {ref!r}  # the data\n"
                return _call(
                    p.DELEGATE_EXECUTE,
                    step,
                    code=code,
                    purpose=f"{analysis.purpose} (data: {ref})",
                )
        computed = _computed_report(results)
        researched = results.get(p.DELEGATE_RESEARCH, [])
        if (
            question.kind == "value"
            and computed is None
            and (question.method or question.compute)
            and len(researched) < 2
            and p.DELEGATE_EXECUTE not in results
        ):  # the data table may say only what it holds ("concentration–time profile"): search
            # for the method's or the quantity's data as well
            named = " ".join(filter(None, [question.method, question.quantity]))
            words = _data_words(named)
            if words or question.compute:
                query = f"{named} {words} data".strip()
                return _call(p.DELEGATE_RESEARCH, step, query=query, k=8)
        if question.kind == "methods" and len(researched) < 2:  # the methods' own passages
            subject = question.quantity or " ".join(question.terms)
            return _call(
                p.DELEGATE_RESEARCH, step, query=f"{subject} method plot equation analysis", k=20
            )
        if (
            question.kind == "definition"
            and question.subject
            and len(researched) < 2
            and set(tokenize(question.subject)) != set(question.terms)
        ):  # the term on its own
            return _call(p.DELEGATE_RESEARCH, step, query=question.subject, k=8)
        if computed is not None and len(researched) < 2:
            report, _table = computed
            method = str(report.get("method") or "")
            if _method_passage(method, evidence, exclude=_table) is None:
                return _call(p.DELEGATE_RESEARCH, step, query=f"{method} {text}", k=8)
        claims = self.draft(question, mode, results, evidence)
        audits = results.get(p.DELEGATE_AUDIT, [])
        if not audits:
            return _call(p.DELEGATE_AUDIT, step, draft=_draft_text(claims, text), claims=claims)
        challenges = audits[-1].get("challenges", [])
        more = results.get(p.REQUEST_MORE_EVIDENCE, [])
        if challenges and not more and claims:
            claim = str(challenges[0].get("claim", text))
            extra = " ".join(filter(None, [question.quantity, question.method]))
            return _call(p.REQUEST_MORE_EVIDENCE, step, claim=claim, query=extra)
        if more and len(audits) < 2:
            return _call(p.DELEGATE_AUDIT, step, draft=_draft_text(claims, text), claims=claims)
        unsupported = _unsupported(audits[-1])
        if unsupported and len(results.get(p.PLAN, [])) < 2 and claims:
            return _call(
                p.PLAN,
                step,
                goal=text,
                steps=[
                    {
                        "action": p.FINALIZE,
                        "purpose": "answer with the claims the evidence supports; drop "
                        f"{len(unsupported)} the audit could not support",
                    }
                ],
                success_criteria="no claim left that the audit found unsupported",
            )
        return self._finalize(question, mode, results, step)

    # --- composing -------------------------------------------------------------------------

    def draft(
        self, question: Question, mode: str, results: Results, evidence: Evidence | None = None
    ) -> list[dict[str, Any]]:
        """The claims that answer the question, each citing the passages it came from."""
        evidence = evidence if evidence is not None else Evidence(results)
        if not evidence.anchors or not addresses(question, evidence.passages):
            return []
        claims: list[dict[str, Any]] = []
        computed = _computed_report(results)
        related: set[str] | None = None  # with a computed value: passages on its data or method
        if computed is not None:
            report, table_ref = computed
            method = str(report.get("method") or "")
            method_ref = _method_passage(method, evidence, table_ref)
            values = _value_claims(report, table_ref, method_ref)
            for claim in values:  # owl_dl/owl_full: more passages on the same data or method
                _corroborate_computed(claim, evidence, method, table_ref, _NEEDED.get(mode, 1))
            if question.quantity:  # the asked quantity first
                values.sort(key=lambda c: -coverage_of(question.quantity or "", _what(c["text"])))
            claims += values
            document = table_ref.partition("#")[0]
            related = {
                ref
                for ref in evidence.anchors
                if ref.partition("#")[0] == document or ref == method_ref
            }
        relevance = {ref: evidence.relevance(ref) for ref in evidence.anchors}
        extra = 0
        most = MAX_METHODS if question.kind == "methods" else MAX_CLAIMS
        titles = {ref: str(a.get("doc_title") or "") for ref, a in evidence.anchors.items()}
        for picked in select(
            question, evidence.passages, relevance=relevance, limit=most, titles=titles
        ):
            if len(claims) >= most or (related is not None and extra >= 2):
                break
            if any(picked.text == c["text"] for c in claims):
                continue
            if related is not None and picked.ref not in related:
                continue  # a value from another method or data set does not belong here
            claims.append({"text": picked.text, "anchors": [picked.ref]})
            extra += 1
        need = _NEEDED.get(mode, 1)
        for claim in claims:
            _corroborate(claim, evidence, need, mode)
        return claims

    def _finalize(self, question: Question, mode: str, results: Results, step: int) -> ToolCall:
        evidence = Evidence(results)
        claims = self.draft(question, mode, results, evidence)
        audits = results.get(p.DELEGATE_AUDIT, [])
        last = audits[-1] if audits else {}
        # what the evidence could not settle is left out: in owl_lite the claims found
        # unsupported; in owl_dl and owl_full every claim still challenged (their audit would
        # remove it)
        dropped = _unsupported(last) if mode == "owl_lite" else _challenged(last)
        kept = [c for c in claims if c["text"] not in dropped]
        computed = _computed_report(results)
        if not kept:
            reason = (
                "no passage above the relevance threshold addresses "
                + (", ".join(question.terms[:6]) or "the question")
                if not addresses(question, evidence.passages)
                else "the passages found do not support an answer the audit accepts"
            )
            answer, used = render_answer(question.text, [], unanswered_reason=reason)
            return _call(
                p.FINALIZE,
                step,
                answer_markdown=answer,
                claims=[],
                evidence_used=used,
                confidence=0.1,
                uncertainty="nothing in the corpus answers the question",
            )
        lead = _lead(question, computed is not None)
        answer, used = render_answer(question.text, kept, lead=lead)
        if computed is not None:
            uncertainty = (
                "± is the standard error of the fit; it does not include systematic errors "
                "(calibration, the model behind the method); the value holds for the range of "
                "the data"
            )
        elif question.kind == "value":
            uncertainty = "the value is as the corpus states it; nothing was recomputed"
        else:
            uncertainty = "the answer quotes the passages cited; nothing was computed"
        confidence = 0.8 if last.get("passed") else 0.5
        return _call(
            p.FINALIZE,
            step,
            answer_markdown=answer,
            claims=kept,
            evidence_used=used,
            confidence=confidence,
            uncertainty=uncertainty,
        )


def _computed_report(results: Results) -> tuple[dict[str, Any], str] | None:
    """The last successful computation's ``report`` and the table passage it used."""
    executed = results.get(p.DELEGATE_EXECUTE, [])
    for result in reversed(executed):
        report = (result.get("variables") or {}).get("report")
        if result.get("status") == "ok" and isinstance(report, dict) and report.get("results"):
            source = str(report.get("source") or result.get("data") or "")
            if not source:
                source = _table_of(report, results)
            return report, source
    return None


def _table_of(report: dict[str, Any], results: Results) -> str:
    """The table passage a report was computed from: the one whose columns it names."""
    column = str((report.get("data_range") or {}).get("column") or "")
    for result in results.get(p.DELEGATE_RESEARCH, []):
        for found in result.get("tables", []):
            if not column or column in found.get("columns", []):
                return _ref(found)
    return ""


def _method_passage(method: str, evidence: Evidence, exclude: str) -> str | None:
    """The most relevant passage, other than the table's, that names the method."""
    name = _method_name(method)
    best: tuple[float, str] | None = None
    for ref in evidence.ranked():
        if ref == exclude:
            continue
        share = coverage_of(name or method, evidence.passages.get(ref, ""))
        if share >= 0.5 and (best is None or share > best[0]):
            best = (share, ref)
    return best[1] if best else None


def _unsupported(audit: dict[str, Any]) -> set[str]:
    """Claims an audit challenged for what no more evidence settles: unsupported, off-question."""
    return {
        str(c.get("claim"))
        for c in audit.get("challenges", [])
        if set(c.get("checks", [])) & {"support", "unit_consistency"}
    }


def _challenged(audit: dict[str, Any]) -> set[str]:
    return {str(c.get("claim")) for c in audit.get("challenges", [])}


def _draft_text(claims: list[dict[str, Any]], question: str) -> str:
    return " ".join(c["text"] for c in claims) or f"No evidence found for: {question}"


def _lead(question: Question, computed: bool) -> str:
    if question.kind == "methods":
        return "Methods the corpus describes:"
    if question.kind == "value" and computed:
        return "Computed from the data in the corpus (value ± standard error):"
    return ""


def _plan(question: Question) -> dict[str, Any]:
    steps = [{"action": p.DELEGATE_RESEARCH, "purpose": "find passages that answer it"}]
    if question.kind == "value":
        steps.append(
            {
                "action": p.DELEGATE_EXECUTE,
                "purpose": f"compute {question.quantity or 'the value'} from a data table "
                "in the evidence, if one holds the data",
            }
        )
    what = {
        "value": "the value with its unit, uncertainty and how it was obtained",
        "methods": "the methods by name, one line each",
        "explanation": "the sentences that state the causes",
        "comparison": "what the passages say about each side and how they differ",
        "definition": "the defining sentence and what supports it",
        "general": "the sentences that address the question",
    }[question.kind]
    steps += [
        {"action": p.DELEGATE_AUDIT, "purpose": "check evidence, support, errors and units"},
        {"action": p.FINALIZE, "purpose": f"answer with {what}, each claim cited"},
    ]
    return {
        "goal": question.text,
        "steps": steps,
        "success_criteria": "every claim supported by the passages it cites and above the "
        "mode's relevance threshold; the answer addresses the question; the audit passes",
    }


def planner_message(question: str, mode: str) -> list[Message]:
    """The conversation a planner starts from."""
    return [
        Message.system(
            f"You are the planner of a research team working in mode {mode}. Use the tools: "
            "research the question, compute what it asks for in the sandbox, have the auditor "
            "check the draft, answer every challenge, then finalize with cited claims. "
            "Answer the question that was asked: a value with its unit, standard error and "
            "how it was obtained; methods by name; causes for a why question. A computation "
            "should leave a `report` dict: {'method', 'fit', 'n', 'r_squared', 'data_range': "
            "{'column', 'min', 'max', 'unit'}, 'results': [{'name', 'label', 'value', "
            "'stderr', 'unit'}], 'plot': {'x', 'y', 'slope', 'intercept', 'x_label', "
            "'y_label'}}. Every number in a claim must be in the passages it cites or computed; "
            "if the corpus does not answer the question, say so."
        ),
        Message.user(question),
    ]
