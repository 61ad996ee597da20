"""The values ``rar diff`` produces: aligned steps, the first divergence, answer, evidence,
metrics, and the whole :class:`RunDiff` with its documented ``as_dict()`` shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rar.replay.fields import FieldDiff, Plain

STATUSES: tuple[str, ...] = ("same", "different-request", "different-response", "different-result")
STATUSES += ("error-differs", "extra-in-a", "extra-in-b")
Pair = tuple["Step | None", "Step | None"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a run: its identity, request/result digests and the event it came from."""

    seq: int
    span: str
    kind: str
    ordinal: int
    request: str | None
    result: str | None
    error: dict[str, Any] | None
    event: dict[str, Any] = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.span, self.kind)


@dataclass(frozen=True, slots=True)
class AlignedStep:
    status: str
    a: Step | None
    b: Step | None

    @property
    def step(self) -> Step:
        found = self.a if self.a is not None else self.b
        assert found is not None
        return found

    def as_dict(self, index: int) -> dict[str, Any]:
        a, b, step = self.a, self.b, self.step
        return {
            "index": index,
            "status": self.status,
            "span": step.span,
            "kind": step.kind,
            "a": None if a is None else {"seq": a.seq, "ordinal": a.ordinal},
            "b": None if b is None else {"seq": b.seq, "ordinal": b.ordinal},
        }


@dataclass(frozen=True, slots=True)
class Divergence:
    index: int
    aligned: AlignedStep
    reason: str
    compared: str | None  # "request", "result", "error", or None for an extra step
    fields: tuple[FieldDiff, ...]
    fields_omitted: int
    detail: str | None  # an extra step's request (or result), shortened

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.aligned.as_dict(self.index),
            "reason": self.reason,
            "compared": self.compared,
            "fields": [f.as_dict() for f in self.fields],
            "fields_omitted": self.fields_omitted,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class AnswerDiff(Plain):
    a: str | None
    b: str | None
    status_a: str
    status_b: str
    diff: tuple[str, ...]  # unified diff lines, empty when the texts are equal

    @property
    def equal(self) -> bool:
        return self.a == self.b and self.status_a == self.status_b


@dataclass(frozen=True, slots=True)
class EvidenceDiff(Plain):
    added: tuple[dict[str, Any], ...] = ()
    removed: tuple[dict[str, Any], ...] = ()
    changed: tuple[dict[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True, slots=True)
class Metric(Plain):
    name: str
    a: float | None
    b: float | None
    delta: float


@dataclass(frozen=True, slots=True)
class RunSide(Plain):
    run_id: str
    goal: str | None
    status: str
    events: int
    steps: int


@dataclass(frozen=True, slots=True)
class SpanSummary:
    """A span's share of a diff: where its first step is, and how many steps of each status
    (only the statuses that occur, in the order of :data:`STATUSES`)."""

    span: str
    first: int  # the index in RunDiff.steps of the span's first step
    counts: dict[str, int]

    @property
    def steps(self) -> int:
        return sum(self.counts.values())

    @property
    def same(self) -> bool:
        return set(self.counts) <= {"same"}

    def describe(self) -> str:
        """``"2 same, 1 different-response"``."""
        return ", ".join(f"{n} {status}" for status, n in self.counts.items())


@dataclass(frozen=True)
class RunDiff:
    a: RunSide
    b: RunSide
    steps: tuple[AlignedStep, ...]
    first_divergence: Divergence | None
    answer: AnswerDiff
    evidence: EvidenceDiff
    metrics: tuple[Metric, ...]
    manifest: tuple[FieldDiff, ...]
    manifest_omitted: int = 0
    # groups of sibling spans that ran concurrently in A or in B (their steps are compared
    # sibling by sibling, see rar.replay.diff), each in the order its spans were opened
    concurrent: tuple[tuple[str, ...], ...] = ()

    @property
    def equivalent(self) -> bool:
        return self.first_divergence is None and self.answer.equal

    @property
    def spans(self) -> tuple[SpanSummary, ...]:
        """The steps' spans in the order they first occur in :attr:`steps`, with their counts."""
        first: dict[str, int] = {}
        counts: dict[str, dict[str, int]] = {}
        for index, aligned in enumerate(self.steps):
            span = aligned.step.span
            first.setdefault(span, index)
            found = counts.setdefault(span, {})
            found[aligned.status] = found.get(aligned.status, 0) + 1
        return tuple(
            SpanSummary(span, index, {s: counts[span][s] for s in STATUSES if s in counts[span]})
            for span, index in first.items()
        )

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for aligned in self.steps:
            counts[aligned.status] += 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        first = self.first_divergence
        return {
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "equivalent": self.equivalent,
            "counts": self.counts,
            "first_divergence": None if first is None else first.as_dict(),
            "steps": [aligned.as_dict(i) for i, aligned in enumerate(self.steps)],
            "answer": {"equal": self.answer.equal, **self.answer.as_dict()},
            "evidence": self.evidence.as_dict(),
            "metrics": [m.as_dict() for m in self.metrics],
            "manifest": [f.as_dict() for f in self.manifest],
            "manifest_omitted": self.manifest_omitted,
        }
