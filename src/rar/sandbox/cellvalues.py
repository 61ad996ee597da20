"""What the sandbox worker reports about a cell: captured output, error records, JSON values.

Standard library only: the worker (worker.py) loads this file from its own directory inside the
sandbox, where ``rar`` is not importable.
"""

from __future__ import annotations

import errno
import importlib.util
import io
import math
import traceback
import types
from typing import Any

MAX_ITEMS = 1000
MAX_STR = 10_000
MAX_DEPTH = 4
MAX_TRACEBACK = 16 * 1024
LIMIT_ERRNOS = {errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.EAGAIN}
SKIP = object()  # "not a JSON value we keep"
SCIENCE_LIBRARIES = ("numpy", "scipy", "matplotlib")  # preloaded; their absence is said plainly


class CpuTimeExceeded(BaseException):
    """The cell used up its CPU-time budget (a BaseException: ``except Exception`` won't eat it)."""


class Capture(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    def __init__(self, cap: int, fd: int) -> None:
        self._parts: list[str] = []
        self._room = cap
        self._fd = fd
        self.truncated = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self._room > 0:
            piece = text[: self._room]
            self._parts.append(piece)
            self._room -= len(piece)
            if len(piece) < len(text):
                self.truncated = True
        elif text:
            self.truncated = True
        return len(text)

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def text(self) -> str:
        return "".join(self._parts)


def is_limit(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError | CpuTimeExceeded):
        return True
    return isinstance(exc, OSError) and exc.errno in LIMIT_ERRNOS


def missing_libraries() -> list[str]:
    """Which of SCIENCE_LIBRARIES this interpreter cannot import (found without importing)."""
    missing = []
    for name in SCIENCE_LIBRARIES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def not_installed(name: str, environment: str) -> str:
    return (
        f"{name} is not installed in the Python environment running RAR ({environment}): "
        f"pip install {name}"
    )


def describe(
    exc: BaseException, tb: types.TracebackType | None, environment: str | None = None
) -> dict[str, str]:
    """The exception as {type, message, traceback}; ``tb`` starts where the traceback should.
    A missing scientific library (``import numpy`` without numpy) gets a message naming the
    ``environment`` and the fix."""
    kind = type(exc)
    qualified = kind.__module__ not in ("builtins", __name__)
    name = f"{kind.__module__}.{kind.__qualname__}" if qualified else kind.__qualname__
    try:
        message = str(exc)
    except Exception:
        message = f"<{name}: str() failed>"
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if environment and missing in SCIENCE_LIBRARIES:  # "numpy.foo" missing: numpy is there
        message = not_installed(str(missing), environment)
    try:
        text = "".join(traceback.format_exception(kind, exc, tb))
    except Exception:
        text = f"{name}: {message}\n"
    described = {
        "type": name,
        "message": clean(message)[:4000],
        "traceback": clean(text)[-MAX_TRACEBACK:],
    }
    if environment and missing in SCIENCE_LIBRARIES:
        described["missing_library"] = str(missing)  # for callers that act on it
    return described


def clean(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def jsonable(value: Any, depth: int) -> Any:
    """A JSON value RAR can hash canonically, or SKIP for anything else or anything large."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if abs(value) <= 2**53 - 1 else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return clean(str(value)) if len(value) <= MAX_STR else SKIP
    if type(value).__module__ == "numpy" and hasattr(value, "ndim"):
        if value.ndim == 0 and hasattr(value, "item"):
            return jsonable(value.item(), depth)
        if getattr(value, "size", MAX_ITEMS + 1) <= MAX_ITEMS and value.dtype.kind in "biuf":
            return jsonable(value.tolist(), depth)
        return SKIP
    if depth >= MAX_DEPTH:
        return SKIP
    if isinstance(value, list | tuple):
        if len(value) > MAX_ITEMS:
            return SKIP
        items = [jsonable(item, depth + 1) for item in value]
        return SKIP if any(item is SKIP for item in items) else items
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS or not all(isinstance(key, str) for key in value):
            return SKIP
        pairs = {clean(key): jsonable(item, depth + 1) for key, item in value.items()}
        return SKIP if any(item is SKIP for item in pairs.values()) else pairs
    return SKIP
