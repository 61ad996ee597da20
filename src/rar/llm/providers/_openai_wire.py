"""Wire mapping of the OpenAI-compatible providers: requests to JSON bodies and answers back.

Pure functions (no HTTP) shared by the sync, async and streaming paths of
:class:`rar.llm.providers.openai.OpenAIChat` and :class:`~rar.llm.providers.openai.OpenAIText`,
so each path maps exactly the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from rar.errors import MalformedResponseError, StreamInterruptedError
from rar.llm.provider import ChunkCallback
from rar.llm.providers._http import expect
from rar.llm.types import (
    FinishReason,
    Message,
    Request,
    ResponseFormat,
    StreamChunk,
    ToolCall,
    Usage,
)

_FINISH = {reason.value: reason for reason in FinishReason if reason != FinishReason.OTHER}
_FINISH["function_call"] = FinishReason.TOOL_CALLS  # the pre-tools name of tool_calls

#: OpenAI's reasoning models (o1, o3-mini, o4-mini, gpt-5, gpt-5.1-mini, ...), which refuse
#: ``max_tokens`` and take ``max_completion_tokens`` instead.
_REASONING_MODEL = re.compile(r"^(?:o\d+|gpt-5)(?:[-.:_@].*)?$", re.IGNORECASE)
OFFICIAL_HOST = "api.openai.com"


# --- wire format: requests ------------------------------------------------------------------


def _message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        wire["content"] = message.content
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    else:
        wire["content"] = message.content or ""
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id
    return wire


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _response_format(fmt: ResponseFormat) -> dict[str, Any]:
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.json_schema or {}}
    if fmt.strict is not None:
        schema["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": schema}


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's reasoning models (o1, o3, o4-mini, gpt-5, ...),
    also behind a router's prefix (``openai/o3``) or as a fine-tune (``ft:o4-mini-...``)."""
    name = model.rsplit("/", 1)[-1]
    name = name.removeprefix("ft:")
    return bool(_REASONING_MODEL.match(name))


def max_tokens_field(model: str, base_url: str) -> str:
    """The name of the output-token limit in a chat request to ``model`` at ``base_url``.

    OpenAI deprecated ``max_tokens`` for ``max_completion_tokens``, which its API takes for
    every current model and its reasoning models insist on. Other OpenAI-compatible servers
    (vLLM, llama.cpp, Ollama, ...) may only know ``max_tokens``, so they get it, unless the
    model is a reasoning model (served by a proxy that forwards to OpenAI).
    """
    official = (urlsplit(base_url).hostname or "").lower() == OFFICIAL_HOST
    return "max_completion_tokens" if official or is_reasoning_model(model) else "max_tokens"


def chat_body(request: Request, *, token_limit: str = "max_tokens") -> dict[str, Any]:
    """The body of a ``/chat/completions`` request, without ``model`` and ``stream``;
    ``max_tokens`` is sent under the name ``token_limit`` (see :func:`max_tokens_field`)."""
    body: dict[str, Any] = {"messages": [_message(m) for m in request.messages]}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": t.model_dump(mode="json")} for t in request.tools
        ]
    if request.tool_choice:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    body.update(sampling(request, request.stop, token_limit))
    if request.response_format is not None:
        body["response_format"] = _response_format(request.response_format)
    if request.reasoning_effort:
        body["reasoning_effort"] = request.reasoning_effort
    return body


def sampling(
    request: Request, stop: tuple[str, ...], max_tokens: str = "max_tokens"
) -> dict[str, Any]:
    """The sampling fields that are set; the token limit is sent under the name ``max_tokens``
    (``/completions`` knows only ``max_tokens``)."""
    values = {
        "temperature": request.temperature,
        "top_p": request.top_p,
        max_tokens: request.max_tokens,
        "seed": request.seed,
        "stop": list(stop) or None,
    }
    return {key: value for key, value in values.items() if value is not None}


# --- wire format: answers -------------------------------------------------------------------


