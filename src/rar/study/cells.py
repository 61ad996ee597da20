"""Running one cell, on whichever process a Dask worker gives it.

A cell is run at most once to completion per store. Before a cell runs, its worker takes the
cell's lock (an advisory ``flock`` on ``<store>/studies/cells/<digest>.lock``, released by the
kernel however the process ends) and writes the run id it is about to record into
``<digest>.json``. A later attempt (the study run again after a crash, or two studies sharing a
cell) takes the same lock, so it waits for a worker still running the cell, and then finds the
run id: when that run finished, it is reused instead of run again. The marker is only a pointer;
the run's manifest decides whether the cell is done.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from rar.store.manifest import RunStatus
from rar.store.store import Store, new_run_id

STUDIES_DIR = "studies"
DONE = frozenset({RunStatus.COMPLETED.value, RunStatus.COMPLETED_WITH_WARNINGS.value})


def cells_dir(store: Store) -> Path:
    return store.root / STUDIES_DIR / "cells"


def finished_run(store: Store, digest: str) -> dict[str, Any] | None:
    """The finished run recorded for the cell ``digest``, as a cell outcome; None if none is."""
    try:
        marker = orjson.loads((cells_dir(store) / f"{digest}.json").read_bytes())
        run_id = str(marker["run_id"])
        manifest = store.manifest(run_id)
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    except Exception:  # a damaged or half-written run is not a finished cell
        return None
    if manifest.status.value not in DONE or store.is_writing(run_id):
        return None
    return {"run_id": run_id, "status": manifest.status.value, "reused": True, "error": None}


@contextmanager
def cell_lock(store: Store, digest: str) -> Iterator[None]:
    directory = cells_dir(store)
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _mark(store: Store, digest: str, run_id: str) -> None:
    """Point the cell at ``run_id`` (written atomically: a reader sees the old or the new one)."""
    path = cells_dir(store) / f"{digest}.json"
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_bytes(orjson.dumps({"run_id": run_id}))
    os.replace(temporary, path)


_stores: dict[str, Store] = {}


def worker_store(store_root: str) -> Store:
    """This process's :class:`Store` at ``store_root``, opened by its first cell and kept for
    the next ones (closed when the process exits): a worker runs many cells, and opening the
    index and closing it (a checkpoint that waits for the other workers' writes, and syncs)
    for each of them cost more than some cells."""
    store = _stores.get(store_root)
    if store is None:
        if not _stores:
            atexit.register(_close_stores)
        store = _stores[store_root] = Store(store_root)
    return store


def _close_stores() -> None:
    while _stores:
        _stores.popitem()[1].close()


def run_cell(store_root: str, params: dict[str, Any], digest: str) -> dict[str, Any]:
    """Run one cell into the store at ``store_root`` (a Dask task); return its outcome.

    The outcome is ``{run_id, status, reused, error, seconds}``; a failure is a value (the
    error's type and message), never an exception, so one bad cell does not stop a study.
    """
    begun = time.perf_counter()
    store = worker_store(store_root)
    try:
        with cell_lock(store, digest):
            done = finished_run(store, digest)
            if done is not None:
                return {**done, "seconds": round(time.perf_counter() - begun, 6)}
            run_id = new_run_id()
            _mark(store, digest, run_id)
            outcome = _perform(store, params, digest, run_id)
    except Exception as exc:
        outcome = {"run_id": None, "status": "failed", "reused": False, "error": _error(exc)}
    return {**outcome, "seconds": round(time.perf_counter() - begun, 6)}


def _perform(store: Store, params: dict[str, Any], digest: str, run_id: str) -> dict[str, Any]:
    tags = {"study_cell": digest}
    try:
        if params["kind"] == "flow":
            from rar.replay.engine import execute

            run = execute(
                params["entrypoint"],
                inputs=dict(params.get("inputs") or {}),
                goal=params["entrypoint"],
                store=store,
                seed=int(params["seed"]),
                tags={**tags, "kind": "flow"},
                run_id=run_id,
            )
            status = run.manifest.status.value
        else:
            from rar.science.runtime import ask_question

            status = ask_question(
                params["question"],
                mode=params["mode"],
                corpus=params["corpus"],
                model=params["model"],
                seed=int(params["seed"]),
                max_steps=int(params.get("max_steps", 12)),
                store=store,
                tags=tags,
                run_id=run_id,
            ).status
    except Exception as exc:
        recorded = store.run_dir(run_id).is_dir()
        return {
            "run_id": run_id if recorded else None,
            "status": "failed",
            "reused": False,
            "error": _error(exc),
        }
    error = None
    if status not in DONE:
        error = {"type": "RunNotCompleted", "message": f"the run finished {status}"}
    return {"run_id": run_id, "status": status, "reused": False, "error": error}


def _error(exc: BaseException) -> dict[str, str]:
    from rar.redaction import redact_output

    message = getattr(exc, "message", None) or str(exc)
    return {"type": type(exc).__name__, "message": redact_output(str(message))}
