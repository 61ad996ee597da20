"""Exports of recorded runs into other formats (see docs/trajectory.md)."""

from __future__ import annotations

from rar.export.trajectory import (
    FORMAT,
    OUTCOMES,
    STEP_TYPES,
    TrajectoryError,
    check_steps,
    export_trajectory,
    load_schema,
    validate,
)

__all__ = [
    "FORMAT",
    "OUTCOMES",
    "STEP_TYPES",
    "TrajectoryError",
    "check_steps",
    "export_trajectory",
    "load_schema",
    "validate",
]
