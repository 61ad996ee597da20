"""The HTTP server under ``rar proxy``: uvicorn's h11 protocol, with the limits it lacks.

What uvicorn (0.3x, h11) does by itself, and what is added here:

* **malformed requests** — h11 refuses them (bad request line, bad header, an unknown
  ``Transfer-Encoding``, headers over ``h11_max_incomplete_event_size``, 64 KiB here): uvicorn
  answers 400 and closes.
* **Content-Length with Transfer-Encoding** — h11 does *not* refuse it (it lets chunked win, as
  RFC 9112 allows); the proxy app answers 400 and closes, so no request can be smuggled.
* **slow headers** — uvicorn has no timeout for a request whose headers trickle in (its
  ``timeout_keep_alive`` covers only the idle time between requests, and a fresh connection not
  at all): :class:`GuardedH11Protocol` answers 408 and closes when the headers of a request are
  not complete ``header_timeout`` seconds after the connection opened or the request began.
* **slow bodies and big bodies** — the proxy app reads a body with a deadline (408) and a cap
  (413), see :class:`rar.interop.proxy.Proxy`.

Signals: uvicorn re-raises a SIGINT or SIGTERM it caught once it has shut down, which would
end the process before the session's run is finished; :class:`ProxyServer` keeps the signal
instead, so the run is sealed ``completed`` and the command exits 0.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEADER_BYTES = 64 * 1024
_TIMEOUT_BODY = b"the request headers did not arrive in time\n"
_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n" % len(_TIMEOUT_BODY)
) + _TIMEOUT_BODY


class _Corked:
    """A connection's transport whose writes of one event-loop step go out as one.

    uvicorn writes a response's head, its body and its end separately, each a ``send(2)`` at
    once: the client is woken for the head alone and again for the body. Here they are joined
    and sent at the end of the step (``loop.call_soon``), or before a close. Everything else is
    the transport's own."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self._pending is None:
            self._pending = [data]
            self._loop.call_soon(self.flush)
        else:
            self._pending.append(data)

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers (and the writes of one
    step sent together, see :class:`_Corked`)."""

    header_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_timer: asyncio.TimerHandle | None = None
        super().connection_made(_Corked(transport, self.loop))  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._header_timer is None:
            self._arm()  # a new request on a kept-alive connection begins
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.write(_TIMEOUT_ANSWER)
            self.transport.close()


def protocol_with(header_timeout: float) -> type[GuardedH11Protocol]:
    return type("GuardedH11", (GuardedH11Protocol,), {"header_timeout": header_timeout})


class ProxyServer(uvicorn.Server):
    """uvicorn's server that keeps a caught SIGINT/SIGTERM (``signals``) instead of raising it
    again after the shutdown."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.signals: list[int] = []

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self.signals.extend(self._captured_signals)
                self._captured_signals.clear()


def make_server(
    app: Any,
    *,
    header_timeout: float = 10.0,
    keep_alive: float = 5.0,
    graceful: float = 10.0,
) -> ProxyServer:
    config = uvicorn.Config(
        app,
        http=protocol_with(header_timeout),
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        date_header=False,
        proxy_headers=False,  # nothing reads the client's address: no X-Forwarded-* rewriting
        timeout_keep_alive=keep_alive,  # type: ignore[arg-type]  # a float works
        timeout_graceful_shutdown=graceful,  # type: ignore[arg-type]
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    return ProxyServer(config)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port)."""
    from rar.errors import ConfigError

    name = host.strip("[]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); try another --port, "
            "or --port 0 for any free one"
        ) from exc
    return sock
