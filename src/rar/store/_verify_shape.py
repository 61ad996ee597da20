"""A fast first test of an event's shape, for ``rar verify``: sound lines skip pydantic.

Validating every line with the pydantic union (:data:`rar.store.events.EVENT_ADAPTER`) costs
more than parsing and hashing it. The checkers here are derived from the same models, field by
field, and are *strictly narrower* than pydantic: each accepts only values of the exact JSON
types a writer produces (``type(v) is int``, never a bool or a numeric string), no unknown keys,
every required field present. So when a checker says yes, pydantic says yes too; when it says
no, or a field has an annotation or constraint it does not know, the line goes to pydantic,
which decides and explains. No line is ever accepted that the models reject
(``tests/test_verify_shape.py`` checks that on mutated events of every type).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import annotated_types
from pydantic import BaseModel

from rar.store.events import EVENT_MODELS

Check = Callable[[Any], bool]
_MISSING: Final = object()


class _Unknown(Exception):
    """An annotation or constraint this module does not know: pydantic decides."""


class _Builder:
    """Writes one straight-line check function per model (Python source, compiled once)."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_MISSING": _MISSING}
        self.functions: dict[type[BaseModel], str] = {}
        self.sources: list[str] = []

    def constant(self, value: Any) -> str:
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def expr(self, annotation: Any, var: str, depth: int = 0) -> str:
        """A Python expression true only for values pydantic accepts as ``annotation``."""
        if annotation is Any:
            return "True"
        if annotation in (str, int, bool):
            return f"type({var}) is {annotation.__name__}"
        if annotation is type(None):
            return f"{var} is None"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return f"{self.model(annotation)}({var})"
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        item = f"_i{depth}"
        if origin in (types.UnionType, typing.Union):
            return "(" + " or ".join(self.expr(a, var, depth) for a in args) + ")"
        if origin is typing.Literal:
            if not all(type(a) is str for a in args):
                raise _Unknown(annotation)
            return f"(type({var}) is str and {var} in {self.constant(frozenset(args))})"
        if origin is list and len(args) == 1:
            inner = self.expr(args[0], item, depth + 1)
            return f"(type({var}) is list and all({inner} for {item} in {var}))"
        if origin is dict and len(args) == 2 and args[0] is str:
            inner = self.expr(args[1], item, depth + 1)
            if inner == "True":
                return f"(type({var}) is dict and all(type(_k) is str for _k in {var}))"
            return (
                f"(type({var}) is dict and all(type(_k) is str and {inner} "
                f"for _k, {item} in {var}.items()))"
            )
        raise _Unknown(annotation)

    def field(self, info: Any, var: str) -> str:
        check = self.expr(info.annotation, var)
        for item in info.metadata:
            bound = getattr(item, "ge", getattr(item, "gt", None))
            if (
                not isinstance(item, (annotated_types.Ge, annotated_types.Gt))
                or type(bound) is not int
            ):
                raise _Unknown(item)
            op = ">=" if isinstance(item, annotated_types.Ge) else ">"
            check = f"({check} and type({var}) is int and {var} {op} {bound})"
        return check

    def model(self, model: type[BaseModel]) -> str:
        name = self.functions.get(model)
        if name is not None:
            return name
        if model.model_config.get("extra") != "forbid":
            raise _Unknown(model)
        name = f"_m{len(self.functions)}_{model.__name__}"
        self.functions[model] = name
        try:
            self.sources.append(self._model_source(model, name))
        except _Unknown:
            del self.functions[model]
            raise
        return name

    def _model_source(self, model: type[BaseModel], name: str) -> str:
        allowed: set[str] = set()
        needed: set[str] = set()
        lines: list[str] = []
        for field_name, info in model.model_fields.items():
            if info.alias not in (None, field_name) or info.validation_alias is not None:
                raise _Unknown(model)
            allowed.add(field_name)
            if info.is_required():
                needed.add(field_name)
                lines.append(f"    v = g({field_name!r})")
                lines.append(f"    if not ({self.field(info, 'v')}): return False")
            else:
                lines.append(f"    v = g({field_name!r}, _MISSING)")
                lines.append(
                    f"    if v is not _MISSING and not ({self.field(info, 'v')}): return False"
                )
        keys_ok = f"e.keys() <= {self.constant(frozenset(allowed))}"
        has_needed = f"{self.constant(frozenset(needed))} <= e.keys()"
        return "\n".join(
            [
                f"def {name}(e):",
                f"    if type(e) is not dict or not {keys_ok} or not {has_needed}:",
                "        return False",
                "    g = e.get",
                *lines,
                "    return True",
            ]
        )

    def compile(self) -> dict[str, Any]:
        exec(compile("\n\n".join(self.sources), "<rar event shape checks>", "exec"), self.namespace)
        return self.namespace


def _build() -> dict[str, Check]:
    checks: dict[str, str] = {}
    builder = _Builder()
    for event_type, model in EVENT_MODELS.items():
        try:
            checks[event_type] = builder.model(model)
        except _Unknown:
            continue  # this type always goes to pydantic
    namespace = builder.compile()
    return {event_type: namespace[name] for event_type, name in checks.items()}


@functools.cache
def fast_checks() -> dict[str, Check]:
    """Event type → a check that, when it returns True, guarantees the union validates the
    event. Built on first use (writing and compiling the checks takes ~10 ms)."""
    return _build()


def __getattr__(name: str) -> Any:
    if name == "FAST_CHECKS":
        return fast_checks()
    raise AttributeError(name)
