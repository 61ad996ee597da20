"""Listing a store of 10k runs: ``Store.list_runs()`` warm and cold, and the ``rar list`` CLI.

The store is built by recording tiny runs (one effect each, durable=False) with the default run
ids; how long that took is printed (and whether a generated id collided). Then:

* warm: ``Store(path).list_runs()`` with index.sqlite up to date (a fresh Store each time);
* cold: the same after deleting index.sqlite (and its -wal/-shm), so every run is re-read;
* CLI: ``python -m rar --store X list`` and ``list --json`` as subprocess wall time (warm index),
  and ``list`` with the index deleted before each call (cold: what the issue measured), next to
  ``python -c pass`` (interpreter start-up) for scale.

    python bench/list_runs.py [--quick] [--runs N]

Goal: <= 200 ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import _common
from _common import median, table, temp_dir

import rar
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store

GOAL_MS = 200.0
BUILD_LIMIT_S = 120.0


def build(store_dir: Path, runs: int) -> tuple[float, int]:
    """Record ``runs`` tiny runs; return the seconds it took."""
    redactor = Redactor(env={})
    t0 = time.perf_counter()
    store = Store(store_dir, create=True)
    for i in range(runs):
        run = record(f"tiny run {i}: look up one fact", store=store, seed=i,
                     durable=False, redactor=redactor)
        with run:
            run.effect("tool", {"name": "lookup", "args": {"i": i}}, lambda i=i: {"value": i})
    store.close()
    return time.perf_counter() - t0


def remove_index(store_dir: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = store_dir / f"index.sqlite{suffix}"
        if path.exists():
            path.unlink()


def time_list(store_dir: Path, *, cold: bool) -> tuple[float, int]:
    if cold:
        remove_index(store_dir)
    t0 = time.perf_counter()
    store = Store(store_dir)
    rows = store.list_runs()
    seconds = time.perf_counter() - t0
    store.close()
    return seconds, len(rows)


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(rar.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("RAR_HOME", None)
    env["COLUMNS"] = "120"
    return env


def time_cmd(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return seconds, len(proc.stdout)


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [("--runs", {"type": int, "default": None, "help": "runs in the store (default 10000)"})],
    )
    runs = args.runs or (500 if args.quick else 10_000)
    reps = 3 if args.quick else 5
    with temp_dir("list") as tmp:
        store_dir = tmp / "store"
        build_s = build(store_dir, runs)
        note = "" if build_s <= BUILD_LIMIT_S else f" (over the {BUILD_LIMIT_S:.0f} s budget)"
        print(f"list_runs: built {runs:,} runs in {build_s:.1f} s "
              f"({build_s / runs * 1e3:.2f} ms/run){note}")

        rows = []
        # warm: the index is up to date after the build; one untimed call to be sure
        time_list(store_dir, cold=False)
        warm = [time_list(store_dir, cold=False) for _ in range(reps)]
        rows.append(["Store(path).list_runs() warm", warm[0][1], "",
                     median([s for s, _ in warm]) * 1e3])
        cold = [time_list(store_dir, cold=True) for _ in range(reps)]
        rows.append(["Store(path).list_runs() cold (index deleted)", cold[0][1], "",
                     median([s for s, _ in cold]) * 1e3])

        env = cli_env()
        py = sys.executable
        commands = [
            ("python -c pass (start-up floor)", [py, "-c", "pass"]),
            ("python -m rar --store X list", [py, "-m", "rar", "--store", str(store_dir), "list"]),
            ("python -m rar --store X list --json",
             [py, "-m", "rar", "--store", str(store_dir), "list", "--json"]),
        ]
        for label, argv in commands:
            time_cmd(argv, env)  # warm the page cache
            timings = [time_cmd(argv, env) for _ in range(reps)]
            rows.append([label, runs if "rar" in label else "", timings[0][1],
                         median([s for s, _ in timings]) * 1e3])
        cold_cli = []
        for _ in range(reps):  # the index deleted before each: every run is read from its files
            remove_index(store_dir)
            cold_cli.append(time_cmd(commands[1][1], env))
        rows.append(["python -m rar --store X list, cold (index deleted)", runs,
                     cold_cli[0][1], median([s for s, _ in cold_cli]) * 1e3])
        for row in rows:
            floor = row[0].startswith("python -c")
            row.append("-" if floor else f"<= {GOAL_MS:.0f}")
            row.append("-" if floor else _common.verdict(row[3] <= GOAL_MS))
        floor_ms = rows[2][3]
        cli = next(r for r in rows if r[0] == "python -m rar --store X list")
        cold_row = rows[-1]
        _common.summary(f"rar list cold (index deleted), {runs:,} runs", f"{cold_row[3]:.0f} ms",
                        f"python -c pass {floor_ms:.0f} ms; warm index {cli[3]:.0f} ms",
                        f"<= {GOAL_MS:.0f} ms", cold_row[3] <= GOAL_MS)
        _common.summary(f"Store.list_runs() in-process, {runs:,} runs",
                        f"cold {rows[1][3]:.0f} ms", f"warm {rows[0][3]:.0f} ms", "-", None)
        print(table(["what", "runs", "stdout bytes", "ms (median)", "goal ms", "met"], rows,
                    title=f"median of {reps}"))


if __name__ == "__main__":
    main()
