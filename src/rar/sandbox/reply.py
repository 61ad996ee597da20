"""Reading a worker's answer: the frame becomes a :class:`~rar.sandbox.CellResult`.

The frame comes from a process that ran model code, so nothing in it is trusted: strings are
capped and must be valid UTF-8, variables must be JSON RAR can hash canonically, and in
unsafe-local mode host paths are shown as the sandbox shows them (``/work``, ``/tmp``).
"""

from __future__ import annotations

import re
from typing import Any

from rar.sandbox.result import CellResult

ERROR_TEXT_BYTES = 65536


def read_reply(
    reply: dict[str, Any], cap: int, duration_ms: float, host_paths: HostPaths | None = None
) -> CellResult:
    """The result a worker reported; ``cap`` bounds stdout and stderr (bytes)."""

    def text(value: Any, limit: int) -> str:
        shown = _text(value, limit)
        return _text(host_paths.relabel(shown), limit) if host_paths else shown

    status = reply.get("status")
    error = reply.get("error")
    variables = reply.get("variables")
    if not isinstance(variables, dict) or not _safe(variables):
        variables = {}
    return CellResult(
        status=status if status in ("ok", "error", "limit") else "error",
        stdout=text(reply.get("stdout"), cap),
        stderr=text(reply.get("stderr"), cap),
        stdout_truncated=bool(reply.get("stdout_truncated")),
        stderr_truncated=bool(reply.get("stderr_truncated")),
        error={k: text(error.get(k), ERROR_TEXT_BYTES) for k in ("type", "message", "traceback")}
        if isinstance(error, dict) else None,
        variables=host_paths.relabel(variables) if host_paths else variables,
        duration_ms=duration_ms,
    )  # fmt: skip


class HostPaths:
    """Host paths and what results show instead; a match ends where a path component ends."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        longest = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
        self.pattern = re.compile(f"(?:{longest})(?![\\w~+@-]|\\.\\w)")

    def relabel(self, value: Any) -> Any:
        """``value`` (a str, or JSON) with every host path replaced."""
        if isinstance(value, str):
            return self.pattern.sub(lambda match: self.names[match.group(0)], value)
        if isinstance(value, list):
            return [self.relabel(item) for item in value]
        if isinstance(value, dict):
            return {self.relabel(key): self.relabel(item) for key, item in value.items()}
        return value


def _text(value: Any, cap: int) -> str:
    if not isinstance(value, str):
        return ""
    return value.encode("utf-8", "replace")[:cap].decode("utf-8", "ignore")


def _safe(value: Any, depth: int = 0) -> bool:
    """Whether a value from the worker is JSON RAR can hash canonically (and not too deep)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if depth > 16:
        return False
    if isinstance(value, list):
        return all(_safe(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and _utf8(k) and _safe(v, depth + 1) for k, v in value.items()
        )
    return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, from a forged frame
        return False
    return True
