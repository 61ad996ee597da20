"""The tool registry: look up, validate, run and record the calls a model asks for.

Every failure of a call becomes a value, never an exception and never text that looks like
output: an unknown tool, arguments that are not a JSON object or do not validate, the tool
raising, the tool running over its time limit, a result that is not JSON. The
:class:`ToolResult` then has ``ok=False``, ``error={"type", "message"}``, and its ``content``
(what the model sees) starts with ``Error:``.

With ``run=...`` each call is one ``tool`` effect::

    request = {"name", "version", "args", "call_id"}    # args: parsed, or the raw text
    result  = {"ok": true,  "value": ..., "content": "..."}
            | {"ok": false, "error": {"type", "message"}, "content": "Error: ..."}

The failure is caught inside the effect, so the record holds it as the effect's *result* (the
event carries no ``error``) and a replay serves it back exactly. The :class:`ToolResult` is
rebuilt from what the run returns (the redacted value), so the agent sees what was recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import pydantic_core

from rar.errors import CanonicalizationError
from rar.hashing import canonical
from rar.llm.types import Message, ToolCall, ToolSpec
from rar.tools._execution import call_async, call_sync
from rar.tools.core import Tool
from rar.tools.errors import (
    InvalidArgumentsError,
    InvalidResultError,
    ToolDefinitionError,
    UnknownToolError,
)

if TYPE_CHECKING:
    from rar.runtime.run import Run


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, success or failure, as the model and the record see it."""

    call_id: str
    name: str
    ok: bool
    content: str
    value: Any = None
    error: dict[str, str] | None = None

    @classmethod
    def success(cls, call: ToolCall, value: Any) -> ToolResult:
        """A result from a tool's return value (converted to JSON; refused if it is not)."""
        try:
            plain = pydantic_core.to_jsonable_python(value)
            canonical(plain)  # NaN, infinities, integers beyond 2**53 have no agreed JSON
        except (pydantic_core.PydanticSerializationError, CanonicalizationError) as exc:
            return cls.failure(
                call,
                InvalidResultError(f"tool {call.name!r} returned a value that is not JSON: {exc}"),
            )
        content = plain if isinstance(plain, str) else orjson.dumps(plain).decode()
        return cls(call_id=call.id, name=call.name, ok=True, content=content, value=plain)

    @classmethod
    def failure(cls, call: ToolCall, exc: BaseException) -> ToolResult:
        """A result from an exception: its type name and message."""
        message = str(exc) or "(no message)"
        error = {"type": type(exc).__name__, "message": message}
        return cls(
            call_id=call.id,
            name=call.name,
            ok=False,
            content=f"Error: {error['type']}: {message}",
            error=error,
        )

    @classmethod
    def from_json(cls, call: ToolCall, data: dict[str, Any]) -> ToolResult:
        """Rebuild a result from its JSON form (what a run returns, possibly redacted)."""
        ok = bool(data["ok"])
        return cls(
            call_id=call.id,
            name=call.name,
            ok=ok,
            content=str(data["content"]),
            value=data.get("value") if ok else None,
            error=None if ok else dict(data["error"]),
        )

    def to_json(self) -> dict[str, Any]:
        """``{"ok", "value" | "error", "content"}``: the recorded form."""
        if self.ok:
            return {"ok": True, "value": self.value, "content": self.content}
        return {"ok": False, "error": dict(self.error or {}), "content": self.content}

    def message(self) -> Message:
        """The ``tool`` message answering the call, flagged ``is_error`` on failure."""
        call = ToolCall(id=self.call_id, name=self.name)
        return Message.tool(call, self.content, is_error=not self.ok)


