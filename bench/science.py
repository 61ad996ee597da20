"""The science runtime end to end: `rar run` on a demo question, cold, and `rar replay` of it.

Each measurement is a fresh `python -m rar` process on a fresh store (cold: nothing cached, the
BM25 index built, the sandbox started when the question needs a computation).

    python bench/science.py [--quick]

Goals: `rar run` ≤ 5 s wall on 2 cores; `rar replay` of it ≤ 2 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import _common
from _common import median, table, temp_dir

SPECS = Path(__file__).resolve().parents[1] / "src" / "rar" / "science" / "specs"
CASES = [
    ("prose question (owl_lite)",
     ["run", "Why do narrow temperature ranges make Arrhenius estimates uncertain?"]),
    ("Kissinger fit in the sandbox (owl_dl)", ["run", "--spec", str(SPECS / "kissinger.yaml")]),
]


def timed(args: list[str], store: Path) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "rar", "--store", str(store), *args, "--json"],
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - started, out.stdout


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    reps = 2 if args.quick else 5
    rows = []
    for label, command in CASES:
        runs, replays = [], []
        for rep in range(reps):
            with temp_dir("science") as tmp:
                store = tmp / f"store-{rep}"
                seconds, out = timed(command, store)
                runs.append(seconds)
                run_id = json.loads(out)["run_id"]
                seconds, out = timed(["replay", run_id], store)
                assert json.loads(out)["replay_status"] == "reproducible"
                replays.append(seconds)
        rows.append([label, f"{median(runs):.2f}", "<= 5", _common.verdict(median(runs) <= 5),
                     f"{median(replays):.2f}", "<= 2", _common.verdict(median(replays) <= 2)])
    print(table(["question", "rar run s (median)", "goal", "met", "rar replay s (median)",
                 "goal", "met"], rows,
                title=f"science: {reps} cold runs each, fresh store and process every time"))


if __name__ == "__main__":
    main()
