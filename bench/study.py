"""Studies on Dask: N scripted runs on a LocalCluster of 2 workers vs sequentially in one process.

Each cell is one flow cell of ``rar.demo:demo_agent`` (a short recorded agent loop on the
scripted model with a calculator tool), seeds 1..N, so every cell is a distinct run whose
payloads are mostly the same. ``sequential`` runs every cell in this process, one after another,
through the same function a worker runs (``rar.study.cells.run_cell``: lock, marker, run);
``LocalCluster`` runs ``rar.study(...)`` on 2 single-threaded worker processes, cluster start-up
included. Reported: wall time of each, the speed-up, the store's bytes per run (logs and
manifests vs blobs: identical payloads across runs are stored once), and the overhead per cell
of the study on Dask: (wall × workers − the time the workers spent in cells) / N, which holds
the cluster's start, scheduling, and the study's own record (a span and an effect per cell).

    python bench/study.py [--quick]       # quick: 100 runs; full: 1,000

Goal: speed-up >= 1.3 on 2 workers.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import dir_size, parse_args, summary, table, temp_dir

QUESTION = "What is 17 * 23 + 4?"


def _spec(n: int) -> dict[str, object]:
    return {
        "name": "bench",
        "flows": [{"entrypoint": "rar.demo:demo_agent", "inputs": {"question": QUESTION}}],
        "seeds": {"start": 1, "count": n},
    }


def _sizes(root: Path) -> tuple[int, int]:
    blobs = dir_size(root / "blobs") if (root / "blobs").exists() else 0
    return dir_size(root) - blobs, blobs


def sequential(root: Path, n: int) -> float:
    from rar.study.cells import run_cell
    from rar.study.spec import cells_of, parse_study

    cells = cells_of(parse_study(_spec(n), "bench"))
    begun = time.perf_counter()
    for cell in cells:
        outcome = run_cell(str(root), cell.params, cell.digest)
        assert outcome["status"] == "completed", outcome
    return time.perf_counter() - begun


def on_cluster(root: Path, n: int, workers: int = 2) -> tuple[float, float]:
    import rar

    begun = time.perf_counter()
    result = rar.study(_spec(n), store=root, workers=workers)
    wall = time.perf_counter() - begun
    assert result.counts["completed"] == n, result.counts
    in_cells = sum(float(c["seconds"]) for c in result.cells)
    return wall, (wall * workers - in_cells) / n


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 100 if args.quick else 1000
    with temp_dir("study-seq") as seq_root, temp_dir("study-dask") as dask_root:
        seq_wall = sequential(seq_root / "runs", n)
        dask_wall, overhead = on_cluster(dask_root / "runs", n)
        logs, blobs = _sizes(dask_root / "runs")
        seq_logs, seq_blobs = _sizes(seq_root / "runs")
    speedup = seq_wall / dask_wall
    rows = [
        ["sequential (1 process)", n, seq_wall, n / seq_wall, (seq_logs + seq_blobs) / n / 1024],
        ["LocalCluster (2 workers)", n, dask_wall, n / dask_wall, (logs + blobs) / n / 1024],
    ]
    print(table(["mode", "runs", "wall s", "runs/s", "KiB/run"], rows,
                title=f"bench/study.py: {n} scripted runs (rar.demo:demo_agent)"))  # fmt: skip
    print()
    print(f"speed-up: {speedup:.2f}x")
    print(f"store growth per run: {logs / n / 1024:.1f} KiB logs+manifests, "
          f"{blobs / n / 1024:.2f} KiB blobs ({blobs / 1024:.0f} KiB of blobs for {n} runs: "
          "identical payloads stored once)")  # fmt: skip
    print(f"overhead per cell on Dask (start-up, scheduling, the study's record): "
          f"{overhead * 1000:.1f} ms")  # fmt: skip
    summary(
        "study: speed-up of 2 Dask workers over sequential",
        f"{speedup:.2f}x ({dask_wall:.1f} s)",
        f"sequential {seq_wall:.1f} s",
        ">= 1.3x",
        speedup >= 1.3,
    )


if __name__ == "__main__":
    main()
