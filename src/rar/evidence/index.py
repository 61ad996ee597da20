"""BM25 search over a corpus's passages, persisted per corpus digest, with absolute scores.

Normalisation (see ``docs/evidence.md``): a hit's ``score`` is its BM25 score divided by the score
of a *reference passage*: one of average length that contains every query term exactly once.
Under BM25 (``k1 = 1.2``, ``b = 0.75``) that passage scores exactly ``Σ idf(t)`` over the query's
distinct terms, so::

    score = min(1, bm25(query, passage) / Σ_t idf(t))

Query terms the corpus never uses count in the denominator with the largest idf (``df = 0``):
a query about something the corpus does not cover scores low whatever its single lucky word.
The score does not depend on the other hits or on ``k``; 0 means no query term, ~0.3 that the
passage holds about a third of the query's (idf-weighted) information, 1 that it holds all of it
at least as strongly as a typical passage would. Passages that are short and repeat the terms can
exceed the reference: they are capped at 1, and ``raw_score`` keeps the uncapped BM25 score.

Order: raw score descending, then doc_id, then passage number (a stable tie-break).
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from rar.errors import UserError
from rar.evidence.analysis import ANALYSIS_VERSION, query_terms, tokenize
from rar.evidence.anchors import EvidenceAnchor
from rar.evidence.backends import (
    BACKENDS,
    K1,
    B,
    Backend,
    build_backend,
    library_version,
    open_backend,
)
from rar.evidence.corpus import Corpus, Passage

__all__ = ["DEFAULT_BACKEND", "BM25Index", "Hit", "index_directory"]

DEFAULT_BACKEND: Final = "tantivy"
META_NAME: Final = "rar-index.json"
FORMAT: Final = 1


class Hit(BaseModel):
    """One search result: the passage, its normalised score and its rank (1-based)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passage: Passage
    doc_title: str
    score: float = Field(ge=0.0, le=1.0)
    """Normalised relevance in [0, 1], comparable across queries (see the module doc)."""
    raw_score: float
    """The BM25 score itself (classic scale)."""
    rank: int

    def anchor(self) -> EvidenceAnchor:
        """The evidence anchor citing this hit's passage."""
        return EvidenceAnchor.from_passage(self.passage, self.doc_title, self.score)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def index_directory(store_root: Path | str, corpus: Corpus) -> Path:
    """Where a store keeps the index of ``corpus``: ``<store>/indexes/sha256-<hex>``."""
    return Path(store_root) / "indexes" / corpus.digest.replace(":", "-")


def _idf(num_docs: int, df: int) -> float:
    return math.log(1.0 + (num_docs - df + 0.5) / (df + 0.5))


class BM25Index:
    """A BM25 index over ``corpus.passages`` (one backend), stored under a directory."""

    def __init__(
        self, corpus: Corpus, path: Path, backend: Backend, *, built: bool, seconds: float
    ) -> None:
        self.corpus = corpus
        self.path = path
        """The backend's directory (``<directory>/<backend>``)."""
        self.backend = backend.name
        self.built = built
        """True when this call built the index, False when it reused a persisted one."""
        self.seconds = seconds
        """Time spent building or opening it."""
        self._backend = backend
        self._idf_cache: dict[str, float] = {}

    def __repr__(self) -> str:
        how = "built" if self.built else "reused"
        return (
            f"BM25Index({self.backend}, {len(self.corpus.passages)} passages, {how}, {self.path})"
        )

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        directory: Path | str,
        backend: str = DEFAULT_BACKEND,
        *,
        rebuild: bool = False,
    ) -> BM25Index:
        """Open the index of ``corpus`` in ``directory``, building it if missing or stale.

        The index lives in ``<directory>/<backend>/``, next to ``rar-index.json`` naming the corpus
        digest, the analysis rules, the library and its version; any difference (or ``rebuild``)
        builds it again, into a temporary directory swapped in when complete.
        """
        if backend not in BACKENDS:
            raise UserError(
                f"unknown BM25 backend {backend!r}; choose one of {', '.join(BACKENDS)}"
            )
        start = time.perf_counter()
        path = Path(directory) / backend
        meta = _meta(corpus, backend)
        current = not rebuild and _read_meta(path) == meta
        if current:
            try:
                opened = open_backend(backend, path)
            except Exception:  # a damaged index is derived data: build it again
                pass
            else:
                if opened.num_docs == len(corpus.passages):
                    return cls(
                        corpus, path, opened, built=False, seconds=time.perf_counter() - start
                    )
        # replace what is there, unless a concurrent builder puts the same index in place meanwhile
        _build_into(corpus, path, backend, meta, replace_current=current or rebuild)
        opened = open_backend(backend, path)
        return cls(corpus, path, opened, built=True, seconds=time.perf_counter() - start)

    def idf(self, term: str) -> float:
        value = self._idf_cache.get(term)
        if value is None:
            value = _idf(self._backend.num_docs, self._backend.doc_freq(term))
            self._idf_cache[term] = value
        return value

    def reference_score(self, query: str) -> float:
        """BM25 score of an average-length passage holding each query term once: Σ idf."""
        return sum(self.idf(term) for term in query_terms(query))

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The ``k`` best passages for ``query`` (fewer when fewer match), best first."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        terms = query_terms(query)
        if not terms:
            return []
        reference = sum(self.idf(term) for term in terms)
        passages = self.corpus.passages
        found = [
            (raw, passages[ordinal])
            for raw, ordinal in self._backend.candidates(terms, k)
            if raw > 0
        ]
        found.sort(key=lambda item: (-item[0], item[1].doc_id, item[1].number))
        return [
            Hit(
                passage=passage,
                doc_title=self.corpus.title(passage.doc_id),
                score=min(1.0, raw / reference),
                raw_score=raw,
                rank=rank,
            )
            for rank, (raw, passage) in enumerate(found[:k], start=1)
        ]


def _meta(corpus: Corpus, backend: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "corpus_digest": corpus.digest,
        "passages": len(corpus.passages),
        "analysis": ANALYSIS_VERSION,
        "backend": backend,
        "library_version": library_version(backend),
        "k1": K1,
        "b": B,
    }


def _read_meta(path: Path) -> Any:
    try:
        return orjson.loads((path / META_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def _build_into(
    corpus: Corpus, path: Path, backend: str, meta: dict[str, Any], *, replace_current: bool
) -> None:
    """Build in a sibling temporary directory, then swap it in (readers never see half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = path.with_name(f".{path.name}.tmp-{suffix}")
    old = path.with_name(f".{path.name}.old-{suffix}")
    try:
        tmp.mkdir()
        build_backend(backend, [tokenize(p.text) for p in corpus.passages], tmp)
        (tmp / META_NAME).write_bytes(orjson.dumps(meta, option=orjson.OPT_SORT_KEYS))
        if not replace_current and _read_meta(path) == meta:
            return  # a concurrent builder finished the same index first: keep it
        if path.exists():
            with contextlib.suppress(FileNotFoundError):  # another builder moved it first
                path.rename(old)
        try:
            tmp.rename(path)
        except OSError:
            if _read_meta(path) != meta:  # lost a race only if the winner built the same index
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
