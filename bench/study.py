"""Studies on Dask: N scripted runs on a LocalCluster of 2 workers vs sequentially in one process.

Each cell is one flow cell, seeds 1..N, so every cell is a distinct run whose payloads are mostly
the same: ``demo`` cells are ``rar.demo:demo_agent`` (a short recorded agent loop on the scripted
model with a calculator tool, ~20-90 ms here depending on the load), ``50 ms`` cells are the same
agent followed by 50 ms of CPU work (``_study_flow.timed_agent``), the size of cell a study is
for. ``sequential`` runs every cell in this process, one after another, through the same
function a worker runs (``rar.study.cells.run_cell``: lock, marker, run); ``LocalCluster`` runs
``rar.study(...)`` on 2 single-threaded worker processes, cluster start-up and shut-down
included (a fresh process per round, so nothing is warm). Rounds alternate sequential and
LocalCluster for each kind of cell; medians are reported. Also: the store's bytes per run (logs
and manifests vs blobs: identical payloads across runs are stored once), and the overhead per
cell of the study on Dask: (wall × workers − the time the workers spent in cells) / N, which
holds the cluster's start, scheduling, and the study's own record (a span and an effect per
cell).

    python bench/study.py [--quick] [--rounds R]   # quick: 100 runs, 3 rounds; full: 1,000, 1

Goal: speed-up >= 1.3 on 2 workers for the 50 ms cells.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import dir_size, median, parse_args, summary, table, temp_dir

QUESTION = "What is 17 * 23 + 4?"
WORK_MS = 50
KINDS = ("demo", f"{WORK_MS} ms")


def _spec(n: int, kind: str = "demo") -> dict[str, object]:
    flow: dict[str, object] = {
        "entrypoint": "rar.demo:demo_agent",
        "inputs": {"question": QUESTION},
    }
    if kind != "demo":
        flow = {
            "entrypoint": "_study_flow:timed_agent",
            "inputs": {"question": QUESTION, "work_ms": WORK_MS},
        }
    return {"name": "bench", "flows": [flow], "seeds": {"start": 1, "count": n}}


def _sizes(root: Path) -> tuple[int, int]:
    blobs = dir_size(root / "blobs") if (root / "blobs").exists() else 0
    return dir_size(root) - blobs, blobs


def sequential(root: Path, n: int, kind: str = "demo") -> float:
    from rar.study.cells import run_cell
    from rar.study.spec import cells_of, parse_study

    cells = cells_of(parse_study(_spec(n, kind), "bench"))
    begun = time.perf_counter()
    for cell in cells:
        outcome = run_cell(str(root), cell.params, cell.digest)
        assert outcome["status"] == "completed", outcome
    return time.perf_counter() - begun


def on_cluster(root: Path, n: int, workers: int = 2, kind: str = "demo") -> tuple[float, float]:
    import rar

    begun = time.perf_counter()
    result = rar.study(_spec(n, kind), store=root, workers=workers)
    wall = time.perf_counter() - begun
    assert result.counts["completed"] == n, result.counts
    in_cells = sum(float(c["seconds"]) for c in result.cells)
    return wall, (wall * workers - in_cells) / n


def _one_round(kind: str, n: int) -> dict[str, float]:
    """Sequential then LocalCluster, in a fresh process (nothing imported, no forkserver)."""
    command = [sys.executable, __file__, "--round", kind, "--n", str(n)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("ROUND "))
    return dict(json.loads(line.removeprefix("ROUND ")))


def _round(kind: str, n: int) -> None:
    with temp_dir("study-seq") as seq_root, temp_dir("study-dask") as dask_root:
        seq_wall = sequential(seq_root / "runs", n, kind)
        dask_wall, overhead = on_cluster(dask_root / "runs", n, kind=kind)
        logs, blobs = _sizes(dask_root / "runs")
    row = {"seq": seq_wall, "dask": dask_wall, "overhead": overhead, "logs": logs, "blobs": blobs}
    print("ROUND " + json.dumps(row), flush=True)


def main() -> None:
    args = parse_args(
        __doc__.splitlines()[0],
        [
            ("--rounds", {"type": int, "default": 0, "help": "rounds (default 3 quick, 1 full)"}),
            ("--round", {"default": None, "help": argparse.SUPPRESS}),
            ("--n", {"type": int, "default": 0, "help": argparse.SUPPRESS}),
        ],
    )
    if args.round is not None:
        _round(args.round, args.n)
        return
    n = 100 if args.quick else 1000
    rounds = args.rounds or (3 if args.quick else 1)
    seen: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for number in range(rounds):
        for kind in KINDS:
            seen[kind].append(_one_round(kind, n))
            got = seen[kind][-1]
            print(f"round {number + 1}, {kind} cells: sequential {got['seq']:.2f} s, "
                  f"LocalCluster {got['dask']:.2f} s", flush=True)  # fmt: skip
    rows, speedups = [], {}
    for kind in KINDS:
        seq_wall = median([r["seq"] for r in seen[kind]])
        dask_wall = median([r["dask"] for r in seen[kind]])
        speedups[kind] = median([r["seq"] / r["dask"] for r in seen[kind]])
        overhead = median([r["overhead"] for r in seen[kind]])
        rows.append([f"{kind}: sequential (1 process)", n, seq_wall, n / seq_wall, "", ""])
        rows.append([f"{kind}: LocalCluster (2 workers)", n, dask_wall, n / dask_wall,
                     f"{speedups[kind]:.2f}x", overhead * 1000])  # fmt: skip
    print()
    title = f"bench/study.py: {n} scripted runs, medians of {rounds} rounds"
    header = ["cells", "runs", "wall s", "runs/s", "speed-up", "overhead ms/cell"]
    print(table(header, rows, title=title))
    last = seen["demo"][-1]
    logs, blobs = last["logs"], last["blobs"]
    print()
    print(f"store growth per run: {logs / n / 1024:.1f} KiB logs+manifests, "
          f"{blobs / n / 1024:.2f} KiB blobs ({blobs / 1024:.0f} KiB of blobs for {n} runs: "
          "identical payloads stored once)")  # fmt: skip
    goal_kind = KINDS[1]
    dask_wall = median([r["dask"] for r in seen[goal_kind]])
    seq_wall = median([r["seq"] for r in seen[goal_kind]])
    summary(
        f"study: speed-up of 2 Dask workers over sequential ({goal_kind} cells)",
        f"{speedups[goal_kind]:.2f}x ({dask_wall:.1f} s)",
        f"sequential {seq_wall:.1f} s",
        ">= 1.3x",
        speedups[goal_kind] >= 1.3,
    )


if __name__ == "__main__":
    main()
