"""Evidence: a corpus of passages, BM25 search over them, and anchors checkable offline.

::

    from rar.evidence import BM25Index, Corpus, verify_anchors

    corpus = Corpus.load(demo_corpus_path())
    index = BM25Index.build(corpus, index_directory(store_root, corpus))
    hits = index.search("Kissinger method heating rate", k=5)
    anchors = [hit.anchor() for hit in hits]
    assert verify_anchors(anchors, corpus) == []

The rules (passages, locations, ids, digests, scores) are in ``docs/evidence.md``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Final

from rar.evidence.anchors import AnchorProblem, EvidenceAnchor, verify_anchors
from rar.evidence.backends import BACKENDS
from rar.evidence.corpus import Corpus, CorpusError, Document, Passage, SkippedFile
from rar.evidence.index import DEFAULT_BACKEND, BM25Index, Hit, index_directory

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEMO_CORPUS",
    "AnchorProblem",
    "BM25Index",
    "Corpus",
    "CorpusError",
    "Document",
    "EvidenceAnchor",
    "Hit",
    "Passage",
    "SkippedFile",
    "demo_corpus_path",
    "index_directory",
    "resolve_corpus",
    "verify_anchors",
]

DEMO_CORPUS: Final = "demo"


def demo_corpus_path() -> Path:
    """The packaged demo corpus (methods for determining activation energies)."""
    return Path(str(files("rar").joinpath("science", "corpus")))


def resolve_corpus(name: str | Path) -> Path:
    """A task spec's ``corpus`` value as a directory: ``demo`` is the packaged corpus."""
    if isinstance(name, str) and name == DEMO_CORPUS:
        return demo_corpus_path()
    return Path(name).expanduser()
