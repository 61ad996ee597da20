"""Built-in tools: a safe :func:`calculator` and a guarded :func:`http_get`."""

from __future__ import annotations

from rar.tools.builtins._netguard import NetworkPolicy, address_problem
from rar.tools.builtins.calculator import calculator, evaluate
from rar.tools.builtins.web import fetch, http_get, make_http_get

__all__ = [
    "NetworkPolicy",
    "address_problem",
    "calculator",
    "evaluate",
    "fetch",
    "http_get",
    "make_http_get",
]