class ToolRegistry:
    """The tools an agent offers a model, in registration order."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with ``@tool``); usable as a decorator."""
        new = item if isinstance(item, Tool) else Tool(item)
        if new.name in self._tools:
            old = self._tools[new.name]
            raise ToolDefinitionError(
                f"a tool named {new.name!r} is already registered ({old!r}); "
                "give the new one another name with @tool(name=...)",
                name=new.name,
            )
        self._tools[new.name] = new
        return new

    def get(self, name: str) -> Tool:
        """The tool called ``name``; :class:`UnknownToolError` names the known tools."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(
                f"there is no tool {name!r}; the available tools are: {self._known()}", name=name
            ) from None

    def _known(self) -> str:
        return ", ".join(self._tools) or "(none)"

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The tools' specs for a model request, in registration order."""
        return [t.spec for t in self._tools.values()]

    def manifest(self) -> list[dict[str, str]]:
        """``[{"name", "version"}, ...]`` for ``rar.record(tools=...)``."""
        return [t.manifest_entry() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<ToolRegistry {self._known()}>"

    # --- one call ----------------------------------------------------------------------------

    def execute(self, call: ToolCall, *, run: Run | None = None) -> ToolResult:
        """Run one call (recorded as a ``tool`` effect when ``run`` is given)."""
        if run is None:
            return self._execute_now(call)
        data = run.effect("tool", self._request(call), lambda: self._execute_now(call).to_json())
        return ToolResult.from_json(call, data)

    async def aexecute(self, call: ToolCall, *, run: Run | None = None) -> ToolResult:
        """Run one call from async code; synchronous tools run in a worker thread."""
        if run is None:
            return await self._aexecute_now(call)

        async def perform() -> dict[str, Any]:
            return (await self._aexecute_now(call)).to_json()

        data = await run.aeffect("tool", self._request(call), perform)
        return ToolResult.from_json(call, data)

    def _request(self, call: ToolCall) -> dict[str, Any]:
        known = self._tools.get(call.name)
        args: Any
        try:
            args = call.parsed_arguments()
            canonical(args)
        except (ValueError, CanonicalizationError):
            args = call.arguments  # recorded as the model wrote it
        return {
            "name": call.name,
            "version": known.version if known else None,
            "args": args,
            "call_id": call.id,
        }

    def _prepare(self, call: ToolCall) -> tuple[Tool, dict[str, Any]] | ToolResult:
        try:
            found = self.get(call.name)
            try:
                arguments = call.parsed_arguments()
            except ValueError as exc:
                raise InvalidArgumentsError(str(exc)) from None
            return found, found.validate(arguments)
        except (UnknownToolError, InvalidArgumentsError) as exc:
            return ToolResult.failure(call, exc)

    def _execute_now(self, call: ToolCall) -> ToolResult:
        prepared = self._prepare(call)
        if isinstance(prepared, ToolResult):
            return prepared
        found, kwargs = prepared
        try:
            value = call_sync(found, kwargs)
        except Exception as exc:
            return ToolResult.failure(call, exc)
        return ToolResult.success(call, value)

    async def _aexecute_now(self, call: ToolCall) -> ToolResult:
        prepared = self._prepare(call)
        if isinstance(prepared, ToolResult):
            return prepared
        found, kwargs = prepared
        try:
            value = await call_async(found, kwargs)
        except Exception as exc:
            return ToolResult.failure(call, exc)
        return ToolResult.success(call, value)

    # --- several calls (a model's parallel tool calls) ------------------------------------------

    def execute_all(self, calls: Sequence[ToolCall], *, run: Run | None = None) -> list[ToolResult]:
        """Run calls one after another; results in the calls' order.

        With ``run``, call ``i`` runs in span ``tool-{i}`` of the current span, exactly as
        :meth:`aexecute_all` records it, so either can serve the other's record.
        """
        if run is None:
            return [self._execute_now(call) for call in calls]
        results = []
        for i, call in enumerate(calls):
            with run.span(f"tool-{i}", tool=call.name):
                results.append(self.execute(call, run=run))
        return results

    async def aexecute_all(
        self, calls: Sequence[ToolCall], *, run: Run | None = None
    ) -> list[ToolResult]:
        """Run calls concurrently; results in the calls' order.

        With ``run``, call ``i`` runs in its own span ``tool-{i}``; the spans are opened in call
        order (each task waits until the previous one has opened its span) so the span paths and
        each effect's identity do not depend on which call finishes first.
        """
        calls = list(calls)
        if run is None:
            return list(await asyncio.gather(*(self._aexecute_now(call) for call in calls)))
        opened = [asyncio.Event() for _ in calls]

        async def one(i: int, call: ToolCall) -> ToolResult:
            try:
                if i:
                    await opened[i - 1].wait()
                with run.span(f"tool-{i}", tool=call.name):
                    opened[i].set()
                    return await self.aexecute(call, run=run)
            finally:
                opened[i].set()

        return list(await asyncio.gather(*(one(i, call) for i, call in enumerate(calls))))
