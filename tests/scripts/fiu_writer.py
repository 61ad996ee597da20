"""Child process for the fault-injection tests, run under ``fiu-run``.

Usage: ``fiu_writer.py STORE ACKFILE RUNS EFFECTS``

Records RUNS runs of EFFECTS effects each (alternately durable and not) while libfiu makes some
``write``/``fsync`` calls fail. Every outcome is appended to ACKFILE as one line, written with
``os.write`` and retried until it is whole (the injected failures hit these writes too):

* ``ack RUN I``: ``run.effect`` for effect I returned: acknowledged, it must be in the log;
* ``fail RUN I``: ``run.effect`` raised :class:`AppendError`: it must not be in the log;
* ``unexpected RUN I OSError|other TYPE: MESSAGE``: ``run.effect`` raised something else;
* ``start-failed RUN TYPE: MESSAGE`` / ``started RUN``: the outcome of ``record()``;
* ``finished RUN STATUS`` / ``finish-failed RUN TYPE: MESSAGE``: the outcome of ``finish()``;
* ``faults JSON``, the last line: how many of the store's ``os.write`` calls failed or wrote
  short and how many ``os.fsync`` calls failed, by the file they hit (``log``: events.jsonl,
  ``pack``, ``other``), so the parent knows the injected faults reached the store. ACKFILE's
  own writes are not counted.

Effects mix inline results, results large enough to be blobs, repeated blobs and model requests
whose growing ``messages`` list is stored as a chain of message blobs.
"""

from __future__ import annotations

import json
import os
import random
import sys

from rar.errors import AppendError
from rar.redaction import Redactor
from rar.runtime.start import record


class Acks:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._write = os.write  # not the counting wrapper: these writes are not the store's

    def __call__(self, line: str) -> None:
        data = memoryview((line.replace("\n", " ") + "\n").encode())
        while data:
            try:
                data = data[self._write(self.fd, data) :]
            except OSError:
                continue  # an injected failure: try again


class InjectedFaults:
    """Counts the store's failed and short ``os.write`` and failed ``os.fsync`` calls.

    Nothing fails on its own in a test's temporary directory, so every failure counted was
    injected by libfiu (the wrappers call the real functions, whose libc calls libfiu hooks).
    """

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {
            what: {"log": 0, "pack": 0, "other": 0}
            for what in ("write_errors", "short_writes", "fsync_errors")
        }

    def install(self) -> None:
        real_write, real_fsync = os.write, os.fsync

        def write(fd: int, data: bytes) -> int:
            try:
                written = real_write(fd, data)
            except OSError:
                self._count("write_errors", fd)
                raise
            if written < len(data):
                self._count("short_writes", fd)
            return written

        def fsync(fd: int) -> None:
            try:
                real_fsync(fd)
            except OSError:
                self._count("fsync_errors", fd)
                raise

        os.write, os.fsync = write, fsync  # type: ignore[assignment]

    def _count(self, what: str, fd: int) -> None:
        try:
            name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            name = ""
        kind = "log" if name == "events.jsonl" else "pack" if name.endswith(".pack") else "other"
        self.counts[what][kind] += 1


def main() -> None:
    store, ack_path, runs, effects = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ack = Acks(ack_path)
    faults = InjectedFaults()
    faults.install()
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
    ack(f"faults {json.dumps(faults.counts, sort_keys=True)}")
    os._exit(0)


if __name__ == "__main__":
    main()