def text(value: Any, what: str, provider: str) -> str | None:
    """Text of a content field: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(value, list):
        pieces = []
        for i, part in enumerate(value):
            part = expect(part, dict, f"{what}[{i}]", provider) or {}
            pieces.append(expect(part.get("text"), str, f"{what}[{i}].text", provider) or "")
        value = "".join(pieces)
    return expect(value, (str, list), what, provider) or None


def _count(data: Any, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) else 0


def usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        input_tokens=_count(data, "prompt_tokens"),
        cached_input_tokens=_count(data.get("prompt_tokens_details"), "cached_tokens"),
        output_tokens=_count(data, "completion_tokens"),
        reasoning_tokens=_count(data.get("completion_tokens_details"), "reasoning_tokens"),
    )


def arguments(value: Any) -> str:
    if isinstance(value, str):
        return value or "{}"
    return "{}" if value is None else orjson.dumps(value).decode()


def finish_reason(raw: Any, tool_calls: tuple[ToolCall, ...], provider: str) -> FinishReason:
    raw = expect(raw, str, "choices[0].finish_reason", provider)
    finish = _FINISH.get(raw, FinishReason.OTHER) if raw else FinishReason.STOP
    if tool_calls and finish == FinishReason.STOP:  # Ollama and others say "stop" here
        finish = FinishReason.TOOL_CALLS
    return finish


def tool_calls(message: dict[str, Any], provider: str) -> tuple[ToolCall, ...]:
    """The tool calls of a chat answer's ``message``."""
    where = "choices[0].message.tool_calls"
    calls = []
    for i, call in enumerate(expect(message.get("tool_calls"), list, where, provider) or ()):
        call = expect(call, dict, f"{where}[{i}]", provider) or {}
        function = expect(call.get("function"), dict, f"{where}[{i}].function", provider) or {}
        name = expect(function.get("name"), str, f"{where}[{i}].function.name", provider)
        if not name:
            raise MalformedResponseError(
                f"`{where}[{i}]` has no `function.name`", provider=provider
            )
        call_id = expect(call.get("id"), str, f"{where}[{i}].id", provider) or f"call_{i}"
        calls.append(
            ToolCall(id=call_id, name=name, arguments=arguments(function.get("arguments")))
        )
    return tuple(calls)


def first_choice(data: dict[str, Any], provider: str) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        problem = "no `choices`" if choices is None else "an empty or invalid `choices`"
        keys = ", ".join(sorted(data)) or "none"
        raise MalformedResponseError(f"the answer has {problem} (keys: {keys})", provider=provider)
    return choices[0]


def decode_chunk(data: str, provider: str) -> dict[str, Any]:
    """One streamed event as a JSON object; an ``error`` event interrupts the stream."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedResponseError(
            f"a stream event is not JSON ({exc}): {data[:200]!r}", provider=provider
        ) from exc
    if not isinstance(chunk, dict):
        raise MalformedResponseError("a stream event is not a JSON object", provider=provider)
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise StreamInterruptedError(
            f"the server reported an error mid-stream: {message}", provider=provider
        )
    return chunk


@dataclass
class _CallSlot:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamState:
    """What a stream delivered so far, reassembled into the shape of a plain answer."""

    provider: str = "openai"
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _CallSlot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    model: str = ""
    done: bool = False

    def feed(self, delta: dict[str, Any], on_chunk: ChunkCallback) -> None:
        provider = self.provider

        def delta_text(key: str) -> str | None:
            return text(delta.get(key), f"choices[0].delta.{key}", provider)

        reasoning = delta_text("reasoning_content") or delta_text("reasoning")
        if reasoning:
            self.reasoning.append(reasoning)
            on_chunk(StreamChunk(kind="reasoning", text=reasoning))
        content = delta_text("content") or delta_text("refusal")
        if content:
            self.content.append(content)
            on_chunk(StreamChunk(kind="content", text=content))
        calls = expect(delta.get("tool_calls"), list, "choices[0].delta.tool_calls", provider)
        for position, part in enumerate(calls or ()):
            if not isinstance(part, dict):
                continue
            index = part.get("index", position)
            slot = self.calls.setdefault(index if isinstance(index, int) else position, _CallSlot())
            where = f"choices[0].delta.tool_calls[{position}]"
            function = expect(part.get("function"), dict, f"{where}.function", provider) or {}
            slot.id = slot.id or expect(part.get("id"), str, f"{where}.id", provider)
            slot.name = slot.name or expect(
                function.get("name"), str, f"{where}.function.name", provider
            )
            fragment = function.get("arguments")
            if fragment is not None:  # a string fragment, or (some servers) the whole object
                slot.arguments.append(
                    fragment if isinstance(fragment, str) else arguments(fragment)
                )

    def answer(self, choice: dict[str, Any]) -> dict[str, Any]:
        """A plain (non-streamed) answer holding ``choice``, with what the stream said around it."""
        choice = {"index": 0, "finish_reason": self.finish_reason, **choice}
        return {"model": self.model, "choices": [choice], "usage": self.usage}

    def message(self) -> dict[str, Any]:
        calls = [
            {"id": s.id, "function": {"name": s.name, "arguments": "".join(s.arguments)}}
            for _, s in sorted(self.calls.items())
        ]
        content, reasoning = "".join(self.content), "".join(self.reasoning)
        return {"content": content, "reasoning_content": reasoning, "tool_calls": calls}
