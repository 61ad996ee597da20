"""A corpus: a directory of text documents split into passages with stable locations.

See ``docs/evidence.md`` for the rules. In short:

* documents are ``.md``, ``.markdown``, ``.txt`` and ``.rst`` files found recursively, in sorted
  order of their relative POSIX paths; everything else is listed in :attr:`Corpus.skipped` with
  the reason (other extensions, hidden files and directories, symbolic links, binary files, files
  that are not UTF-8, empty files);
* a document's ``doc_id`` is a slug of its relative path without the extension
  (``Methods/Kissinger Method.md`` → ``methods/kissinger-method``);
* passages are paragraphs (blank-line separated blocks; fenced code blocks stay whole); a heading
  block attaches to the block after it; locations are ``paragraph_<n>``, 1-based per document;
* digests: a document's is over its bytes, a passage's ``content_hash`` over its text as stored
  (UTF-8, no Unicode normalisation), the corpus's over its ``(doc_id, digest)`` pairs in order.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from rar.errors import UserError
from rar.evidence.splitting import split_passages, title_of
from rar.hashing import digest_bytes, digest_value

__all__ = [
    "TEXT_EXTENSIONS",
    "Corpus",
    "CorpusError",
    "Document",
    "Passage",
    "SkippedFile",
    "doc_ids_for",
]

log = logging.getLogger(__name__)

TEXT_EXTENSIONS: Final = (".md", ".markdown", ".txt", ".rst")
_MARKDOWN: Final = (".md", ".markdown")
_SLUG_JUNK = re.compile(r"[^\w.]+")


class CorpusError(UserError):
    """A corpus directory is missing, empty, or holds no usable document."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Passage(_Frozen):
    """One paragraph of a document: the unit that is indexed, retrieved and cited."""

    doc_id: str
    location: str
    """``paragraph_<number>``."""
    number: int
    """1-based position of the passage in its document."""
    line: int
    """1-based line of the file where the passage starts."""
    text: str
    content_hash: str
    """``digest_bytes(text.encode("utf-8"))``."""

    @property
    def ref(self) -> str:
        """``doc_id#location``, the form claims cite."""
        return f"{self.doc_id}#{self.location}"


class Document(_Frozen):
    doc_id: str
    title: str
    path: str
    """Relative POSIX path inside the corpus directory."""
    digest: str
    """Digest of the file's bytes."""
    passages: tuple[Passage, ...]


class SkippedFile(_Frozen):
    path: str
    """Relative POSIX path inside the corpus directory."""
    reason: str


def _slug_part(part: str) -> str:
    slug = _SLUG_JUNK.sub("-", unicodedata.normalize("NFC", part).casefold()).strip("-.")
    return slug or "_"


def _stem_path(relative: str) -> str:
    head, _, name = relative.rpartition("/")
    stem = name[: -len(Path(name).suffix)] if Path(name).suffix else name
    return f"{head}/{stem}" if head else stem


def doc_ids_for(relative_paths: list[str]) -> dict[str, str]:
    """The doc id of each relative path: a slug of the path without its extension.

    Each segment is NFC-normalised (macOS and Linux spell accented file names differently),
    case-folded, and runs of characters other than letters, digits and dots become ``-``. When
    several paths give the same slug, every one of them gets ``-`` and 8 hex digits of the digest
    of its relative path appended, so an id never silently moves to another file.
    """
    slugs = {p: "/".join(_slug_part(s) for s in _stem_path(p).split("/")) for p in relative_paths}
    counts: dict[str, int] = {}
    for slug in slugs.values():
        counts[slug] = counts.get(slug, 0) + 1
    ids: dict[str, str] = {}
    for path, slug in slugs.items():
        if counts[slug] > 1:
            slug = f"{slug}-{digest_bytes(path.encode('utf-8'))[7:15]}"
        ids[path] = slug
    return ids


