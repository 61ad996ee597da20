"""The orchestrator: a function-calling loop in which the planner delegates to the other agents.

The planner model (the rule-based planner offline, or a real model) calls the tools of
:mod:`rar.science.protocol`. Each delegation is a Contract Net round (CFP to the agents, bids,
AWARD, REPORT) over ACL messages; the Researcher searches the corpus and keeps anchors above the
mode's relevance threshold, the Executor runs code in the sandbox, the Auditor runs the six
checks and CHALLENGEs claims, which the planner answers (more evidence, or a retraction).
Every agent's beliefs, desires and intentions are BDI state whose changes are in the record.

"Finalize first": a final answer is the hard requirement. If the planner runs out of steps, the
orchestrator finalizes from what was found; extras (the argumentation graph of owl_full) never
cost the answer.

What the planner finalizes is audited once more (the ``final`` audit). In owl_dl and owl_full a
claim that fails a check there is removed from the answer and listed as rejected (a RETRACT
message, a rejected node of the argumentation graph); in owl_lite it stays, with the audit not
passed. A planner may revise its plan when challenges remain (``plan`` again: a ``replan``
event), at most :data:`MAX_REPLANS` times. A search for more evidence uses the question's terms
and the planner's extra terms, never the challenged claim's own words: a passage cannot be found
again by searching for what was copied from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import ValidationError

from rar.errors import ProviderError
from rar.llm.client import Client
from rar.llm.types import Message
from rar.runtime.run import Run, RunWaiting, error_value
from rar.sandbox.result import VOLATILE_FIELDS
from rar.science import protocol as p
from rar.science.answer import render_answer
from rar.science.figures import record_fit_figure
from rar.science.planner import planner_message
from rar.science.protocols import (
    CONTRACT_NET_PROTOCOL,
    ACLMessage,
    ArgumentationFramework,
    AuditReport,
    BDIState,
    ContractNet,
    Draft,
    MessageBus,
    Mode,
    Performative,
    audit,
    log_audit,
)
from rar.science.protocols.modes import POLICIES
from rar.science.questions import Question, classify

ResearchFn = Callable[[str, int], dict[str, Any]]
ExecuteFn = Callable[[str], dict[str, Any]]

# who can do what: (success probability, capability match, cost, latency) per agent and task kind
CAPABILITIES: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "research": {"researcher": (0.95, 1.0, 1.0, 1.0), "executor": (0.2, 0.1, 2.0, 3.0)},
    "execute": {"executor": (0.9, 1.0, 2.0, 2.0), "researcher": (0.1, 0.1, 1.0, 1.0)},
    "audit": {"auditor": (0.95, 1.0, 1.0, 1.0), "researcher": (0.3, 0.2, 1.0, 1.0)},
}


MAX_REPLANS = 2  # how many times a planner may revise its plan after the first


class WaitRequested(RunWaiting):
    """The planner asked to wait; the run stops WAITING and ``rar resume`` continues it."""


@dataclass
class Outcome:
    result: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


class Orchestrator:
    def __init__(
        self,
        run: Run,
        client: Client,
        *,
        research: ResearchFn,
        execute: ExecuteFn,
        mode: Mode | str,
        max_steps: int,
        fallback: Callable[[], Client] | None = None,
        auditor: Client | None = None,
    ) -> None:
        self.run = run
        self.client = client
        self.auditor = auditor  # a model that reviews drafts too (rar.science.model_auditor)
        self._fallback_client = fallback  # the planner to use when the model is unavailable
        self.fell_back: dict[str, Any] | None = None
        self.notes: list[str] = []  # warnings about the setup, e.g. a missing library
        self._research = research
        self._execute = execute
        self.mode = Mode(mode)
        self.max_steps = max_steps
        self.bus = MessageBus(run)
        self.bdi = {
            name: BDIState(name, run) for name in ("planner", "researcher", "executor", "auditor")
        }
        self.net = ContractNet(self.bus, manager="planner", bdi=self.bdi["planner"])
        self.anchors: dict[str, dict[str, Any]] = {}
        self.passages: dict[str, str] = {}  # the whole text of each anchored passage
        self.executions: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []  # what each delegated task reported
        self.audit_report: dict[str, Any] | None = None
        self.challenges: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []  # claims the final audit removed
        self.plans = 0
        self.produced: list[str] = []  # artifacts of the task under way
        self.question: Question = classify("")

    # --- the loop ----------------------------------------------------------------------------

    def answer(self, question: str) -> Outcome:
        self.bdi["planner"].desire("answer", question)
        self.question = classify(question)
        messages = planner_message(question, self.mode.value)
        for _ in range(self.max_steps):
            response = self._plan(messages)
            messages.append(response.message)
            if not response.tool_calls:  # a model that answers in prose: take it as final
                final = {"answer_markdown": response.content or "", "confidence": 0.3}
                return self._final(question, final)
            for call in response.tool_calls:
                try:
                    arguments = call.parsed_arguments()
                except ValueError as exc:
                    messages.append(Message.tool(call, f"Error: {exc}", is_error=True))
                    continue
                if call.name == p.FINALIZE:
                    try:
                        final = p.Finalize.model_validate(arguments).model_dump()
                    except ValidationError as exc:  # repair: the model sees what to fix
                        messages.append(Message.tool(call, f"Error: {exc}", is_error=True))
                        continue
                    return self._final(question, final)
                result = self._dispatch(call.name, arguments)
                messages.append(
                    Message.tool(
                        call,
                        orjson.dumps(for_model(result), option=orjson.OPT_SORT_KEYS).decode(),
                        is_error=not _succeeded(result),
                    )
                )
        return self._final(
            question, self._fallback(question, messages), warning="step limit reached"
        )

    def _plan(self, messages: list[Message]) -> Any:
        """The planner's next turn; an unavailable model hands over to the fallback planner."""
        try:
            with self.run.span("plan", agent="planner"):
                return self.client.complete(messages=messages, tools=p.TOOLS)
        except ProviderError as exc:
            if not exc.retryable or self._fallback_client is None or self.fell_back is not None:
                raise
            failed = self.client.profile.name
            self.client = self._fallback_client()
            instead = self.client.profile.name
            self.fell_back = {"failed": failed, "instead": instead, "reason": exc.message}
            self.run.log_event(
                "fallback",
                agent="planner",
                what="planner",
                failed=failed,
                instead=instead,
                error=error_value(exc, self.run.redactor),
            )
        with self.run.span("plan", agent="planner"):
            return self.client.complete(messages=messages, tools=p.TOOLS)

    def _dispatch(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == p.PLAN:
            try:
                plan = p.Plan.model_validate(arguments)
            except ValidationError as exc:  # repair: the planner sees what to fix
                return {"error": f"the plan does not match the Plan schema: {exc}"}
            self.plans += 1
            if self.plans > 1 + MAX_REPLANS:
                return {
                    "error": f"the plan was already revised {MAX_REPLANS} times; finalize with "
                    "the claims the evidence supports"
                }
            if self.plans > 1:  # a revision: say what it answers
                self.run.log_event(
                    "replan",
                    agent="planner",
                    revision=self.plans - 1,
                    goal=plan.goal,
                    open_challenges=[str(c.get("claim")) for c in self.challenges],
                )
            self.bdi["planner"].intend("plan", plan.model_dump(mode="json"))
            return {"accepted": True, "steps": len(plan.steps), "revision": self.plans - 1}
        if name == p.DELEGATE_RESEARCH:
            return self._delegate(
                "research",
                arguments,
                lambda: self._do_research(
                    str(arguments.get("query", "")), int(arguments.get("k", 8))
                ),
            )
        if name == p.REQUEST_MORE_EVIDENCE:
            claim = str(arguments.get("claim", ""))
            query = self._evidence_query(claim, str(arguments.get("query", "")))
            self.bdi["planner"].intend(f"justify:{claim}", {**arguments, "query": query})
            result = self._delegate(
                "research",
                {**arguments, "query": query},
                lambda: {"claim": claim, "query": query, **self._do_research(query, 8)},
            )
            # the planner answers the auditor's challenge with the new evidence
            self.bus.send(
                ACLMessage(
                    performative=Performative.JUSTIFY,
                    sender="planner",
                    receivers=("auditor",),
                    content={"claim": claim, "anchors": len(result.get("anchors", []))},
                    evidence=tuple(result.get("anchors", [])),
                )
            )
            return result
        if name == p.DELEGATE_EXECUTE:
            return self._delegate(
                "execute", arguments, lambda: self._do_execute(str(arguments.get("code", "")))
            )
        if name == p.DELEGATE_AUDIT:
            return self._delegate("audit", arguments, lambda: self._do_audit(arguments))
        if name in (p.WAIT_SECONDS, p.WAIT_UNTIL):
            return self._wait(name, arguments)
        return {
            "error": f"unknown tool {name!r}; the tools are: {', '.join(t.name for t in p.TOOLS)}"
        }

    def _delegate(
        self, kind: str, description: dict[str, Any], work: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """One Contract Net round: CFP, bids, AWARD, the work, REPORT."""
        offers = CAPABILITIES[kind]
        # the protocol marks the span as a Contract Net round (a contract_net span in telemetry)
        with self.run.span(kind, agent="planner", protocol=CONTRACT_NET_PROTOCOL):
            task = self.net.announce({"kind": kind, **description}, contractors=sorted(offers))
            for contractor, (success, match, cost, latency) in sorted(offers.items()):
                self.net.bid(
                    task,
                    contractor,
                    success_probability=success,
                    capability_match=match,
                    cost=cost,
                    latency=latency,
                )
            winner = self.net.award(task)
            self.net.start(task)
            self.produced = []
            with self.run.span(winner.contractor, agent=winner.contractor):
                result = work()
            self.net.report(
                task,
                success=_succeeded(result),
                result=_summary(result),
                artifacts=self.produced,  # the figures and files the work left, by name
            )
        self.reports.append(
            {"task_id": task.task_id, "kind": kind, "success": _succeeded(result)}
        )
        return result

    def _evidence_query(self, claim: str, query: str) -> str:
        """The question's words and the planner's extra words, without the claim's own."""
        from rar.evidence.analysis import tokenize

        question_words = set(tokenize(self.question.text))
        claim_words = set(tokenize(claim)) - question_words
        extra = [w for w in query.split() if not (set(tokenize(w)) & claim_words)]
        return " ".join([self.question.text, *extra]).strip()

    # --- the agents' work --------------------------------------------------------------------

    def _do_research(self, query: str, k: int) -> dict[str, Any]:
        found = self._research(query, k)
        threshold = POLICIES[self.mode].min_relevance
        kept = [a for a in found.get("anchors", []) if float(a["relevance_score"]) > threshold]
        texts = found.get("passages") or {}
        for anchor in kept:
            ref = f"{anchor['doc_id']}#{anchor['location']}"
            self.anchors[ref] = anchor
            if isinstance(texts.get(ref), str):
                self.passages[ref] = texts[ref]
        if kept:
            self.run.log_event("evidence", agent="researcher", anchors=kept)
        self.bdi["researcher"].believe(
            f"query:{query}", [f"{a['doc_id']}#{a['location']}" for a in kept]
        )
        kept_refs = {f"{a['doc_id']}#{a['location']}" for a in kept}
        return {
            "anchors": kept,
            "passages": {ref: text for ref, text in texts.items() if ref in kept_refs},
            "tables": found.get("tables", []),
            "below_threshold": len(found.get("anchors", [])) - len(kept),
        }

    def _do_execute(self, code: str) -> dict[str, Any]:
        result = self._execute(code)
        self.executions.append(result)
        error = result.get("error") or {}
        if isinstance(error, dict) and error.get("missing_library"):  # say it plainly, once
            said = str(error.get("message"))
            if said not in self.notes:
                self.notes.append(said)
        figure = record_fit_figure(self.run, result, len(self.executions))  # a plot of a fit
        if figure is not None:
            self.produced.append(figure)
        self._record_cell_files(result, len(self.executions))
        self.bdi["executor"].believe(
            f"cell:{len(self.executions)}",
            {"status": result.get("status"), "variables": result.get("variables", {})},
        )
        return result

    def _record_cell_files(self, result: dict[str, Any], cell: int) -> None:
        """Files a cell wrote become artifacts (``cells/<n>/<path>``), from the workspace or,
        in a replay that did not run the cell, from the store (the recorded run saved them)."""
        if result.get("status") != "ok":
            return
        from rar.hashing import digest_bytes

        for item in result.get("artifacts") or []:
            path, digest = str(item.get("path", "")), str(item.get("digest", ""))
            data: bytes | None = None
            source = self.run.workspace / path
            try:
                if source.is_file() and not source.is_symlink():
                    data = source.read_bytes()
            except OSError:
                data = None
            if data is None or digest_bytes(data) != digest:
                try:
                    data = self.run.store.get_blob(digest)
                except Exception:  # gone or never saved: say so in the record, never crash
                    self.run.log_event(
                        "note", agent="executor", level="warning",
                        text=f"cell {cell} wrote {path}, but its bytes are not in the store",
                    )
                    continue
            name = f"cells/{cell}/{path}"
            try:
                self.run.artifact(
                    name,
                    data,
                    media_type=str(item.get("media_type") or "application/octet-stream"),
                    agent="executor",
                )
            except ValueError:  # a name artifacts/ cannot hold
                continue
            self.produced.append(name)

    def asked(self) -> dict[str, Any]:
        """What the question asks, and whether any kept passage addresses it (for the audit)."""
        from rar.science.compose import addresses

        q = self.question
        return {
            "text": q.text,
            "kind": q.kind,
            "quantity": q.quantity,
            "method": q.method,
            "compared": list(q.compared),
            "terms": list(q.terms),
            "addressed": addresses(q, self.passages) if self.passages else False,
        }

    def _draft(self, answer: str, claims: list[Any]) -> Draft:
        return Draft.model_validate(
            {
                "answer": answer,
                "asked": self.asked(),
                "claims": claims,
                "anchors": list(self.anchors.values()),
                "passages": self.passages,
                "executions": self.executions,
                "reports": self.reports,
            }
        )

    def _audit(self, draft: Draft) -> AuditReport:
        """The rule checks, and the auditor model's review when the run has one."""
        report = audit(draft, self.mode)
        if self.auditor is not None:
            from rar.science import model_auditor

            with self.run.span("review", agent="auditor"):
                check = model_auditor.review(self.auditor, draft, self.mode)
            report = model_auditor.with_review(report, draft, check)
        return report

    def _do_audit(self, arguments: dict[str, Any]) -> dict[str, Any]:
        draft = self._draft(str(arguments.get("draft", "")), arguments.get("claims") or [])
        report = self._audit(draft)
        log_audit(self.run, report, stage="draft")
        for message in report.challenge_messages("auditor", ["planner"]):
            self.bus.send(message)
        result = report.model_dump(mode="json")
        self.audit_report = result
        self.challenges = list(result.get("challenges", []))
        self.bdi["auditor"].believe("last_audit", {"passed": result["passed"]})
        return {
            "passed": result["passed"],
            "blocking": result.get("blocking"),
            "checks": [{k: c[k] for k in ("name", "passed", "detail")} for c in result["checks"]],
            "challenges": self.challenges,
        }

    def _wait(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Park the run until a deadline (``rar resume`` continues it); a past one goes on."""
        reason = str(arguments.get("reason", ""))
        now = self.run.now()
        if name == p.WAIT_SECONDS:
            try:
                seconds = float(arguments.get("seconds", 0))
            except (TypeError, ValueError):
                seconds = math.nan
            if not seconds <= MAX_WAIT_SECONDS:  # NaN fails too
                return {"error": f"seconds must be a number up to {MAX_WAIT_SECONDS:.0f}"}
            until_time = now + timedelta(seconds=max(0.0, seconds))
            asked: dict[str, Any] = {"seconds": seconds}
        else:
            try:
                until_time = parse_deadline(str(arguments.get("until", "")))
            except ValueError as exc:
                return {"error": str(exc)}
            asked = {"until": until_time.isoformat()}
        if until_time <= now:  # nothing to wait for
            return {"waited": False, **asked}
        until = until_time.isoformat()
        self.run.effect("wait", {"until": until, "reason": reason}, lambda: {"until": until})
        if not self.run.last_effect_served():  # first time here: stop; `rar resume` goes on
            self.run.log_event(
                "checkpoint",
                reason=f"wait: {reason}",
                state={"until": until, "anchors": sorted(self.anchors)},
            )
            raise WaitRequested(until, reason)
        return {"waited": True, **asked}

    # --- finalizing ----------------------------------------------------------------------------

    def _fallback(self, question: str, messages: list[Message]) -> dict[str, Any]:
        """The answer the rule-based planner composes from the conversation so far."""
        from rar.llm.types import Request
        from rar.science.planner import RuleBasedPlanner

        call = RuleBasedPlanner().finalize_call(
            Request(model="rule-based", messages=tuple(messages))
        )
        final = p.Finalize.model_validate(call.parsed_arguments()).model_dump()
        final["confidence"] = min(float(final["confidence"]), 0.5)
        final["uncertainty"] = (
            f"{final.get('uncertainty') or ''}; the planner ran out of steps before finalizing, "
            "so the offline composer answered from what was found"
        ).lstrip("; ")
        return final

    def _final(self, question: str, final: dict[str, Any], warning: str | None = None) -> Outcome:
        warnings = ([warning] if warning else []) + self.notes
        answer = final["answer_markdown"]
        claims = [dict(claim) for claim in final.get("claims", [])]
        report = self._final_audit(answer, claims)
        if self.mode is not Mode.OWL_LITE:  # a claim that fails its checks leaves the answer
            failing = _failing_claims(report)
            if failing:
                self.rejected = [
                    {"claim": claims[index]["text"], "reasons": reasons}
                    for index, reasons in failing.items()
                ]
                claims = [c for i, c in enumerate(claims) if i not in failing]
                answer, _used = render_answer(
                    question,
                    claims,
                    unanswered_reason="every claim drafted failed the audit",
                )
                report = self._final_audit(answer, claims)
                warnings.append(
                    f"{len(failing)} claim{'s' if len(failing) != 1 else ''} removed: "
                    "failed the final audit"
                )
        if self.fell_back is not None:
            said = (
                f"the planner model {self.fell_back['failed']} was unavailable "
                f"({self.fell_back['reason']}); {self.fell_back['instead']} finished the run"
            )
            warnings.append(said)
            answer = f"{answer}\n\n*Planned offline: {said}.*"
        if not report.get("passed"):
            warnings.append("the audit did not pass")
        cited = {str(ref) for claim in claims for ref in claim.get("anchors", [])}
        used = [
            ref
            for ref in dict.fromkeys([*final.get("evidence_used", []), *sorted(cited)])
            if ref in self.anchors and (ref in cited or not claims)
        ]
        kept = {str(claim.get("text")) for claim in claims}
        retracted = {str(c["claim"]): c["reasons"] for c in self.rejected}
        for challenge in self.challenges:  # a challenged claim left out of the answer is retracted
            claim = str(challenge.get("claim"))
            if claim not in kept and claim not in retracted:
                retracted[claim] = [_reason(challenge)]
        for claim, reasons in retracted.items():
            self.bus.send(
                ACLMessage(
                    performative=Performative.RETRACT,
                    sender="planner",
                    receivers=("auditor",),
                    content={"claim": claim, "reason": "; ".join(str(r) for r in reasons)},
                )
            )
        confidence = final.get("confidence")
        if isinstance(confidence, int | float) and not report.get("passed"):
            confidence = min(float(confidence), 0.5 if claims else 0.2)
        result: dict[str, Any] = {
            "question": question,
            "mode": self.mode.value,
            "answer": answer,
            "claims": claims,
            "rejected": self.rejected,
            "confidence": confidence,
            "uncertainty": final.get("uncertainty", ""),
            "anchors": [self.anchors[ref] for ref in used],
            "audit": {**report, "rejected": self.rejected},
            "executions": len(self.executions),
            "warnings": warnings,
        }
        if self.fell_back is not None:
            result["planner_fallback"] = self.fell_back
        if self.mode is Mode.OWL_FULL:
            result["argumentation"] = self._argumentation({**final, "claims": claims})
        self.bdi["planner"].drop_desire("answer")
        return Outcome(result, warnings)

    def _final_audit(self, answer: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
        """The Auditor checks what is delivered: the finalized claims (``stage: final``)."""

        def work() -> dict[str, Any]:
            report = self._audit(self._draft(answer, claims))
            log_audit(self.run, report, stage="final")
            dumped: dict[str, Any] = report.model_dump(mode="json")
            return dumped

        result = self._delegate("audit", {"stage": "final", "claims": len(claims)}, work)
        self.audit_report = result
        self.bdi["auditor"].believe("final_audit", {"passed": result["passed"]})
        return result

    def _argumentation(self, final: dict[str, Any]) -> dict[str, Any]:
        """Claims, their support, the auditor's challenges as attacks; the grounded extension."""
        try:
            graph = ArgumentationFramework()
            # claims numbered from 1, as the audit numbers them
            kept = list(final.get("claims", []))
            texts = {str(c.get("text")) for c in kept} | {r["claim"] for r in self.rejected}
            retracted = [  # challenged, then left out by the planner: attacked by the challenge
                {"text": str(c.get("claim")), "anchors": []}
                for c in self.challenges
                if str(c.get("claim")) not in texts
            ]
            claims = (
                kept
                + list({c["text"]: c for c in retracted}.values())
                + [
                    {"text": r["claim"], "anchors": [], "rejected": r["reasons"]}
                    for r in self.rejected
                ]
            )
            for index, claim in enumerate(claims, start=1):
                support = [self.anchors.get(ref, {"ref": ref}) for ref in claim.get("anchors", [])]
                graph.add(f"claim-{index}", claim.get("text", ""), support)
                for number, challenge in enumerate(self.challenges, start=1):
                    if challenge.get("claim") == claim.get("text") and "rejected" not in claim:
                        attacker = f"challenge-{index}-{number}"
                        graph.add(attacker, _reason(challenge), [])
                        graph.attack(attacker, f"claim-{index}")
                if "rejected" in claim:  # the final audit's findings defeat it
                    attacker = f"audit-{index}"
                    graph.add(attacker, "; ".join(str(r) for r in claim["rejected"]), [])
                    graph.attack(attacker, f"claim-{index}")
            return graph.to_json()
        except Exception as exc:  # best-effort: never costs the answer
            return {"error": f"{type(exc).__name__}: {exc}"}


# what a model must never see: it differs between two identical runs, so it would defeat the
# cache and make the same question cost a model call again
VOLATILE = frozenset(VOLATILE_FIELDS)
MAX_WAIT_SECONDS = 366 * 24 * 3600.0  # a year: longer is a planner's mistake, not a plan


def for_model(result: dict[str, Any]) -> dict[str, Any]:
    """A tool result as the planner model sees it: without timings and other volatile fields."""
    return {key: value for key, value in result.items() if key not in VOLATILE}


def parse_deadline(text: str) -> datetime:
    """An ISO 8601 time (UTC when it names no offset), or a ValueError saying what to give."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"until must be an ISO 8601 time such as 2026-12-01T12:00:00Z, got {text!r}"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _succeeded(result: dict[str, Any]) -> bool:
    """Whether a contractor's work succeeded (a sandbox result always has an ``error`` key)."""
    return result.get("error") is None and result.get("status") in (None, "ok")


def _reason(challenge: dict[str, Any]) -> str:
    """A challenge's reasons as one sentence."""
    reasons = challenge.get("reasons")
    if isinstance(reasons, list) and reasons:
        return "; ".join(str(r) for r in reasons)
    return str(challenge.get("reason") or "challenged")


def _failing_claims(report: dict[str, Any]) -> dict[int, list[str]]:
    """Index (from 0) → reasons of each claim that failed an ``error`` check of the report."""
    failing: dict[int, list[str]] = {}
    for check in report.get("checks", []):
        if check.get("passed") or check.get("severity") != "error":
            continue
        for finding in check.get("findings", []):
            claim_id = str(finding.get("claim_id") or "")
            if claim_id.startswith("claim-") and claim_id[6:].isdigit():
                failing.setdefault(int(claim_id[6:]) - 1, []).append(str(finding["problem"]))
    return failing


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """What a REPORT message carries: counts and status, not the whole payload."""
    return {
        "anchors": len(result.get("anchors", [])),
        "status": result.get("status"),
        "passed": result.get("passed"),
        "error": result.get("error"),
    }
