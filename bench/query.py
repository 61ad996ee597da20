"""Querying a store of 200 runs: the first ``rar query`` (cold: query.sqlite built from every
log) against the next ones (warm: two ``lstat`` per run, nothing read), and ``rar search``.

The store holds demo runs (scripted model, calculator: 21 events, 3 model calls each). Measured:

* cold, in process: ``query(...)`` with query.sqlite (and -wal/-shm) deleted before each call;
* warm, in process: ``query(...)`` with query.sqlite up to date;
* one more run: a run recorded, then ``query(...)`` (only that run is read);
* CLI: ``python -m rar --store X query ...`` wall time, cold and warm, ``search`` warm, next
  to ``rar list`` and ``python -c pass`` (interpreter start-up) for scale.

    python bench/query.py [--quick] [--runs N]

Goal: a warm ``rar query`` on 200 runs within 300 ms of ``rar list`` on the same store.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import _common
from _common import median, table, temp_dir

from rar.demo import run_demo
from rar.store.query import QUERY_NAME, query
from rar.store.store import Store

GOAL_MS = 300.0
SQL = "SELECT kind, count(*), sum(duration_us) FROM effects GROUP BY kind"


def build(root: Path, runs: int) -> float:
    t0 = time.perf_counter()
    store = Store(root, create=True)
    for seed in range(runs):
        run_demo(store, seed=seed)
    store.close()
    return time.perf_counter() - t0


def remove_database(root: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (root / f"{QUERY_NAME}{suffix}").unlink(missing_ok=True)


def timed(call: object) -> float:
    t0 = time.perf_counter()
    call()  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1000


def cli(root: Path, *args: str) -> float:
    """Wall time of one CLI call, with a bytecode cache (what an installed rar has)."""
    argv = [sys.executable, "-m", "rar", "--store", str(root), *args]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    args = _common.parse_args(__doc__ or "", [("--runs", {"type": int, "default": 200})])
    repeat = 3 if args.quick else 7
    runs = 20 if args.quick else args.runs
    with temp_dir("query") as base:
        root = base / "runs"
        seconds = build(root, runs)
        print(f"built a store of {runs} demo runs in {seconds:.1f} s")
        cold, warm, one_more = [], [], []
        for _ in range(repeat):
            remove_database(root)
            cold.append(timed(lambda: query(SQL, root)))
        for _ in range(repeat):
            warm.append(timed(lambda: query(SQL, root)))
        for seed in range(repeat):
            store = Store(root)
            run_demo(store, seed=1000 + seed)
            store.close()
            time.sleep(2.1)  # past the racy window, as a later query would be
            one_more.append(timed(lambda: query(SQL, root)))
        events = query("SELECT count(*) FROM events", root).rows[0][0]
        cli(root, "--help")  # fills the bytecode cache
        python = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            python.append((time.perf_counter() - t0) * 1000)
        cli_cold = []
        for _ in range(repeat):
            remove_database(root)
            cli_cold.append(cli(root, "query", SQL))
        cli_warm = [cli(root, "query", SQL) for _ in range(repeat)]
        cli_list = [cli(root, "list") for _ in range(repeat)]
        cli_search = [
            cli(root, "search", "activation energy", "--limit", "5") for _ in range(repeat)
        ]
        size = sum(p.stat().st_size for p in root.glob(QUERY_NAME + "*"))
    rows = [
        ("query(), cold (query.sqlite built)", median(cold)),
        ("query(), warm", median(warm)),
        ("query() after one more run", median(one_more)),
        ("rar query, cold", median(cli_cold)),
        ("rar query, warm", median(cli_warm)),
        ("rar search, warm", median(cli_search)),
        ("rar list (for scale)", median(cli_list)),
        ("python -c pass", median(python)),
    ]
    print(
        table(
            ["what", "median ms"],
            rows,
            title=f"{runs + repeat} runs, {events} events, query.sqlite {size / 1e6:.1f} MB",
        )
    )
    _common.summary(
        f"rar query on {runs} runs (warm / cold)",
        f"{median(cli_warm):.0f} / {median(cli_cold):.0f} ms",
        f"{median(cli_list):.0f} ms rar list",
        f"warm <= rar list + {GOAL_MS:.0f} ms",
        median(cli_warm) <= median(cli_list) + GOAL_MS,
    )


if __name__ == "__main__":
    main()
