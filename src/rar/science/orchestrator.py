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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import ValidationError

from rar.agents import (
    ACLMessage,
    ArgumentationFramework,
    BDIState,
    ContractNet,
    Draft,
    MessageBus,
    Mode,
    Performative,
    audit,
    log_audit,
)
from rar.agents.modes import POLICIES
from rar.errors import ProviderError
from rar.llm.client import Client
from rar.llm.types import Message
from rar.runtime.run import Run, RunWaiting, error_value
from rar.sandbox.result import VOLATILE_FIELDS
from rar.science import protocol as p
from rar.science.figures import record_fit_figure
from rar.science.planner import planner_message

ResearchFn = Callable[[str, int], dict[str, Any]]
ExecuteFn = Callable[[str], dict[str, Any]]

# who can do what: (success probability, capability match, cost, latency) per agent and task kind
CAPABILITIES: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "research": {"researcher": (0.95, 1.0, 1.0, 1.0), "executor": (0.2, 0.1, 2.0, 3.0)},
    "execute": {"executor": (0.9, 1.0, 2.0, 2.0), "researcher": (0.1, 0.1, 1.0, 1.0)},
    "audit": {"auditor": (0.95, 1.0, 1.0, 1.0), "researcher": (0.3, 0.2, 1.0, 1.0)},
}


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
    ) -> None:
        self.run = run
        self.client = client
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
        self.executions: list[dict[str, Any]] = []
        self.audit_report: dict[str, Any] | None = None
        self.challenges: list[dict[str, Any]] = []

    # --- the loop ----------------------------------------------------------------------------

    def answer(self, question: str) -> Outcome:
        self.bdi["planner"].desire("answer", question)
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
        return self._final(question, self._fallback(question), warning="step limit reached")

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
            self.bdi["planner"].intend("plan", plan.model_dump(mode="json"))
            return {"accepted": True, "steps": len(plan.steps)}
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
            self.bdi["planner"].intend(f"justify:{claim}", arguments)
            result = self._delegate(
                "research",
                arguments,
                lambda: {
                    "claim": claim,
                    **self._do_research(str(arguments.get("query", claim)), 8),
                },
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
        with self.run.span(kind, agent="planner"):
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
            with self.run.span(winner.contractor, agent=winner.contractor):
                result = work()
            self.net.report(task, success=_succeeded(result), result=_summary(result))
        return result

    # --- the agents' work --------------------------------------------------------------------

    def _do_research(self, query: str, k: int) -> dict[str, Any]:
        found = self._research(query, k)
        threshold = POLICIES[self.mode].min_relevance
        kept = [a for a in found.get("anchors", []) if float(a["relevance_score"]) > threshold]
        for anchor in kept:
            self.anchors[f"{anchor['doc_id']}#{anchor['location']}"] = anchor
        if kept:
            self.run.log_event("evidence", agent="researcher", anchors=kept)
        self.bdi["researcher"].believe(
            f"query:{query}", [f"{a['doc_id']}#{a['location']}" for a in kept]
        )
        return {
            "anchors": kept,
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
        record_fit_figure(self.run, result, len(self.executions))  # a plot of a fit, if any
        self.bdi["executor"].believe(
            f"cell:{len(self.executions)}",
            {"status": result.get("status"), "variables": result.get("variables", {})},
        )
        return result

    def _do_audit(self, arguments: dict[str, Any]) -> dict[str, Any]:
        draft = Draft.model_validate(
            {
                "answer": str(arguments.get("draft", "")),
                "claims": arguments.get("claims") or [],
                "anchors": list(self.anchors.values()),
                "executions": self.executions,
            }
        )
        report = audit(draft, self.mode)
        log_audit(self.run, report)
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

    def _fallback(self, question: str) -> dict[str, Any]:
        refs = sorted(self.anchors)[:3]
        lines = [f"**Question.** {question}", ""] + [
            f"- {self.anchors[r].get('snippet', '')[:200]} [{i + 1}]" for i, r in enumerate(refs)
        ]
        return {
            "answer_markdown": "\n".join(lines) or question,
            "evidence_used": refs,
            "claims": [],
            "confidence": 0.2,
            "uncertainty": "the planner ran out of steps before finalizing",
        }

    def _final(self, question: str, final: dict[str, Any], warning: str | None = None) -> Outcome:
        warnings = ([warning] if warning else []) + self.notes
        answer = final["answer_markdown"]
        if self.fell_back is not None:
            said = (
                f"the planner model {self.fell_back['failed']} was unavailable "
                f"({self.fell_back['reason']}); {self.fell_back['instead']} finished the run"
            )
            warnings.append(said)
            answer = f"{answer}\n\n*Planned offline: {said}.*"
        if self.audit_report is None or not self.audit_report.get("passed"):
            warnings.append("the audit did not pass" if self.audit_report else "not audited")
        used = [ref for ref in final.get("evidence_used", []) if ref in self.anchors]
        kept = {str(claim.get("text")) for claim in final.get("claims", [])}
        for challenge in self.challenges:  # a challenged claim left out of the answer is retracted
            claim = str(challenge.get("claim"))
            if claim not in kept:
                self.bus.send(
                    ACLMessage(
                        performative=Performative.RETRACT,
                        sender="planner",
                        receivers=("auditor",),
                        content={"claim": claim, "reason": _reason(challenge)},
                    )
                )
        result: dict[str, Any] = {
            "question": question,
            "mode": self.mode.value,
            "answer": answer,
            "claims": final.get("claims", []),
            "confidence": final.get("confidence"),
            "uncertainty": final.get("uncertainty", ""),
            "anchors": [self.anchors[ref] for ref in used],
            "audit": self.audit_report or {},
            "executions": len(self.executions),
            "warnings": warnings,
        }
        if self.fell_back is not None:
            result["planner_fallback"] = self.fell_back
        if self.mode is Mode.OWL_FULL:
            result["argumentation"] = self._argumentation(final)
        self.bdi["planner"].drop_desire("answer")
        return Outcome(result, warnings)

    def _argumentation(self, final: dict[str, Any]) -> dict[str, Any]:
        """Claims, their support, the auditor's challenges as attacks; the grounded extension."""
        try:
            graph = ArgumentationFramework()
            # claims numbered from 1, as the audit numbers them
            for index, claim in enumerate(final.get("claims", []), start=1):
                support = [self.anchors.get(ref, {"ref": ref}) for ref in claim.get("anchors", [])]
                graph.add(f"claim-{index}", claim.get("text", ""), support)
                for number, challenge in enumerate(self.challenges, start=1):
                    if challenge.get("claim") == claim.get("text"):
                        attacker = f"challenge-{index}-{number}"
                        graph.add(attacker, _reason(challenge), [])
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


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """What a REPORT message carries: counts and status, not the whole payload."""
    return {
        "anchors": len(result.get("anchors", [])),
        "status": result.get("status"),
        "passed": result.get("passed"),
        "error": result.get("error"),
    }
