"""One client connection of the proxy's server: llhttp's callbacks, the request queue, the
answers in order, refusals with a lingering close, and the deadlines the server's sweep checks
(see :mod:`rar.interop._server` for what is refused and why)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

import httptools

from rar.interop._http import Reply, Request, error_reply

if TYPE_CHECKING:
    from rar.interop._server import ProxyServer

LINGER_SECONDS = 2.0  # how long a refused client may go on sending before the close
LINGER_BYTES = 4 * 1024 * 1024  # and how much of it is read and dropped
_log = logging.getLogger("rar.proxy")
_REASONS = {s.value: s.phrase.encode("ascii") for s in HTTPStatus}


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Pending:
    """A request being parsed."""

    __slots__ = ("body", "headers", "keep_alive", "size", "url", "version")

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.keep_alive = True
        self.version = "1.1"


class Connection(asyncio.Protocol):
    """One client connection: parse, queue, answer in order."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self.app = server.app
        self.loop = server.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.pending: _Pending | None = None
        self.head_bytes = 0  # bytes of the request under way before its headers were complete
        self.queue: deque[Request | _Refused | None] = deque()  # None: close after the rest
        self.busy = False
        self.closing = False
        self.lingering = 0  # bytes still to drop after a refusal, before closing
        self.paused = False
        self.timer_kind = ""  # what happens at the deadline: "header", "body", "idle", "linger"
        self.deadline = 0.0  # loop time; checked by the server's sweep (see ProxyServer)
        self.writable: asyncio.Future[None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.staged: Reply | None = None  # a reply sent but its last byte (see Request)
        self.completed = False  # the staged reply's last byte is sent (see _complete)

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        self._arm("header", self.server.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self._disarm()
        self.server.connections.discard(self)
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        if self.task is None:
            self.server.idle_changed()

    def eof_received(self) -> bool:
        if self.lingering:
            self.abort()
        return False  # half-closed by the client: close

    def pause_writing(self) -> None:
        self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def data_received(self, data: bytes) -> None:
        if self.closing:
            if self.lingering:  # read and dropped, so that the refusal reaches the client
                self.lingering -= len(data)
                if self.lingering <= 0:
                    self.abort()
            return
        if self.timer_kind == "idle":  # a kept-alive connection's next request begins
            self._arm("header", self.server.header_timeout)
        if self.head_bytes >= 0:  # counted until the headers are complete
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # an Upgrade request is answered as a plain one (nothing is upgraded), then closed
            self.queue.append(None)
            self._stop_reading()
            return
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__ if isinstance(exc.__context__, _Refused) else None
            self._refuse(refused or _Refused(400, "the request could not be read"))
            return
        except httptools.HttpParserError as exc:
            self._refuse(_Refused(400, f"malformed HTTP request: {exc}"))
            return
        if self.head_bytes > self.server.max_header_bytes:
            self._refuse(_Refused(431, "the request's headers are too large"))

    # --- httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.pending = _Pending()
        if not self.busy and self.timer_kind != "header":
            self._arm("header", self.server.header_timeout)

    def on_url(self, url: bytes) -> None:
        assert self.pending is not None
        self.pending.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.pending is not None
        self.pending.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        pending = self.pending
        assert pending is not None
        self.head_bytes = -1  # counting stops until the next request begins
        version = self.parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise _Refused(505, f"HTTP/{version} is not supported; use HTTP/1.1")
        length: bytes | None = None
        chunked = False
        expect = b""
        for name, value in pending.headers:
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"expect":
                expect = value
        if length is not None and chunked:
            raise _Refused(400, "Content-Length and Transfer-Encoding together")
        size = int(length) if length is not None else None  # digits only: llhttp checked
        if size is not None and size > self.app.max_body:
            raise _Refused(413, f"request bodies are limited to {self.app.max_body} bytes")
        pending.keep_alive = self.parser.should_keep_alive()
        pending.version = version
        if not self.busy:
            self._disarm()
        if size == 0 or (size is None and not chunked):
            return  # no body: on_message_complete follows at once
        if not self.busy:
            self._arm("body", self.app.body_timeout)
        if expect.lower() == b"100-continue" and version == "1.1" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        pending = self.pending
        assert pending is not None
        pending.size += len(body)
        if pending.size > self.app.max_body:
            raise _Refused(413, f"request bodies are limited to {self.app.max_body} bytes")
        pending.body.append(body)

    def on_message_complete(self) -> None:
        pending, self.pending = self.pending, None
        assert pending is not None
        self.head_bytes = 0
        if self.timer_kind == "body":
            self._disarm()
        try:
            url = httptools.parse_url(pending.url)
        except httptools.HttpParserError:
            raise _Refused(400, "the request's target is not a path") from None
        request = Request(
            self.parser.get_method().decode("ascii"),
            (url.path or b"/").decode("latin-1"),
            url.query or b"",
            pending.headers,
            pending.body[0] if len(pending.body) == 1 else b"".join(pending.body),
            pending.version,
        )
        if self.busy:
            self.queue.append(request)
            if not pending.keep_alive:
                self.queue.append(None)
            self._stop_reading()  # one request waits at most; the socket buffers the rest
        else:
            if not pending.keep_alive:
                self.queue.append(None)
            self._start(request)

    # --- answering ---------------------------------------------------------------------------

    def _start(self, request: Request | None = None) -> None:
        """Answer ``request`` (the application starts on it now, before this returns: a proxy
        sends it upstream at once), then whatever is queued."""
        self.busy = True
        self._disarm()
        started = self._begin(request) if request is not None else None
        self.task = self.loop.create_task(self._work(request, started))

    def _begin(self, request: Request) -> Awaitable[Reply]:
        if request.method != "HEAD":
            request.stage = self._stage
        try:
            return self.app.answer(request)
        except Exception as exc:
            return _failed(request, exc)

    async def _work(
        self, request: Request | None = None, started: Awaitable[Reply] | None = None
    ) -> None:
        try:
            if (
                request is not None
                and started is not None
                and not await self._answer(request, started)
            ):
                return
            while self.queue and not self.closing:
                item = self.queue.popleft()
                if item is None:
                    self._close()
                    return
                if isinstance(item, _Refused):
                    reply = error_reply(item.status, item.message)
                    await self._send(reply, close=True, linger=True)
                    return
                if not await self._answer(item, self._begin(item)):
                    return
        finally:
            self.busy = False
            self.task = None
            if not self.closing:
                self._resume_reading()
                if self.pending is None:
                    self._arm("idle", self.server.keep_alive)
                elif self.head_bytes < 0:  # the next request's body is on its way
                    self._arm("body", self.app.body_timeout)
                else:
                    self._arm("header", self.server.header_timeout)
            self.server.idle_changed()

    async def _answer(self, request: Request, started: Awaitable[Reply]) -> bool:
        """Send the answer to ``request``; False when the connection is closed after it."""
        try:
            reply = await started
        except Exception as exc:
            reply = await _failed(request, exc)
        request.stage = None
        staged, self.staged = self.staged, None
        completed, self.completed = self.completed, False
        if staged is not None:
            if reply is not staged:  # what was staged is not the answer: never complete it
                if not completed:
                    _log.warning("rar proxy: a staged answer was withdrawn; the connection closes")
                self.abort()
                return False
            if not completed and not self.closing and self.transport is not None:
                self.transport.write(reply.body[-1:])
            if reply.close or self.server.stopping:
                self._close()
            return not self.closing
        close = reply.close or self.server.stopping
        if request.method == "HEAD":
            reply.body, reply.pieces = b"", None
        elif reply.pieces is not None and request.version == "1.0":
            close = True  # no chunked encoding in HTTP/1.0: the end of the stream is the close
        await self._send(reply, close=close, chunked=request.version != "1.0")
        return not close and not self.closing

    def _stage(self, reply: Reply) -> Callable[[], None] | None:
        """Send ``reply`` (whole, with a body) but its last byte; return what sends the last
        byte (see :class:`Request`), or None when nothing was staged."""
        if self.staged is not None or reply.pieces is not None or len(reply.body) < 2:
            return None
        if self.closing or self.transport is None:
            return None
        head = _whole_head(reply, reply.close or self.server.stopping)
        self.transport.writelines([head, memoryview(reply.body)[:-1]])
        self.staged = reply
        return self._complete

    def _complete(self) -> None:
        """Send the staged reply's last byte, once (its record is durable)."""
        staged = self.staged
        if staged is None or self.completed or self.closing or self.transport is None:
            return
        self.transport.write(staged.body[-1:])
        self.completed = True

    async def _send(
        self, reply: Reply, *, close: bool, linger: bool = False, chunked: bool = True
    ) -> None:
        transport = self.transport
        assert transport is not None
        try:
            if reply.pieces is None:
                if not self.closing:
                    transport.write(_whole_head(reply, close) + reply.body)
            else:
                head = _head(reply, close)
                frame = _chunk if chunked else _raw
                head.append(b"transfer-encoding: chunked\r\n\r\n" if chunked else b"\r\n")
                first = b"".join(head)
                if reply.body:
                    first += frame(reply.body)
                if not self.closing:
                    transport.write(first)
                async for piece in reply.pieces:
                    if self.closing:
                        break  # the client went away: the rest is not read
                    if piece:
                        transport.write(frame(piece))
                        if self.writable is not None:
                            await self.writable
                if chunked and not self.closing:
                    transport.write(b"0\r\n\r\n")
        finally:
            if reply.aclose is not None:
                await reply.aclose()
            if close:
                self._close(linger=linger)

    # --- refusing, timers, flow ----------------------------------------------------------------

    def _refuse(self, refused: _Refused) -> None:
        """Answer ``refused`` (after the answers under way) and close; read nothing more."""
        self._stop_reading()
        self.pending = None
        self.queue.append(refused)
        if not self.busy:
            self._start()

    def _arm(self, kind: str, seconds: float) -> None:
        self.timer_kind = kind
        self.deadline = self.loop.time() + seconds

    def _disarm(self) -> None:
        self.timer_kind = ""

    def expired(self, kind: str) -> None:
        """The deadline of ``kind`` passed (called by the server's sweep)."""
        self.timer_kind = ""
        if kind == "linger":
            self.abort()
            return
        if self.closing or self.busy:
            return
        if kind == "idle":
            self._close()
        elif kind == "header":
            self._refuse(_Refused(408, "the request headers did not arrive in time"))
        else:
            self._refuse(_Refused(408, "the request body did not arrive in time"))

    def _stop_reading(self) -> None:
        if not self.paused and self.transport is not None and not self.closing:
            self.paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.paused and self.transport is not None and not self.queue:
            self.paused = False
            self.transport.resume_reading()

    def _close(self, *, linger: bool = False) -> None:
        if not self.closing:
            self.closing = True
            self._disarm()
            if linger:
                self._linger()
            elif self.transport is not None:
                self.transport.close()

    def _linger(self) -> None:
        """After a refusal: end our side, then drop what the client still sends for a while.

        Closing a socket with unread bytes in it makes the kernel reset the connection, and a
        reset can discard the refusal before the client read it (a client still sending an
        oversize request). So the answer goes out with a FIN, what arrives is read and dropped
        (up to ``LINGER_BYTES``) and the socket is closed when the client closes its side, or
        after ``LINGER_SECONDS``."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self.lingering = LINGER_BYTES
        if self.paused:
            self.paused = False
            transport.resume_reading()
        self._arm("linger", LINGER_SECONDS)

    def abort(self) -> None:
        """Close now, whatever is under way or unread."""
        self.lingering = 0
        self.closing = True
        self._disarm()
        if self.transport is not None:
            self.transport.close()

    def close_if_idle(self) -> bool:
        """Close now when no request is under way (shutting down); True if closed."""
        if self.busy:
            return False
        self._close()
        return True


async def _failed(request: Request, exc: Exception) -> Reply:
    _log.error("rar proxy failed to answer %s %s", request.method, request.path, exc_info=exc)
    return error_reply(500, "rar proxy failed to answer this request", "rar_error")


def _head(reply: Reply, close: bool) -> list[bytes]:
    """The status line and headers of ``reply``, without the framing header and end."""
    head = [b"HTTP/1.1 %d %s\r\n" % (reply.status, _REASONS.get(reply.status, b""))]
    head.extend(b"%s: %s\r\n" % pair for pair in reply.headers)
    if close:
        head.append(b"connection: close\r\n")
    return head


def _whole_head(reply: Reply, close: bool) -> bytes:
    """The head of a reply sent whole, with its length."""
    head = _head(reply, close)
    head.append(b"content-length: %d\r\n\r\n" % len(reply.body))
    return b"".join(head)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _raw(data: bytes) -> bytes:
    return data
