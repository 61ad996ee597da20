"""The Run context: record (and later replay, fork, resume) through one effect boundary."""

from rar.runtime.run import Run, Span, error_value, record

__all__ = ["Run", "Span", "error_value", "record"]
