"""Start-up: ``rar --help`` and ``rar --version`` beside bare Python, in fresh processes.

Every command is a new ``python`` process (``sys.executable``), run in interleaved rounds so
that load from elsewhere on the machine falls on all of them alike; medians. The bytecode cache
is allowed (``PYTHONDONTWRITEBYTECODE`` unset, one warm-up round writes it), as an installed
``rar`` has one. Floors measured in the same rounds: ``python -c pass`` (the interpreter and its
``site``), and ``python -c "import click"`` (the CLI library alone).

    python bench/startup.py [--quick] [--profile]

Goal: ``rar --help`` <= 80 ms (the issue measured bare python at 18 ms here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import _common
from _common import median, table

import rar

GOAL_MS = 80.0


def env() -> dict[str, str]:
    out = dict(os.environ)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    src = str(Path(rar.__file__).resolve().parent.parent)
    out["PYTHONPATH"] = src + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH") else "")
    return out


def timed(argv: list[str], environment: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=environment, capture_output=True, check=True)
    return time.perf_counter() - began


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    rounds = 7 if args.quick else 21
    py = sys.executable
    commands = {
        "python -c pass (floor)": [py, "-c", "pass"],
        'python -c "import click" (floor)': [py, "-c", "import click"],
        "rar --help": [py, "-m", "rar", "--help"],
        "rar --version": [py, "-m", "rar", "--version"],
    }
    environment = env()
    for argv in commands.values():  # warm-up: page cache and bytecode cache
        timed(argv, environment)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            times[name].append(timed(argv, environment) * 1e3)
    bare = median(times["python -c pass (floor)"])
    rows = []
    for name, values in times.items():
        mid = median(values)
        goal = name.startswith("rar --help")
        rows.append(
            [
                name,
                mid,
                min(values),
                mid - bare,
                f"<= {GOAL_MS:.0f}" if goal else "-",
                _common.verdict(mid <= GOAL_MS) if goal else "-",
            ]
        )
    helped = median(times["rar --help"])
    _common.summary(
        "rar --help",
        f"{helped:.0f} ms",
        f"bare python {bare:.0f} ms",
        f"<= {GOAL_MS:.0f} ms",
        helped <= GOAL_MS,
    )
    print(
        table(
            ["command", "median ms", "min ms", "over bare python", "goal ms", "met"],
            rows,
            title=f"startup: {rounds} interleaved rounds, fresh process each",
        )
    )
    if args.profile:
        out = subprocess.run(
            [py, "-X", "importtime", "-m", "rar", "--help"],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        )
        lines = [ln for ln in out.stderr.splitlines() if ln.startswith("import time:")]
        lines.sort(key=lambda ln: int(ln.split("|")[1]), reverse=True)
        print("\n--- python -X importtime -m rar --help: largest cumulative imports (us) ---")
        print("\n".join(lines[:25]))


if __name__ == "__main__":
    main()
