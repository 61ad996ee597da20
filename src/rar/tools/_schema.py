"""From a Python function to a tool's JSON Schema: type hints and pydantic models (the argument
descriptions come from :mod:`rar.tools._docstrings`)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import pydantic
from pydantic.fields import FieldInfo

from rar.tools.errors import InvalidArgumentsError, ToolDefinitionError


def arguments_model(
    fn: Callable[..., Any], name: str, arg_docs: dict[str, str]
) -> type[pydantic.BaseModel]:
    """A pydantic model of ``fn``'s parameters (extra arguments are refused)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ToolDefinitionError(f"cannot read the type hints of tool {name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: *{param.name} / **{param.name} cannot be described to a model; "
                "name every argument"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {name!r}: positional-only argument {param.name!r} cannot be passed by name"
            )
        if param.name.startswith("_"):
            raise ToolDefinitionError(
                f"tool {name!r}: argument {param.name!r} starts with '_'; rename it"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        described = _described(annotation) or (
            isinstance(default, FieldInfo) and default.description is not None
        )
        if param.name in arg_docs and not described:  # Field(description=...) wins
            annotation = Annotated[annotation, pydantic.Field(description=arg_docs[param.name])]
        fields[param.name] = (annotation, default)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        return pydantic.create_model(f"{name}_arguments", __config__=config, **fields)
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolDefinitionError(f"tool {name!r}: cannot build its argument model: {exc}") from exc


def _described(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description is not None
        for meta in annotation.__metadata__
    )


def json_schema(model: type[pydantic.BaseModel], name: str) -> dict[str, Any]:
    """The model's JSON Schema without pydantic's generated titles."""
    try:
        schema = model.model_json_schema()
    except pydantic.PydanticInvalidForJsonSchema as exc:
        raise ToolDefinitionError(f"tool {name!r}: arguments have no JSON Schema: {exc}") from exc
    cleaned = _strip_titles(schema)
    assert isinstance(cleaned, dict)
    cleaned.setdefault("properties", {})
    return cleaned


def _strip_titles(node: Any, *, names: bool = False) -> Any:
    """Drop ``title`` from schema objects; ``names`` marks a mapping of names to schemas."""
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if names:
            out[key] = _strip_titles(value)
        elif key == "title" and isinstance(value, str):
            continue
        elif key in ("properties", "$defs", "definitions", "patternProperties"):
            out[key] = _strip_titles(value, names=True)
        elif key in ("default", "const", "enum", "examples"):
            out[key] = value  # values, not schemas
        else:
            out[key] = _strip_titles(value)
    return out


def validation_message(tool: str, exc: pydantic.ValidationError) -> InvalidArgumentsError:
    """An error naming every bad field, what is wrong with it, and what was given."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        problem = f"{where}: {error['msg']}"
        if error["type"] not in ("missing",):
            shown = repr(error.get("input"))
            problem += f" (got {shown[:80]}{'...' if len(shown) > 80 else ''})"
        problems.append(problem)
    return InvalidArgumentsError(
        f"invalid arguments for tool {tool!r}: " + "; ".join(problems),
        fields=[".".join(str(p) for p in e["loc"]) for e in exc.errors(include_url=False)],
    )
