"""One job of ``rar view --allow-runs``, in a process of its own: ``python -m rar.viewer.worker``.

The viewer's server starts one such process per job and writes the job to its standard input as
one JSON line (:class:`rar.viewer.jobs.JobQueue` does); the process answers with JSON lines on
its standard output:

* ``{"event": "run", "run_id": ...}`` as soon as the run it records exists (its manifest is
  written), so that the page can follow the run live;
* then ``{"event": "done", "run_id", "run_status", "replay_status"}``, or ``{"event": "error",
  "error": {"type", "message"}, "run_id"}`` (``run_id`` null when the job failed before a run
  was created: a replay refused, a corpus that would not load).

A job is one of ``ask`` (:func:`rar.science.runtime.ask_question`), ``replay`` (strict, offline),
``branch`` (a fork at an event, with changed settings) and ``resume``
(:mod:`rar.replay.engine`). Whatever the job itself prints goes to standard error, never into the
answer. When standard input closes — the server stopped, or cancelled the job — the process
ends at once; a run it was recording is then left ``interrupted``, and ``rar resume`` continues
it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

EXIT_ORPHANED = 4
"""The exit code of a worker whose standard input closed before the job ended."""
SPOT_INTERVAL_S = 0.05


class _Answer:
    """The process's JSON-line channel to the server (a private copy of standard output)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, **message: Any) -> None:
        with self._lock:
            self._stream.write(orjson.dumps(message) + b"\n")
            self._stream.flush()


def _run_id_prefix(now: datetime) -> str:
    """Run ids made from now on sort after this (``YYYYMMDD-HHMMSS-``, two seconds early)."""
    return (now - timedelta(seconds=2)).strftime("%Y%m%d-%H%M%S-")


def spot_run(
    store_root: Path, after: str, found: threading.Event, *, run_id: str | None = None
) -> str | None:
    """The id of the run this process is recording, once its manifest exists: a run directory
    named after ``after`` (or the directory of ``run_id``, a run being resumed) whose lock this
    process holds — the lock's text names its holder, see :mod:`rar.store.lock`. Polls until
    found or ``found`` is set; None then."""
    from rar.store.layout import LOCK_NAME, MANIFEST_NAME
    from rar.store.lock import is_locked

    holder = f"pid {os.getpid()} on {socket.gethostname()}\n".encode()
    while not found.is_set():
        try:
            if run_id is not None:
                names = [run_id]
            else:
                names = sorted(
                    (e.name for e in os.scandir(store_root) if e.name >= after), reverse=True
                )
        except OSError:
            names = []
        for name in names:
            path = store_root / name
            try:
                with open(path / LOCK_NAME, "rb") as lock:
                    text = lock.read(200)
            except OSError:
                continue
            if text == holder and _running(path / MANIFEST_NAME) and is_locked(path):
                return name
        found.wait(SPOT_INTERVAL_S)
    return None


def _running(manifest: Path) -> bool:
    """Whether the manifest exists and says the run is running (a resumed run's says so once
    the resume has begun, not before)."""
    try:
        data = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("status") == "running"


def perform(job: dict[str, Any]) -> dict[str, Any]:
    """Do ``job``; return what the ``done`` answer says about it."""
    from rar.store.store import Store

    store = Store(job["store"])
    kind = job["kind"]
    try:
        if kind == "ask":
            from rar.science.runtime import ask_question

            result = ask_question(
                job["question"],
                mode=job["mode"],
                corpus=job["corpus"],
                model=job["model"],
                seed=int(job["seed"]),
                store=store,
            )
            return {"run_id": result.run_id, "run_status": result.status}
        if kind in ("replay", "branch"):
            from rar.replay import replay

            if kind == "replay":
                report = replay(job["run"], store=store, mode="strict")
            else:
                report = replay(
                    job["run"], store=store, mode="fork", at=int(job["at"]), overrides=job["set"]
                )
        elif kind == "resume":
            from rar.replay import resume

            report = resume(job["run"], store=store, early=bool(job.get("now")))
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        run_id = report.replay_run or job.get("run")
        status = store.manifest(run_id).status.value if run_id else None
        return {"run_id": run_id, "run_status": status, "replay_status": report.replay_status}
    finally:
        store.close()


def _error(exc: BaseException) -> dict[str, Any]:
    from rar.errors import RarError
    from rar.redaction import redact_output

    message = exc.message if isinstance(exc, RarError) else str(exc)
    return {"type": type(exc).__name__, "message": redact_output(message or type(exc).__name__)}


def _stop_when_orphaned() -> None:
    """End the process as soon as standard input closes (the server is gone, or cancelled)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(EXIT_ORPHANED)


def main() -> int:
    # the answer goes to a private copy of stdout; anything else printed goes to stderr
    answer = _Answer(os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)
    line = sys.stdin.buffer.readline()
    try:
        job = orjson.loads(line)
        if not isinstance(job, dict) or "kind" not in job or "store" not in job:
            raise ValueError("a job is a JSON object with kind and store")
    except (orjson.JSONDecodeError, ValueError) as exc:
        answer.send(event="error", error=_error(exc), run_id=None)
        return 2
    threading.Thread(target=_stop_when_orphaned, name="orphan-watch", daemon=True).start()
    found = threading.Event()
    spotted: list[str] = []
    after = _run_id_prefix(datetime.now(UTC))  # nondeterminism-ok: not agent logic
    resumed = str(job["run"]) if job["kind"] == "resume" else None

    def spot() -> None:
        run_id = spot_run(Path(job["store"]), after, found, run_id=resumed)
        if run_id is not None:
            spotted.append(run_id)
            answer.send(event="run", run_id=run_id)

    threading.Thread(target=spot, name="run-spotter", daemon=True).start()
    try:
        outcome = perform(job)
    except Exception as exc:
        found.set()
        answer.send(event="error", error=_error(exc), run_id=spotted[0] if spotted else None)
        return 1
    found.set()
    answer.send(event="done", **outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main())
