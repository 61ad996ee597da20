"""Provider wire bodies lifted back to RAR's provider-neutral :class:`~rar.llm.types.Request`.

RAR's providers turn a neutral request into a wire body (:mod:`rar.llm.providers`). Here the
body an SDK sent is read back into a neutral request, which is accepted only when RAR's own
provider code renders it into the very same body (compared as canonical JSON, the equivalence
the record's digests use). A request accepted this way is recorded exactly as a
:class:`~rar.llm.client.Client` call records it, so both share one cache; anything the neutral
form cannot say (another field, a content-part list, a ``developer`` role, an image) makes the
lift return None, and the request is recorded as its wire body instead. No two different bodies
are ever recorded alike.

The only rewrites made before comparing are documented equivalences of the wire formats:
Anthropic's string ``content`` is its one-text-block list; Gemini's ``systemInstruction`` is
read without its ``role``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from pydantic import ValidationError

from rar.errors import RarError
from rar.hashing import canonical
from rar.llm.types import Message, Request, ResponseFormat, ToolCall, ToolSpec

Lifted = Request | None


def _same(rendered: Any, sent: Any) -> bool:
    try:
        return canonical(rendered) == canonical(sent)
    except RarError:
        return False


def _attempt(build: Callable[[], Request], render: Callable[[Request], Any], sent: Any) -> Lifted:
    """``build()`` when ``render`` of it gives back ``sent``; None on any failure."""
    try:
        request = build()
        return request if _same(render(request), sent) else None
    except (ValidationError, RarError, KeyError, TypeError, ValueError, AttributeError):
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


def _optional(body: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise TypeError(f"{key} is not {kind}")
    return value


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(_text(v) for v in value)


# --- OpenAI chat completions -------------------------------------------------------------------


def openai_chat(body: dict[str, Any]) -> Lifted:
    """The neutral request of a ``/chat/completions`` body (``stream`` fields already taken
    out), or None."""
    from rar.llm.providers import _openai_wire as wire

    token_limit = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"

    def build() -> Request:
        messages = tuple(_openai_message(m) for m in body["messages"])
        tools = tuple(
            ToolSpec(
                name=_text(t["function"]["name"]),
                description=t["function"].get("description", ""),
                parameters=t["function"].get("parameters", {"type": "object", "properties": {}}),
            )
            for t in body.get("tools") or ()
        )
        return Request(
            model=_text(body["model"]),
            messages=messages,
            tools=tools,
            tool_choice=_openai_tool_choice(body.get("tool_choice")),
            temperature=_optional(body, "temperature", (int, float)),
            top_p=_optional(body, "top_p", (int, float)),
            max_tokens=_optional(body, token_limit, int),
            stop=_stop(body.get("stop")),
            seed=_optional(body, "seed", int),
            response_format=_openai_format(body.get("response_format")),
            reasoning_effort=body.get("reasoning_effort"),
        )

    def render(request: Request) -> dict[str, Any]:
        return {"model": request.model, **wire.chat_body(request, token_limit=token_limit)}

    return _attempt(build, render, body)


def _openai_message(wire: dict[str, Any]) -> Message:
    calls = tuple(
        ToolCall(
            id=_text(c["id"]),
            name=_text(c["function"]["name"]),
            arguments=_text(c["function"]["arguments"]),
        )
        for c in wire.get("tool_calls") or ()
    )
    content = wire.get("content")
    return Message(
        role=wire["role"],
        content=None if content is None else _text(content),
        tool_calls=calls,
        tool_call_id=wire.get("tool_call_id"),
    )


def _openai_tool_choice(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _text(value["function"]["name"])


def _openai_format(value: Any) -> ResponseFormat | None:
    if value is None:
        return None
    if value.get("type") != "json_schema":
        return ResponseFormat(type=value["type"])
    schema = value["json_schema"]
    return ResponseFormat(
        type="json_schema",
        name=schema.get("name"),
        json_schema=schema.get("schema"),
        strict=schema.get("strict"),
    )


# --- Anthropic messages --------------------------------------------------------------------------


def anthropic_messages(body: dict[str, Any]) -> Lifted:
    """The neutral request of a ``/v1/messages`` body (without ``stream``), or None."""
    from rar.llm.providers import _anthropic_wire as wire

    sent = {**body, "messages": [_anthropic_blocks(m) for m in body.get("messages") or ()]}

    def build() -> Request:
        messages: list[Message] = []
        system = body.get("system")
        if system is not None:
            messages.append(Message.system(_text(system)))
        for turn in sent["messages"]:
            messages.extend(_anthropic_turn(turn))
        tools = tuple(
            ToolSpec(
                name=_text(t["name"]),
                description=t.get("description", ""),
                parameters=t["input_schema"],
            )
            for t in body.get("tools") or ()
        )
        return Request(
            model=_text(body["model"]),
            messages=tuple(messages),
            tools=tools,
            tool_choice=_anthropic_tool_choice(body.get("tool_choice")),
            temperature=_optional(body, "temperature", (int, float)),
            top_p=_optional(body, "top_p", (int, float)),
            max_tokens=_optional(body, "max_tokens", int),
            stop=_stop(body.get("stop_sequences")),
        )

    return _attempt(build, wire.build_body, sent)


def _anthropic_blocks(turn: Any) -> Any:
    """A turn whose string ``content`` is written as its one text block (the same thing)."""
    if isinstance(turn, dict) and isinstance(turn.get("content"), str):
        return {**turn, "content": [{"type": "text", "text": turn["content"]}]}
    return turn


def _anthropic_turn(turn: dict[str, Any]) -> list[Message]:
    role = turn["role"]
    if role == "assistant":
        texts = [b for b in turn["content"] if b["type"] == "text"]
        calls = [b for b in turn["content"] if b["type"] == "tool_use"]
        if len(texts) + len(calls) != len(turn["content"]) or len(texts) > 1:
            raise ValueError("an assistant turn RAR would not write")
        if texts and calls and turn["content"][0]["type"] != "text":
            raise ValueError("text after tool calls")
        return [
            Message.assistant(
                _text(texts[0]["text"]) if texts else None,
                [
                    ToolCall(
                        id=_text(c["id"]),
                        name=_text(c["name"]),
                        arguments=orjson.dumps(c["input"], option=orjson.OPT_SORT_KEYS).decode(),
                    )
                    for c in calls
                ],
            )
        ]
    if role != "user":
        raise ValueError(f"role {role!r}")
    messages = []
    for block in turn["content"]:
        if block["type"] == "text":
            messages.append(Message.user(_text(block["text"])))
        elif block["type"] == "tool_result":
            content = block.get("content")
            messages.append(
                Message(
                    role="tool",
                    content=None if content is None else _text(content),
                    tool_call_id=_text(block["tool_use_id"]),
                    is_error=bool(block.get("is_error", False)),
                )
            )
        else:
            raise ValueError(f"block {block['type']!r}")
    return messages


def _anthropic_tool_choice(value: Any) -> str | None:
    if value is None:
        return None
    kind = value["type"]
    if kind in ("auto", "none"):
        return str(kind)
    if kind == "any":
        return "required"
    return _text(value["name"])


# --- Gemini generateContent ----------------------------------------------------------------------

_GEMINI_CONFIG = {
    "temperature": "temperature",
    "topP": "top_p",
    "maxOutputTokens": "max_tokens",
    "seed": "seed",
}


def gemini_generate(body: dict[str, Any], model: str) -> Lifted:
    """The neutral request of a ``models/{model}:generateContent`` body, or None."""
    from rar.llm.providers import _google as wire

    sent = dict(body)
    instruction = body.get("systemInstruction")
    if isinstance(instruction, dict) and instruction.get("role") == "user":
        sent["systemInstruction"] = {k: v for k, v in instruction.items() if k != "role"}

    def build() -> Request:
        messages: list[Message] = []
        if instruction is not None:
            messages.extend(Message.system(_text(p["text"])) for p in instruction["parts"])
        for content in body["contents"]:
            messages.extend(_gemini_content(content))
        config = dict(body.get("generationConfig") or {})
        fields: dict[str, Any] = {}
        for key, name in _GEMINI_CONFIG.items():
            if key in config:
                fields[name] = config[key]
        if "stopSequences" in config:
            fields["stop"] = _stop(config["stopSequences"])
        return Request(model=model, messages=tuple(messages), **fields)

    return _attempt(build, wire.build_body, sent)


def _gemini_content(content: dict[str, Any]) -> list[Message]:
    role, parts = content.get("role", "user"), content["parts"]
    if role == "model":
        texts = [p for p in parts if set(p) == {"text"}]
        calls = [p["functionCall"] for p in parts if set(p) == {"functionCall"}]
        if len(texts) + len(calls) != len(parts) or len(texts) > 1:
            raise ValueError("a model turn RAR would not write")
        from rar.llm.providers._google import generated_id

        return [
            Message.assistant(
                _text(texts[0]["text"]) if texts else None,
                [
                    ToolCall(
                        id=_text(c["id"]) if "id" in c else generated_id(c["name"], i),
                        name=_text(c["name"]),
                        arguments=orjson.dumps(
                            c.get("args", {}), option=orjson.OPT_SORT_KEYS
                        ).decode(),
                    )
                    for i, c in enumerate(calls)
                ],
            )
        ]
    if role != "user":
        raise ValueError(f"role {role!r}")
    if len(parts) == 1 and set(parts[0]) == {"text"}:
        return [Message.user(_text(parts[0]["text"]))]
    messages = []
    for part in parts:
        answer = part["functionResponse"]
        result = answer["response"]
        error = set(result) == {"error"} and isinstance(result["error"], str)
        text = result["error"] if error else orjson.dumps(result).decode()
        if set(result) == {"content"} and isinstance(result["content"], str):
            text = result["content"]
        messages.append(
            Message(
                role="tool",
                content=text,
                name=_text(answer["name"]),
                tool_call_id=answer.get("id"),
                is_error=error,
            )
        )
    return messages
