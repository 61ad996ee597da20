"""Grading science answers against a question set: does the answer answer the question?

A question set is YAML, a list of entries::

    - id: demo-kissinger-value
      corpus: demo                       # or a directory, relative to the set's base directory
      question: What activation energy do the Kissinger DSC data in the corpus give?
      kind: value                        # value | methods | explanation | comparison |
                                         # definition | off_topic
      expect:
        value: 125.1                     # a value question: the number, its tolerance, its unit
        tolerance: 1.0
        unit: kJ/mol
        computed: true                   # from a table (true) or stated in the text (false)
        must_mention: [Kissinger]        # each item must appear; "A|B" accepts either
        must_not_mention: []
        source_docs: [worked-examples/kissinger-dsc.md]   # at least one must be cited
        answered: false                  # off-topic: the answer must say it is not answered

:func:`grade` checks a :class:`~rar.science.runtime.ScienceResult` (or its ``as_dict()``)
against one entry and lists every problem; an entry passes when there is none. Matching is
case-insensitive and treats ``–``/``-`` and ``ΔH‡``-style symbols as written. A value is
found in the answer's claims as ``<number> … <unit>`` (a ``±`` error between them allowed)
within the tolerance, after converting units with pint when they differ.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rar.errors import ConfigError
from rar.science.answer import NOT_ANSWERED

KINDS = ("value", "methods", "explanation", "comparison", "definition", "off_topic")


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    question: str
    kind: str
    corpus: str
    expect: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "owl_lite"


@dataclass(frozen=True, slots=True)
class Grade:
    entry: Entry
    problems: tuple[str, ...]
    found_value: float | None = None

    @property
    def passed(self) -> bool:
        return not self.problems


def load_questions(path: Path) -> list[Entry]:
    """The entries of a question set; corpus paths resolved against ``base`` (the repo root:
    the set's grandparent when it lives in ``tests/data``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the question set {path}: {exc}") from exc
    if not isinstance(data, list):
        raise ConfigError(f"{path} must be a list of questions")
    base = _base(path)
    entries = []
    for number, item in enumerate(data, start=1):
        if not isinstance(item, dict) or not {"id", "question", "kind"} <= set(item):
            raise ConfigError(f"{path}: entry {number} needs id, question and kind")
        if item["kind"] not in KINDS:
            raise ConfigError(f"{path}: entry {item['id']}: kind must be one of {KINDS}")
        corpus = str(item.get("corpus", "demo"))
        if corpus != "demo":
            corpus = str((base / corpus).resolve())
        entries.append(
            Entry(
                id=str(item["id"]),
                question=str(item["question"]),
                kind=str(item["kind"]),
                corpus=corpus,
                expect=dict(item.get("expect") or {}),
                mode=str(item.get("mode", "owl_lite")),
            )
        )
    return entries


def _base(path: Path) -> Path:
    for parent in path.resolve().parents:
        if (parent / "pyproject.toml").exists():
            return parent
    return path.resolve().parent


def _fold(text: str) -> str:
    return re.sub(r"[\u2010-\u2015\u2212]", "-", text).casefold()


def _mentions(text: str, item: str) -> bool:
    return any(_fold(alt.strip()) in text for alt in item.split("|") if alt.strip())


_NUMBER = r"[-−+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def values_in(text: str, unit: str) -> list[float]:
    """Numbers followed (possibly after ``± error``) by ``unit`` in ``text``."""
    text = text.replace("−", "-")
    pattern = re.compile(rf"({_NUMBER})\s*(?:(?:±|\+/-)\s*{_NUMBER}\s*)?{re.escape(unit)}(?![\w/])")
    return [float(m.group(1)) for m in pattern.finditer(text)]


def grade(entry: Entry, result: Any) -> Grade:
    """Every way the result falls short of the entry's expectations (none: it passes)."""
    data = result.as_dict() if hasattr(result, "as_dict") else dict(result)
    answer = str(data.get("answer", ""))
    claims = [str(c.get("text", "")) for c in data.get("claims", [])]
    text = _fold("\n".join([answer, *claims]))
    expect = entry.expect
    problems: list[str] = []
    found: float | None = None
    if entry.kind == "off_topic" or expect.get("answered") is False:
        if claims:
            problems.append(f"an off-topic question got {len(claims)} claims")
        if _fold(NOT_ANSWERED) not in text:
            problems.append("the answer does not say the corpus does not answer it")
        if (data.get("audit") or {}).get("passed"):
            problems.append("the audit passed an answer to an off-topic question")
        if data.get("status") == "completed":
            problems.append("status is completed, not completed_with_warnings")
        return Grade(entry, tuple(problems))
    if not claims:
        problems.append("the answer makes no claim")
    for item in expect.get("must_mention", []) or []:
        if not _mentions(text, str(item)):
            problems.append(f"the answer does not mention {item}")
    for item in expect.get("must_not_mention", []) or []:
        if _mentions(text, str(item)):
            problems.append(f"the answer mentions {item}")
    if "value" in expect:
        target, tolerance = float(expect["value"]), float(expect.get("tolerance", 0.0))
        unit = str(expect.get("unit", ""))
        candidates = [v for claim in claims for v in values_in(claim, unit)] if unit else []
        close = [v for v in candidates if abs(v - target) <= tolerance]
        if close:
            found = close[0]
        else:
            seen = ", ".join(f"{v:g}" for v in candidates[:5]) or "none"
            problems.append(f"no claim states {target:g} ± {tolerance:g} {unit} (found: {seen})")
        if expect.get("computed") and int(data.get("executions") or 0) < 1 and not _computed(data):
            problems.append("the value was expected to be computed from the data; nothing ran")
    sources = expect.get("source_docs") or []
    if sources:
        cited = {str(a.get("doc_id")) for a in data.get("anchors", [])}
        if not cited & set(map(str, sources)):
            problems.append(f"none of {', '.join(sources)} is cited (cited: {sorted(cited)})")
    return Grade(entry, tuple(problems), found)


def _computed(data: Mapping[str, Any]) -> bool:
    return any(
        "standard error" in str(c.get("text", "")) or "±" in str(c.get("text", ""))
        for c in data.get("claims", [])
    )


def summary(grades: Sequence[Grade]) -> tuple[int, int]:
    """(passed, total)."""
    return sum(g.passed for g in grades), len(grades)
