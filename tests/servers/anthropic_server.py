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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
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
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from servers._local import Dropped as Dropped
from servers._local import LocalServer, Raw, event_stream

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
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


# --- the server ----------------------------------------------------------------------------------


class AnthropicServer(LocalServer[Message | Stream | Raw, Received]):
    """The scripted server; start it with ``with AnthropicServer() as server: ...``.

    A ``Message`` in the script answers a streaming request with its stream events."""

    _label = "Anthropic"

    def __init__(self) -> None:
        super().__init__([Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        answer = self._take(Received(request.url.path, dict(request.headers), body))
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
        def frame(event: BaseModel | dict[str, Any]) -> bytes:
            data = event if isinstance(event, dict) else dump(event)
            return b"event: %s\ndata: %s\n\n" % (str(data["type"]).encode(), orjson.dumps(data))

        return event_stream(
            stream.events, frame, cut_after=stream.cut_after, drop_after=stream.drop_after
        )
