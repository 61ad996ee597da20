"""The HTTP/1.1 server under ``rar proxy``: llhttp (``httptools``) on asyncio, uvloop when there.

The proxy's added latency is its purpose's cost, so its server is lean: one
:class:`asyncio.Protocol` per connection feeding the C parser, a request handed to the
application as one :class:`Request` (no ASGI messages), and the answer written with as few
``send(2)`` calls as it allows (head and body of a whole answer in one). ``bench/proxy.py``'s
pass-through floor spent 0.41–0.48 ms of CPU per call on uvicorn with h11, 0.23–0.27 ms on this
(see docs/design.md).

What it refuses, each answered with an OpenAI-shaped error and a closed connection (the
server keeps serving):

* **malformed HTTP** — whatever llhttp refuses (a bad request line or header, a bare LF, an
  obsolete line fold, an unknown ``Transfer-Encoding``, duplicate ``Content-Length``): 400;
  a version other than HTTP/1.0 or 1.1: 505;
* **Content-Length with Transfer-Encoding** — llhttp refuses it, and the server checks again: 400,
  so no request can be smuggled past the proxy;
* **headers over** ``max_header_bytes`` (64 KiB): 431;
* **slow headers** — a request whose headers are not complete ``header_timeout`` seconds after
  the connection opened or the request's first byte came: 408;
* **big and slow bodies** — a body over the application's ``max_body`` (by its
  ``Content-Length`` or as it arrives): 413; one that does not arrive within the application's
  ``body_timeout``: 408.

A kept-alive connection idle for ``keep_alive`` seconds is closed quietly. Pipelined requests are
answered in order, one at a time (reading pauses while one waits). ``Expect: 100-continue`` is
answered before the body is read.

**Stopping.** :meth:`ProxyServer.run` serves until :attr:`ProxyServer.should_exit` is set or the
process gets SIGINT/SIGTERM (when run in the main thread; the signal is kept in
:attr:`ProxyServer.signals`, not raised again, so the session's run is sealed and the command
exits 0). It stops listening, lets the requests under way finish for up to ``graceful``
seconds (a second signal cuts that short), then calls the application's ``aclose()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading

from rar.interop._connection import Connection
from rar.interop._http import App, Reply, Request, error_reply

__all__ = ["App", "ProxyServer", "Reply", "Request", "bind", "error_reply", "make_server"]

MAX_HEADER_BYTES = 64 * 1024
_CHECK_EVERY = 0.1  # seconds between looks at should_exit


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed ("auto") or asked for, else asyncio's."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class ProxyServer:
    """Serves ``app`` on listening sockets until told to stop (see the module's docstring)."""

    def __init__(
        self,
        app: App,
        *,
        header_timeout: float = 10.0,
        keep_alive: float = 5.0,
        graceful: float = 10.0,
        max_header_bytes: int = MAX_HEADER_BYTES,
        loop: str = "auto",
    ) -> None:
        self.app = app
        self.header_timeout = header_timeout
        self.keep_alive = keep_alive
        self.graceful = graceful
        self.max_header_bytes = max_header_bytes
        self.loop_kind = loop
        self.started = False
        self.should_exit = False
        self.stopping = False
        self.signals: list[int] = []
        self.connections: set[Connection] = set()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by run
        self._idle: asyncio.Event | None = None
        self._force = False

    def run(self, sockets: list[socket.socket]) -> None:
        """Serve on ``sockets`` (listening already) until stopped; blocks."""
        self.loop = _new_loop(self.loop_kind)
        try:
            self.loop.run_until_complete(self.serve(sockets))
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def serve(self, sockets: list[socket.socket]) -> None:
        loop = self.loop
        servers = [
            await loop.create_server(lambda: Connection(self), sock=sock) for sock in sockets
        ]
        handled = self._handle_signals()
        self.started = True
        try:
            while not self.should_exit:
                await asyncio.sleep(self._tick)
                self._sweep()
            await self._shutdown(servers)
        finally:
            for number in handled:
                loop.remove_signal_handler(number)

    def _handle_signals(self) -> list[int]:
        if threading.current_thread() is not threading.main_thread():
            return []
        handled: list[int] = []
        for number in (signal.SIGINT, signal.SIGTERM):
            try:
                self.loop.add_signal_handler(number, self._signalled, number)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                continue
            handled.append(number)
        return handled

    def _signalled(self, number: int) -> None:
        self.signals.append(number)
        if self.should_exit:  # a second signal: stop waiting for the requests under way
            self._force = True
            self.idle_changed()
        self.should_exit = True

    @property
    def _tick(self) -> float:
        """Seconds between sweeps: a tenth of a second, less for shorter timeouts."""
        shortest = min(self.header_timeout, self.keep_alive, self.app.body_timeout)
        return max(0.01, min(_CHECK_EVERY, shortest / 4))

    def _sweep(self) -> None:
        """Act on every connection whose deadline passed. One sweep for all, a few times a
        second, in place of a timer armed and cancelled for every request."""
        now = self.loop.time()
        for conn in list(self.connections):
            if conn.timer_kind and now >= conn.deadline:
                conn.expired(conn.timer_kind)

    def idle_changed(self) -> None:
        if self._idle is not None:
            self._idle.set()

    async def _shutdown(self, servers: list[asyncio.Server]) -> None:
        self.stopping = True
        for server in servers:
            server.close()
        self._idle = asyncio.Event()
        deadline = self.loop.time() + self.graceful
        while not self._force:
            open_ = [conn for conn in list(self.connections) if not conn.close_if_idle()]
            if not open_ or self.loop.time() >= deadline:
                break
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self._tick, deadline - self.loop.time())):
                    await self._idle.wait()
            self._sweep()
        tasks = [conn.task for conn in self.connections if conn.task is not None]
        for conn in list(self.connections):
            conn.abort()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.app.aclose()


def make_server(
    app: App,
    *,
    header_timeout: float = 10.0,
    keep_alive: float = 5.0,
    graceful: float = 10.0,
    loop: str = "auto",
) -> ProxyServer:
    return ProxyServer(
        app, header_timeout=header_timeout, keep_alive=keep_alive, graceful=graceful, loop=loop
    )


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
