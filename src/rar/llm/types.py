"""Provider-neutral model types: messages, tool specs, requests, responses, usage.

Every provider translates these to and from its wire format; everything above the providers
(the client, the cache, the agent loop, the record) speaks only these. They are frozen pydantic
models: a :class:`Message` computes its canonical JSON and digest once (:attr:`Message.canonical`)
and every later request that carries it reuses them, so keying a long conversation costs only
its new messages.
"""

from __future__ import annotations

import enum
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from rar.hashing import Canonical

Role = Literal["system", "user", "assistant", "tool"]
_CANONICAL = attrgetter("canonical")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def plain(self) -> dict[str, Any]:
        """JSON-able dict without fields left at their defaults (the canonical shape)."""
        return self.model_dump(mode="json", exclude_defaults=True, by_alias=True)


class ToolCall(_Frozen):
    """A call the model asked for. ``arguments`` is the JSON text exactly as the model wrote it."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ``ValueError`` naming the problem when they are not."""
        try:
            value = orjson.loads(self.arguments or "{}")
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"arguments of {self.name!r} are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(
                f"arguments of {self.name!r} must be a JSON object, got {type(value).__name__}"
            )
        return value


class Message(_Frozen):
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = Field(default=None, description="for role=tool: the call answered")
    name: str | None = Field(default=None, description="for role=tool: the tool's name")
    reasoning: str | None = Field(default=None, description="reasoning content, where exposed")
    is_error: bool = Field(default=False, description="for role=tool: the tool failed")

    @cached_property
    def canonical(self) -> Canonical:
        """Canonical JSON and digest of this message, computed once."""
        return Canonical(self.plain())

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(
        cls, content: str | None = None, tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()
    ) -> Message:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        return cls(
            role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=is_error
        )


class ToolSpec(_Frozen):
    """A tool the model may call: its name, description and JSON Schema of the arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ResponseFormat(_Frozen):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    json_schema: dict[str, Any] | None = None
    strict: bool | None = None


class Request(_Frozen):
    """What is asked of a model, independent of the provider."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = Field(
        default=None, description="'auto', 'none', 'required', or the name of one tool"
    )
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed"] | None = Field(
        default=None,
        description="how much of its reasoning a model should summarise (OpenAI's Responses "
        "API); carried and keyed, not sent by the chat-completions providers",
    )

    def payload(self, memo: ConversationMemo | None = None) -> dict[str, Any]:
        """The request as a JSON value for hashing and recording (messages pre-hashed).

        Fields left at their defaults are left out, so a field added later (such as
        ``reasoning_summary``) changes no digest of a request recorded before it existed.
        ``memo`` (one per caller that sends a growing conversation) reuses the previous
        request's message parts when this request's messages begin with the same messages.
        """
        data = self.model_dump(
            mode="json", exclude_defaults=True, by_alias=True, exclude={"messages"}
        )
        if memo is None:
            # map + attrgetter: ~5x faster than a comprehension over pydantic instances
            data["messages"] = list(map(_CANONICAL, self.messages))
        else:
            data["messages"] = memo.parts(self.messages)
        return data

    def extend(self, *messages: Message, **changes: Any) -> Request:
        """A copy with ``messages`` appended (and other fields changed)."""
        return self.model_copy(update={"messages": (*self.messages, *messages), **changes})


class ConversationMemo:
    """The canonical parts of the messages of the last request a caller made.

    A conversation is sent whole at every call, so listing every message's canonical part
    costs O(n) Python steps per call. When the next request's messages begin with the same
    message objects (checked by a tuple comparison, which for the same objects is one pointer
    test each, in C), only the new messages are looked at. Messages are immutable, so the same
    object has the same canonical part; an equal but different object compares equal only when
    its fields are equal, which gives the same part too. Anything else lists every message.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        # (messages, their parts) as one value: threads sharing a client read and replace it whole
        self._last: tuple[tuple[Message, ...], tuple[Canonical, ...]] = ((), ())

    def parts(self, messages: tuple[Message, ...]) -> list[Canonical]:
        seen, parts = self._last
        known = len(seen)
        if known and len(messages) >= known and messages[:known] == seen:
            fresh = [*parts, *map(_CANONICAL, messages[known:])]
        else:
            fresh = list(map(_CANONICAL, messages))
        self._last = (messages, tuple(fresh))
        return fresh


class Usage(_Frozen):
    """Tokens of one call (or a sum of calls).

    ``input_tokens`` counts the whole prompt, whatever the provider's convention: of it,
    ``cached_input_tokens`` were read from the provider's prompt cache and
    ``cache_write_input_tokens`` were written to it (Anthropic's cache writes, billed above the
    input price). ``reasoning_tokens`` are part of ``output_tokens``.
    """

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields}
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            **{name: getattr(self, name) - getattr(other, name) for name in type(self).model_fields}
        )


class FinishReason(enum.StrEnum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


class Response(_Frozen):
    """What a model answered."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    finish_reason: FinishReason = FinishReason.STOP
    usage: Usage = Usage()
    model: str = Field(default="", description="the model id the provider says served it")
    provider: str = ""

    @property
    def message(self) -> Message:
        """The answer as an assistant message, ready to append to the conversation."""
        return Message(
            role="assistant",
            content=self.content,
            tool_calls=self.tool_calls,
            reasoning=self.reasoning,
        )

    @property
    def truncated(self) -> bool:
        return self.finish_reason == FinishReason.LENGTH


class StreamChunk(_Frozen):
    """A piece of a streamed answer, delivered to callbacks as it arrives."""

    kind: Literal["content", "reasoning"]
    text: str
