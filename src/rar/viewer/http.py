"""The viewer's JSON answers: errors as ``{"error", "message", "home"}``, and fast JSON."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse, Response


class ApiError(Exception):
    """An answer other than 200, as JSON."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

    def response(self) -> JSONResponse:
        return error_response(self.status, self.error, self.message)


def error_response(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": error, "message": message, "home": "/"},
        status_code=status,
    )


def json_response(data: Any, status: int = 200) -> Response:
    # orjson: events hold big ints and non-ASCII text; OPT_NON_STR_KEYS for stats dicts
    return Response(
        orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status_code=status,
        media_type="application/json",
    )
