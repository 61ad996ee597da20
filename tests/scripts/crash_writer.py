"""Child process for the crash tests: record one run, acknowledging every effect on stdout.

Usage: ``crash_writer.py STORE RUN_ID SEED DURABLE(0|1) [STOP_AFTER]``

Records a run with id RUN_ID into STORE and performs effects in a loop. After each
``run.effect(...)`` returns (or raises the effect's own error, which is recorded too) it prints the
number of effects acknowledged so far and flushes, so the parent knows what was acknowledged
before it sends SIGKILL. Payload sizes vary: some results stay inline in the event, some are
larger than the inline limit and become blobs (a few of them repeat, to exercise deduplication).

Without STOP_AFTER the loop runs until the process is killed. With STOP_AFTER the process ends
abruptly with ``os._exit(0)`` after that many effects, leaving the run unfinished exactly as a
crash would (the kernel releases the run lock).
"""

from __future__ import annotations

import os
import random
import sys

from rar.redaction import Redactor
from rar.runtime.start import record

SIZES = (16, 200, 900, 1500, 3000, 12000)


class EffectFailed(Exception):
    """The error an effect raises now and then (it is recorded as the effect's error)."""


def _result(rng: random.Random, i: int) -> dict[str, object]:
    size = rng.choice(SIZES)
    if i % 11 == 5:
        return {"repeat": "r" * 3000}  # the same large payload several times: one blob
    return {"i": i, "data": rng.randbytes(size // 2).hex()}


def _fail() -> object:
    raise EffectFailed("the tool failed")


def main() -> None:
    store, run_id, seed, durable = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    stop_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    rng = random.Random(seed)
    run = record(
        "crash test",
        store=store,
        seed=seed,
        run_id=run_id,
        durable=durable,
        redactor=Redactor(env={}),
    )
    i = 0
    while stop_after is None or i < stop_after:
        request = {"i": i, "pad": "q" * rng.choice((0, 50, 1200))}
        try:
            if i % 13 == 7:
                run.effect("tool", request, _fail)
            elif i % 5 == 3:
                with run.span("step"):
                    run.effect("llm", request, lambda i=i: _result(rng, i))
            else:
                run.effect("tool", request, lambda i=i: _result(rng, i))
        except EffectFailed:
            pass
        i += 1
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
