"""A tool: a Python function a model may call, described by a JSON Schema derived from its hints.

::

    @tool
    def lookup(symbol: str, limit: int = 5) -> list[str]:
        \"\"\"Find compounds whose formula contains a symbol.

        Args:
            symbol: the element symbol, such as "Fe".
            limit: at most this many results.
        \"\"\"

``lookup.spec`` is the :class:`~rar.llm.types.ToolSpec` sent to the model; ``lookup("Fe")`` still
calls the function directly. Arguments from a model are validated with pydantic before the call
(:meth:`Tool.validate`); running a call with validation, timeouts and recording is the job of
:class:`~rar.tools.registry.ToolRegistry`.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import pydantic

from rar.llm.types import ToolSpec
from rar.tools._docstrings import parse_docstring
from rar.tools._schema import arguments_model, json_schema, validation_message
from rar.tools.errors import ToolDefinitionError

F = TypeVar("F", bound=Callable[..., Any])
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Tool:
    """A callable tool: ``name``, ``description``, ``version``, ``parameters``, ``timeout``.

    ``timeout`` (seconds, or None for no limit) is enforced by the registry: an ``async`` tool is
    cancelled when it runs over; a synchronous tool runs in a daemon worker thread and the caller
    stops waiting for it, because a Python thread cannot be killed (the thread runs on until the
    function returns; its result is discarded).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        version: str | int = "1",
        timeout: float | None = None,
    ) -> None:
        if not callable(fn):
            raise ToolDefinitionError(f"a tool needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what model providers accept); pass @tool(name=...)"
            )
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or timeout <= 0
            or not math.isfinite(timeout)
        ):
            raise ToolDefinitionError(
                f"tool {self.name!r}: timeout must be a positive number of seconds or None"
            )
        summary, arg_docs = parse_docstring(inspect.getdoc(fn))
        self.description = summary if description is None else description
        self.version = str(version)
        self.timeout: float | None = None if timeout is None else float(timeout)
        call_method = getattr(type(fn), "__call__", None)  # noqa: B004 - async __call__
        self.is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isroutine(fn) and inspect.iscoroutinefunction(call_method)
        )
        self.arguments = arguments_model(fn, self.name, arg_docs)
        self.parameters: dict[str, Any] = json_schema(self.arguments, self.name)
        functools.update_wrapper(self, fn, updated=())

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def manifest_entry(self) -> dict[str, str]:
        """``{"name", "version"}``, for a run manifest's ``tools`` list."""
        return {"name": self.name, "version": self.version}

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments converted by their types (defaults filled in).

        Raises :class:`InvalidArgumentsError` naming every bad field.
        """
        try:
            model = self.arguments.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            raise validation_message(self.name, exc) from None
        return {field: getattr(model, field) for field in type(model).model_fields}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly: no validation, no timeout, no recording."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        kind = "async " if self.is_async else ""
        return f"<{kind}Tool {self.name} v{self.version}>"


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    version: str | int = "1",
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    version: str | int = "1",
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a function: ``@tool`` or ``@tool(name=..., timeout=...)``.

    The name defaults to the function's name, the description to its docstring's summary and
    body (never its sections), each argument's description to its entry in the docstring's
    arguments section, in Google, NumPy, Sphinx or Epydoc style (an
    ``Annotated[..., Field(description=...)]`` wins). Arguments without a default
    are required. Any type pydantic can validate works: nested models, lists, enums, literals.
    """

    def wrap(function: Callable[..., Any]) -> Tool:
        return Tool(function, name=name, description=description, version=version, timeout=timeout)

    return wrap if fn is None else wrap(fn)
