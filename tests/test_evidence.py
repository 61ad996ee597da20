"""rar.evidence: corpus loading, passages and digests, BM25 search, persistence, anchors, the
demo corpus and the task specs."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

import rar.evidence.index as index_module
from rar.errors import UserError
from rar.evidence import (
    BACKENDS,
    DEFAULT_BACKEND,
    BM25Index,
    Corpus,
    CorpusError,
    EvidenceAnchor,
    Hit,
    demo_corpus_path,
    index_directory,
    resolve_corpus,
    verify_anchors,
)
from rar.evidence.analysis import query_terms, snippet, stem, tokenize
from rar.hashing import digest_bytes

SPECS = Path(__file__).resolve().parents[1] / "src" / "rar" / "science" / "specs"
INSTALLED = tuple(name for name in BACKENDS if importlib.util.find_spec(name) is not None)
EACH_BACKEND = [
    pytest.param(name, marks=pytest.mark.skipif(name not in INSTALLED, reason=f"{name} missing"))
    for name in BACKENDS
]


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    write(
        root,
        "alpha.md",
        "# Alpha title\n\nFirst paragraph about kinetics.\n\n## Section\n\nSecond.\n",
    )
    write(root, "sub/beta.txt", "Beta first line\nstill the first paragraph\n\nAnother one.\n")
    write(root, "sub/deeper/gamma.rst", "Gamma Title\n===========\n\nBody of gamma.\n")
    return root


@pytest.fixture(scope="module")
def demo() -> Corpus:
    return Corpus.load(demo_corpus_path())


@pytest.fixture(scope="module")
def demo_indexes(demo: Corpus, tmp_path_factory: pytest.TempPathFactory) -> dict[str, BM25Index]:
    directory = tmp_path_factory.mktemp("indexes")
    return {backend: BM25Index.build(demo, directory, backend) for backend in INSTALLED}


# --- loading ------------------------------------------------------------------------------------


def test_load_is_recursive_sorted_and_lists_what_it_skipped(small: Path) -> None:
    write(small, "notes.json", "{}")
    write(small, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(small, "binary.md", b"text\x00with a NUL")
    write(small, "latin1.txt", "caf\u00e9 cr\u00e8me".encode("latin-1"))
    write(small, "empty.md", "  \n\n")
    write(small, ".hidden.md", "# hidden\n\ntext\n")
    write(small, ".git/config", "[core]\n")
    corpus = Corpus.load(small)
    assert [d.path for d in corpus.documents] == [
        "alpha.md",
        "sub/beta.txt",
        "sub/deeper/gamma.rst",
    ]
    assert [d.doc_id for d in corpus.documents] == ["alpha", "sub/beta", "sub/deeper/gamma"]
    reasons = {s.path: s.reason for s in corpus.skipped}
    assert set(reasons) == {
        ".git/",
        ".hidden.md",
        "binary.md",
        "empty.md",
        "image.png",
        "latin1.txt",
        "notes.json",
    }
    assert reasons["latin1.txt"].startswith("not UTF-8 text")
    assert "binary" in reasons["binary.md"]
    assert reasons["image.png"].startswith("unsupported extension (.png)")
    assert reasons["notes.json"].startswith("unsupported extension (.json)")
    assert reasons["empty.md"].startswith("empty")
    assert reasons[".git/"].startswith("hidden directory")


def test_binary_with_an_unsupported_extension_is_skipped_for_its_extension(tmp_path: Path) -> None:
    write(tmp_path, "doc.md", "# Doc\n\ntext\n")
    write(tmp_path, "image.png", b"\x00\x01")
    (reason,) = [s.reason for s in Corpus.load(tmp_path).skipped]
    assert reason.startswith("unsupported extension (.png)")


def test_symbolic_links_are_not_followed(tmp_path: Path) -> None:
    write(tmp_path, "doc.md", "# Doc\n\ntext\n")
    outside = write(tmp_path.parent / "outside", "secret.md", "# Secret\n\nsecret\n")
    (tmp_path / "link.md").symlink_to(outside)
    (tmp_path / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    corpus = Corpus.load(tmp_path)
    assert [d.doc_id for d in corpus.documents] == ["doc"]
    assert {s.path: s.reason for s in corpus.skipped} == {
        "link.md": "symbolic link (not followed)",
        "linkdir/": "symbolic link (not followed)",
    }


def test_missing_directory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"does not exist") as info:
        Corpus.load(tmp_path / "nope")
    assert isinstance(info.value, UserError)
    assert str(tmp_path / "nope") in str(info.value)


def test_a_file_is_not_a_corpus(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="not a directory"):
        Corpus.load(write(tmp_path, "a.md", "# A\n"))


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"is empty") as info:
        Corpus.load(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_only_unusable_files_is_an_error_naming_them(tmp_path: Path) -> None:
    write(tmp_path, "data.csv", "a,b\n1,2\n")
    write(tmp_path, "old.txt", b"\xff\xfe\x00broken")
    with pytest.raises(CorpusError) as info:
        Corpus.load(tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "no usable document" in message
    assert "2 entries found" in message and "data.csv" in message and "old.txt" in message
    assert len(info.value.skipped) == 2  # type: ignore[attr-defined]


# --- ids, titles, passages, digests ------------------------------------------------------------


def test_doc_ids_are_slugs_of_the_relative_path(tmp_path: Path) -> None:
    write(tmp_path, "Methods/Kissinger Method.md", "# K\n\ntext\n")
    write(tmp_path, "a#b.md", "# A\n\ntext\n")
    nfd = unicodedata.normalize("NFD", "Énergie d'activation.txt")
    write(tmp_path, nfd, "Énergie\n")
    ids = sorted(d.doc_id for d in Corpus.load(tmp_path).documents)
    assert ids == ["a-b", "methods/kissinger-method", "énergie-d-activation"]


def test_colliding_slugs_get_a_suffix_from_their_path(tmp_path: Path) -> None:
    write(tmp_path, "notes.md", "# Notes\n\none\n")
    write(tmp_path, "notes.txt", "Notes\n\ntwo\n")
    ids = [d.doc_id for d in Corpus.load(tmp_path).documents]
    assert ids == [
        "notes-" + digest_bytes(b"notes.md")[7:15],
        "notes-" + digest_bytes(b"notes.txt")[7:15],
    ]


def test_titles(small: Path) -> None:
    write(small, "setext.md", "Intro line\n\nSetext Title\n------------\n\ntext\n")
    write(small, "plain.md", "\n\nNo heading here\nsecond line\n")
    titles = {d.path: d.title for d in Corpus.load(small).documents}
    assert titles == {
        "alpha.md": "Alpha title",
        "sub/beta.txt": "Beta first line",
        "sub/deeper/gamma.rst": "Gamma Title",
        "setext.md": "Setext Title",
        "plain.md": "No heading here",
    }


def test_passages_headings_attach_to_the_next_block(tmp_path: Path) -> None:
    text = (
        "# Title\n\n## Section\n\nFirst paragraph\nline two\n\n---\n\n"
        "```\ncode\n\nstill code\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Trailing heading\n"
    )
    write(tmp_path, "doc.md", text)
    (doc,) = Corpus.load(tmp_path).documents
    assert [(p.location, p.number, p.line, p.text) for p in doc.passages] == [
        ("paragraph_1", 1, 1, "# Title\n\n## Section\n\nFirst paragraph\nline two"),
        ("paragraph_2", 2, 10, "```\ncode\n\nstill code\n```"),
        ("paragraph_3", 3, 16, "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("paragraph_4", 4, 20, "## Trailing heading"),
    ]
    for passage in doc.passages:
        assert passage.content_hash == digest_bytes(passage.text.encode("utf-8"))
        assert passage.ref == f"doc#{passage.location}"


def test_crlf_gives_the_same_passages_but_another_file_digest(tmp_path: Path) -> None:
    write(tmp_path / "lf", "doc.md", "# T\n\nline one\nline two\n")
    write(tmp_path / "crlf", "doc.md", "# T\r\n\r\nline one\r\nline two\r\n")
    lf, crlf = Corpus.load(tmp_path / "lf"), Corpus.load(tmp_path / "crlf")
    assert lf.passages == crlf.passages
    assert lf.documents[0].digest != crlf.documents[0].digest


def test_text_is_hashed_as_written_without_unicode_normalisation(tmp_path: Path) -> None:
    write(tmp_path / "nfc", "doc.md", unicodedata.normalize("NFC", "café\n"))
    write(tmp_path / "nfd", "doc.md", unicodedata.normalize("NFD", "café\n"))
    nfc, nfd = Corpus.load(tmp_path / "nfc"), Corpus.load(tmp_path / "nfd")
    assert nfc.passages[0].content_hash != nfd.passages[0].content_hash
    assert tokenize(nfc.passages[0].text) == tokenize(nfd.passages[0].text)  # search ignores it


def test_two_loads_are_equal_and_one_byte_changes_the_digests(small: Path) -> None:
    first, second = Corpus.load(small), Corpus.load(small)
    assert first.documents == second.documents
    assert first.digest == second.digest and first.digest.startswith("sha256:")
    path = small / "sub" / "beta.txt"
    path.write_bytes(path.read_bytes().replace(b"Another", b"Anotjer"))
    third = Corpus.load(small)
    assert third.digest != first.digest
    changed = [
        (a.ref, a.content_hash != b.content_hash)
        for a, b in zip(first.passages, third.passages, strict=True)
    ]
    assert [ref for ref, differs in changed if differs] == ["sub/beta#paragraph_2"]
    assert [
        d.digest == e.digest for d, e in zip(first.documents, third.documents, strict=True)
    ] == [
        True,
        False,
        True,
    ]


def test_passage_lookup(small: Path) -> None:
    corpus = Corpus.load(small)
    assert corpus.passage("alpha", "paragraph_2") == corpus.documents[0].passages[1]
    for doc_id, location in [
        ("alpha", "paragraph_0"),
        ("alpha", "paragraph_02"),
        ("alpha", "paragraph_3"),
        ("alpha", "para_1"),
        ("nope", "paragraph_1"),
    ]:
        assert corpus.passage(doc_id, location) is None


def test_tokenizer() -> None:
    assert tokenize("The Arrhenius plots: ln k vs 1/T at 8.314 J; energies, processes, gas") == [
        "arrhenius", "plot", "ln", "k", "vs", "1", "8.314", "j", "energy", "process", "gas",
    ]  # fmt: skip
    assert stem("analysis") == "analysis" and stem("studies") == "study"
    assert query_terms("rate rates RATE the") == ["rate"]


# --- search -------------------------------------------------------------------------------------

RELEVANT = [
    ("DSC peak temperatures at four heating rates Kissinger", "worked-examples/kissinger-dsc"),
    ("climbing image nudged elastic band saddle point", "dft-nudged-elastic-band"),
    ("Tris buffer pKa changes with temperature", "enzyme-kinetics-temperature"),
    ("isokinetic temperature compensation effect Meyer-Neldel", "compensation-effect"),
    ("Doyle approximation log p(x) = -2.315 - 0.4567 x", "ozawa-flynn-wall-method"),
]


@pytest.mark.parametrize("backend", EACH_BACKEND)
@pytest.mark.parametrize(("query", "doc_id"), RELEVANT)
def test_relevant_passage_ranks_first(
    demo_indexes: dict[str, BM25Index], backend: str, query: str, doc_id: str
) -> None:
    hits = demo_indexes[backend].search(query, k=5)
    assert hits[0].passage.doc_id == doc_id
    assert hits[0].score > 0.35
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert [h.raw_score for h in hits] == sorted((h.raw_score for h in hits), reverse=True)


@pytest.mark.parametrize("backend", EACH_BACKEND)
def test_scores_have_absolute_meaning(
    demo: Corpus, demo_indexes: dict[str, BM25Index], backend: str
) -> None:
    index = demo_indexes[backend]
    assert index.search("medieval poetry football tournament", k=5) == []
    weak = index.search("medieval poetry football tournament temperature", k=5)
    assert weak and all(h.score < 0.15 for h in weak)
    for passage in (demo.passages[5], demo.passages[40], demo.passages[90]):
        verbatim = " ".join(passage.text.split()[:40])
        (best, *_) = index.search(verbatim, k=3)
        assert best.passage == passage and best.score >= 0.9
    assert index.search("the of and", k=5) == []  # nothing but stop words
    with pytest.raises(ValueError, match="k must be at least 1"):
        index.search("arrhenius", k=0)


@pytest.mark.skipif(INSTALLED != BACKENDS, reason="needs both backends")
def test_backends_agree(demo_indexes: dict[str, BM25Index]) -> None:
    """Same formula, same tokens: equal scores up to tantivy's one-byte length encoding."""
    for query, _ in RELEVANT:
        a, b = (demo_indexes[name].search(query, k=8) for name in BACKENDS)
        assert a[0].passage == b[0].passage
        scores = {h.passage.ref: h.raw_score for h in b}
        shared = [h for h in a if h.passage.ref in scores]
        assert len(shared) >= 6
        for hit in shared:
            assert hit.raw_score == pytest.approx(scores[hit.passage.ref], rel=0.03)


