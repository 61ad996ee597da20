"""What ``rar verify`` reports (re-exported by :mod:`rar.store.verify`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """Something that no longer matches (or, in ``warnings``, a harmless leftover of a crash)."""

    run_id: str | None
    what: str
    detail: str
    seq: int | None = None
    expected: str | None = None
    actual: str | None = None
    path: str | None = None
    offset: int | None = None  # byte offset in ``path`` where it starts

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class VerifyReport:
    runs: int = 0
    events: int = 0
    blobs: int = 0
    packs: int = 0
    problems: list[Problem] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # always empty: verify never repairs
    notes: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runs": self.runs,
            "events": self.events,
            "blobs": self.blobs,
            "packs": self.packs,
            "problems": [p.as_dict() for p in self.problems],
            "repaired": self.repaired,
            "notes": self.notes,
            "warnings": [w.as_dict() for w in self.warnings],
        }
