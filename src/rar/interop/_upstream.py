"""The proxy's client for its one upstream: HTTP/1.1 on asyncio, connections kept alive.

``rar proxy`` talks to exactly one origin (``--upstream``), always ``POST`` or ``GET``, and hands
every answer on whole or as it streams. ``httpx2.AsyncClient`` does that at ~1.1 ms of CPU per
call on a loopback upstream (its models, the ``httpcore2`` pool polling every pooled socket
before each request, ``anyio`` on every read and write); this client does it at ~0.25 ms
(``bench/proxy.py``). It is not a general HTTP client, and keeps what the proxy relied on:

* **connections** are kept alive and reused (last used first). An idle connection is dropped
  once its server closes it (the protocol sees the EOF; nothing is polled), when it has been
  idle ``keepalive_expiry`` seconds, or when more than ``max_idle`` are idle. At most
  ``max_connections`` are open at once; further requests wait for one.
* **framing** follows RFC 9112 §6.3: informational (1xx) answers are skipped, 204 and 304 have no
  body, ``Transfer-Encoding: chunked`` wins over ``Content-Length`` (and the connection is not
  reused), conflicting or malformed lengths and chunk sizes are errors, anything else is read to
  the end of the connection. A response head may be at most 256 KiB.
* **content coding**: ``Accept-Encoding: gzip, deflate`` is sent, as httpx2 did, and those
  codings are undone (an unknown coding is passed on as it came, as httpx2 does).
* **errors** are httpx2's own exception classes (``ConnectError``, ``ConnectTimeout``,
  ``WriteError``, ``ReadError``, ``ReadTimeout``, ``RemoteProtocolError``, ``DecodingError``),
  so a failed call is recorded, and replayed, exactly as through the SDK transport.
* **TLS** for an ``https`` upstream uses ``httpx2.create_ssl_context()`` (the same certificate
  store as before), with ALPN ``http/1.1``.

Nothing is retried: a request that fails is answered 502 and recorded as the failure it was.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, cast
from urllib.parse import urlsplit

import httpx2

MAX_HEAD_BYTES = 256 * 1024
_READ_SIZE = 64 * 1024
_HIGH_WATER = 1024 * 1024  # pause reading the socket past this many buffered bytes
_NO_BODY = frozenset({204, 304})
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: bytes in a buffer, one reader waiting at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self.reused = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drain: asyncio.Future[None] | None = None

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not an isinstance check: uvloop's transports are not asyncio.Transport subclasses
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None and self.error is None:
            self.error = exc
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        self._drain = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- use -----------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Idle and still open: nothing arrived since the last answer, no EOF."""
        transport = self.transport
        return (
            not self.eof
            and not self.buffer
            and transport is not None
            and not transport.is_closing()
        )

    def close(self) -> None:
        self.eof = True
        if self.transport is not None:
            self.transport.close()

    async def write(self, data: bytes, timeout: float) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise httpx2.WriteError("the upstream connection is closed")
        transport.write(data)
        await self.drained(timeout)
        if self.error is not None:
            raise httpx2.WriteError(str(self.error))

    async def drained(self, timeout: float) -> None:
        """Wait until the transport took what was written (when it said it was full)."""
        drain = self._drain
        if drain is not None:
            try:
                async with asyncio.timeout(timeout):
                    await drain
            except TimeoutError:
                raise httpx2.WriteTimeout("writing the request upstream timed out") from None

    async def _wait(self, timeout: float) -> None:
        """Wait for more bytes (or EOF); httpx2.ReadTimeout after ``timeout`` seconds."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        waiter = self._waiter = self.loop.create_future()
        handle = self.loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None

    def _take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def read_until(self, mark: bytes, limit: int, timeout: float, what: str) -> bytes:
        """The bytes up to and including ``mark``."""
        start = 0
        while True:
            found = self.buffer.find(mark, start)
            if found >= 0:
                return self._take(found + len(mark))
            if len(self.buffer) > limit:
                raise httpx2.RemoteProtocolError(f"the upstream's {what} is too long")
            if self.eof:
                self._broken(what)
            start = max(0, len(self.buffer) - len(mark) + 1)
            await self._wait(timeout)

    async def read_some(self, most: int, timeout: float) -> bytes:
        """Up to ``most`` bytes, as soon as any are there; b"" at EOF."""
        while not self.buffer:
            if self.eof:
                if self.error is not None:
                    raise httpx2.ReadError(str(self.error))
                return b""
            await self._wait(timeout)
        return self._take(most)

    async def read_exactly(self, size: int, timeout: float, what: str) -> bytes:
        while len(self.buffer) < size:
            if self.eof:
                self._broken(what)
            await self._wait(timeout)
        return self._take(size)

    def _broken(self, what: str) -> None:
        if self.error is not None:
            raise httpx2.ReadError(str(self.error))
        raise httpx2.RemoteProtocolError(
            f"the upstream closed the connection in the middle of its {what}"
        )


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx2.ReadTimeout("the upstream did not answer in time"))


class _Decoder:
    """Undoes gzip or deflate (httpx2's rules: deflate may come with or without its header)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._gzip = coding == "gzip"
        self._first = True
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS)

    def decode(self, data: bytes) -> bytes:
        try:
            if self._first and not self._gzip and data:
                self._first = False
                try:
                    return self._z.decompress(data)
                except zlib.error:  # a raw deflate stream, without the zlib header
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._z.decompress(data)
        except zlib.error as exc:
            raise httpx2.DecodingError(
                f"the upstream's {self.coding} body is damaged: {exc}"
            ) from exc

    def flush(self) -> bytes:
        try:
            return self._z.flush()
        except zlib.error as exc:
            raise httpx2.DecodingError(
                f"the upstream's {self.coding} body is damaged: {exc}"
            ) from exc


