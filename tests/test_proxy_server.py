"""The HTTP/1.1 server under ``rar proxy`` (:mod:`rar.interop._server`), on asyncio's loop and
on uvloop's, with a scripted application and raw sockets: keep-alive, pipelining,
``Expect: 100-continue``, HEAD, HTTP/1.0, streams, a client that leaves, refusals that reach a
client still sending, and stopping with a request under way."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from rar.interop._server import Reply, Request, bind, make_server

LOOPS = ["asyncio", "uvloop"]


class Scripted:
    """An application: ``/echo`` answers the body, ``/stream`` streams ``n`` pieces (``gap``
    seconds apart), ``/slow`` answers after ``delay``, ``/boom`` raises."""

    max_body = 4096
    body_timeout = 2.0

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.closed: list[str] = []
        self.pieces_sent = 0
        self.shut = False

    async def answer(self, request: Request) -> Reply:
        self.requests.append(request)
        if request.path == "/boom":
            raise RuntimeError("the application failed")
        if request.path in ("/staged", "/withdrawn"):
            staged = Reply(200, [(b"content-type", b"text/plain")], b"staged answer")
            assert request.stage is not None
            request.stage(staged)
            self.staged_at = time.monotonic()
            await asyncio.sleep(0.3)  # the record is made durable meanwhile
            if request.path == "/withdrawn":
                return Reply(500, [(b"content-type", b"text/plain")], b"the record failed")
            return staged
        if request.path == "/slow":
            await asyncio.sleep(0.5)
            return Reply(200, [(b"content-type", b"text/plain")], b"slow answer")
        if request.path == "/stream":
            n = int(dict(part.split(b"=") for part in request.query.split(b"&"))[b"n"])

            async def pieces() -> AsyncIterator[bytes]:
                for i in range(1, n):
                    await asyncio.sleep(0.05)
                    self.pieces_sent += 1
                    yield b"data: %d\n\n" % i

            async def aclose() -> None:
                self.closed.append(request.path)

            return Reply(
                200,
                [(b"content-type", b"text/event-stream")],
                b"data: 0\n\n",
                pieces=pieces(),
                aclose=aclose,
            )
        return Reply(200, [(b"content-type", b"text/plain")], b"echo:" + request.body)

    async def aclose(self) -> None:
        self.shut = True


class Serving:
    def __init__(self, loop: str, **options: Any) -> None:
        self.app = Scripted()
        self.server = make_server(self.app, loop=loop, **options)
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> Serving:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive()
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)


@pytest.fixture(params=LOOPS)
def serving(request: pytest.FixtureRequest) -> Iterator[Serving]:
    with Serving(request.param, keep_alive=0.5, header_timeout=1.0) as running:
        yield running


def post(path: bytes, body: bytes, *extra: bytes) -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n" % (path, len(body))
    return head + b"".join(h + b"\r\n" for h in extra) + b"\r\n" + body


_LEFT: dict[int, bytes] = {}  # bytes read past an answer, per socket (pipelined answers)


def read_answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """The next answer with a Content-Length on ``sock``: (head, body)."""
    data = _LEFT.pop(sock.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before the head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lines[0].split(b":")[1])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    _LEFT[sock.fileno()] = body[length:]
    return head, body[:length]


def read_to_close(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_kept_alive_connection_carries_several_requests(serving: Serving) -> None:
    with serving.connect() as sock:
        for n in range(3):
            sock.sendall(post(b"/echo", b"%d" % n))
            head, body = read_answer(sock)
            assert head.startswith(b"HTTP/1.1 200 OK") and body == b"echo:%d" % n
    assert len(serving.app.requests) == 3


def test_pipelined_requests_are_answered_in_order(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(post(b"/slow", b"") + post(b"/echo", b"second") + post(b"/echo", b"third"))
        bodies = [read_answer(sock)[1] for _ in range(3)]
    assert bodies == [b"slow answer", b"echo:second", b"echo:third"]


def test_expect_100_continue_is_answered_before_the_body_is_sent(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        assert read_answer(sock)[1] == b"echo:hello"


def test_a_head_request_gets_the_head_only(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(b"HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n" + post(b"/echo", b"after"))
        data = b""
        while b"echo:after" not in data:
            data += sock.recv(65536)
    assert data.count(b"HTTP/1.1 200") == 2 and data.index(b"content-length: 0") > 0


def test_a_stream_is_chunked_for_http11_and_ends_with_the_close_for_http10(
    serving: Serving,
) -> None:
    with serving.connect() as sock:
        sock.sendall(b"GET /stream?n=3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        chunked = read_to_close(sock)
    assert b"transfer-encoding: chunked" in chunked
    assert chunked.endswith(b"9\r\ndata: 2\n\n\r\n0\r\n\r\n")
    with serving.connect() as sock:
        sock.sendall(b"GET /stream?n=3 HTTP/1.0\r\n\r\n")
        plain = read_to_close(sock)
    assert b"transfer-encoding" not in plain.lower()
    assert plain.endswith(b"\r\n\r\ndata: 0\n\ndata: 1\n\ndata: 2\n\n")


def test_a_client_that_leaves_a_stream_stops_it_and_the_reply_is_closed(
    serving: Serving,
) -> None:
    with serving.connect() as sock:
        sock.sendall(b"GET /stream?n=100 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert b"data: 0" in sock.recv(65536)
    deadline = time.monotonic() + 5
    while not serving.app.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert serving.app.closed == ["/stream"]
    assert serving.app.pieces_sent < 20, "the stream went on after its client left"


def test_an_idle_kept_alive_connection_is_closed_quietly(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(post(b"/echo", b"x"))
        read_answer(sock)
        started = time.monotonic()
        assert read_to_close(sock) == b""  # no 408 for a connection that asked nothing more
        assert time.monotonic() - started < 3


def test_an_application_error_is_a_500_and_the_server_keeps_serving(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(post(b"/boom", b"") + post(b"/echo", b"still"))
        head, body = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 500") and b"rar_error" in body
        assert read_answer(sock)[1] == b"echo:still"


def test_a_refused_client_still_sending_reads_the_refusal(serving: Serving) -> None:
    """An oversize body refused at once: the 413 must not be lost to a connection reset while
    the client is still sending (the server drops what comes before it closes)."""
    with serving.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n")
        received = b""
        try:
            for _ in range(40):
                sock.sendall(b"x" * 50_000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        with contextlib.suppress(ConnectionResetError):
            received = read_to_close(sock)
    assert received.startswith(b"HTTP/1.1 413"), received[:100]
    assert b"connection: close" in received


def test_stopping_lets_a_request_under_way_finish_then_closes_the_application() -> None:
    with Serving("auto") as running:
        sock = running.connect()
        sock.sendall(post(b"/slow", b""))
        time.sleep(0.1)
        stopper = threading.Thread(target=running.stop)
        stopper.start()
        head, body = read_answer(sock)
        stopper.join(timeout=20)
        sock.close()
    assert body == b"slow answer" and b"connection: close" in head
    assert running.app.shut
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", running.port), timeout=1).close()


def test_a_staged_answer_is_all_there_but_its_last_byte_until_the_application_answers(
    serving: Serving,
) -> None:
    with serving.connect() as sock:
        sock.sendall(post(b"/staged", b""))
        early = b""
        while not early.endswith(b"staged answe"):
            early += sock.recv(65536)
        arrived = time.monotonic()
        assert b"content-length: 13" in early
        _, body = read_answer_from(sock, early)
        completed = time.monotonic()
    assert body == b"staged answer"
    assert arrived < serving.app.staged_at + 0.25 <= completed, "the last byte waited"


def test_an_answer_staged_then_withdrawn_is_never_completed(serving: Serving) -> None:
    with serving.connect() as sock:
        sock.sendall(post(b"/withdrawn", b"") + post(b"/echo", b"never"))
        received = read_to_close(sock)
    assert received.endswith(b"staged answe"), "not one byte more, and no other answer"
    assert b"never" not in received and b"500" not in received


def read_answer_from(sock: socket.socket, data: bytes) -> tuple[bytes, bytes]:
    _LEFT[sock.fileno()] = data
    return read_answer(sock)
