"""Re-check the evidence anchors a recorded run cites against its corpus (for ``rar verify``)."""

from __future__ import annotations

from typing import Any

from rar.evidence.anchors import verify_anchors
from rar.evidence.corpus import Corpus, CorpusError
from rar.store.store import Store
from rar.store.verify import Problem


def anchor_problems(store: Store, run_id: str) -> list[Problem]:
    """Problems with the run's anchors: passages changed, moved or gone, or no corpus."""
    from rar.evidence import resolve_corpus

    events = store.events(run_id)
    anchors: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("type") == "evidence":
            for anchor in store.resolve_payload(event.get("anchors")) or []:
                anchors[f"{anchor.get('doc_id')}#{anchor.get('location')}"] = anchor
    if not anchors:
        return []
    manifest = store.manifest(run_id)
    reference = manifest.inputs.get("corpus")
    name = reference.value if reference is not None else None
    if not isinstance(name, str):
        return [Problem(run_id, "anchor", "the run cites evidence but names no corpus to check "
                                          "it against")]
    try:
        corpus = Corpus.load(resolve_corpus(name))
    except CorpusError as exc:
        return [Problem(run_id, "anchor", f"the corpus {name!r} cannot be read: {exc.message}")]
    return [
        Problem(run_id, "anchor", problem.message, expected=problem.expected,
                actual=problem.actual, path=f"{problem.doc_id}#{problem.location}")
        for problem in verify_anchors(list(anchors.values()), corpus)
    ]
