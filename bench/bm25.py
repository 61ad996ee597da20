"""BM25 backends side by side: tantivy vs bm25s on a generated 100k-passage corpus.

The corpus is deterministic synthetic prose written to a temporary directory as markdown files
(1,000 files × 100 paragraphs of 30–120 words) and loaded with ``Corpus.load``. Its vocabulary is
Zipf-distributed (exponent 1.07) over ~60k words: English stop words and the demo corpus's own
words take the frequent ranks, pronounceable pseudo-words the long tail. The mixed queries are 2–6
words of middling frequency, half of them picked from a random passage (so they match something);
the *frequent* queries are 3–6 of the 300 most common content words (each in ~4–9 % of
passages: the longest posting lists).

For each backend: index build time (``BM25Index.build`` cold: tokenising + library), index size
on disk, reopen time (``BM25Index.build`` on an unchanged corpus), and ``index.search(q, k=10)``
latency p50/p90/p99 over the queries (warm, after one pass) including hit construction.

    python bench/bm25.py [--quick]

Goal: query p50 <= 5 ms at 100k passages.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from pathlib import Path

import _common
from _common import dir_size, table, temp_dir

from rar.evidence import BACKENDS, BM25Index, Corpus, demo_corpus_path
from rar.evidence.analysis import STOP_WORDS

GOAL_MS = 5.0
FILES = 1000
ZIPF = 1.07
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


def vocabulary(size: int) -> list[str]:
    """Frequent real words first, then pronounceable pseudo-words (deterministic)."""
    words: list[str] = sorted(STOP_WORDS - {"s", "t", "don"})
    seen = set(words)
    demo = Corpus.load(demo_corpus_path())
    counts: dict[str, int] = {}
    for passage in demo.passages:
        for word in passage.text.lower().split():
            word = word.strip(".,;:()[]|*#`'\"")
            if word.isalpha() and word not in seen:
                counts[word] = counts.get(word, 0) + 1
    for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        words.append(word)
        seen.add(word)
    rng = random.Random(1729)
    while len(words) < size:
        word = "".join(rng.choices(SYLLABLES, k=rng.choice((2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def write_corpus(root: Path, passages: int, vocab: list[str]) -> float:
    """Write the synthetic corpus; return seconds spent."""
    start = time.perf_counter()
    rng = random.Random(42)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF for rank in range(len(vocab))))
    per_file = max(1, passages // FILES)
    files = (passages + per_file - 1) // per_file
    done = 0
    for number in range(files):
        paragraphs = []
        count = min(per_file, passages - done)
        lengths = [rng.randint(30, 120) for _ in range(count)]
        words = rng.choices(vocab, cum_weights=cumulative, k=sum(lengths))
        offset = 0
        for index, length in enumerate(lengths):
            body = " ".join(words[offset : offset + length])
            offset += length
            paragraphs.append(f"## Part {index}\n{body.capitalize()}." if index % 10 == 0 else body)
        sub = root / f"d{number // 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"doc-{number:04d}.md").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        done += count
    return time.perf_counter() - start


def make_queries(corpus: Corpus, vocab: list[str], count: int) -> tuple[list[str], list[str]]:
    """(mixed queries, frequent-word queries)."""
    rng = random.Random(7)
    middling = vocab[300:30000]
    frequent = vocab[len(STOP_WORDS) : len(STOP_WORDS) + 300]  # the most common content words
    mixed = []
    for number in range(count):
        size = rng.randint(2, 6)
        if number % 2:
            mixed.append(" ".join(rng.sample(middling, size)))
        else:
            words = rng.choice(corpus.passages).text.split()
            mixed.append(" ".join(rng.sample(words, min(size, len(words)))))
    heavy = [" ".join(rng.sample(frequent, rng.randint(3, 6))) for _ in range(count)]
    return mixed, heavy


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latencies_ms(index: BM25Index, queries: list[str]) -> tuple[list[float], float]:
    """Per-query milliseconds (after a warm-up pass) and the share of queries with hits."""
    for query in queries:  # warm-up pass (page cache, idf cache)
        index.search(query, k=10)
    out = []
    matched = 0
    for query in queries:
        start = time.perf_counter()
        hits = index.search(query, k=10)
        out.append((time.perf_counter() - start) * 1e3)
        matched += bool(hits)
    return out, matched / len(queries)


def measure(
    corpus: Corpus, directory: Path, backend: str, queries: list[str], heavy: list[str]
) -> dict[str, float]:
    cold = BM25Index.build(corpus, directory, backend)
    assert cold.built
    size = dir_size(cold.path)
    reopen = []
    for _ in range(3):
        again = BM25Index.build(corpus, directory, backend)
        assert not again.built
        reopen.append(again.seconds)
    latencies, matched = latencies_ms(again, queries)
    frequent, _ = latencies_ms(again, heavy)
    return {
        "build_s": cold.seconds,
        "size_mb": size / 1e6,
        "reopen_ms": statistics.median(reopen) * 1e3,
        "p50": percentile(latencies, 0.5),
        "p90": percentile(latencies, 0.9),
        "p99": percentile(latencies, 0.99),
        "matched": matched,
        "heavy_p50": percentile(frequent, 0.5),
        "heavy_p90": percentile(frequent, 0.9),
    }


def agreement(corpus: Corpus, directory: Path, queries: list[str]) -> float:
    """Share of queries whose top-10 passages are the same under both backends."""
    a, b = (BM25Index.build(corpus, directory, name) for name in BACKENDS)
    same = sum(
        [h.passage.ref for h in a.search(q, 10)] == [h.passage.ref for h in b.search(q, 10)]
        for q in queries
    )
    return same / len(queries)


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    passages, nqueries = (10_000, 100) if args.quick else (100_000, 500)
    vocab = vocabulary(60_000)
    with temp_dir("bm25") as tmp:
        write_s = write_corpus(tmp / "corpus", passages, vocab)
        start = time.perf_counter()
        corpus = Corpus.load(tmp / "corpus")
        load_s = time.perf_counter() - start
        text_mb = sum(len(p.text.encode()) for p in corpus.passages) / 1e6
        queries, heavy = make_queries(corpus, vocab, nqueries)
        rows = []
        for backend in BACKENDS:
            m = measure(corpus, tmp / "indexes", backend, queries, heavy)
            rows.append([
                backend, m["build_s"], m["size_mb"], m["reopen_ms"], m["p50"], m["p90"], m["p99"],
                f"{m['matched']:.0%}", m["heavy_p50"], m["heavy_p90"], f"<= {GOAL_MS:.0f}",
                _common.verdict(max(m["p50"], m["heavy_p50"]) <= GOAL_MS),
            ])  # fmt: skip
        same = agreement(corpus, tmp / "indexes", queries)
    print(table(
        ["backend", "build s", "index MB", "reopen ms", "p50 ms", "p90 ms", "p99 ms", "with hits",
         "frequent p50 ms", "frequent p90 ms", "goal p50 ms", "met"],
        rows,
        title=(
            f"bm25: {len(corpus.passages):,} passages in {len(corpus.documents):,} files "
            f"({text_mb:.1f} MB of text; written in {write_s:.1f} s, Corpus.load {load_s:.1f} s), "
            f"{len(queries)} mixed queries + {len(heavy)} of frequent words, k=10"
        ),
    ))  # fmt: skip
    print(f"identical top-10 under both backends: {same:.0%} of queries")


if __name__ == "__main__":
    main()
