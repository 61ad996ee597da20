"""Task specs: a research question with its settings, in YAML.

::

    task: What activation energy do the Kissinger data in the corpus give?
    mode: owl_dl            # owl_lite, owl_dl, owl_full
    model: planner:rule-based
    seed: 7
    corpus: demo            # the packaged demo corpus, or a directory path
    max_steps: 12

An invalid spec is an error naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rar.errors import ConfigError

Mode = Literal["owl_lite", "owl_dl", "owl_full"]
MODES: tuple[str, ...] = ("owl_lite", "owl_dl", "owl_full")
DEFAULT_MODEL = "planner:rule-based"


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    mode: Mode = "owl_lite"
    model: str = DEFAULT_MODEL
    seed: int = 0
    corpus: str = "demo"
    max_steps: int = Field(default=12, ge=1, le=200)
    planner_fallback: Literal["rule-based", "none"] = "rule-based"

    @field_validator("task")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the task (question) is empty")
        return value.strip()


def load_spec(path: Path) -> TaskSpec:
    """Read a task spec; errors name the file, and the field when one is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no task spec at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the task spec {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"{path}{line} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must be a mapping with at least a 'task' field")
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(spec)"
        raise ConfigError(f"{path}: field {field!r}: {first['msg']}") from None
