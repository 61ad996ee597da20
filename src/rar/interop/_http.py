"""The proxy server's interface to its application: a request in, a reply out (see
:mod:`rar.interop._server`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson


@dataclass
class Request:
    """One request as the application gets it: names of headers lower-case, body whole.

    ``stage(reply)``, set by the server, sends a whole reply but its last byte at once and
    returns a function that sends the last byte (None when nothing was staged); the
    application must then answer with that same reply object, which sends the last byte if
    that function did not (any other answer closes the connection instead). No HTTP client
    completes an answer before its last byte, so the proxy stages an answer while its record
    is made durable, and completes it the moment the record is."""

    method: str
    path: str
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    version: str = "1.1"
    stage: Callable[[Reply], Callable[[], None] | None] | None = None


@dataclass
class Reply:
    """What the application answers: ``body`` whole (sent with its length), or — when
    ``pieces`` is given — ``body`` first and then each piece as it comes (chunked).
    ``close``: end the connection after it. ``aclose`` is awaited once the reply was sent, or
    the client went away."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    pieces: AsyncIterator[bytes] | None = None
    close: bool = False
    aclose: Any = None


class App(Protocol):
    """The application the server calls (``rar.interop.proxy.Proxy``). ``answer`` is called
    as soon as a request is whole (an ``async def`` will do; a plain function returning an
    awaitable may start work before it returns), and its result awaited."""

    max_body: int
    body_timeout: float

    def answer(self, request: Request) -> Awaitable[Reply]: ...

    async def aclose(self) -> None: ...


def error_reply(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    """An OpenAI-shaped error answer."""
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": status}})
    return Reply(status, [(b"content-type", b"application/json")], body)
