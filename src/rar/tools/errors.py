"""Exceptions of the tool layer.

Most tool failures never raise: :meth:`ToolRegistry.execute` turns them into error *values*
(:class:`~rar.tools.registry.ToolResult` with ``ok=False``) whose ``error["type"]`` is one of
the names below, the tool's own exception type, or ``TimeoutError``. These classes are raised
when a tool is defined or looked up wrongly, and by the built-ins (their type names are what the
model and the record see).
"""

from __future__ import annotations

from rar.errors import RarError, UserError


class ToolDefinitionError(UserError):
    """A function cannot become a tool, or a registry already holds a tool of that name."""


class UnknownToolError(UserError, KeyError):
    """No tool of that name is registered (the message names the known tools)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class InvalidArgumentsError(UserError):
    """A call's arguments are not a JSON object or do not validate (names the bad fields)."""


class InvalidResultError(UserError):
    """A tool returned a value that is not JSON (NaN, huge integers, arbitrary objects)."""


class CalculatorError(UserError):
    """The calculator refused an expression or could not evaluate it."""


class URLRefusedError(UserError):
    """``http_get`` refused a URL: its scheme, its host, or an address the host resolves to."""


class FetchError(RarError):
    """``http_get`` could not complete a request (connection failed, too many redirects)."""
