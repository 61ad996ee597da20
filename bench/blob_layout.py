"""Why append-only packs: durable small blobs as one file each vs appended to one pack file.

Each step writes 5 blobs of 300-1200 bytes (deterministic pseudo-prose), 200 steps, durably:

(a) one file per blob, named by digest in a flat directory: write a temp file, fsync it, rename
    it into place, fsync the directory (the design we did not build, implemented here);
(a') the same with the step batched: each temp file fsynced, all renamed, one directory fsync
    per step (the cheapest durable variant of (a));
(b) ``rar.store.blobs.PackWriter``: the 5 blobs appended to one pack, one fsync per step.

The digest (sha256) is computed in every variant. Reported: µs per step (median over steps,
pooled over repetitions), mean, files created, apparent and allocated bytes.

    python bench/blob_layout.py [--quick]
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from pathlib import Path

import _common
from _common import median, table, temp_dir, text

from rar.store.blobs import PackWriter, digest_of

BLOBS_PER_STEP = 5


def make_steps(steps: int) -> list[list[bytes]]:
    rng = random.Random(5)
    return [[f"{s}.{b} {text(rng, rng.randint(300, 1200))}".encode()[:1200]
             for b in range(BLOBS_PER_STEP)] for s in range(steps)]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_tmp(directory: Path, name: str, raw: bytes) -> Path:
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def files_per_blob(root: Path, steps: list[list[bytes]], *, batched: bool) -> list[float]:
    directory = root / "objects"
    directory.mkdir()
    _fsync_dir(root)
    times = []
    for blobs in steps:
        t0 = time.perf_counter()
        if batched:
            staged = []
            for raw in blobs:
                name = hashlib.sha256(raw).hexdigest()
                if not (directory / name).exists():
                    staged.append((_write_tmp(directory, name, raw), directory / name))
            for tmp, final in staged:
                os.rename(tmp, final)
            _fsync_dir(directory)
        else:
            for raw in blobs:
                name = hashlib.sha256(raw).hexdigest()
                final = directory / name
                if final.exists():
                    continue
                os.rename(_write_tmp(directory, name, raw), final)
                _fsync_dir(directory)
        times.append(time.perf_counter() - t0)
    return times


def pack(root: Path, steps: list[list[bytes]]) -> list[float]:
    writer = PackWriter(root / "packs" / "bench.1.pack")
    times = []
    try:
        for blobs in steps:
            t0 = time.perf_counter()
            for raw in blobs:
                writer.append(digest_of(raw), raw)
            writer.sync()
            times.append(time.perf_counter() - t0)
    finally:
        writer.close()
    return times


def usage(path: Path) -> tuple[int, int, int]:
    files = apparent = allocated = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return files, apparent, allocated


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    n_steps, reps = (40, 2) if args.quick else (200, 3)
    steps = make_steps(n_steps)
    raw_bytes = sum(len(b) for s in steps for b in s)
    variants = {
        "(a) file per blob: tmp+fsync+rename+fsync dir":
            lambda r: files_per_blob(r, steps, batched=False),
        "(a') file per blob, one dir fsync per step":
            lambda r: files_per_blob(r, steps, batched=True),
        "(b) PackWriter: append, one fsync per step": lambda r: pack(r, steps),
    }
    pooled: dict[str, list[float]] = {name: [] for name in variants}
    usage_of: dict[str, tuple[int, int, int]] = {}
    with temp_dir("blobs") as tmp:
        for rep in range(reps):
            for i, (name, fn) in enumerate(variants.items()):  # interleaved against drift
                root = tmp / f"r{rep}-v{i}"
                root.mkdir()
                pooled[name].extend(fn(root))
                usage_of[name] = usage(root)
    rows = []
    pack_us = median(pooled[list(variants)[-1]]) * 1e6
    for name, times in pooled.items():
        us = median(times) * 1e6
        files, apparent, allocated = usage_of[name]
        rows.append([name, us, sum(times) / len(times) * 1e6, f"{us / pack_us:.1f}x", files,
                     apparent, allocated])
    print(f"blob_layout: {n_steps} steps x {BLOBS_PER_STEP} blobs of 300-1200 B "
          f"({raw_bytes:,} raw bytes per repetition), {reps} repetitions")
    print(table(["layout", "µs/step (median)", "mean", "vs pack", "files", "bytes apparent",
                 "bytes allocated"], rows))


if __name__ == "__main__":
    main()