def _walk(root: Path) -> Iterator[tuple[str, Path, str | None]]:
    """(relative POSIX path, path, reason to skip or None) for every entry worth listing."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            rel = (here / name).relative_to(root).as_posix()
            if name.startswith("."):
                yield rel + "/", here / name, "hidden directory (not searched)"
            elif (here / name).is_symlink():
                yield rel + "/", here / name, "symbolic link (not followed)"
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if name.startswith("."):
                yield rel, path, "hidden file"
            elif path.is_symlink():
                yield rel, path, "symbolic link (not followed)"
            elif not path.is_file():
                yield rel, path, "not a regular file"
            elif path.suffix.lower() not in TEXT_EXTENSIONS:
                ext = path.suffix.lower() or "none"
                yield (
                    rel,
                    path,
                    f"unsupported extension ({ext}); loaded: {', '.join(TEXT_EXTENSIONS)}",
                )
            else:
                yield rel, path, None


def _decode(data: bytes) -> tuple[str | None, str]:
    """(text, '') or (None, reason)."""
    if b"\x00" in data[:8192]:
        return None, "binary file (contains NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start})"
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return None, "empty (no text)"
    return text, ""


class Corpus:
    """The documents of a corpus directory, their passages, and what was skipped."""

    def __init__(
        self, root: Path, documents: tuple[Document, ...], skipped: tuple[SkippedFile, ...]
    ) -> None:
        self.root = root
        self.documents = documents
        self.skipped = skipped
        self.digest = digest_value([[d.doc_id, d.digest] for d in documents])

    def __repr__(self) -> str:
        return (
            f"Corpus({str(self.root)!r}, {len(self.documents)} documents, "
            f"{len(self.passages)} passages, {self.digest[:19]}…)"
        )

    @classmethod
    def load(cls, path: Path | str) -> Corpus:
        """Read every text document under ``path``; raise :class:`CorpusError` if none is usable."""
        root = Path(path)
        if not root.exists():
            raise CorpusError(f"corpus directory {root} does not exist", path=root)
        if not root.is_dir():
            raise CorpusError(f"corpus path {root} is not a directory", path=root)
        root = root.resolve()
        skipped: list[SkippedFile] = []
        texts: dict[str, tuple[str, bytes]] = {}
        for rel, file, reason in _walk(root):
            if reason is None:
                try:
                    data = file.read_bytes()
                except OSError as exc:
                    reason = f"unreadable ({exc.strerror or exc})"
                else:
                    text, reason = _decode(data)
                    if text is not None:
                        texts[rel] = (text, data)
                        continue
                log.warning("corpus %s: skipped %s: %s", root, rel, reason)
            skipped.append(SkippedFile(path=rel, reason=reason))
        if not texts:
            raise CorpusError(_nothing_usable(root, skipped), path=root, skipped=skipped)
        ids = doc_ids_for(sorted(texts))
        documents = []
        for rel in sorted(texts):
            text, data = texts[rel]
            doc_id = ids[rel]
            markdown = rel.lower().endswith(_MARKDOWN)
            rst = rel.lower().endswith(".rst")
            passages = tuple(
                Passage(
                    doc_id=doc_id,
                    location=f"paragraph_{n}",
                    number=n,
                    line=line,
                    text=body,
                    content_hash=digest_bytes(body.encode("utf-8")),
                )
                for n, (line, body) in enumerate(split_passages(text, rst=rst), start=1)
            )
            title = title_of(text, markdown=markdown, rst=rst) or Path(rel).stem
            documents.append(
                Document(
                    doc_id=doc_id,
                    title=title,
                    path=rel,
                    digest=digest_bytes(data),
                    passages=passages,
                )
            )
        return cls(root, tuple(documents), tuple(skipped))

    @cached_property
    def passages(self) -> tuple[Passage, ...]:
        """Every passage, in document order then passage order (the index's numbering)."""
        return tuple(p for d in self.documents for p in d.passages)

    @cached_property
    def _by_id(self) -> dict[str, Document]:
        return {d.doc_id: d for d in self.documents}

    def document(self, doc_id: str) -> Document | None:
        return self._by_id.get(doc_id)

    def passage(self, doc_id: str, location: str) -> Passage | None:
        """The passage at ``doc_id`` / ``location``, or None when either is missing."""
        doc = self._by_id.get(doc_id)
        if doc is None or not location.startswith("paragraph_"):
            return None
        number = location.removeprefix("paragraph_")
        if not number.isdigit() or number.startswith("0"):
            return None
        index = int(number) - 1
        return doc.passages[index] if index < len(doc.passages) else None

    def title(self, doc_id: str) -> str:
        doc = self._by_id.get(doc_id)
        return doc.title if doc else ""


def _nothing_usable(root: Path, skipped: list[SkippedFile]) -> str:
    if not skipped:
        return (
            f"corpus directory {root} is empty: a corpus is a directory of text documents "
            f"({', '.join(TEXT_EXTENSIONS)}), searched recursively"
        )
    shown = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:5])
    more = f"; and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return (
        f"corpus directory {root} has no usable document: {len(skipped)} entr"
        f"{'y' if len(skipped) == 1 else 'ies'} found, all skipped ({shown}{more}). "
        f"Documents must be UTF-8 text files ending in {', '.join(TEXT_EXTENSIONS)}"
    )
