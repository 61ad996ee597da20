"""The embedded demo: a small scripted agent run, recorded offline with no API key.

A scripted model answers a question about Arrhenius rate constants in a few turns, calling a
calculator tool twice. Every model turn and tool call passes through :meth:`Run.effect`, so the
run lands in the store as a complete, verifiable record.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable
from typing import Any

from rar.hashing import Canonical
from rar.runtime.run import Run, record
from rar.store.store import Store

QUESTION = (
    "Rate constants measured at 300 K and 320 K are 2.1e-3 and 8.4e-3 per second. "
    "What activation energy does the two-point Arrhenius equation give?"
)
MODEL = "demo"

_SCRIPT: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": "I will take the ratio of the rate constants first.",
        "tool_calls": [
            {"id": "call_1", "name": "calculator", "arguments": {"expression": "8.4e-3 / 2.1e-3"}}
        ],
    },
    {
        "role": "assistant",
        "content": "Now Ea = R ln(k2/k1) / (1/T1 - 1/T2), with R = 8.314 J/(mol K).",
        "tool_calls": [
            {
                "id": "call_2",
                "name": "calculator",
                "arguments": {"expression": "8.314 * log(4) / (1/300 - 1/320) / 1000"},
            }
        ],
    },
    {
        "role": "assistant",
        "content": "The two-point Arrhenius estimate is Ea ≈ 55.3 kJ/mol "
        "(k rises fourfold between 300 K and 320 K).",
    },
]

_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[[float], float]] = {
    "log": math.log,
    "exp": math.exp,
    "sqrt": math.sqrt,
}


def calculate(expression: str) -> float:
    """Evaluate arithmetic (+ - * / **, log, exp, sqrt) without eval()."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and len(node.args) == 1
        ):
            return _FUNCTIONS[node.func.id](walk(node.args[0]))
        raise ValueError(f"unsupported expression element: {ast.dump(node)[:60]}")

    return walk(ast.parse(expression, mode="eval"))


def _scripted_model(turn: int) -> Callable[[], dict[str, Any]]:
    def complete() -> dict[str, Any]:
        message = _SCRIPT[turn]
        finish = "tool_calls" if "tool_calls" in message else "stop"
        return {
            "model": MODEL,
            "message": message,
            "finish_reason": finish,
            "usage": {"input_tokens": 40 + 30 * turn, "output_tokens": 25},
        }

    return complete


def run_demo(store: Store | None = None, *, seed: int = 7) -> Run:
    """Record the demo run into ``store`` and return the finished :class:`Run`."""
    run = record(
        QUESTION,
        store=store,
        seed=seed,
        inputs={"question": QUESTION},
        models=[{"provider": "scripted", "model": MODEL}],
        tools=[{"name": "calculator", "version": "1"}],
        entrypoint="rar.demo:run_demo",
        tags={"kind": "demo"},
    )
    with run:
        messages = [
            Canonical({"role": "system", "content": "You are a careful physical chemist."}),
            Canonical({"role": "user", "content": QUESTION}),
        ]
        answer = ""
        with run.span("agent", agent="assistant"):
            for turn in range(len(_SCRIPT)):
                request = {"model": MODEL, "messages": messages, "temperature": 0}
                response = run.effect("llm", request, _scripted_model(turn))
                message = response["message"]
                messages = [*messages, Canonical(message)]
                for call in message.get("tool_calls", []):
                    expression = call["arguments"]["expression"]
                    value = run.effect(
                        "tool",
                        {"name": "calculator", "version": "1", "args": call["arguments"]},
                        functools.partial(calculate, expression),
                    )
                    messages = [
                        *messages,
                        Canonical(
                            {"role": "tool", "tool_call_id": call["id"], "content": repr(value)}
                        ),
                    ]
                if response["finish_reason"] == "stop":
                    answer = message["content"]
                    break
        run.finish(result={"answer": answer})
    return run
