"""Child process for the fault-injection tests, run under ``fiu-run``.

Usage: ``fiu_writer.py STORE ACKFILE RUNS EFFECTS``

Records RUNS runs of EFFECTS effects each (alternately durable and not) while libfiu makes some
``write``/``fsync`` calls fail. Every outcome is appended to ACKFILE as one line, written with
``os.write`` and retried until it is whole (the injected failures hit these writes too):

* ``ack RUN I``: ``run.effect`` for effect I returned: acknowledged, it must be in the log;
* ``fail RUN I``: ``run.effect`` raised :class:`AppendError`: it must not be in the log;
* ``unexpected RUN I OSError|other TYPE: MESSAGE``: ``run.effect`` raised something else;
* ``start-failed RUN TYPE: MESSAGE`` / ``started RUN``: the outcome of ``record()``;
* ``finished RUN STATUS`` / ``finish-failed RUN TYPE: MESSAGE``: the outcome of ``finish()``.

Effects mix inline results, results large enough to be blobs, repeated blobs and model requests
whose growing ``messages`` list is stored as a chain of message blobs.
"""

from __future__ import annotations

import os
import random
import sys

from rar.errors import AppendError
from rar.redaction import Redactor
from rar.runtime.start import record


class Acks:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, line: str) -> None:
        data = memoryview((line.replace("\n", " ") + "\n").encode())
        while data:
            try:
                data = data[os.write(self.fd, data) :]
            except OSError:
                continue  # an injected failure: try again


def main() -> None:
    store, ack_path, runs, effects = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ack = Acks(ack_path)
    rng = random.Random(5)
    for r in range(runs):
        run_id = f"20240101-000000-{r:06x}"
        try:
            run = record(
                "faults",
                store=store,
                seed=r,
                run_id=run_id,
                durable=r % 2 == 0,
                redactor=Redactor(env={}),
            )
        except Exception as exc:
            ack(f"start-failed {run_id} {type(exc).__name__}: {exc}")
            continue
        ack(f"started {run_id}")
        messages: list[dict[str, str]] = [{"role": "user", "content": f"task {r}"}]
        for i in range(effects):
            request: dict[str, object] = {"run": r, "i": i}
            if i % 3 == 0:
                request["messages"] = messages
                kind = "llm"
            else:
                kind = "tool"
            size = rng.choice((10, 300, 2000, 9000))
            result = (
                {"i": i, "data": rng.randbytes(size // 2).hex()}
                if i % 4
                else {"shared": "s" * 5000}
            )
            try:
                run.effect(kind, request, lambda result=result: result)
            except AppendError:
                ack(f"fail {run_id} {i}")
                continue
            except Exception as exc:
                family = "OSError" if isinstance(exc, OSError) else "other"
                ack(f"unexpected {run_id} {i} {family} {type(exc).__name__}: {exc}")
                continue
            ack(f"ack {run_id} {i}")
            if kind == "llm":
                messages = [*messages, {"role": "assistant", "content": f"reply {i}"}]
        try:
            manifest = run.finish()
        except Exception as exc:
            ack(f"finish-failed {run_id} {type(exc).__name__}: {exc}")
        else:
            ack(f"finished {run_id} {manifest.status.value}")
    os._exit(0)


if __name__ == "__main__":
    main()
