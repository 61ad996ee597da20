"""A model-driven auditor: a model reviews the draft and answers in the AuditSchema.

``--auditor MODEL`` (``auditor:`` in a spec, ``ask_question(auditor=...)``) adds a model's review
to the rule checks; it never replaces them (a model cannot pass what the rules reject). The
model is shown the question, each claim with the full text of the passages it cites, and what
was computed; it answers with JSON matching :class:`AuditSchema`, validated locally. An answer
that does not match gets one repair prompt and one more attempt (two in all, each a recorded
``llm`` effect, as Plan and Finalize are). The review becomes the ``model_review`` check: it
passes when the model approves; each claim the model challenges becomes a finding on that claim
(and a CHALLENGE). A model that gives no valid answer after both attempts fails the check and
says why; a model that cannot be reached fails the run like any provider error.
"""

from __future__ import annotations

import orjson
from pydantic import BaseModel, ConfigDict, Field

from rar.errors import StructuredOutputError
from rar.llm.client import Client
from rar.llm.types import Message
from rar.science.protocols.audit import AuditReport, Check, Draft, Finding, challenges
from rar.science.protocols.modes import Mode

ATTEMPTS = 2


class ClaimVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    claim: int = Field(ge=1, description="the claim's number, from 1")
    supported: bool
    reason: str = ""


class AuditSchema(BaseModel):
    """What the auditor model answers: a verdict per claim and on the answer as a whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approved: bool = Field(description="the answer addresses the question and every claim holds")
    addresses_question: bool
    claims: list[ClaimVerdict] = Field(default_factory=list)
    summary: str = ""


def _prompt(draft: Draft, mode: Mode) -> list[Message]:
    pool = {f"{a.get('doc_id')}#{a.get('location')}": a for a in draft.anchors}
    claims = []
    for number, claim in enumerate(draft.claims, start=1):
        cited = []
        for ref in claim.anchors:
            key = ref if isinstance(ref, str) else f"{ref.get('doc_id')}#{ref.get('location')}"
            anchor = pool.get(key, {})
            cited.append({"ref": key, "text": draft.passages.get(key) or anchor.get("snippet", "")})
        claims.append({"number": number, "text": claim.text, "cites": cited})
    computed = [
        {"status": e.status, "report": e.variables.get("report")}
        for e in draft.executions
        if e.variables.get("report") is not None
    ]
    body = {
        "question": draft.asked.text if draft.asked else "",
        "mode": mode.value,
        "claims": claims,
        "computed": computed,
    }
    return [
        Message.system(
            "You are the auditor of a research team. For each claim decide whether the passages "
            "it cites (or the computed results) support it: every number must be in them or "
            "computed, and the claim must say what they say. Decide whether the answer as a "
            "whole addresses the question. Answer only with JSON matching the schema."
        ),
        Message.user(orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()),
    ]


def review(client: Client, draft: Draft, mode: Mode) -> Check:
    """The ``model_review`` check: the model's verdicts as findings (never raises on bad JSON)."""
    try:
        verdict = client.structured(
            messages=_prompt(draft, mode), schema=AuditSchema, attempts=ATTEMPTS
        )
    except StructuredOutputError as exc:
        return Check(
            name="model_review",
            passed=False,
            severity="error",
            detail=f"the auditor model gave no valid AuditSchema in {ATTEMPTS} attempts: {exc}",
        )
    findings: list[Finding] = []
    for item in verdict.claims:
        if not item.supported and item.claim <= len(draft.claims):
            reason = item.reason or "the auditor model found it unsupported"
            findings.append(Finding(claim_id=f"claim-{item.claim}", problem=reason))
    if not verdict.addresses_question:
        findings.append(Finding(claim_id=None, problem="the answer does not address the question"))
    passed = verdict.approved and not findings
    if not passed and not findings:
        findings.append(Finding(claim_id=None, problem=verdict.summary or "not approved"))
    detail = verdict.summary or ("approved" if passed else "not approved")
    if findings:
        detail = " | ".join(
            f"{f.claim_id}: {f.problem}" if f.claim_id else f.problem for f in findings[:8]
        )
    return Check(
        name="model_review",
        passed=passed,
        severity="info" if passed else Mode(mode).policy.evidence_severity,
        detail=detail,
        findings=findings,
    )


def with_review(report: AuditReport, draft: Draft, check: Check) -> AuditReport:
    """The rule report with the model's check added (passed only if both pass)."""
    checks = [*report.checks, check]
    return AuditReport(
        mode=report.mode,
        passed=all(c.passed for c in checks),
        blocking=any(not c.passed and c.severity == "error" for c in checks),
        checks=checks,
        challenges=challenges(draft, report.mode, checks),
    )
