"""Child process for the concurrency tests: record several runs into a shared store.

Usage: ``concurrent_writer.py STORE WORKER RUNS GOFILE``

Creates ``GOFILE.readyWORKER`` once imported, then waits until GOFILE exists (``-``: start at
once) so that several workers start recording at the same moment, then records RUNS runs with
ids ``20240102-0000WW-00000J``. Every run records the same large payload (``SHARED``) twice,
then a few effects of its own; the run with J == 4 fails (an exception inside the run), the
others complete. Prints one JSON object per run:
``{"run_id", "status", "events", "head", "shared"}`` (``shared`` = the digest of SHARED).
"""

from __future__ import annotations

import json
import os
import sys
import time

from rar.redaction import Redactor
from rar.runtime.start import record

SHARED = {"shared": "the same large payload in every run " * 200}


class Boom(Exception):
    pass


def run_id_for(worker: int, j: int) -> str:
    return f"20240102-0000{worker:02d}-{j:06x}"


def start_together(go: str, worker: int) -> None:
    """Say this worker is ready (``GOFILE.readyWORKER``), then wait for GOFILE (``-``: none)."""
    deadline = time.monotonic() + 60
    if go != "-":
        open(f"{go}.ready{worker}", "w").close()
    while go != "-" and not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.001)


def main() -> None:
    store, worker, runs, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    start_together(go, worker)
    for j in range(runs):
        run = record(
            f"worker {worker} run {j}",
            store=store,
            seed=worker * 100 + j,
            run_id=run_id_for(worker, j),
            redactor=Redactor(env={}),
        )
        try:
            with run:
                shared = None
                for k in range(2 + (worker + j) % 4):
                    request = {"w": worker, "j": j, "k": k}
                    if k < 2:
                        run.effect("tool", request, lambda: SHARED)
                        shared = run.payload(SHARED)["digest"]
                    else:
                        run.effect(
                            "llm",
                            request,
                            lambda j=j, k=k: {"text": f"{worker}/{j}/{k} " * (50 * k)},
                        )
                if j == 4:
                    raise Boom("this run fails")
        except Boom:
            pass
        print(
            json.dumps(
                {
                    "run_id": run.id,
                    "status": run.manifest.status.value,
                    "events": run.manifest.events,
                    "head": run.manifest.head,
                    "shared": shared,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
