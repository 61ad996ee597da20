"""Wire mapping of the Anthropic provider: requests to Messages API JSON and answers back.

Pure functions (no HTTP) shared by the sync, async and streaming paths of
:class:`rar.llm.providers.anthropic.Anthropic`, so each path maps exactly the same way.
"""

from __future__ import annotations

from typing import Any

import httpx2
import orjson

from rar.errors import (
    BadRequestError,
    ConfigError,
    MalformedResponseError,
    StreamInterruptedError,
)
from rar.llm.providers._http import expect, raise_for_status
from rar.llm.types import FinishReason, Message, Request, Response, StreamChunk, ToolCall, Usage

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 1024
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}
#: HTTP status of each error type Anthropic names in a streamed ``error`` event.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


# --- request ---------------------------------------------------------------------------------


def build_body(request: Request) -> dict[str, Any]:
    """The ``/v1/messages`` JSON body for ``request`` (without ``stream``)."""
    fmt = request.response_format
    if fmt is not None and fmt.type != "text":
        raise ConfigError(
            f"{PROVIDER}: the Messages API has no JSON response mode ({fmt.type}); ask for JSON "
            "in the prompt (or offer a tool whose arguments are the schema) and drop "
            "response_format for this provider"
        )
    body: dict[str, Any] = {"model": request.model}
    system = [m.content for m in request.messages if m.role == "system" and m.content]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = _messages(request.messages)
    max_tokens = request.max_tokens
    thinking = _thinking(request)
    if thinking is not None:
        budget, max_tokens = thinking
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    body["max_tokens"] = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    if request.tools:
        body["tools"] = [
            {
                "name": t.name,
                **({"description": t.description} if t.description else {}),
                "input_schema": t.parameters,
            }
            for t in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = _tool_choice(request)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    return body


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "user":
            if message.content:
                add("user", [{"type": "text", "text": message.content}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                try:
                    arguments = call.parsed_arguments()
                except ValueError as exc:
                    raise BadRequestError(
                        f"an assistant message holds invalid tool arguments ({exc}); Anthropic "
                        "needs them as a JSON object. Fix or drop that message",
                        provider=PROVIDER,
                    ) from None
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
                )
            if blocks:
                add("assistant", blocks)
        elif message.role == "tool":
            if not message.tool_call_id:
                raise BadRequestError(
                    "a tool result has no tool_call_id; Anthropic needs the id of the call "
                    "it answers",
                    provider=PROVIDER,
                )
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            if message.content:
                result["content"] = message.content
            if message.is_error:
                result["is_error"] = True
            add("user", [result])
    return out


def _thinking(request: Request) -> tuple[int, int] | None:
    """(budget_tokens, max_tokens) when extended thinking is on for this request."""
    if not request.reasoning_effort or _mid_tool_turn(request.messages):
        return None
    budget = THINKING_BUDGETS[request.reasoning_effort]
    if request.max_tokens is None:
        return budget, budget + DEFAULT_MAX_TOKENS
    budget = max(MIN_THINKING_BUDGET, min(budget, request.max_tokens - DEFAULT_MAX_TOKENS))
    if budget >= request.max_tokens:
        raise ConfigError(
            f"{PROVIDER}: reasoning_effort needs max_tokens above {MIN_THINKING_BUDGET} "
            f"(thinking budgets start at {MIN_THINKING_BUDGET} tokens and count against "
            f"max_tokens); got max_tokens={request.max_tokens}"
        )
    return budget, request.max_tokens


def _mid_tool_turn(messages: tuple[Message, ...]) -> bool:
    """Whether an assistant message follows the last user message (a tool loop in progress).

    With thinking on, Anthropic wants that assistant message replayed with its signed thinking
    block, which RAR does not keep; such requests are sent without thinking instead.
    """
    for message in reversed(messages):
        if message.role == "user":
            return False
        if message.role == "assistant":
            return True
    return False


def _tool_choice(request: Request) -> dict[str, Any]:
    choice = request.tool_choice or "auto"
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if choice not in {t.name for t in request.tools}:
        raise ConfigError(f"tool_choice names {choice!r}, which is not one of the request's tools")
    return {"type": "tool", "name": choice}


# --- answers ---------------------------------------------------------------------------------


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    return expect(value, kind, what, PROVIDER)


def _block_texts(block: dict[str, Any], where: str) -> None:
    """A content block's ``text`` and ``thinking``, when present, are strings."""
    _expect(block.get("text"), str, f"the text of {where}")
    _expect(block.get("thinking"), str, f"the thinking of {where}")


def parse_message(data: dict[str, Any], *, model: str) -> Response:
    """A Messages API ``message`` object as a :class:`Response`."""
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise MalformedResponseError("the answer has no content list", provider=PROVIDER)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise MalformedResponseError("a content block is not an object", provider=PROVIDER)
        _block_texts(block, f"content block {i}")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(_tool_call(block))
    reason = data.get("stop_reason")
    return Response(
        content="".join(texts) or None,
        tool_calls=tuple(calls),
        reasoning="".join(thoughts) or None,
        finish_reason=_FINISH.get(str(reason), FinishReason.OTHER),
        usage=_usage(data.get("usage")),
        model=str(data.get("model") or model),
        provider=PROVIDER,
    )


def _tool_call(block: dict[str, Any]) -> ToolCall:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise MalformedResponseError("a tool_use block has no id or name", provider=PROVIDER)
    if not isinstance(arguments, dict):
        raise MalformedResponseError(
            f"the input of tool_use {name!r} is not an object", provider=PROVIDER
        )
    text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return ToolCall(id=call_id, name=name, arguments=text)


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    # Anthropic's input_tokens leaves out the cache reads and writes; RAR's counts the whole
    # prompt, as OpenAI's prompt_tokens and Gemini's promptTokenCount do
    read = count(usage.get("cache_read_input_tokens"))
    written = count(usage.get("cache_creation_input_tokens"))
    details = usage.get("output_tokens_details")
    thinking = count(details.get("thinking_tokens")) if isinstance(details, dict) else 0
    return Usage(
        input_tokens=count(usage.get("input_tokens")) + read + written,
        cached_input_tokens=read,
        cache_write_input_tokens=written,
        output_tokens=count(usage.get("output_tokens")),
        reasoning_tokens=thinking,
    )


class StreamAssembler:
    """Builds the ``message`` from the streamed events and yields their text pieces."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, list[str]] = {}
        self.stopped = False

    def feed(self, event: str | None, text: str) -> list[StreamChunk]:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponseError(
                f"a streamed event is not JSON ({exc}): {text[:200]!r}", provider=PROVIDER
            ) from exc
        if not isinstance(data, dict):
            raise MalformedResponseError("a streamed event is not an object", provider=PROVIDER)
        kind = data.get("type") or event
        if kind == "error":
            raw = data.get("error")
            error = raw if isinstance(raw, dict) else {}
            status = _ERROR_STATUS.get(str(error.get("type")), 500)
            raise_for_status(httpx2.Response(status, content=text.encode()), provider=PROVIDER)
        if kind == "message_start":
            message = data.get("message")
            if not isinstance(message, dict):
                raise MalformedResponseError("message_start carries no message", provider=PROVIDER)
            usage = _expect(message.get("usage"), dict, "the usage of message_start")
            self.message = {**message, "usage": dict(usage or {})}
            return []
        if self.message is None:
            if kind == "ping":
                return []
            raise MalformedResponseError(f"{kind} before message_start", provider=PROVIDER)
        index = data.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            block = data.get("content_block")
            if not isinstance(block, dict):
                raise MalformedResponseError("a block start carries no block", provider=PROVIDER)
            _block_texts(block, f"started block {index}")
            self.blocks[index] = dict(block)
            if block.get("type") == "tool_use":
                self.partial[index] = []
            return self._start_chunks(block)
        if kind == "content_block_delta" and isinstance(index, int):
            return self._delta(index, data.get("delta"))
        if kind == "content_block_stop" and isinstance(index, int):
            self._finish_block(index)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict):  # stop_reason, stop_sequence: never the usage object
                self.message.update(
                    {k: v for k, v in delta.items() if v is not None and k != "usage"}
                )
            usage = _expect(data.get("usage"), dict, "the usage of message_delta") or {}
            self.message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        return []

    @staticmethod
    def _start_chunks(block: dict[str, Any]) -> list[StreamChunk]:
        text, thought = block.get("text"), block.get("thinking")
        if block.get("type") == "text" and isinstance(text, str) and text:
            return [StreamChunk(kind="content", text=text)]
        if block.get("type") == "thinking" and isinstance(thought, str) and thought:
            return [StreamChunk(kind="reasoning", text=thought)]
        return []

    def _delta(self, index: int, delta: Any) -> list[StreamChunk]:
        block = self.blocks.get(index)
        if block is None or not isinstance(delta, dict):
            raise MalformedResponseError(f"a delta for unknown block {index}", provider=PROVIDER)
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = (block.get("text") or "") + delta["text"]
            return [StreamChunk(kind="content", text=delta["text"])] if delta["text"] else []
        if kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = (block.get("thinking") or "") + delta["thinking"]
            return (
                [StreamChunk(kind="reasoning", text=delta["thinking"])] if delta["thinking"] else []
            )
        if kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self.partial.setdefault(index, []).append(delta["partial_json"])
        return []

    def _finish_block(self, index: int) -> None:
        pieces = self.partial.pop(index, None)
        if pieces is None or index not in self.blocks:
            return
        text = "".join(pieces)
        try:
            self.blocks[index]["input"] = orjson.loads(text) if text.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise MalformedResponseError(
                f"the streamed input of a tool_use block is not JSON ({exc}): {text[:200]!r}",
                provider=PROVIDER,
            ) from exc

    def response(self) -> Response:
        if self.message is None or not self.stopped:
            raise StreamInterruptedError(
                "the stream ended before message_stop; the answer is incomplete",
                provider=PROVIDER,
            )
        for index in list(self.partial):
            self._finish_block(index)
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return parse_message({**self.message, "content": content}, model=self.model)
