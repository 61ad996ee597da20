"""Prompt templates of a flow's agents, and the splits a template creates.

A context maps keys to values; a value is a list (lm-lib's convention) or a scalar. A template
names context keys in four forms:

================== ================================= ============================================
placeholder        expects                           becomes
================== ================================= ============================================
``{{key}}``        a list, or a scalar               the elements as text, joined by a blank line
                                                     (a scalar as text)
``{{{key}}}``      any JSON-able value               its JSON (non-ASCII kept as it is)
``[[key]]``        a list                            one split per element: the element's text
``[[key|hidden]]`` a list                            one split per element, the element kept in
                                                     the split's context but not in the prompt
================== ================================= ============================================

The shortest list under ``[[…]]`` sets the number of splits (an empty one: no split at all).
Each split's context is the context with every branched key narrowed to its one element
(``[element]``), so a later merge or grader can tell the splits apart. Without ``[[…]]`` there is
one split. An element that is not a string shows as JSON. A placeholder naming a key the
context does not hold, or ``[[key]]`` over a value that is not a list, is a
:class:`TemplateError` naming the agent, the placeholder and the keys there are.

::

    splits = expand("Analyze: [[name]] [[id|hidden]]", {"name": ["Alpha", "Beta"], "id": [42, 43]})
    [s.prompt for s in splits]        # ['Analyze: Alpha ', 'Analyze: Beta ']
    [s.context["id"] for s in splits] # [[42], [43]]
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rar.errors import ConfigError

_KEY = r"\s*([A-Za-z_][\w.-]*)\s*"
_JSON = re.compile(r"\{\{\{" + _KEY + r"\}\}\}")
_TEXT = re.compile(r"(?<!\{)\{\{" + _KEY + r"\}\}(?!\})")
_BRANCH = re.compile(r"\[\[" + _KEY + r"(\|\s*hidden\s*)?\]\]")
_ANY = re.compile(
    r"\{\{\{\s*(?P<json>[A-Za-z_][\w.-]*)\s*\}\}\}"
    r"|(?<!\{)\{\{\s*(?P<text>[A-Za-z_][\w.-]*)\s*\}\}(?!\})"
    r"|\[\[\s*(?P<branch>[A-Za-z_][\w.-]*)\s*(?P<hidden>\|\s*hidden\s*)?\]\]"
)


class TemplateError(ConfigError):
    """A template names a key the context does not hold, or branches over a non-list."""


@dataclass(frozen=True, slots=True)
class Split:
    """One prompt of a template, with the context narrowed to its elements."""

    prompt: str
    context: dict[str, Any]
    index: int  # from 0
    total: int


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _joined(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "\n\n".join(_text(item) for item in value)
    return _text(value)


def _missing(agent: str, placeholder: str, context: Mapping[str, Any]) -> TemplateError:
    keys = ", ".join(sorted(context)) or "none"
    return TemplateError(
        f"agent {agent}: the template's {placeholder} names a key the context does not hold "
        f"(its keys: {keys})"
    )


def expand(template: str, context: Mapping[str, Any], *, agent: str = "agent") -> list[Split]:
    """The splits ``template`` makes over ``context`` (one when it does not branch)."""
    branched: dict[str, list[Any]] = {}
    for match in _BRANCH.finditer(template):
        key = match.group(1)
        if key not in context:
            raise _missing(agent, match.group(0), context)
        value = context[key]
        if not isinstance(value, list | tuple):
            raise TemplateError(
                f"agent {agent}: {match.group(0)} branches over {key!r}, which must be a list, "
                f"not {type(value).__name__}; write {{{{{key}}}}} to insert it as text"
            )
        branched[key] = list(value)
    for match in (*_JSON.finditer(template), *_TEXT.finditer(template)):
        if match.group(1) not in context:
            raise _missing(agent, match.group(0), context)

    def fill(index: int | None) -> str:
        # one pass: a value inserted is never read again as a placeholder
        def replace(match: re.Match[str]) -> str:
            if match.group("json"):
                return json.dumps(context[match.group("json")], ensure_ascii=False)
            if match.group("text"):
                return _joined(context[match.group("text")])
            if match.group("hidden") or index is None:
                return ""
            return _text(branched[match.group("branch")][index])

        return _ANY.sub(replace, template)

    if not branched:
        return [Split(fill(None), dict(context), 0, 1)]
    total = min(len(items) for items in branched.values())
    splits = []
    for index in range(total):
        narrowed = dict(context)
        narrowed.update({key: [items[index]] for key, items in branched.items()})
        splits.append(Split(fill(index), narrowed, index, total))
    return splits


def merge_contexts(keys: Iterable[str], contexts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first context with each of ``keys`` the concatenation of that key's lists over all
    ``contexts`` (lm-lib's ``mergeContexts``); a scalar counts as a one-element list."""
    if not contexts:
        return {}
    merged = dict(contexts[0])
    for key in keys:
        values: list[Any] = []
        for context in contexts:
            if key in context:
                value = context[key]
                values.extend(value if isinstance(value, list | tuple) else [value])
        merged[key] = values
    return merged
