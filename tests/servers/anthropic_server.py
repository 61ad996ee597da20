"""A real Anthropic Messages API server for tests, answering from a script.

It serves ``POST /v1/messages`` on 127.0.0.1 (starlette under uvicorn, in a background thread).
Tests script answers built with the official ``anthropic`` SDK's own types — a ``Message`` is
sent as JSON, or, when the request asks to stream, as the raw stream events the real API sends
(``message_start``, ``content_block_start``/``delta``/``stop``, ``message_delta``,
``message_stop``), each one an SDK ``Raw*Event`` serialised with ``to_dict(mode="json")``.
Error answers use the SDK's ``ErrorResponse`` shape. Every request is recorded in
:attr:`AnthropicServer.received` (path, headers, JSON body)::

    server.script(message(text("hi")), Raw(429, error("rate_limit_error", "slow down"), ...))
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import orjson
import uvicorn
from anthropic.types import (
    ErrorResponse,
    InputJSONDelta,
    Message,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from anthropic.types.raw_message_delta_event import Delta
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

Block = TextBlock | ThinkingBlock | ToolUseBlock

# --- answers built with the SDK's types ---------------------------------------------------------


def text(value: str) -> TextBlock:
    return TextBlock(type="text", text=value, citations=None)


def thinking(value: str, signature: str = "sig-test") -> ThinkingBlock:
    return ThinkingBlock(type="thinking", thinking=value, signature=signature)


def tool_use(call_id: str, name: str, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(type="tool_use", id=call_id, name=name, input=arguments)


def message(
    *blocks: Block,
    stop_reason: str | None = None,
    model: str = "claude-served-1",
    input_tokens: int = 11,
    output_tokens: int = 7,
    cache_read: int | None = None,
    cache_creation: int | None = None,
) -> Message:
    """A Messages API answer; ``stop_reason`` defaults to tool_use with tool calls, else
    end_turn."""
    reason = stop_reason or (
        "tool_use" if any(b.type == "tool_use" for b in blocks) else "end_turn"
    )
    return Message(
        id="msg_test",
        type="message",
        role="assistant",
        model=model,
        content=list(blocks),
        stop_reason=reason,  # type: ignore[arg-type]
        stop_sequence=None,
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_input_tokens=cache_read,
            cache_creation_input_tokens=cache_creation,
        ),
    )


def error(kind: str, text_: str) -> dict[str, Any]:
    """An error body as Anthropic sends it (``{"type": "error", "error": {...}}``)."""
    body = ErrorResponse.model_validate(
        {"type": "error", "error": {"type": kind, "message": text_}, "request_id": "req_test"}
    )
    return body.to_dict(mode="json")


def dump(model: BaseModel) -> dict[str, Any]:
    return model.to_dict(mode="json")  # type: ignore[attr-defined, no-any-return]


def _pieces(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def stream_events(answer: Message, piece: int = 4) -> list[BaseModel]:
    """The raw events the Messages API streams for ``answer``, as SDK event objects."""
    start = answer.model_copy(
        update={
            "content": [],
            "stop_reason": None,
            "usage": answer.usage.model_copy(update={"output_tokens": 1}),
        }
    )
    events: list[BaseModel] = [RawMessageStartEvent(type="message_start", message=start)]
    for index, block in enumerate(answer.content):
        if isinstance(block, TextBlock):
            empty: Block = text("")
            deltas: list[Any] = [
                TextDelta(type="text_delta", text=p) for p in _pieces(block.text, piece)
            ]
        elif isinstance(block, ThinkingBlock):
            empty = thinking("", signature="")
            deltas = [
                ThinkingDelta(type="thinking_delta", thinking=p)
                for p in _pieces(block.thinking, piece)
            ]
            deltas.append(SignatureDelta(type="signature_delta", signature=block.signature))
        elif isinstance(block, ToolUseBlock):
            empty = tool_use(block.id, block.name)
            arguments = orjson.dumps(block.input).decode()
            deltas = [
                InputJSONDelta(type="input_json_delta", partial_json=p)
                for p in _pieces(arguments, piece)
            ]
        else:  # pragma: no cover - the tests build only these blocks
            raise TypeError(block)
        events.append(
            RawContentBlockStartEvent(type="content_block_start", index=index, content_block=empty)
        )
        events.extend(
            RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=d)
            for d in deltas
        )
        events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
    events.append(
        RawMessageDeltaEvent(
            type="message_delta",
            delta=Delta(stop_reason=answer.stop_reason, stop_sequence=None),
            usage=MessageDeltaUsage(output_tokens=answer.usage.output_tokens),
        )
    )
    events.append(RawMessageStopEvent(type="message_stop"))
    return events


@dataclass(frozen=True)
class Stream:
    """A streamed answer: SDK events (or raw dicts), cut cleanly or dropped midway."""

    events: Sequence[BaseModel | dict[str, Any]]
    cut_after: int | None = None  # end the body cleanly after this many events
    drop_after: int | None = None  # break the connection after this many events

    @classmethod
    def of(cls, answer: Message, piece: int = 4, **options: Any) -> Stream:
        return cls(stream_events(answer, piece), **options)


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


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Dropped(Exception):
    """Raised inside a streamed body to break the connection mid-answer."""


# --- the server ----------------------------------------------------------------------------------


class AnthropicServer:
    """The scripted server; start it with ``with AnthropicServer() as server: ...``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._script: deque[Message | Stream | Raw] = deque()
        self._lock = threading.Lock()
        self.port = 0
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *answers: Message | Stream | Raw) -> None:
        """Queue the answers to the next requests, in order. A ``Message`` answers a streaming
        request with its stream events."""
        with self._lock:
            self._script.extend(answers)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.received.clear()

    @property
    def last(self) -> Received:
        return self.received[-1]

    async def _messages(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        with self._lock:
            self.received.append(Received(request.url.path, dict(request.headers), body))
            answer = self._script.popleft() if self._script else None
        if answer is None:
            return Raw(500, error("api_error", "the test scripted no answer")).response()
        if isinstance(answer, Raw):
            return answer.response()
        if isinstance(answer, Message):
            if not body.get("stream"):
                return Raw(200, dump(answer)).response()
            answer = Stream.of(answer)
        return self._stream(answer)

    @staticmethod
    def _stream(stream: Stream) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for sent, event in enumerate(stream.events):
                if sent == stream.drop_after:
                    raise Dropped("the test breaks this connection")
                if sent == stream.cut_after:
                    return
                data = event if isinstance(event, dict) else dump(event)
                yield b"event: %s\ndata: %s\n\n" % (str(data["type"]).encode(), orjson.dumps(data))

        return StreamingResponse(body(), media_type="text/event-stream")

    # --- lifecycle ---

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
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
            name="anthropic-test-server",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the Anthropic test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> AnthropicServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
