"""The Run context: record (and later replay, fork, resume) through one effect boundary."""

from rar.runtime.run import Run, Span, error_value
from rar.runtime.start import record

__all__ = ["Run", "Span", "error_value", "record"]
