"""The three audit modes and their thresholds, in one place.

========== =============== ===================== =========================== ===============
mode       anchors / claim relevance (strictly >) evidence failures are      argumentation
========== =============== ===================== =========================== ===============
owl_lite   ≥ 1             > 0.15                warnings (a light audit)    no
owl_dl     ≥ 2             > 0.30                errors                      no
owl_full   ≥ 3             > 0.35                errors                      Dung, grounded
========== =============== ===================== =========================== ===============
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """What a mode demands of the evidence behind each claim."""

    min_anchors: int
    min_relevance: float  # an anchor counts when its relevance_score is strictly greater
    evidence_severity: Severity  # how failed evidence checks weigh in this mode
    argumentation: bool  # whether the run builds a Dung argumentation graph


class Mode(enum.StrEnum):
    OWL_LITE = "owl_lite"
    OWL_DL = "owl_dl"
    OWL_FULL = "owl_full"

    @property
    def policy(self) -> ModePolicy:
        return POLICIES[self]


POLICIES: dict[Mode, ModePolicy] = {
    Mode.OWL_LITE: ModePolicy(
        min_anchors=1, min_relevance=0.15, evidence_severity="warning", argumentation=False
    ),
    Mode.OWL_DL: ModePolicy(
        min_anchors=2, min_relevance=0.30, evidence_severity="error", argumentation=False
    ),
    Mode.OWL_FULL: ModePolicy(
        min_anchors=3, min_relevance=0.35, evidence_severity="error", argumentation=True
    ),
}
