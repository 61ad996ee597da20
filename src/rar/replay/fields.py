"""Field-level differences between two JSON values, for explaining a divergence."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import orjson

MAX_FIELDS = 40
VALUE_WIDTH = 80
_ABSENT: Any = object()


class Plain:
    """``as_dict`` of a flat dataclass: its fields, tuples as lists."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        items = ((f.name, getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in items}


@dataclass(frozen=True, slots=True)
class FieldDiff(Plain):
    path: str
    change: str  # "changed", "added" (only in B) or "removed" (only in A)
    a: Any
    b: Any


def field_diff(a: Any, b: Any, limit: int = MAX_FIELDS) -> tuple[list[FieldDiff], int]:
    """Where two JSON values differ (nested paths, short values), and how many more were cut."""
    found: list[FieldDiff] = []
    total = 0

    def walk(x: Any, y: Any, path: str) -> None:
        nonlocal total
        if type(x) is type(y) and x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in [*x, *(k for k in y if k not in x)]:
                walk(x.get(key, _ABSENT), y.get(key, _ABSENT), f"{path}.{key}" if path else key)
        elif isinstance(x, list) and isinstance(y, list):
            for i in range(max(len(x), len(y))):
                walk(
                    x[i] if i < len(x) else _ABSENT, y[i] if i < len(y) else _ABSENT, f"{path}[{i}]"
                )
        else:
            total += 1
            if len(found) < limit:
                change = "added" if x is _ABSENT else "removed" if y is _ABSENT else "changed"
                found.append(FieldDiff(path or "$", change, shorten(x, y), shorten(y, x)))

    walk(a, b, "")
    return found, total - len(found)


def shorten(value: Any, other: Any = _ABSENT, width: int = VALUE_WIDTH) -> Any:
    """A value cut to about ``width`` characters; a long string around where it differs."""
    if value is _ABSENT or value is None or isinstance(value, bool | int | float):
        return None if value is _ABSENT else value
    if isinstance(value, str):
        if len(value) <= width:
            return value
        start = 0
        if isinstance(other, str):
            same = (i for i, (p, q) in enumerate(zip(value, other, strict=False)) if p != q)
            start = max(0, next(same, min(len(value), len(other))) - width // 4)
        cut = value[start : start + width - 2]
        return ("…" if start else "") + cut + ("…" if start + len(cut) < len(value) else "")
    text = json_text(value)
    return value if len(text) <= width else text[: width - 1] + "…"


def json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def field_differences(expected: Any, actual: Any) -> list[dict[str, Any]]:
    """:func:`field_diff` in the ``{"field", "expected", "actual"}`` shape of a replay report."""
    found, _omitted = field_diff(expected, actual)
    return [{"field": d.path, "expected": d.a, "actual": d.b} for d in found]
