"""A safe calculator: arithmetic from a syntax tree, never ``eval``.

Allowed: numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the constants ``pi`` and
``e`` and the functions ``log`` (natural, or ``log(x, base)``), ``log10``, ``exp``, ``sqrt``,
``sin``, ``cos``, ``tan``, ``abs``, ``round``, ``min``, ``max``. Everything else (names,
attributes, strings, comparisons, lambdas, subscripts, calls of anything else) is refused with
a message saying what was found and what is allowed.

Work is bounded: the expression is at most :data:`MAX_LENGTH` characters and :data:`MAX_NODES`
syntax nodes, nested at most :data:`MAX_DEPTH` deep; integers stay below :data:`MAX_INT_BITS`
bits (``9**9**9`` is refused before it is computed); floats must stay finite. An integer result
beyond ±(2**53 − 1), where JSON readers disagree, is returned as a float.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from rar.hashing import MAX_SAFE_INTEGER
from rar.tools.core import tool
from rar.tools.errors import CalculatorError

MAX_LENGTH = 1000
MAX_NODES = 400
MAX_DEPTH = 60
MAX_INT_BITS = 4096

Number = int | float

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _round(x: Number, digits: int | None = None) -> Number:
    if digits is not None and not isinstance(digits, int):
        raise CalculatorError("round(x, digits): digits must be an integer")
    return round(x) if digits is None else round(x, digits)


# name -> (function, minimum arguments, maximum arguments or None for any number)
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "exp": (math.exp, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 1, None),
    "max": (max, 1, None),
}

_BINARY: dict[type[ast.operator], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
}
_ALLOWED = (
    "numbers, + - * / // % **, parentheses, the constants pi and e, and the functions "
    + ", ".join(FUNCTIONS)
)


def evaluate(expression: str) -> Number:
    """Evaluate ``expression``; raise :class:`CalculatorError` saying why when it cannot."""
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(
            f"the expression is {len(expression)} characters long; the limit is {MAX_LENGTH}"
        )
    if not expression.strip():
        raise CalculatorError("the expression is empty")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        detail = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        raise CalculatorError(f"not a valid arithmetic expression ({detail})") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise CalculatorError(f"the expression has {nodes} parts; the limit is {MAX_NODES}")
    return _result(_eval(tree.body, 0))


def _result(value: Number) -> Number:
    if isinstance(value, int) and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        try:
            return float(value)  # JSON readers disagree beyond 2**53: hand back a float
        except OverflowError:
            raise CalculatorError("the result is too large to represent") from None
    return value


def _eval(node: ast.expr, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"the expression is nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CalculatorError(f"{value!r} is not a number; allowed: {_ALLOWED}")
        return _check(value)
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in FUNCTIONS:
            raise CalculatorError(f"{node.id} is a function: call it, as in {node.id}(2)")
        raise CalculatorError(
            f"unknown name {node.id!r}; the only names are pi and e (allowed: {_ALLOWED})"
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _eval(node.operand, depth + 1)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise CalculatorError("'^' is not allowed; write powers with '**', as in 2**10")
        if type(node.op) not in _BINARY:
            raise CalculatorError(
                f"the operator {type(node.op).__name__} is not allowed; allowed: {_ALLOWED}"
            )
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        return _binary(node.op, left, right)
    if isinstance(node, ast.Call):
        return _call(node, depth)
    if isinstance(node, ast.Attribute):
        raise CalculatorError(
            f"attribute access (.{node.attr}) is not allowed; allowed: {_ALLOWED}"
        )
    what = {
        ast.Lambda: "lambda expressions",
        ast.Subscript: "subscripts",
        ast.Compare: "comparisons",
        ast.BoolOp: "'and'/'or'",
        ast.JoinedStr: "strings",
        ast.NamedExpr: "assignments",
    }.get(type(node), f"{type(node).__name__} nodes")
    raise CalculatorError(f"{what} are not allowed; allowed: {_ALLOWED}")


def _short(value: Number) -> str:
    text = repr(value)
    if len(text) > 24:
        text = f"{text[:10]}...({len(text)} digits)"
    return f"({text})" if value < 0 else text


def _binary(op: ast.operator, left: Number, right: Number) -> Number:
    symbol, function = _BINARY[type(op)]
    shown = f"{_short(left)} {symbol} {_short(right)}"
    if isinstance(op, ast.Pow):
        _check_power(left, right)
    elif (
        isinstance(op, ast.Mult)
        and isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS
    ):
        raise CalculatorError(f"the product is too large (over {MAX_INT_BITS} bits)")
    try:
        value = function(left, right)
    except ZeroDivisionError:
        raise CalculatorError(f"division by zero in {shown}") from None
    except OverflowError:
        raise CalculatorError(f"{shown} is too large") from None
    if isinstance(value, complex):
        raise CalculatorError(f"{shown} is not a real number")
    return _check(value, shown)


def _check_power(base: Number, exponent: Number) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        bits = exponent * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise CalculatorError(
                f"{_short(base)} ** {_short(exponent)} is too large (about {bits:.3g} bits; "
                f"the limit is {MAX_INT_BITS} bits)"
            )


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name):
        raise CalculatorError(f"only these functions can be called: {', '.join(FUNCTIONS)}")
    name = node.func.id
    if name not in FUNCTIONS:
        raise CalculatorError(
            f"the function {name!r} is not allowed; the functions are {', '.join(FUNCTIONS)}"
        )
    if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
        raise CalculatorError(f"{name}() takes plain positional arguments only")
    function, least, most = FUNCTIONS[name]
    if len(node.args) < least or (most is not None and len(node.args) > most):
        expected = str(least) if least == most else f"{least} to {most or 'any number of'}"
        raise CalculatorError(f"{name}() takes {expected} argument(s), got {len(node.args)}")
    args = [_eval(arg, depth + 1) for arg in node.args]
    shown = f"{name}({', '.join(_short(a) for a in args)})"
    try:
        value = function(*args)
    except (ValueError, ZeroDivisionError):
        raise CalculatorError(f"{shown} is undefined (math domain error)") from None
    except OverflowError:
        raise CalculatorError(f"{shown} is too large") from None
    return _check(value, shown)


def _check(value: Number, what: str = "a number") -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError(f"{what} is too large (not a finite number)")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"{what} is too large (over {MAX_INT_BITS} bits)")
    return value


@tool(name="calculator", version="1")
def calculator(
    expression: Annotated[str, Field(min_length=1, max_length=MAX_LENGTH)],
) -> float | int:
    """Evaluate an arithmetic expression exactly as written and return the number.

    Supports + - * / // % ** (power), parentheses, the constants pi and e, and the functions
    log(x) (natural; log(x, base) for another base), log10, exp, sqrt, sin, cos, tan (radians),
    abs, round(x[, digits]), min and max.

    Args:
        expression: the expression, for example "8.314 * log(4) / (1/300 - 1/320)".
    """
    return evaluate(expression)
