"""Code sandbox: per-cell overhead on a warm worker, and cold start with numpy preloaded.

Per-cell overhead: a trivial cell (``x = 1``) on a warm worker, N times (also with 1,000 files
in the workspace, which is scanned before and after each cell); the time of
``Sandbox.run_cell`` as the caller sees it (pipe round trip, seeding, workspace scans before and
after, variable capture). Cold start: from ``Sandbox(...)`` to the first cell's result, on a
fresh workspace each time (bubblewrap, Python, numpy and scipy imported; matplotlib.pyplot is
imported in the background and timed separately as "first pyplot cell").

    python bench/sandbox.py [--quick]

Goals: <= 20 ms per trivial cell (median of 200); <= 300 ms cold start (median of 10).
"""

from __future__ import annotations

import shutil
import statistics
import time

import _common
from _common import median, table, temp_dir

from rar.sandbox import Sandbox

CELL_GOAL_MS = 20.0
COLD_GOAL_MS = 300.0


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


def cold_start(starts: int, *, preload: bool, code: str = "x = 1") -> list[float]:
    times = []
    with temp_dir("sandbox-cold") as tmp:
        for i in range(starts):
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
    rows = [
        row("trivial cell, warm worker (bwrap)", per_cell(cells, unsafe_local=False), CELL_GOAL_MS),
        row("trivial cell, warm worker (unsafe-local)", per_cell(cells, unsafe_local=True), None),
        row("trivial cell, 1,000 files in the workspace",
            per_cell(cells, unsafe_local=False, files=1000), None),
        row("cold start -> first result, numpy+scipy", cold_start(starts, preload=True),
            COLD_GOAL_MS),
        row("cold start -> first result, no preload", cold_start(starts, preload=False), None),
        row("cold start -> first pyplot cell", cold_start(
            starts, preload=True, code="import matplotlib.pyplot as plt\nplt.figure()"), None),
    ]  # fmt: skip
    print(table(
        ["measure", "n", "median ms", "p90", "min", "max", "stdev", "goal ms", "met"],
        rows,
        title=f"sandbox: isolation={info['isolation']}, host uid {info['host_uid']}, "
              f"seccomp={info['seccomp']}, preloaded {', '.join(info['preloaded'])}",
    ))  # fmt: skip


if __name__ == "__main__":
    main()