class Reply:
    """An upstream answer: status and headers at once, the body read on demand.

    Read it whole (:meth:`read`) or piece by piece (``async for``), then :meth:`aclose` (which
    returns the connection to the pool when the body was read to its end).
    """

    def __init__(
        self,
        pool: Upstream,
        conn: _Connection,
        status: int,
        headers: list[tuple[str, str]],
        framing: tuple[str, int],
        reusable: bool,
    ) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self.status = status
        self.headers = headers
        self._framing, self._left = framing  # "length" (bytes left), "chunked", "close", "none"
        self._reusable = reusable
        self._done = self._framing == "none" or (self._framing == "length" and not self._left)
        self._decoders = _decoders(self.get("content-encoding"))

    def get(self, name: str) -> str | None:
        """A header's value (repeated headers joined with ``", "``, as httpx2 does)."""
        values = [v for k, v in self.headers if k == name]
        return ", ".join(values) if values else None

    async def _raw(self) -> AsyncIterator[bytes]:
        conn = self._conn
        timeout = self._pool.read_timeout
        if conn is None or self._done:
            return
        if self._framing == "length":
            while self._left:
                data = await conn.read_some(min(self._left, _READ_SIZE), timeout)
                if not data:
                    conn._broken("body")
                self._left -= len(data)
                yield data
        elif self._framing == "chunked":
            while True:
                line = await conn.read_until(b"\n", 4096, timeout, "chunk header")
                size = _chunk_size(line)
                if size == 0:
                    while (
                        await conn.read_until(b"\n", MAX_HEAD_BYTES, timeout, "trailers")
                    ).strip():
                        pass
                    break
                while size:
                    data = await conn.read_some(min(size, _READ_SIZE), timeout)
                    if not data:
                        conn._broken("body")
                    size -= len(data)
                    yield data
                if await conn.read_exactly(2, timeout, "chunk end") != b"\r\n":
                    raise httpx2.RemoteProtocolError("the upstream sent a malformed chunk")
        else:  # to the end of the connection
            while data := await conn.read_some(_READ_SIZE, timeout):
                yield data
        self._done = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The decoded body, piece by piece, as it arrives."""
        decoders = self._decoders
        async for data in self._raw():
            for decoder in decoders:
                data = decoder.decode(data)
            if data:
                yield data
        if decoders:
            tail = b""
            for i, decoder in enumerate(decoders):
                tail = decoder.flush() if i == 0 else decoder.decode(tail) + decoder.flush()
            if tail:
                yield tail

    async def read(self, limit: int, too_large: Callable[[], Exception]) -> bytes:
        """The whole decoded body; ``too_large()`` is raised past ``limit`` bytes."""
        conn = self._conn
        if (
            not self._decoders
            and conn is not None
            and self._framing == "length"
            and len(conn.buffer) >= self._left
        ):  # the common case: the whole body came with the head
            if self._left > limit:
                raise too_large()
            data = conn._take(self._left)
            self._left = 0
            self._done = True
            return data
        pieces: list[bytes] = []
        size = 0
        async for piece in self:
            size += len(piece)
            if size > limit:
                raise too_large()
            pieces.append(piece)
        return b"".join(pieces)

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._reusable and conn.usable:
            self._pool._release(conn)
        else:
            conn.close()
            self._pool._release(None)


def _decoders(encoding: str | None) -> list[_Decoder]:
    if not encoding:
        return []
    codings = [c.strip().lower() for c in encoding.split(",")]
    return [_Decoder(c) for c in reversed(codings) if c in ("gzip", "deflate")]


def _chunk_size(line: bytes) -> int:
    text = line.split(b";", 1)[0].strip()
    if not text or len(text) > 16 or not set(text) <= _HEX:
        raise httpx2.RemoteProtocolError("the upstream sent a malformed chunk size")
    return int(text, 16)


def _parse_head(head: bytes) -> tuple[bytes, int, list[tuple[str, str]]]:
    """(HTTP version, status, headers with lower-case names) of a response head."""
    lines = head.split(b"\n")
    status_line = lines[0].rstrip(b"\r")
    parts = status_line.split(b" ", 2)
    if (
        len(parts) < 2
        or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(parts[1]) != 3
        or not parts[1].isdigit()
    ):
        raise httpx2.RemoteProtocolError(
            f"the upstream sent a malformed status line {status_line[:80]!r}"
        )
    raw: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        if not line:
            continue
        if line[0] in (32, 9):  # obs-fold: a continuation of the previous value
            if not raw:
                raise httpx2.RemoteProtocolError("the upstream sent a malformed header")
            name, value = raw[-1]
            raw[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name or not set(name) <= _TOKEN:
            raise httpx2.RemoteProtocolError(f"the upstream sent a malformed header {name[:80]!r}")
        raw.append((name.lower(), value.strip(b" \t")))
    encoding = _header_encoding(raw)
    headers = [(k.decode("ascii"), v.decode(encoding)) for k, v in raw]
    return parts[0], int(parts[1]), headers


def _header_encoding(raw: list[tuple[bytes, bytes]]) -> str:
    """httpx2's rule for the whole set: ascii, else utf-8, else latin-1."""
    for encoding in ("ascii", "utf-8"):
        try:
            for _, value in raw:
                value.decode(encoding)
        except UnicodeDecodeError:
            continue
        return encoding
    return "iso-8859-1"


