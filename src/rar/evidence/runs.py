"""Re-check the evidence anchors a recorded run cites against its corpus (for ``rar verify`` and
the viewer's evidence badges)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rar.evidence.anchors import AnchorProblem, verify_anchors
from rar.evidence.corpus import Corpus, CorpusError
from rar.store.store import Store
from rar.store.verify import Problem


@dataclass(slots=True)
class AnchorCheck:
    """The anchors a run cites, checked against its corpus as it is now."""

    anchors: dict[str, dict[str, Any]]
    """``doc_id#location`` → the anchor as recorded (the last evidence event citing it)."""
    corpus: str | None = None
    problems: list[AnchorProblem] = field(default_factory=list)
    error: str | None = None
    """Why the anchors could not be checked (no corpus named, or it cannot be read)."""

    @property
    def checked(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        """``status`` per anchor: ``matches``, the problem kind, or ``unchecked``."""
        broken = {f"{p.doc_id}#{p.location}": p for p in self.problems}
        status: dict[str, dict[str, Any]] = {}
        for key in self.anchors:
            problem = broken.get(key)
            if not self.checked:
                status[key] = {"status": "unchecked", "message": self.error}
            elif problem is None:
                status[key] = {"status": "matches", "message": None}
            else:
                status[key] = {
                    "status": problem.kind,
                    "message": problem.message,
                    "found_at": problem.found_at,
                }
        return {
            "checked": self.checked,
            "corpus": self.corpus,
            "error": self.error,
            "anchors": status,
        }


def check_anchors(
    store: Store, run_id: str, events: Iterable[dict[str, Any]] | None = None
) -> AnchorCheck:
    """Every anchor of the run's ``evidence`` events, checked against the run's corpus
    (``events``: the run's events when already read)."""
    from rar.evidence import resolve_corpus

    anchors: dict[str, dict[str, Any]] = {}
    for event in store.events(run_id) if events is None else events:
        if event.get("type") == "evidence":
            for anchor in store.resolve_payload(event.get("anchors")) or []:
                if isinstance(anchor, dict):
                    anchors[f"{anchor.get('doc_id')}#{anchor.get('location')}"] = anchor
    if not anchors:
        return AnchorCheck(anchors)
    manifest = store.manifest(run_id)
    reference = manifest.inputs.get("corpus")
    name = reference.value if reference is not None else None
    if not isinstance(name, str):
        return AnchorCheck(
            anchors, error="the run cites evidence but names no corpus to check it against"
        )
    try:
        corpus = Corpus.load(resolve_corpus(name))
    except CorpusError as exc:
        return AnchorCheck(
            anchors, corpus=name, error=f"the corpus {name!r} cannot be read: {exc.message}"
        )
    problems = verify_anchors(list(anchors.values()), corpus)
    return AnchorCheck(anchors, corpus=name, problems=problems)


def anchor_problems(store: Store, run_id: str) -> list[Problem]:
    """Problems with the run's anchors: passages changed, moved or gone, or no corpus."""
    check = check_anchors(store, run_id)
    if check.error is not None:
        return [Problem(run_id, "anchor", check.error)]
    return [
        Problem(run_id, "anchor", problem.message, expected=problem.expected,
                actual=problem.actual, path=f"{problem.doc_id}#{problem.location}")
        for problem in check.problems
    ]
