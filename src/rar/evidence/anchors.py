"""Evidence anchors: citations of passages that can be checked offline against the corpus.

An anchor names a passage (``doc_id``, ``location``) and carries the digest of its text
(``content_hash``). :func:`verify_anchors` re-reads the corpus and reports every anchor whose
passage changed or vanished, and every snippet that is not the passage's own text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rar.evidence.analysis import snippet as make_snippet

if TYPE_CHECKING:
    from rar.evidence.corpus import Corpus, Passage

__all__ = ["AnchorProblem", "EvidenceAnchor", "verify_anchors"]

ProblemKind = Literal["document_missing", "passage_missing", "passage_changed", "snippet_mismatch"]


class EvidenceAnchor(BaseModel):
    """A citation of one passage, with the digest of the text it cites."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    doc_id: str
    doc_title: str
    location: str
    content_hash: str
    snippet: str
    """The passage text, cut to about 300 characters on a word boundary (``…`` when cut)."""
    relevance_score: float = Field(ge=0.0, le=1.0)

    @property
    def ref(self) -> str:
        """``doc_id#location``, the form claims cite."""
        return f"{self.doc_id}#{self.location}"

    @classmethod
    def from_passage(
        cls, passage: Passage, doc_title: str, relevance_score: float
    ) -> EvidenceAnchor:
        return cls(
            doc_id=passage.doc_id,
            doc_title=doc_title,
            location=passage.location,
            content_hash=passage.content_hash,
            snippet=make_snippet(passage.text),
            relevance_score=relevance_score,
        )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AnchorProblem(BaseModel):
    """Why an anchor no longer matches the corpus."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ProblemKind
    doc_id: str
    location: str
    expected: str | None
    """What the anchor says (its content hash; its snippet for ``snippet_mismatch``)."""
    actual: str | None
    """What the corpus holds now (None when the document or passage is gone)."""
    found_at: str | None = None
    """``doc_id#location`` where a passage with the expected hash is now, if anywhere."""
    message: str

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


_FIELDS = frozenset(EvidenceAnchor.model_fields)


def _squash(text: str) -> str:
    return " ".join(text.split())


def verify_anchors(
    anchors: Iterable[EvidenceAnchor | Mapping[str, Any]], corpus: Corpus
) -> list[AnchorProblem]:
    """Check every anchor against ``corpus``; an empty list means all of them still hold.

    Anchors may be :class:`EvidenceAnchor` objects or their JSON form (e.g. read from a run);
    keys other than the anchor's fields are ignored.
    """
    by_hash: dict[str, str] = {}
    for known in corpus.passages:
        by_hash.setdefault(known.content_hash, known.ref)
    problems: list[AnchorProblem] = []
    for item in anchors:
        anchor = (
            item
            if isinstance(item, EvidenceAnchor)
            else EvidenceAnchor.model_validate({k: v for k, v in item.items() if k in _FIELDS})
        )
        doc_id, location, expected = anchor.doc_id, anchor.location, anchor.content_hash
        moved = by_hash.get(expected)
        where = f"{doc_id}#{location}"
        if corpus.document(doc_id) is None:
            problems.append(
                AnchorProblem(
                    kind="document_missing",
                    doc_id=doc_id,
                    location=location,
                    expected=expected,
                    actual=None,
                    found_at=moved,
                    message=f"{where}: the document {doc_id!r} is no longer in the corpus"
                    + (f"; the passage is now at {moved}" if moved else ""),
                )
            )
            continue
        passage = corpus.passage(doc_id, location)
        if passage is None:
            problems.append(
                AnchorProblem(
                    kind="passage_missing",
                    doc_id=doc_id,
                    location=location,
                    expected=expected,
                    actual=None,
                    found_at=moved,
                    message=f"{where}: the document has no passage {location}"
                    + (f"; the passage is now at {moved}" if moved else ""),
                )
            )
            continue
        if passage.content_hash != expected:
            problems.append(
                AnchorProblem(
                    kind="passage_changed",
                    doc_id=doc_id,
                    location=location,
                    expected=expected,
                    actual=passage.content_hash,
                    found_at=moved,
                    message=f"{where}: the passage text changed since it was cited"
                    + (f"; the cited text is now at {moved}" if moved else ""),
                )
            )
            continue
        quoted = _squash(anchor.snippet.removesuffix("…"))
        if quoted and quoted not in _squash(passage.text):
            problems.append(
                AnchorProblem(
                    kind="snippet_mismatch",
                    doc_id=doc_id,
                    location=location,
                    expected=anchor.snippet,
                    actual=make_snippet(passage.text),
                    message=f"{where}: the anchor's snippet is not text of the passage it cites",
                )
            )
    return problems