def _framing(
    status: int, headers: list[tuple[str, str]], method: str
) -> tuple[tuple[str, int], bool]:
    """(framing, whether the connection may carry another request after this answer)."""
    tokens = {t.strip().lower() for k, v in headers if k == "connection" for t in v.split(",")}
    keep = "close" not in tokens
    if method == "HEAD" or status in _NO_BODY:
        return ("none", 0), keep
    codings = [v for k, v in headers if k == "transfer-encoding"]
    if codings:
        last = ",".join(codings).split(",")[-1].strip().lower()
        if last == "chunked":
            with_length = any(k == "content-length" for k, _ in headers)
            return ("chunked", 0), keep and not with_length
        return ("close", 0), False
    lengths = [v for k, v in headers if k == "content-length"]
    if lengths:
        values = {item.strip() for v in lengths for item in v.split(",")}
        if len(values) != 1:
            raise httpx2.RemoteProtocolError("the upstream sent conflicting Content-Length values")
        value = values.pop()
        if not value.isdigit() or len(value) > 18:
            raise httpx2.RemoteProtocolError(f"the upstream sent a bad Content-Length {value!r}")
        return ("length", int(value)), keep
    return ("close", 0), False


class Exchange:
    """One request under way (see :meth:`Upstream.send`)."""

    def __init__(self, pool: Upstream, method: str, head: bytes, body: bytes) -> None:
        self._pool = pool
        self._method = method
        self._data = head + body if len(body) <= 65536 else None
        self._head, self._body = head, body
        self._conn: _Connection | None = None
        self._written = False
        self._done = False

    def start(self, conn: _Connection) -> None:
        """Write the request on ``conn`` now (no wait: the transport buffers what the socket
        does not take at once)."""
        self._conn = conn
        transport = conn.transport
        if transport is None or transport.is_closing():
            return  # written (and failed) in reply()
        if self._data is not None:
            transport.write(self._data)
        else:
            transport.write(self._head)
            transport.write(self._body)
        self._written = True

    async def reply(self) -> Reply:
        """The answer's head (connecting and writing first when :meth:`start` did not)."""
        if self._done:
            raise RuntimeError("the answer of this request was read already")
        self._done = True
        pool = self._pool
        conn = self._conn
        if conn is None:
            conn = self._conn = await pool._connection()
        try:
            if not self._written:
                if self._data is not None:
                    await conn.write(self._data, pool.write_timeout)
                else:
                    await conn.write(self._head, pool.write_timeout)
                    await conn.write(self._body, pool.write_timeout)
            else:
                await conn.drained(pool.write_timeout)
            return await pool._answer(conn, self._method)
        except BaseException:
            conn.close()
            pool._release(None)
            raise

    def abandon(self) -> None:
        """Give the request up before :meth:`reply` (its connection is closed)."""
        if not self._done:
            self._done = True
            if self._conn is not None:
                self._conn.close()
                self._pool._release(None)


