"""The viewer's JSON answers: errors as ``{"error", "message", "home"}``, fast JSON, and the
query parameters read from a request (numbers and dates), each refused with a 400 that names the
parameter and what it may be. An error's message passes :func:`rar.redaction.redact_output`: it
may quote a request's path or an exception, and what the viewer serves is redacted as what runs
record."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response

from rar.hashing import MAX_SAFE_INTEGER
from rar.redaction import redact_output

_WHOLE = re.compile(r"-?[0-9]{1,40}")
_DATE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?Z?)?"
)
_DATE_HELP = "a date or a UTC time like 2026-11-30, 2026-11-30T08:30 or 2026-11-30T08:30:15Z"


class ApiError(Exception):
    """An answer other than 200, as JSON."""

    def __init__(self, status: int, error: str, message: str) -> None:
        message = redact_output(message)
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

    def response(self) -> JSONResponse:
        return error_response(self.status, self.error, self.message)


def error_response(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": error, "message": redact_output(message), "home": "/"},
        status_code=status,
    )


def json_response(data: Any, status: int = 200) -> Response:
    # orjson: events hold big ints and non-ASCII text; OPT_NON_STR_KEYS for stats dicts
    return Response(
        orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status_code=status,
        media_type="application/json",
    )


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 40 else raw[:40] + "…")


def int_param(
    query: Mapping[str, str],
    name: str,
    default: int | None,
    *,
    minimum: int = 0,
    maximum: int = MAX_SAFE_INTEGER,
) -> int | None:
    """The whole number ``query[name]``, ``default`` when it is absent or empty.

    Only ASCII digits with an optional ``-`` are read (not ``+5``, ``1_000``, ``1e3``, ``٣``
    or spaces), and the value must lie in ``minimum..maximum`` (by default at most 2**53 - 1,
    which every JSON reader holds exactly); anything else is an :class:`ApiError` 400 that
    names the parameter and the range.
    """
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    allowed = f"{name} must be a whole number from {minimum} to {maximum}"
    if not _WHOLE.fullmatch(raw):
        raise ApiError(400, "bad-parameter", f"{allowed}, not {_shown(raw)}")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise ApiError(400, "bad-parameter", f"{allowed}, not {_shown(raw)}")
    return value


def date_param(query: Mapping[str, str], name: str) -> str:
    """The date or UTC time ``query[name]`` as text that sorts against ISO ``created_at``
    values ("" when absent); a trailing ``Z`` is dropped (every time is UTC). Anything that is
    not a real date from 0001-01-01 to 9999-12-31 (``2026-13-45``, ``T25:00``) is an
    :class:`ApiError` 400 naming the parameter."""
    raw = query.get(name) or ""
    if not raw:
        return ""
    problem = f"{name} must be {_DATE_HELP} (years 0001 to 9999), not {_shown(raw)}"
    if not _DATE.fullmatch(raw):
        raise ApiError(400, "bad-parameter", problem)
    text = raw.removesuffix("Z")
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise ApiError(400, "bad-parameter", problem) from None
    return text
