"""The reproducibility engine: execute runs from an entrypoint, replay them, explain divergence."""

from rar.replay.engine import ReplayRefusedError, ReplayReport, execute, replay, resume
from rar.replay.source import NondeterminismError, RecordedEffects, ReplayMissError

__all__ = [
    "NondeterminismError",
    "RecordedEffects",
    "ReplayMissError",
    "ReplayRefusedError",
    "ReplayReport",
    "execute",
    "replay",
    "resume",
]