@pytest.mark.parametrize("backend", EACH_BACKEND)
def test_ties_break_on_doc_id_then_location(tmp_path: Path, backend: str) -> None:
    same = "Kissinger peak shift with heating rate.\n\n"
    for name in ["zeta", "alpha", "mid/beta", "gamma"]:
        write(tmp_path / "c", f"{name}.md", same * 12)
    write(tmp_path / "c", "other.md", "Unrelated words entirely.\n")
    corpus = Corpus.load(tmp_path / "c")
    index = BM25Index.build(corpus, tmp_path / "idx", backend)
    hits = index.search("kissinger heating", k=14)
    assert len({h.raw_score for h in hits}) == 1  # 48 identical passages, all tied
    assert [h.passage.ref for h in hits] == [f"alpha#paragraph_{n}" for n in range(1, 13)] + [
        "gamma#paragraph_1",
        "gamma#paragraph_2",
    ]
    again = BM25Index.build(corpus, tmp_path / "idx", backend).search("kissinger heating", k=14)
    assert again == hits


def test_hits_are_json(demo_indexes: dict[str, BM25Index]) -> None:
    hits = demo_indexes[DEFAULT_BACKEND].search("Eyring plot entropy of activation", k=3)
    data = json.loads(json.dumps([h.to_json() for h in hits]))
    assert [Hit.model_validate(item) for item in data] == hits
    assert set(data[0]) == {"passage", "doc_title", "score", "raw_score", "rank"}