class Upstream:
    """A pool of kept-alive HTTP/1.1 connections to one origin (``base_url``'s)."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        write_timeout: float = 600.0,
        keepalive_expiry: float = 5.0,
        max_idle: int = 64,
        max_connections: int = 256,
        ssl_context: Any = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        default = 443 if parts.scheme == "https" else 80
        self.port = parts.port or default
        name = f"[{self.host}]" if ":" in self.host else self.host
        authority = name if self.port == default else f"{name}:{self.port}"
        self.authority = authority.encode("idna")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.keepalive_expiry = keepalive_expiry
        self.max_idle = max_idle
        self.max_connections = max_connections
        if ssl_context is None and self.scheme == "https":  # built now, not on the first call
            ssl_context = httpx2.create_ssl_context()
            ssl_context.set_alpn_protocols(["http/1.1"])
        self._ssl = ssl_context
        self._idle: list[_Connection] = []
        self._open = 0
        self._waiting: list[asyncio.Future[None]] = []
        self._closed = False

    # --- connections ---------------------------------------------------------------------------

    def _idle_connection(self) -> _Connection | None:
        """A kept-alive connection still fit to use, or None."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and now - conn.idle_since < self.keepalive_expiry:
                conn.reused = True
                return conn
            conn.close()
            self._open -= 1
        return None

    async def _connection(self) -> _Connection:
        conn = self._idle_connection()
        if conn is not None:
            return conn
        while self._open >= self.max_connections:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter
            if self._idle:
                return await self._connection()
        self._open += 1
        try:
            return await self._connect()
        except BaseException:
            self._open -= 1
            self._wake_one()
            raise

    async def _connect(self) -> _Connection:
        if self._closed:
            raise httpx2.ConnectError("the proxy is shutting down")
        loop = asyncio.get_running_loop()
        ssl: Any = self._ssl if self.scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop),
                    self.host,
                    self.port,
                    ssl=ssl,
                    server_hostname=self.host if ssl is not None else None,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout(
                f"connecting to {self.host}:{self.port} timed out"
            ) from None
        except OSError as exc:
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    def _release(self, conn: _Connection | None) -> None:
        """A connection back from a request: kept idle (``conn``), or gone (None)."""
        if conn is not None and not self._closed and len(self._idle) < self.max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            if conn is not None:
                conn.close()
            self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            waiter = self._waiting.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    # --- requests ------------------------------------------------------------------------------

    def send(
        self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> Exchange:
        """Start a request (``target``: path and query as on the request line; ``headers``
        without ``host``, ``content-length`` and ``accept-encoding``, which are added). On a
        kept-alive connection its bytes are written before this returns; ``await
        exchange.reply()`` then reads the head of the answer (or connects first)."""
        lines = [
            b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode("ascii"), target, self.authority)
        ]
        lines.extend(b"%s: %s\r\n" % pair for pair in headers)
        lines.append(b"accept-encoding: gzip, deflate\r\n")
        if body or method not in ("GET", "HEAD"):
            lines.append(b"content-length: %d\r\n" % len(body))
        lines.append(b"\r\n")
        exchange = Exchange(self, method, b"".join(lines), body)
        conn = self._idle_connection()
        if conn is not None:
            exchange.start(conn)
        return exchange

    async def request(
        self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> Reply:
        """:meth:`send`, and the head of the answer."""
        return await self.send(method, target, headers, body).reply()

    async def _answer(self, conn: _Connection, method: str) -> Reply:
        while True:
            raw = await self._head(conn)
            version, status, answer = _parse_head(raw)
            if status >= 200 or status == 101:
                break  # 1xx: informational, another head follows
        if status == 101:
            raise httpx2.RemoteProtocolError("the upstream switched protocols")
        framing, keep = _framing(status, answer, method)
        return Reply(self, conn, status, answer, framing, keep and version == b"HTTP/1.1")

    async def _head(self, conn: _Connection) -> bytes:
        if conn.eof and not conn.buffer:
            raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
        try:
            return await conn.read_until(
                b"\r\n\r\n", MAX_HEAD_BYTES, self.read_timeout, "response head"
            )
        except httpx2.RemoteProtocolError:
            if not conn.buffer:
                raise httpx2.RemoteProtocolError(
                    "Server disconnected without sending a response."
                ) from None
            raise

    async def aclose(self) -> None:
        """Close every idle connection; those in use close when their answer is done."""
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._open -= len(self._idle)
        self._idle.clear()
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(httpx2.ConnectError("the proxy is shutting down"))
        self._waiting.clear()
