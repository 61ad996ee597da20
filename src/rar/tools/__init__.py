"""Tools a model can call: definition, validation, execution and recording.

::

    from rar.tools import ToolRegistry, default_tools, tool

    @tool
    def convert(value: float, unit: Literal["K", "C"]) -> float:
        \"\"\"Convert a temperature.

        Args:
            value: the temperature.
            unit: the unit of ``value``; the other one is returned.
        \"\"\"
        return value - 273.15 if unit == "K" else value + 273.15

    registry = default_tools()          # calculator, http_get
    registry.register(convert)
    request = request.model_copy(update={"tools": tuple(registry.specs())})
    ...
    results = registry.execute_all(response.tool_calls, run=run)   # recorded, in call order
    messages += [result.message() for result in results]

Failures (unknown tool, bad arguments, the tool raising or timing out) come back as
:class:`ToolResult` values with ``ok=False``; see :mod:`rar.tools.registry`.
"""

from __future__ import annotations

from rar.tools.builtins import calculator, http_get, make_http_get
from rar.tools.core import Tool, tool
from rar.tools.errors import (
    CalculatorError,
    FetchError,
    InvalidArgumentsError,
    InvalidResultError,
    ToolDefinitionError,
    UnknownToolError,
    URLRefusedError,
)
from rar.tools.registry import ToolRegistry, ToolResult


def default_tools() -> ToolRegistry:
    """A new registry holding the built-ins: ``calculator`` and ``http_get`` (public hosts)."""
    return ToolRegistry([calculator, http_get])


__all__ = [
    "CalculatorError",
    "FetchError",
    "InvalidArgumentsError",
    "InvalidResultError",
    "Tool",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "URLRefusedError",
    "UnknownToolError",
    "calculator",
    "default_tools",
    "http_get",
    "make_http_get",
    "tool",
]
