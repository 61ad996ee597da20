"""Response handlers: how an agent's answer becomes context keys.

A handler has ``handle(context, response) -> bool``. Returning ``False`` or raising means the
answer could not be used: the flow asks the model once more with the handler's
``repair_instruction(problem)`` added to the last user turn (2 attempts in all; each is a
recorded model call), then marks the split failed. A handler may also have
``before_stream(context)`` and ``on_chunk(context, chunk)``, called when the flow streams.

* :class:`TextHandler` — the answer's text under ``key``, its reasoning under
  ``<key>_reasoning``; streams chunk by chunk into both keys;
* :class:`AccumulateHandler` — appends each answer to the list under ``key``;
* :class:`JsonHandler` — parses the first ``{`` … last ``}`` leniently (trailing commas, single
  quotes, comments, unquoted keys: JSON5) and flattens it into list-valued keys named
  ``prefix + field``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from rar.flow.context import FlowContext
from rar.llm.types import Response, StreamChunk

REPAIR = (
    "Your previous answer could not be used ({problem}). Answer the request above again, "
    "following its instructions exactly."
)
JSON_REPAIR = (
    "Your previous answer was not a valid JSON object ({problem}). Answer again with only one "
    "JSON object, nothing before or after it."
)


class HandlerError(ValueError):
    """A handler's reason to refuse an answer (its message goes into the repair prompt)."""


@runtime_checkable
class ResponseHandler(Protocol):
    def handle(self, context: FlowContext, response: Response) -> bool: ...


def repair_instruction(handler: Any, problem: str) -> str:
    """The instruction that asks the model to try again, from the handler when it has one."""
    custom = getattr(handler, "repair_instruction", None)
    if callable(custom):
        return str(custom(problem))
    return REPAIR.format(problem=problem)


class TextHandler:
    """The answer's text under ``key`` (after ``transform``), reasoning under ``<key>_reasoning``.

    ``transform(text) -> text`` may raise :class:`HandlerError` (or return ``None``) to ask for
    another attempt; ``on_update(context, chunk)`` is called after each streamed chunk.
    """

    def __init__(
        self,
        key: str = "response",
        *,
        transform: Callable[[str], str | None] | None = None,
        on_update: Callable[[FlowContext, StreamChunk], None] | None = None,
    ) -> None:
        self.key = key
        self.transform = transform
        self.on_update = on_update

    @property
    def reasoning_key(self) -> str:
        return f"{self.key}_reasoning"

    def before_stream(self, context: FlowContext) -> None:
        context[self.key] = ""
        context[self.reasoning_key] = ""

    def on_chunk(self, context: FlowContext, chunk: StreamChunk) -> None:
        key = self.reasoning_key if chunk.kind == "reasoning" else self.key
        context[key] = str(context.get(key) or "") + chunk.text
        if self.on_update is not None:
            self.on_update(context, chunk)

    def handle(self, context: FlowContext, response: Response) -> bool:
        text = response.content or ""
        if self.transform is not None:
            transformed = self.transform(text)
            if transformed is None:
                return False
            text = transformed
        context[self.key] = text
        if response.reasoning:
            context[self.reasoning_key] = response.reasoning
        elif self.reasoning_key in context and not context[self.reasoning_key]:
            del context.values[self.reasoning_key]
        return True


class AccumulateHandler:
    """Appends each answer (after ``transform``) to the list under ``key``; never retries."""

    def __init__(self, key: str, *, transform: Callable[[str], str] | None = None) -> None:
        self.key = key
        self.transform = transform

    def handle(self, context: FlowContext, response: Response) -> bool:
        text = response.content or ""
        context.add(self.key, self.transform(text) if self.transform else text)
        return True


class JsonHandler:
    """Lenient JSON into list-valued keys ``prefix + field`` (see :func:`flatten_json`)."""

    def __init__(self, prefix: str = "", *, required: tuple[str, ...] = ()) -> None:
        self.prefix = prefix
        self.required = required

    def repair_instruction(self, problem: str) -> str:
        return JSON_REPAIR.format(problem=problem)

    def handle(self, context: FlowContext, response: Response) -> bool:
        parsed = parse_json_object(response.content or "")
        missing = [name for name in self.required if name not in parsed]
        if missing:
            raise HandlerError(f"the object has no {', '.join(repr(m) for m in missing)}")
        for name, values in flatten_json(parsed).items():
            key = self.prefix + name
            existing = context.get(key)
            if isinstance(existing, list):
                existing.extend(values)
            else:
                context[key] = values
        return True


def parse_json_object(text: str) -> dict[str, Any]:
    """The object between the first ``{`` and the last ``}`` of ``text``, parsed as JSON5.

    Raises :class:`HandlerError` saying what was wrong (no object, or where it failed to parse).
    """
    import json5

    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise HandlerError("the answer holds no {...} object")
    try:
        value = json5.loads(text[start : end + 1])
    except ValueError as exc:
        raise HandlerError(f"it does not parse: {exc}") from None
    if not isinstance(value, dict):  # pragma: no cover - braces always give an object
        raise HandlerError("the answer's {...} is not an object")
    return value


def flatten_json(value: dict[str, Any]) -> dict[str, list[Any]]:
    """Flatten an object into ``{field: [values]}``, lm-lib's way.

    A scalar field gives one entry; an array gives an entry per scalar element, and its objects
    are flattened in turn (their fields become keys of their own); an object-valued field gives
    all its scalar leaves under the field's name. Strings stay strings, numbers numbers.
    """
    out: dict[str, list[Any]] = {}

    def put(name: str, item: Any) -> None:
        out.setdefault(name, []).append(item)

    def leaves(item: Any) -> list[Any]:
        if isinstance(item, dict):
            return [leaf for inner in item.values() for leaf in leaves(inner)]
        if isinstance(item, list):
            return [leaf for inner in item for leaf in leaves(inner)]
        return [item]

    def field(name: str, item: Any) -> None:
        if isinstance(item, list):
            if not item:
                out.setdefault(name, [])
            for element in item:
                if isinstance(element, dict):
                    for inner_name, inner in element.items():
                        field(inner_name, inner)
                else:
                    for leaf in leaves(element):
                        put(name, leaf)
        elif isinstance(item, dict):
            out.setdefault(name, [])
            for leaf in leaves(item):
                put(name, leaf)
        else:
            put(name, item)

    for name, item in value.items():
        field(str(name), item)
    return out
