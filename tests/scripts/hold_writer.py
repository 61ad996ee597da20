"""Child process for the lock test: record a run and keep it open until told to go on.

Usage: ``hold_writer.py STORE RUN_ID``

Records three effects, prints ``ready`` and waits for a line on stdin (the run lock is held all
the while), then records three more effects, finishes the run and prints the number of events.
"""

from __future__ import annotations

import sys

from rar.redaction import Redactor
from rar.runtime.start import record


def main() -> None:
    store, run_id = sys.argv[1], sys.argv[2]
    with record("held", store=store, seed=1, run_id=run_id, redactor=Redactor(env={})) as run:
        for i in range(3):
            run.effect("tool", {"i": i}, lambda i=i: {"big": "b" * 2000 * (i + 1)})
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(3, 6):
            run.effect("tool", {"i": i}, lambda i=i: {"big": "b" * 2000 * (i + 1)})
    print(run.manifest.events, flush=True)


if __name__ == "__main__":
    main()
