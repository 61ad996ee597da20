"""Shared helpers for the benchmark scripts (not a benchmark itself).

Importing this module makes ``rar`` importable from a source checkout: when ``import rar`` fails,
the repository's ``src`` directory is put first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import random
import shutil
import statistics
import string
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"

if importlib.util.find_spec("rar") is None:
    sys.path.insert(0, str(SRC))


def parse_args(description: str, extra: Sequence[tuple[str, dict]] = ()) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="smoke mode: fewer iterations")
    if not any(flag == "--profile" for flag, _ in extra):
        parser.add_argument("--profile", action="store_true", help="print a cProfile of RAR's part")
    for flag, kwargs in extra:
        parser.add_argument(flag, **kwargs)
    return parser.parse_args()


@contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory (under $TMPDIR), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"rar-bench-{prefix}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def dir_size(path: Path) -> int:
    """Bytes of every regular file under ``path`` (apparent sizes)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def count_files(path: Path) -> int:
    return sum(len(files) for _d, _s, files in os.walk(path))


_VOCAB: list[str] | None = None


def _vocab() -> list[str]:
    global _VOCAB
    if _VOCAB is None:
        rng = random.Random(20240601)
        _VOCAB = sorted({
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 10)))
            for _ in range(4000)
        })
    return _VOCAB


def text(rng: random.Random, size: int) -> str:
    """Deterministic pseudo-prose of exactly ``size`` characters (ASCII words and spaces)."""
    vocab = _vocab()
    words = rng.choices(vocab, k=size // 5 + 8)
    out = " ".join(words)
    while len(out) < size:
        out += " " + " ".join(rng.choices(vocab, k=size // 5 + 8))
    return out[:size]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """A plain fixed-width table."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    if title:
        lines.append(title)
    for n, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if n and _numeric(c) else c.ljust(w)
                               for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "-+.") and any(c.isdigit() for c in cell)


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def summary(metric: str, rar: str, floor: str, goal: str, met: bool | None) -> None:
    """One machine-readable line for ``bench/all.py`` (the README's table): the metric, RAR's
    median, its floor measured in the same run, the goal and whether it is met."""
    import json

    shown = "-" if met is None else verdict(met)
    print("BENCH-ROW " + json.dumps(
        {"metric": metric, "rar": rar, "floor": floor, "goal": goal, "met": shown}
    ))  # fmt: skip


def profiled(enabled: bool, label: str):  # type: ignore[no-untyped-def]
    """A context manager printing a cProfile of its body (top 25 by own time) when enabled."""
    import cProfile
    import pstats

    @contextmanager
    def run() -> Iterator[None]:
        if not enabled:
            yield
            return
        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            print(f"\n--- profile: {label} ---")
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)

    return run()