def test_unknown_or_missing_backend(
    demo: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError, match="unknown BM25 backend"):
        BM25Index.build(demo, tmp_path, "lucene")
    import importlib.metadata

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(UserError, match="pip install bm25s"):
        BM25Index.build(demo, tmp_path, "bm25s")


# --- persistence --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", EACH_BACKEND)
def test_index_is_reused_then_rebuilt_when_the_corpus_changes(
    small: Path, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[str] = []
    real = index_module.build_backend

    def counting(name: str, tokens: Any, directory: Path) -> None:
        builds.append(name)
        real(name, tokens, directory)

    monkeypatch.setattr(index_module, "build_backend", counting)
    corpus = Corpus.load(small)
    directory = index_directory(tmp_path / "store", corpus)
    assert directory == tmp_path / "store" / "indexes" / corpus.digest.replace(":", "-")
    first = BM25Index.build(corpus, directory, backend)
    assert first.built and builds == [backend]
    meta = first.path / index_module.META_NAME
    stamp = meta.stat().st_mtime_ns
    second = BM25Index.build(Corpus.load(small), directory, backend)
    assert not second.built and builds == [backend] and meta.stat().st_mtime_ns == stamp
    assert second.search("kinetics", k=3) == first.search("kinetics", k=3)

    write(small, "alpha.md", "# Alpha title\n\nNow about thermodynamics.\n")
    changed = Corpus.load(small)
    third = BM25Index.build(changed, directory, backend)  # same directory, other corpus digest
    assert third.built and builds == [backend, backend]
    assert third.search("kinetics", k=3) == []
    assert third.search("thermodynamics", k=3)[0].passage.doc_id == "alpha"
    assert [p.name for p in directory.iterdir()] == [backend]  # no temporary leftovers


@pytest.mark.parametrize("backend", EACH_BACKEND)
def test_damaged_or_stale_index_is_rebuilt(small: Path, tmp_path: Path, backend: str) -> None:
    corpus = Corpus.load(small)
    first = BM25Index.build(corpus, tmp_path, backend)
    for item in first.path.iterdir():
        if item.name != index_module.META_NAME:
            item.unlink()
    assert BM25Index.build(corpus, tmp_path, backend).built
    meta = first.path / index_module.META_NAME
    meta.write_text(meta.read_text().replace("analysis/1", "analysis/0"))
    assert BM25Index.build(corpus, tmp_path, backend).built
    assert not BM25Index.build(corpus, tmp_path, backend).built
    assert BM25Index.build(corpus, tmp_path, backend, rebuild=True).built


# --- anchors ------------------------------------------------------------------------------------


def test_anchor_json_round_trip(demo_indexes: dict[str, BM25Index]) -> None:
    hit = demo_indexes[DEFAULT_BACKEND].search("Friedman differential isoconversional", k=1)[0]
    anchor = hit.anchor()
    assert anchor.doc_id == "friedman-method" and anchor.doc_title.startswith("The Friedman")
    assert anchor.content_hash == hit.passage.content_hash
    assert anchor.relevance_score == hit.score
    assert EvidenceAnchor.model_validate_json(anchor.model_dump_json()) == anchor
    assert EvidenceAnchor.model_validate(json.loads(json.dumps(anchor.to_json()))) == anchor
    with pytest.raises(ValidationError):
        EvidenceAnchor.model_validate({**anchor.to_json(), "relevance_score": 1.5})
    with pytest.raises(ValidationError):
        anchor.snippet = "changed"  # type: ignore[misc]


def test_snippet_is_cut_on_a_word_boundary() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    cut = snippet(text)
    assert len(cut) <= 300 and cut.endswith("…")
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "
    assert snippet("short text ") == "short text"


def test_verify_detects_changed_vanished_and_moved_passages(small: Path) -> None:
    corpus = Corpus.load(small)
    anchors = [EvidenceAnchor.from_passage(p, corpus.title(p.doc_id), 0.5) for p in corpus.passages]
    assert verify_anchors(anchors, corpus) == []
    assert verify_anchors([{**a.to_json(), "note": "x"} for a in anchors], corpus) == []  # JSON

    write(small, "alpha.md", "# Alpha title\n\nFirst paragraph about kinetics.\n")
    write(
        small,
        "sub/beta.txt",
        "Beta first line\nstill the first paragraph\n\nAnother one, edited.\n",
    )
    (small / "sub" / "deeper" / "gamma.rst").unlink()
    problems = {(p.doc_id, p.location): p for p in verify_anchors(anchors, Corpus.load(small))}
    assert {key: p.kind for key, p in problems.items()} == {
        ("alpha", "paragraph_2"): "passage_missing",
        ("sub/beta", "paragraph_2"): "passage_changed",
        ("sub/deeper/gamma", "paragraph_1"): "document_missing",
    }
    edited = problems[("sub/beta", "paragraph_2")]
    assert edited.expected == anchors[3].content_hash and edited.actual != edited.expected
    assert edited.found_at is None
    missing = problems[("alpha", "paragraph_2")]
    assert missing.actual is None and missing.expected == anchors[1].content_hash
    vanished = problems[("sub/deeper/gamma", "paragraph_1")]
    assert vanished.actual is None and "no longer in the corpus" in vanished.message
    assert json.loads(json.dumps([p.to_json() for p in problems.values()]))


def test_verify_reports_where_a_moved_passage_went(tmp_path: Path) -> None:
    write(tmp_path, "doc.md", "One.\n\nTwo.\n")
    corpus = Corpus.load(tmp_path)
    anchor = EvidenceAnchor.from_passage(corpus.passages[1], "doc", 0.4)
    write(tmp_path, "doc.md", "Zero.\n\nOne.\n\nTwo.\n")
    (problem,) = verify_anchors([anchor], Corpus.load(tmp_path))
    assert problem.kind == "passage_changed" and problem.found_at == "doc#paragraph_3"


def test_verify_detects_a_snippet_that_is_not_the_passage(small: Path) -> None:
    corpus = Corpus.load(small)
    anchor = EvidenceAnchor.from_passage(corpus.passages[0], "Alpha title", 0.9)
    forged = anchor.model_copy(update={"snippet": "Kinetics proves the claim."})
    (problem,) = verify_anchors([anchor, forged], corpus)
    assert problem.kind == "snippet_mismatch" and problem.expected == forged.snippet


# --- the demo corpus and the task specs --------------------------------------------------------


def _fit_slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def _table(text: str) -> list[list[float]]:
    rows = [
        line.strip().strip("|").split("|") for line in text.splitlines() if line.startswith("|")
    ]
    return [[float(cell) for cell in row] for row in rows[2:]]


def test_demo_corpus(demo: Corpus) -> None:
    import math

    assert len(demo.documents) >= 12
    assert not demo.skipped  # nothing for a new user's first run to warn about
    assert resolve_corpus("demo") == demo_corpus_path()
    for doc in demo.documents:
        words = sum(len(p.text.split()) for p in doc.passages)
        assert 300 <= words <= 900, (doc.doc_id, words)
        assert doc.passages[0].text.startswith("# ") and doc.title in doc.passages[0].text
    tables = {p.ref: p.text for p in demo.passages if "\n|---" in p.text}
    assert len(tables) >= 6
    rows = _table(tables["worked-examples/first-order-decomposition#paragraph_3"])
    arrhenius = -8.314462618 * _fit_slope([1 / t for t, _ in rows], [math.log(k) for _, k in rows])
    assert arrhenius / 1000 == pytest.approx(102.9, abs=0.1)
    rows = _table(tables["worked-examples/kissinger-dsc#paragraph_3"])
    kissinger = -8.314462618 * _fit_slope(
        [1 / tp for _, tp in rows], [math.log(beta / tp**2) for beta, tp in rows]
    )
    assert kissinger / 1000 == pytest.approx(125.1, abs=0.1)


def test_demo_corpus_digest_is_independent_of_the_checkout(demo: Corpus, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere"
    shutil.copytree(demo_corpus_path(), copy)
    os.utime(copy / "arrhenius-equation.md", (0, 0))
    assert Corpus.load(copy).digest == demo.digest


def test_task_specs_parse() -> None:
    paths = sorted(SPECS.glob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert set(spec) == {"task", "mode", "model", "seed", "corpus", "max_steps"}, path
        assert spec["mode"] in {"owl_lite", "owl_dl", "owl_full"}
        assert spec["corpus"] == "demo" and spec["model"] == "planner:rule-based"
        assert isinstance(spec["seed"], int) and isinstance(spec["max_steps"], int)
        assert isinstance(spec["task"], str) and spec["task"].strip()
    assert {yaml.safe_load(p.read_text())["mode"] for p in paths} == {
        "owl_lite",
        "owl_dl",
        "owl_full",
    }


def test_task_specs_validate_as_task_specs() -> None:
    from rar.science.spec import TaskSpec, load_spec  # ours: it must import, never skip

    paths = sorted(SPECS.glob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        written = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = load_spec(path)
        assert isinstance(spec, TaskSpec), path
        # every field the file sets is read as written
        assert {name: getattr(spec, name) for name in written} == written, path
        assert spec.corpus == "demo"
