"""Field-level differences between two JSON values, for explaining a divergence."""

from __future__ import annotations

from typing import Any

import orjson

_MAX_FIELDS = 20
_MAX_TEXT = 200


def field_differences(expected: Any, actual: Any, path: str = "") -> list[dict[str, Any]]:
    """Paths (``request.messages[3].content``) where two values differ, with short values."""
    found: list[dict[str, Any]] = []
    _walk(expected, actual, path, found)
    return found[:_MAX_FIELDS]


def _walk(a: Any, b: Any, path: str, found: list[dict[str, Any]]) -> None:
    if len(found) >= _MAX_FIELDS or (a == b and type(a) is type(b)):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            child = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                found.append(_entry(child, a.get(key), b.get(key)))
            else:
                _walk(a[key], b[key], child, found)
        return
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            _walk(x, y, f"{path}[{index}]", found)
        if len(a) != len(b):
            found.append(_entry(f"{path}.length", len(a), len(b)))
        return
    found.append(_entry(path or "$", a, b))


def _entry(path: str, expected: Any, actual: Any) -> dict[str, Any]:
    return {"field": path, "expected": _short(expected), "actual": _short(actual)}


def _short(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        text = orjson.dumps(value).decode()
        return value if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[: _MAX_TEXT - 1] + "…"
    return value
