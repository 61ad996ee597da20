"""Field-level differences between two JSON values, for explaining a divergence."""

from __future__ import annotations

from typing import Any


def field_differences(expected: Any, actual: Any) -> list[dict[str, Any]]:
    """Paths (``request.messages[3].content``) where two values differ, with short values.

    The same comparison ``rar diff`` uses (:func:`rar.replay.diff.field_diff`), in the
    ``{"field", "expected", "actual"}`` shape of a replay report.
    """
    from rar.replay.diff import field_diff

    found, _omitted = field_diff(expected, actual)
    return [{"field": d.path, "expected": d.a, "actual": d.b} for d in found]
