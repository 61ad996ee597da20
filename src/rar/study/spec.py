"""A study's spec: the grid of cells it runs, read from YAML or given in code.

::

    name: reproducibility
    questions:                       # prose questions: one science run per cell
      - What activation energy do the Kissinger DSC data in the corpus give?
    specs: [task.yaml]               # task specs (rar run --spec): their task joins the questions
    flows:                           # entrypoints, called as function(run, **inputs)
      - entrypoint: mypkg.flows:summarise
        inputs: {topic: tides}
    seeds: [1, 2, 3]                 # or {start: 0, count: 20}
    modes: [owl_lite, owl_dl, owl_full]
    models: [planner:rule-based]
    corpora: [demo]
    max_steps: 12

A question cell is one (question, seed, mode, model, corpus); a flow cell one (flow, seed): modes,
models and corpora are the science runtime's settings and do not apply to flows. A cell is
identified by the digest of its canonical parameters, so the same cell in another run of the study
(or in another study) is recognised as already done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rar.errors import ConfigError
from rar.hashing import digest_value

MODES: tuple[str, ...] = ("owl_lite", "owl_dl", "owl_full")  # rar.science.spec.MODES
DEFAULT_MODEL = "planner:rule-based"
CELL_VERSION = "1"  # part of every cell digest: bump it when a cell's meaning changes


class FlowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    entrypoint: str
    inputs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("entrypoint")
    @classmethod
    def _module_function(cls, value: str) -> str:
        module, _, function = value.partition(":")
        if not module or not function:
            raise ValueError(f"flow entrypoint {value!r} is not of the form module:function")
        return value


class SeedRange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: int = 0
    count: int = Field(ge=1, le=100_000)


class StudySpec(BaseModel):
    """The grid. Every list is an axis; the cells are their product."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "study"
    questions: list[str] = Field(default_factory=list)
    specs: list[str] = Field(default_factory=list)
    flows: list[FlowSpec] = Field(default_factory=list)
    seeds: list[int] | SeedRange = Field(default_factory=lambda: [0])
    modes: list[str] = Field(default_factory=lambda: ["owl_lite"])
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    corpora: list[str] = Field(default_factory=lambda: ["demo"])
    max_steps: int = Field(default=12, ge=1, le=200)

    @field_validator("questions")
    @classmethod
    def _questions(cls, value: list[str]) -> list[str]:
        if any(not isinstance(q, str) or not q.strip() for q in value):
            raise ValueError("a question is empty")
        return [q.strip() for q in value]

    @field_validator("modes")
    @classmethod
    def _modes(cls, value: list[str]) -> list[str]:
        unknown = [m for m in value if m not in MODES]
        if unknown:
            raise ValueError(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
        return value

    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, SeedRange):
            return list(range(self.seeds.start, self.seeds.start + self.seeds.count))
        return list(self.seeds)


@dataclass(frozen=True, slots=True)
class Cell:
    """One run of the grid: its parameters and the digest that names it."""

    params: dict[str, Any]
    digest: str

    @property
    def kind(self) -> str:
        return str(self.params["kind"])

    def label(self) -> str:
        p = self.params
        if self.kind == "flow":
            return f"{p['entrypoint']} seed={p['seed']}"
        return f"{_short(p['question'])} · {p['mode']} · seed={p['seed']} · {p['model']}"


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def cell(params: Mapping[str, Any]) -> Cell:
    """A cell from its parameters (the digest covers them all, and :data:`CELL_VERSION`)."""
    values = {"cell_version": CELL_VERSION, **params}
    return Cell(dict(params), digest_value(values))


def cells_of(spec: StudySpec, *, base: Path | None = None) -> list[Cell]:
    """The grid in a stable order: questions (then task specs), then flows; seeds innermost."""
    questions = list(spec.questions) + [_task_of(path, base) for path in spec.specs]
    seeds = spec.seed_list()
    grid: list[Cell] = []
    seen: set[str] = set()
    for question in questions:
        for corpus in spec.corpora:
            for model in spec.models:
                for mode in spec.modes:
                    for seed in seeds:
                        grid.append(cell({
                            "kind": "question", "question": question, "corpus": corpus,
                            "model": model, "mode": mode, "seed": seed,
                            "max_steps": spec.max_steps,
                        }))  # fmt: skip
    for flow in spec.flows:
        for seed in seeds:
            grid.append(cell({
                "kind": "flow", "entrypoint": flow.entrypoint, "inputs": flow.inputs, "seed": seed,
            }))  # fmt: skip
    unique = [c for c in grid if not (c.digest in seen or seen.add(c.digest))]  # type: ignore[func-returns-value]
    if not unique:
        raise ConfigError(
            f"study {spec.name!r} has an empty grid: give at least one question, task spec or "
            "flow, and at least one seed, mode, model and corpus"
        )
    return unique


def _task_of(path: str, base: Path | None) -> str:
    from rar.science.spec import load_spec

    resolved = Path(path) if base is None or Path(path).is_absolute() else base / path
    return load_spec(resolved).task


def parse_study(data: Any, source: str) -> StudySpec:
    """A spec from a mapping; one :class:`ConfigError` naming ``source`` and every problem."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source} must be a mapping with 'questions' (or 'specs' or 'flows'), 'seeds' and "
            "'modes'; see examples/reproducibility.yaml"
        )
    try:
        return StudySpec.model_validate(dict(data))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                fields = ", ".join(StudySpec.model_fields)
                message = f"unknown key (the keys are {fields})"
            problems.append(f"{where}: {message}" if where else message)
        raise ConfigError(f"{source}: {'; '.join(problems)}") from None


def load_study(path: Path) -> StudySpec:
    """Read a study spec (YAML); errors name the file and what is wrong in it."""
    from rar.science.spec import read_yaml

    data = read_yaml(path, "study spec", "; give a YAML file such as examples/reproducibility.yaml")
    return parse_study(data, str(path))
