"""Task specs: a research question with its settings, in YAML.

::

    task: What activation energy do the Kissinger data in the corpus give?
    mode: owl_dl            # owl_lite, owl_dl, owl_full
    model: planner:rule-based   # or a profile, provider:model, or auto (picked by the mode)
    thinking_level: high    # minimal, low, medium, high, off (default: from the mode)
    seed: 7
    corpus: demo            # the packaged demo corpus, or a directory path
    max_steps: 12

``task_description`` and ``corpus_path`` (the names of the RAR paper's run specs) are aliases
of ``task`` and ``corpus``; a spec gives one name of each or the other, not both.

An invalid spec is an error naming the file and every field that is wrong: each unknown key
(with the nearest valid one when it looks like a typo), each key given twice under its alias,
each value that does not fit.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rar.errors import ConfigError
from rar.science.planner_model import ThinkingLevel

Mode = Literal["owl_lite", "owl_dl", "owl_full"]
MODES: tuple[str, ...] = ("owl_lite", "owl_dl", "owl_full")
DEFAULT_MODEL = "planner:rule-based"
ALIASES: dict[str, str] = {"task_description": "task", "corpus_path": "corpus"}
"""Other names a spec may give a key under (alias -> key)."""


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    mode: Mode = "owl_lite"
    model: str = DEFAULT_MODEL
    thinking_level: ThinkingLevel | None = None  # None: the mode's (planner_model.MODE_THINKING)
    seed: int = 0
    corpus: str = "demo"
    max_steps: int = Field(default=12, ge=1, le=200)
    planner_fallback: Literal["rule-based", "none"] = "rule-based"
    auditor: str | None = None  # a model that reviews drafts too (None: the rule checks alone)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        conflicts = alias_conflicts(data)
        if conflicts:
            raise ValueError("; ".join(conflicts))
        return {ALIASES.get(key, key): value for key, value in data.items()}

    @field_validator("task")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the task (question) is empty")
        return value.strip()


def valid_keys() -> list[str]:
    """Every key a spec may have: the fields, then the aliases."""
    return [*TaskSpec.model_fields, *ALIASES]


def alias_conflicts(data: Mapping[Any, Any]) -> list[str]:
    """A sentence for each key given both under its name and its alias."""
    return [
        f"give either {key!r} or {alias!r} (its alias), not both"
        for alias, key in ALIASES.items()
        if alias in data and key in data
    ]


def unknown_keys(data: Mapping[Any, Any]) -> str | None:
    """One sentence naming every unknown key (with a "did you mean" for near misses) and the
    valid keys; None when every key is known."""
    valid = valid_keys()
    unknown = [key for key in data if key not in valid]
    if not unknown:
        return None
    named = []
    for key in unknown:
        near = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
        named.append(f"{str(key)!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    plural = "s" if len(unknown) > 1 else ""
    return f"unknown key{plural} {', '.join(named)}; valid keys: {', '.join(valid)}"


def _field_errors(exc: ValidationError) -> list[str]:
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"field {field!r}: {message}" if field else message)
    return problems


def parse_spec(data: Any, source: str) -> TaskSpec:
    """A spec from a mapping; every problem in it is named in one :class:`ConfigError` that
    starts with ``source`` (the file)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source} must be a mapping with at least a 'task' field")
    problems = alias_conflicts(data)
    unknown = unknown_keys(data)
    if unknown:
        problems.append(unknown)
    valid = valid_keys()
    # the known keys are checked too, so that one error names everything that is wrong
    known = {ALIASES.get(key, key): value for key, value in data.items() if key in valid}
    try:
        spec = TaskSpec.model_validate(known)
    except ValidationError as exc:
        problems.extend(_field_errors(exc))
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}")
    return spec


def read_yaml(path: Path, what: str = "task spec", missing: str = "") -> Any:
    """The YAML document in ``path``; a :class:`ConfigError` naming the file (a ``what``) when
    it is missing (``missing`` says what to do), unreadable or not YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no {what} at {path}{missing}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        # one line: PyYAML's own message quotes the document over several
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line} is not valid YAML: {problem}; fix the file") from None


def load_spec(path: Path) -> TaskSpec:
    """Read a task spec; errors name the file, and every field that is wrong."""
    return parse_spec(read_yaml(path), str(path))
