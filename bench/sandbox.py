"""Code sandbox: per-cell overhead on a warm worker, and cold start beside bare bubblewrap.

Per-cell overhead: a trivial cell (``x = 1``) on a warm worker, N times (also with 1,000 files
in the workspace, which is scanned before and after each cell); the time of
``Sandbox.run_cell`` as the caller sees it (pipe round trip, seeding, workspace scans before and
after, variable capture). Cold start: from ``Sandbox(...)`` to the first cell's result, on a
fresh workspace each time (bubblewrap, Python, numpy and scipy imported; matplotlib.pyplot is
imported in the background and timed separately as "first pyplot cell").

Cold starts are interleaved with the floor: bare ``bwrap`` (namespaces, read-only root, private
/tmp) starting the same Python with ``-S -c pass``. Nothing is preloaded in the worker: a cell
pays for what it imports (``numpy.random`` is seeded whenever it is first imported), so the cold
start of a numpy cell is shown too.

    python bench/sandbox.py [--quick]

Goals: <= 20 ms per trivial cell (median of 200); <= 120 ms cold start (median of 10).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

import _common
from _common import median, table, temp_dir

from rar.sandbox import Sandbox

CELL_GOAL_MS = 20.0
COLD_GOAL_MS = 120.0


def per_cell(cells: int, *, unsafe_local: bool, files: int = 0) -> list[float]:
    with temp_dir("sandbox-cell") as tmp, Sandbox(tmp / "ws", unsafe_local=unsafe_local) as box:
        for i in range(files):  # the workspace is scanned before and after every cell
            (tmp / "ws" / f"f{i:05d}.txt").write_text(str(i))
        for _ in range(10):  # warm up (and let the background pyplot import finish)
            box.run_cell("x = 1")
        time.sleep(1.0)
        times = []
        for _ in range(cells):
            t0 = time.perf_counter()
            result = box.run_cell("x = 1")
            times.append((time.perf_counter() - t0) * 1e3)
            assert result.ok, result.error
    return times


BWRAP_FLOOR = [
    "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
    "--unshare-all", "--die-with-parent", "--new-session",
]  # fmt: skip


def bare_start() -> float:
    """The floor: bubblewrap starting this Python, which runs nothing (ms)."""
    t0 = time.perf_counter()
    subprocess.run([*BWRAP_FLOOR, sys.executable, "-S", "-c", "pass"], check=True,
                   capture_output=True)  # fmt: skip
    return (time.perf_counter() - t0) * 1e3


def cold_start(
    starts: int, *, preload: bool, code: str = "x = 1", floor: list[float] | None = None
) -> list[float]:
    times = []
    with temp_dir("sandbox-cold") as tmp:
        for i in range(starts):
            if floor is not None and shutil.which("bwrap"):
                floor.append(bare_start())  # interleaved with the sandbox's starts
            t0 = time.perf_counter()
            with Sandbox(tmp / f"ws{i}", preload=preload) as box:
                result = box.run_cell(code)
                times.append((time.perf_counter() - t0) * 1e3)
                assert result.ok, result.error
            shutil.rmtree(tmp / f"ws{i}", ignore_errors=True)
    return times


def row(name: str, values: list[float], goal: float | None) -> list[object]:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    met = _common.verdict(median(values) <= goal) if goal is not None else "-"
    shown_goal = f"<= {goal:.0f}" if goal is not None else "-"
    return [name, len(values), median(values), p90, values[0], values[-1],
            statistics.pstdev(values), shown_goal, met]  # fmt: skip


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    cells, starts = (40, 3) if args.quick else (200, 10)
    # a first sandbox (also builds the matplotlib font cache on the first run on a host)
    with temp_dir("sandbox-warmup") as tmp, Sandbox(tmp / "ws") as box:
        info = box.info
    floor: list[float] = []
    cold = cold_start(starts, preload=True, floor=floor)
    if floor and cold:
        _common.summary("sandbox cold start", f"{median(cold):.0f} ms",
                        f"bare bwrap + python {median(floor):.0f} ms",
                        f"<= {COLD_GOAL_MS:.0f} ms", median(cold) <= COLD_GOAL_MS)
    rows = [
        row("trivial cell, warm worker (bwrap)", per_cell(cells, unsafe_local=False), CELL_GOAL_MS),
        row("trivial cell, warm worker (unsafe-local)", per_cell(cells, unsafe_local=True), None),
        row("trivial cell, 1,000 files in the workspace",
            per_cell(cells, unsafe_local=False, files=1000), None),
        row("floor: bare bwrap + python -S -c pass", floor, None),
        row("cold start -> first result (x = 1)", cold, COLD_GOAL_MS),
        row("cold start -> first numpy+scipy cell", cold_start(
            starts, preload=True, code="import numpy, scipy.stats\nx = float(numpy.random.rand())"),
            None),
        row("cold start -> first result, no preload", cold_start(starts, preload=False), None),
        row("cold start -> first pyplot cell", cold_start(
            starts, preload=True, code="import matplotlib.pyplot as plt\nplt.figure()"), None),
    ]  # fmt: skip
    print(table(
        ["measure", "n", "median ms", "p90", "min", "max", "stdev", "goal ms", "met"],
        rows,
        title=f"sandbox: isolation={info['isolation']}, host uid {info['host_uid']}, "
              f"seccomp={info['seccomp']}, nothing preloaded (a cell imports what it uses)",
    ))  # fmt: skip


if __name__ == "__main__":
    main()
