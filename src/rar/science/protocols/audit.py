"""The Auditor's eight checks: pure functions of a draft and a mode.

::

    report = audit(Draft(claims=[...], anchors=[...], executions=[...]), Mode.OWL_DL)
    report.passed, report.blocking, report.checks, report.challenges
    for message in report.challenge_messages("auditor", ("planner",)):
        bus.send(message)
    log_audit(run, report)                      # one ``audit`` event

======================= =================================================================
check                   passes when
======================= =================================================================
``success``             every reported task and every execution reported success, and there
                        was work to check (no reports and no executions is no success)
``evidence_quantity``   every claim cites at least the mode's number of anchors (1/2/3)
``evidence_structure``  every cited anchor has ``doc_id``, ``location``, ``snippet`` and a
                        ``content_hash`` digest (``sha256:<hex>``), and every reference
                        (``doc_id#location``) names an anchor of the draft
``relevance``           every cited anchor's ``relevance_score`` is > the mode's threshold
``runtime_errors``      no execution or step recorded an error (or printed a traceback)
``unit_consistency``    every quantity a claim states agrees, in dimension and value, with
                        the computed result of the same name (see ``rar.science.protocols._units``)
``support``             every claim's numbers are in the passages it cites or were computed,
                        and enough of its words are in them (see ``rar.science.protocols.support``)
``answers_question``    the answer addresses what was asked (``Draft.asked``): a value with
                        a unit for a value question, named methods for a methods question,
                        a stated cause for a why question, both sides for a comparison —
                        and the corpus held passages that address the question at all
======================= =================================================================

A failed check has severity ``error``, except the four evidence checks (quantity, structure,
relevance, support) in ``owl_lite`` (a light audit), where it is a ``warning``; a passed check
has severity ``info``. ``passed`` means every check passed; ``blocking`` means an ``error``
check failed. Each claim at fault gets one **challenge** (the content of a CHALLENGE message):
``resolve`` is ``JUSTIFY`` when more or better evidence would settle it (``needed_anchors`` says
how many) and ``RETRACT`` when a computed result contradicts it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rar.evidence.analysis import tokenize
from rar.hashing import is_digest
from rar.science.protocols import _units, support
from rar.science.protocols.acl import ACLMessage, Performative
from rar.science.protocols.modes import Mode, Severity

if TYPE_CHECKING:
    from rar.runtime.run import Run

ANCHOR_FIELDS = ("doc_id", "location", "content_hash", "snippet")
TRACEBACK = "Traceback (most recent call last)"
_SHOWN = 8  # problems listed in a check's detail before "... and k more"


def _plain(items: Any) -> Any:
    """Anchors given as models (``EvidenceAnchor``) become their JSON form."""
    if not isinstance(items, list | tuple):
        return items
    return [i.model_dump(mode="json") if isinstance(i, BaseModel) else i for i in items]


class DraftClaim(BaseModel):
    """A claim of the answer and the evidence it cites (anchor dicts or ``doc_id#location``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    text: str = Field(min_length=1)
    id: str | None = None
    anchors: list[str | dict[str, Any]] = Field(default_factory=list)

    _anchors = field_validator("anchors", mode="before")(_plain)


class Execution(BaseModel):
    """What a computation reported: its status, variables and any error (an error value)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    task_id: str | None = None
    status: str = "ok"
    variables: dict[str, Any] = Field(default_factory=dict)
    error: dict[str, Any] | None = None
    stderr: str = ""


Kind = Literal["value", "methods", "explanation", "comparison", "definition", "general"]


class Asked(BaseModel):
    """What the question asks for, as the planner understood it (``rar.science.questions``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    text: str
    kind: Kind = "general"
    quantity: str | None = None
    method: str | None = None
    compared: list[str] = Field(default_factory=list)
    terms: list[str] = Field(default_factory=list)
    addressed: bool = True  # False: no passage above the threshold addresses the question


class Draft(BaseModel):
    """What the Auditor is shown: the claims, the anchors they cite, the work behind them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = ""
    asked: Asked | None = None
    passages: dict[str, str] = Field(default_factory=dict)  # doc_id#location -> passage text
    claims: list[DraftClaim] = Field(default_factory=list)
    anchors: list[dict[str, Any]] = Field(default_factory=list)  # what references resolve to
    executions: list[Execution] = Field(default_factory=list)
    reports: list[dict[str, Any]] = Field(default_factory=list)  # REPORT contents
    errors: list[dict[str, Any]] = Field(default_factory=list)  # error values of other steps

    _anchors = field_validator("anchors", mode="before")(_plain)


class Finding(BaseModel):
    """One problem a check found, and the claim it concerns (None: the work as a whole)."""

    model_config = ConfigDict(frozen=True)

    claim_id: str | None
    problem: str


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    severity: Severity
    detail: str
    findings: list[Finding] = Field(default_factory=list)

    @property
    def claims(self) -> list[str]:
        """Ids of the claims at fault, in order of their first finding."""
        return list(dict.fromkeys(f.claim_id for f in self.findings if f.claim_id is not None))


class Challenge(BaseModel):
    """The content of a CHALLENGE: which claim, why, and what would resolve it."""

    model_config = ConfigDict(frozen=True)

    claim_id: str
    claim: str
    checks: list[str]
    reasons: list[str]
    resolve: Literal["JUSTIFY", "RETRACT"]
    needed_anchors: int = 0
    min_relevance: float = 0.0


class AuditReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Mode
    passed: bool
    blocking: bool
    checks: list[Check]
    challenges: list[Challenge] = Field(default_factory=list)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def challenge_messages(
        self,
        sender: str,
        receivers: Sequence[str],
        *,
        conversation_id: str | None = None,
        reply_to: str | None = None,
    ) -> list[ACLMessage]:
        """One CHALLENGE message per challenge, ready for ``bus.send``."""
        return [
            ACLMessage(
                performative=Performative.CHALLENGE,
                sender=sender,
                receivers=tuple(receivers),
                content=challenge.model_dump(mode="json"),
                conversation_id=conversation_id,
                reply_to=reply_to,
            )
            for challenge in self.challenges
        ]


# --- the draft's claims and their anchors ------------------------------------------------------


def claim_id(index: int, claim: DraftClaim) -> str:
    return claim.id or f"claim-{index + 1}"


def _cited(draft: Draft) -> list[tuple[str, DraftClaim, list[dict[str, Any] | str]]]:
    """Each claim with its anchors, references resolved (an unresolved one stays a string)."""
    pool = {f"{a.get('doc_id')}#{a.get('location')}": a for a in draft.anchors}
    return [
        (
            claim_id(i, claim),
            claim,
            [pool.get(a, a) if isinstance(a, str) else a for a in claim.anchors],
        )
        for i, claim in enumerate(draft.claims)
    ]


def _structure_problem(anchor: dict[str, Any] | str) -> str | None:
    if isinstance(anchor, str):
        return f"reference {anchor!r} names no anchor of the draft"
    missing = [f for f in ANCHOR_FIELDS if anchor.get(f) in (None, "", [], {})]
    if missing:
        return f"anchor {_where(anchor)} lacks {', '.join(missing)}"
    if not is_digest(anchor["content_hash"]):
        return f"anchor {_where(anchor)} has content_hash {anchor['content_hash']!r}, not a digest"
    return None


def _relevance_problem(anchor: dict[str, Any] | str, threshold: float) -> str | None:
    if isinstance(anchor, str):
        return f"reference {anchor!r} has no relevance score (it names no anchor)"
    score = anchor.get("relevance_score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return f"anchor {_where(anchor)} has no relevance_score"
    if not score > threshold:
        return f"anchor {_where(anchor)} has relevance {score:g}, not above {threshold:g}"
    return None


def _where(anchor: dict[str, Any]) -> str:
    return f"{anchor.get('doc_id', '?')}#{anchor.get('location', '?')}"


Found = list[tuple[str | None, str]]  # (claim id or None, problem)


def _result(name: str, found: Found, severity: Severity, ok: str) -> Check:
    if not found:
        return Check(name=name, passed=True, severity="info", detail=ok)
    lines = [f"{cid}: {problem}" if cid else problem for cid, problem in found]
    detail = " | ".join(lines[:_SHOWN])
    if len(lines) > _SHOWN:
        detail += f" | ... and {len(lines) - _SHOWN} more"
    findings = [Finding(claim_id=cid, problem=problem) for cid, problem in found]
    return Check(name=name, passed=False, severity=severity, detail=detail, findings=findings)


# --- the checks --------------------------------------------------------------------------------


def check_success(draft: Draft, mode: Mode) -> Check:
    """Every task report says success and every execution's status is ``ok``."""
    found: Found = [
        (None, f"task {r.get('task_id', '?')} reported failure")
        for r in draft.reports
        if r.get("success") is not True
    ]
    found += [
        (None, f"execution {e.task_id or i + 1} ended with status {e.status!r}")
        for i, e in enumerate(draft.executions)
        if e.status != "ok"
    ]
    if not draft.reports and not draft.executions:
        found.append((None, "no task reported and nothing was executed: there is no work to check"))
    ok = f"{len(draft.reports)} reports and {len(draft.executions)} executions succeeded"
    return _result("success", found, "error", ok)


def check_evidence_quantity(draft: Draft, mode: Mode) -> Check:
    """Every claim cites at least ``mode.policy.min_anchors`` anchors of the draft."""
    mode = Mode(mode)
    need = mode.policy.min_anchors
    found: Found = []
    for cid, claim, anchors in _cited(draft):
        have = sum(1 for a in anchors if isinstance(a, dict))
        if have < need:
            found.append((cid, f"{claim.text!r} cites {have} anchors; {mode} needs {need}"))
    ok = f"{len(draft.claims)} claims cite at least {need} anchors each"
    return _result("evidence_quantity", found, mode.policy.evidence_severity, ok)


def check_evidence_structure(draft: Draft, mode: Mode) -> Check:
    """Every cited anchor is complete and every reference resolves."""
    found: Found = [
        (cid, problem)
        for cid, _claim, anchors in _cited(draft)
        for problem in map(_structure_problem, anchors)
        if problem is not None
    ]
    ok = "every cited anchor has doc_id, location, content_hash and snippet"
    return _result("evidence_structure", found, Mode(mode).policy.evidence_severity, ok)


def check_relevance(draft: Draft, mode: Mode) -> Check:
    """Every cited anchor's ``relevance_score`` is strictly above the mode's threshold."""
    policy = Mode(mode).policy
    found: Found = [
        (cid, problem)
        for cid, _claim, anchors in _cited(draft)
        for anchor in anchors
        if (problem := _relevance_problem(anchor, policy.min_relevance)) is not None
    ]
    ok = f"every cited anchor has relevance above {policy.min_relevance:g}"
    return _result("relevance", found, policy.evidence_severity, ok)


def check_runtime_errors(draft: Draft, mode: Mode) -> Check:
    """No execution or other step recorded an error (or printed a traceback)."""
    found: Found = []
    for i, execution in enumerate(draft.executions):
        name = execution.task_id or str(i + 1)
        if execution.error is not None:
            found.append((None, f"execution {name}: {_error_text(execution.error)}"))
        elif TRACEBACK in execution.stderr:
            last = execution.stderr.strip().splitlines()[-1]
            found.append((None, f"execution {name} printed a traceback: {last}"))
    found += [(None, _error_text(error)) for error in draft.errors]
    return _result("runtime_errors", found, "error", "no runtime errors were recorded")


def check_unit_consistency(draft: Draft, mode: Mode) -> Check:
    """Quantities in claims agree with computed results of the same name, after conversion."""
    computed: dict[str, Any] = {}
    for execution in draft.executions:  # a failed computation's variables prove nothing
        if execution.status == "ok" and execution.error is None:
            computed.update(execution.variables)
    found: Found = []
    compared = 0
    for cid, claim, _anchors in _cited(draft):
        for stated in _units.claim_quantities(claim.text):
            results = _units.computed_for(stated.name, computed)
            if not results:
                continue
            compared += 1
            # a result may be computed in several units (Ea in kJ/mol and in eV): the claim
            # must agree with one of them; it is at fault when it agrees with none
            reasons = [_units.disagreement(stated, result) for result in results]
            if all(reason is not None for reason in reasons):
                same = [r for r in reasons if r is not None and "has dimension" not in r]
                found.append((cid, (same or reasons)[0] or ""))
    ok = f"{compared} claimed quantities agree with the computed results"
    return _result("unit_consistency", found, "error", ok)


def _computed(draft: Draft) -> list[float]:
    values: list[float] = []
    for execution in draft.executions:  # a failed computation's variables prove nothing
        if execution.status == "ok" and execution.error is None:
            support.computed_numbers(execution.variables, values)
    return values


def _source_text(draft: Draft, anchor: dict[str, Any]) -> str:
    ref = f"{anchor.get('doc_id')}#{anchor.get('location')}"
    return draft.passages.get(ref) or str(anchor.get("snippet") or "")


def check_support(draft: Draft, mode: Mode) -> Check:
    """Each claim's numbers are in its cited passages or computed; its words are in them (or in
    the description of a computation: its method, fit, labels and columns)."""
    mode = Mode(mode)
    share_needed = support.WORD_SHARE[mode.value]
    computed = _computed(draft)
    described = " ".join(
        support.computed_words(e.variables)
        for e in draft.executions
        if e.status == "ok" and e.error is None
    )
    found: Found = []
    for cid, claim, anchors in _cited(draft):
        sources = [_source_text(draft, a) for a in anchors if isinstance(a, dict)]
        if not sources:
            found.append((cid, f"{claim.text!r} cites no passage, so nothing supports it"))
            continue
        numbers = support.unsupported_numbers(claim.text, sources, computed)
        if numbers:
            found.append(
                (cid, f"{', '.join(numbers)} in {claim.text!r} is neither in the cited "
                 "passages nor computed")
            )
        share, missing = support.word_share(claim.text, [*sources, described])
        if share < share_needed:
            found.append(
                (cid, f"only {share:.0%} of the words of {claim.text!r} are in the cited "
                 f"passages ({mode} needs {share_needed:.0%}; missing: {', '.join(missing[:6])})")
            )
    ok = f"{len(draft.claims)} claims are supported by the passages they cite"
    return _result("support", found, mode.policy.evidence_severity, ok)


_CAUSAL = re.compile(
    r"\b(because|since|due to|owing to|so that|therefore|thus|hence|leads? to|led to|"
    r"results? in|resulting in|means that|is why|reflects?|arises?|explains?|caused?|causes|"
    r"depends? on|as a result|consequently|which is why|drives?|gives? rise|makes?|made|"
    r"allows?|enables?|prevents?|so|proportional to|scales? with)\b",
    re.IGNORECASE,
)
_CONTRAST = re.compile(
    r"\b(whereas|unlike|than|while|compared|differs?|different|in contrast|both|but|"
    r"instead|rather|however|same)\b",
    re.IGNORECASE,
)
_METHOD_WORDS = re.compile(
    r"\b(method|analysis|plot|equation|approach|technique|fit|regression|test|model|"
    r"calculation|procedure|measurement|band|integration|spectroscopy|calorimetry)s?\b",
    re.IGNORECASE,
)


def _mentions(text: str, phrase: str) -> bool:
    words = [w for w in tokenize(phrase) if w]
    have = set(tokenize(text))
    return bool(words) and sum(w in have for w in words) * 2 >= len(words)


def check_answers_question(draft: Draft, mode: Mode) -> Check:
    """The answer addresses what was asked: a value, methods, a cause, a comparison."""
    asked = draft.asked
    if asked is None:
        return Check(
            name="answers_question", passed=True, severity="info",
            detail="no question was given to check the answer against",
        )
    found: Found = []
    texts = [claim.text for claim in draft.claims]
    if not asked.addressed:
        found.append((None, "no passage above the relevance threshold addresses the question's "
                      f"terms ({', '.join(asked.terms[:8]) or 'none'}): the corpus does not "
                      "answer it"))
    elif not texts:
        found.append((None, "the answer makes no claim"))
    elif asked.kind == "value":
        valued = [t for t in texts if _has_value(t)]
        what = asked.quantity or "a value"
        if not valued:
            found.append((None, f"the question asks for {what}; no claim states a number "
                          "with a unit"))
    elif asked.kind == "methods":
        named = {m.group(0).lower() for t in texts for m in _METHOD_WORDS.finditer(t)}
        with_method = [t for t in texts if _METHOD_WORDS.search(t)]
        if not with_method:
            found.append((None, "the question asks for methods; no claim names one"))
        elif asked.method is None and len(with_method) < 2 and len(named) < 2:
            found.append((None, "the question asks for methods; only one is named"))
    elif asked.kind == "explanation":
        if not any(_CAUSAL.search(t) for t in texts):
            found.append((None, "the question asks why or how; no claim states a cause or a "
                          "mechanism"))
    elif asked.kind == "comparison":
        sides = [c for c in asked.compared if c.strip()]
        if sides and not all(any(_mentions(t, side) for t in texts) for side in sides):
            missing = [s for s in sides if not any(_mentions(t, s) for t in texts)]
            found.append((None, f"the question compares {' and '.join(sides)}; the answer "
                          f"says nothing about {', '.join(missing)}"))
    named_kinds = ("value", "methods", "definition", "general")
    # a claim is about the named method when it, or the passage it cites (with its section
    # heading and its document's title: "Arrhenius plots and the two-point method"), names it
    about = texts + [
        f"{a.get('doc_title') or ''} {_source_text(draft, a)}"
        for _cid, _claim, anchors in _cited(draft)
        for a in anchors
        if isinstance(a, dict)
    ]
    if (
        asked.method
        and texts
        and asked.kind in named_kinds
        and not any(_mentions(t, asked.method) for t in about)
    ):
        found.append((None, f"the question names {asked.method}; no claim is about it"))
    ok = f"the answer addresses the {asked.kind} question"
    return _result("answers_question", found, "error", ok)


def _has_value(text: str) -> bool:
    """A number followed by a unit pint reads (or a percentage) somewhere in the text."""
    for match in _VALUE_WITH_UNIT.finditer(text.replace("−", "-")):
        unit = match["unit"]
        if unit == "%" or _units._read_unit(unit)[0] is not None:
            return True
    return False


_VALUE_WITH_UNIT = re.compile(
    r"\d(?:[\d.,]*\d)?(?:\s*(?:×|x)\s*10\S*)?\s*(?:±\s*[\d.]+\s*)?"
    r"(?P<unit>%|(?:1/)?[^\W\d_][\w°µμΩÅ·*/^⁻⁰¹²³⁴⁵⁶⁷⁸⁹\-]*)"
)


CHECKS: tuple[Callable[[Draft, Mode], Check], ...] = (
    check_success,
    check_evidence_quantity,
    check_evidence_structure,
    check_relevance,
    check_runtime_errors,
    check_unit_consistency,
    check_support,
    check_answers_question,
)


def _error_text(error: Mapping[str, Any]) -> str:
    return f"{error.get('type', 'Error')}: {error.get('message', '')}".rstrip(": ")


# --- the audit ---------------------------------------------------------------------------------


def audit(draft: Draft | Mapping[str, Any], mode: Mode | str) -> AuditReport:
    """Run the eight checks on a draft in a mode; challenge every claim at fault."""
    draft = draft if isinstance(draft, Draft) else Draft.model_validate(draft)
    mode = Mode(mode)
    checks = [check(draft, mode) for check in CHECKS]
    return AuditReport(
        mode=mode,
        passed=all(c.passed for c in checks),
        blocking=any(not c.passed and c.severity == "error" for c in checks),
        checks=checks,
        challenges=challenges(draft, mode, checks),
    )


def challenges(draft: Draft, mode: Mode, checks: Sequence[Check]) -> list[Challenge]:
    """One challenge per claim named by a failed check, in the order of the claims."""
    policy = Mode(mode).policy
    challenged: list[Challenge] = []
    for cid, claim, anchors in _cited(draft):
        failed = [c for c in checks if not c.passed and cid in c.claims]
        if not failed:
            continue
        good = sum(
            1
            for a in anchors
            if _structure_problem(a) is None and _relevance_problem(a, policy.min_relevance) is None
        )
        contradicted = any(c.name == "unit_consistency" for c in failed)
        challenged.append(
            Challenge(
                claim_id=cid,
                claim=claim.text,
                checks=[c.name for c in failed],
                reasons=[f.problem for c in failed for f in c.findings if f.claim_id == cid],
                resolve="RETRACT" if contradicted else "JUSTIFY",
                needed_anchors=max(0, policy.min_anchors - good),
                min_relevance=policy.min_relevance,
            )
        )
    return challenged


def log_audit(
    run: Run, report: AuditReport, *, agent: str = "auditor", stage: str | None = None
) -> int:
    """Record the report as an ``audit`` event in the run's current span; returns its seq.

    ``stage`` names which audit it is when a run has several (``draft``, ``final``)."""
    extra = {"stage": stage} if stage is not None else {}
    return run.log_event("audit", agent=agent, report=report.model_dump(mode="json"), **extra)
