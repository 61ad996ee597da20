"""The two BM25 libraries behind one small interface.

Both score the same tokens (``rar.evidence.analysis``) with the same formula, classic BM25 with
``k1 = 1.2``, ``b = 0.75`` and the Lucene idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``: a term
that occurs once in a passage of average length contributes exactly its idf. tantivy scores that
way natively; bm25s's ``lucene`` method leaves out the ``(k1 + 1)`` factor, which is put back. The
two differ only by tantivy's one-byte encoding of passage lengths (up to ~3 % on a score).

A backend returns candidates ``(raw score, passage ordinal)``: the best ``n`` matches *and every
passage tied with the n-th*, so the caller's tie-break (doc_id, then location) decides the order
and not the library's internal order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

K1: Final = 1.2
B: Final = 0.75
BACKENDS: Final = ("tantivy", "bm25s")


class Backend(Protocol):
    name: str

    @property
    def num_docs(self) -> int: ...

    def doc_freq(self, term: str) -> int: ...

    def candidates(self, terms: Sequence[str], n: int) -> list[tuple[float, int]]: ...


def library_version(backend: str) -> str:
    """The installed version of the backend's library; a clear error when it is missing."""
    from importlib.metadata import PackageNotFoundError, version

    from rar.errors import ConfigError

    try:
        return version(backend)
    except PackageNotFoundError:
        raise ConfigError(
            f"the BM25 backend {backend!r} needs the {backend} package: pip install {backend}"
        ) from None


# --- tantivy ----------------------------------------------------------------------------------

_FIELD: Final = "body"
_ORD: Final = "ord"


def _tantivy_schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    # tokens come pre-analysed and space-joined; "freq" keeps no positions (BM25 needs none)
    builder.add_text_field(_FIELD, stored=False, tokenizer_name="whitespace", index_option="freq")
    builder.add_unsigned_field(_ORD, stored=True, indexed=False)
    return builder.build()


class TantivyBackend:
    name = "tantivy"

    def __init__(self, index: Any) -> None:
        import tantivy

        self._tantivy = tantivy
        self._schema = index.schema
        self._searcher = index.searcher()
        self._ords: dict[tuple[int, int], int] = {}

    @classmethod
    def build(cls, tokens: Sequence[Sequence[str]], directory: Path) -> None:
        import tantivy

        index = tantivy.Index(_tantivy_schema(), path=str(directory))
        # one thread: segments (and so the library's own order of equal scores) are reproducible
        writer = index.writer(heap_size=256_000_000, num_threads=1)
        for ordinal, passage_tokens in enumerate(tokens):
            doc = tantivy.Document()
            doc.add_text(_FIELD, " ".join(passage_tokens))
            doc.add_unsigned(_ORD, ordinal)  # Document(ord=int) fails: "Expected a U64"
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()

    @classmethod
    def open(cls, directory: Path) -> TantivyBackend:
        import tantivy

        return cls(tantivy.Index.open(str(directory)))

    @property
    def num_docs(self) -> int:
        return int(self._searcher.num_docs)

    def doc_freq(self, term: str) -> int:
        return int(self._searcher.doc_freq(_FIELD, term))

    def _ordinal(self, address: Any) -> int:
        key = (address.segment_ord, address.doc)
        ordinal = self._ords.get(key)
        if ordinal is None:
            ordinal = int(self._searcher.doc(address)[_ORD][0])
            self._ords[key] = ordinal
        return ordinal

    def candidates(self, terms: Sequence[str], n: int) -> list[tuple[float, int]]:
        t = self._tantivy
        query = t.Query.boolean_query(
            [(t.Occur.Should, t.Query.term_query(self._schema, _FIELD, term)) for term in terms]
        )
        limit = n + 8
        while True:
            hits = self._searcher.search(query, limit=limit, count=False).hits
            if len(hits) < limit or hits[-1][0] < hits[n - 1][0]:
                break
            limit *= 4  # the n-th score is tied beyond the window: widen it
        return [(float(score), self._ordinal(address)) for score, address in hits]


# --- bm25s ------------------------------------------------------------------------------------


class Bm25sBackend:
    name = "bm25s"

    def __init__(self, retriever: Any) -> None:
        import numpy as np

        self._np = np
        self._retriever = retriever
        self._vocab: dict[str, int] = retriever.vocab_dict
        self._indptr = retriever.scores["indptr"]
        self._num_docs = int(retriever.scores["num_docs"])

    @classmethod
    def build(cls, tokens: Sequence[Sequence[str]], directory: Path) -> None:
        import bm25s

        retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
        retriever.index([list(t) for t in tokens], show_progress=False)
        retriever.save(str(directory), show_progress=False)

    @classmethod
    def open(cls, directory: Path) -> Bm25sBackend:
        import bm25s

        return cls(bm25s.BM25.load(str(directory), mmap=True, show_progress=False, verbosity=0))

    @property
    def num_docs(self) -> int:
        return self._num_docs

    def doc_freq(self, term: str) -> int:
        column = self._vocab.get(term)
        if column is None or column + 1 >= len(self._indptr):
            return 0
        return int(self._indptr[column + 1] - self._indptr[column])

    def candidates(self, terms: Sequence[str], n: int) -> list[tuple[float, int]]:
        np = self._np
        known = [term for term in terms if term in self._vocab]
        if not known:
            return []
        scores = self._retriever.get_scores(known)
        matched = np.flatnonzero(scores > 0)
        if len(matched) > n:
            nth = np.partition(scores[matched], len(matched) - n)[len(matched) - n]
            matched = matched[scores[matched] >= nth]  # keeps every passage tied with the n-th
        factor = K1 + 1.0  # bm25s "lucene" omits (k1 + 1); restore the classic scale
        return [(float(scores[i]) * factor, int(i)) for i in matched]


def build_backend(backend: str, tokens: Sequence[Sequence[str]], directory: Path) -> None:
    (TantivyBackend if backend == "tantivy" else Bm25sBackend).build(tokens, directory)


def open_backend(backend: str, directory: Path) -> Backend:
    if backend == "tantivy":
        return TantivyBackend.open(directory)
    return Bm25sBackend.open(directory)
