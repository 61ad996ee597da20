"""What the scripted test servers share: a starlette app served by uvicorn in a background
thread on a free 127.0.0.1 port, started and stopped by hand or as a context manager, with a
queue of scripted answers and the list of requests received.

A server subclasses :class:`LocalServer`, passes its routes, and in each handler records the
request and takes the next answer with :meth:`LocalServer._take`; :func:`event_stream` sends a
streamed answer that can end early or break the connection midway.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

AnswerT = TypeVar("AnswerT")
ReceivedT = TypeVar("ReceivedT")
EventT = TypeVar("EventT")


@dataclass(frozen=True)
class Raw:
    """An answer sent exactly as given: error statuses, broken bodies."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> Response:
        body = self.body if isinstance(self.body, bytes | str) else orjson.dumps(self.body)
        return Response(
            body, status_code=self.status, headers=self.headers, media_type="application/json"
        )


class Dropped(Exception):
    """Raised inside a streamed body to break the connection mid-answer."""


def event_stream(
    events: Sequence[EventT],
    frame: Callable[[EventT], bytes],
    *,
    cut_after: int | None = None,
    drop_after: int | None = None,
) -> StreamingResponse:
    """``events`` sent as Server-Sent Events, each one framed by ``frame``; the body ends cleanly
    after ``cut_after`` events, or the connection breaks after ``drop_after``."""

    async def body() -> AsyncIterator[bytes]:
        for sent, event in enumerate(events):
            if sent == drop_after:
                raise Dropped("the test breaks this connection")
            if sent == cut_after:
                return
            yield frame(event)

    return StreamingResponse(body(), media_type="text/event-stream")


class LocalServer(Generic[AnswerT, ReceivedT]):
    """A scripted server on 127.0.0.1; start it with ``with Server() as server: ...``.

    Subclasses set ``_label`` (named in the thread and in a failure to start) and ``_prefix``
    (the path of the API root in :attr:`base_url`).
    """

    _label = "local"
    _prefix = ""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self.received: list[ReceivedT] = []
        self._script: deque[AnswerT] = deque()
        self._lock = threading.Lock()
        self.port = 0
        self.app = Starlette(routes=list(routes))
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    def script(self, *answers: AnswerT) -> None:
        """Queue the answers to the next requests, in order."""
        with self._lock:
            self._script.extend(answers)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.received.clear()

    @property
    def last(self) -> ReceivedT:
        return self.received[-1]

    def _take(self, received: ReceivedT) -> AnswerT | None:
        """Record a request and take the next scripted answer (None when none is left)."""
        with self._lock:
            self.received.append(received)
            return self._script.popleft() if self._script else None

    # --- lifecycle ---

    def start(self) -> None:
        # IPPROTO_TCP so that asyncio turns on TCP_NODELAY: an answer written in two parts
        # otherwise waits ~40 ms for the client's delayed ACK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="critical",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._socket = sock
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"{self._label.lower()}-test-server",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the {self._label} test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
