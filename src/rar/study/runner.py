"""Run a study: every cell of the grid on Dask, the study itself a recorded run.

The study run's entrypoint is :func:`study_entry`. Each cell is one ``study.cell`` effect in its
own span (``run/cell``, ``run/cell#2``, ... in grid order) whose request holds the cell's
parameters and digest and whose result names the cell's run, its status and its error. A strict
replay of the study serves every cell from the record and runs none; ``rar diff`` aligns two
studies cell by cell.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rar._extras import installed
from rar.errors import ConfigError
from rar.runtime.run import Run
from rar.store.manifest import RunStatus
from rar.store.store import Store
from rar.study.cells import DONE, finished_run, run_cell
from rar.study.cluster import CONNECT_TIMEOUT, FLOW_MODULES, QUESTION_MODULES, Dispatcher
from rar.study.spec import Cell, StudySpec, cells_of, load_study, parse_study

ENTRYPOINT = "rar.study.runner:study_entry"
CELL_KIND = "study.cell"
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class _Execution:
    """How cells are run this time: not an input of the study (a replay runs none)."""

    dispatcher: Dispatcher | None = None
    progress: Progress | None = None


_execution: ContextVar[_Execution | None] = ContextVar("rar_study_execution", default=None)


@dataclass(frozen=True)
class StudyResult:
    """A finished study: its run id and each cell's outcome, in grid order."""

    run_id: str
    name: str
    status: str
    cells: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return counts_of(self.cells)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "name": self.name,
            "status": self.status,
            "counts": self.counts,
            "cells": self.cells,
        }


def counts_of(cells: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "cells": len(cells),
        "completed": sum(1 for c in cells if c.get("status") in DONE),
        "failed": sum(1 for c in cells if c.get("status") not in DONE),
        "reused": sum(1 for c in cells if c.get("reused")),
    }


def study_entry(run: Run, name: str, cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The study's entrypoint: run every cell (each a ``study.cell`` effect); return them all."""
    execution = _execution.get() or _Execution()
    dispatcher = execution.dispatcher or Dispatcher()
    total = len(cells)
    finished = 0

    async def one(cell: dict[str, Any]) -> dict[str, Any]:
        nonlocal finished
        digest, params = cell["digest"], cell["params"]
        request = {"name": CELL_KIND, "version": "1", "digest": digest, "params": params}

        async def perform() -> dict[str, Any]:
            done = finished_run(run.store, digest)
            if done is not None:
                return {**done, "seconds": 0.0}
            key = f"rar-cell-{digest.removeprefix('sha256:')[:16]}-{run.id}"
            try:
                outcome: dict[str, Any] = await dispatcher.run(
                    run_cell, str(run.store.root.resolve()), params, digest, key=key
                )
            except Exception as exc:
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                outcome = {
                    "run_id": None,
                    "status": "failed",
                    "reused": False,
                    "error": {"type": type(exc).__name__, "message": str(message)},
                    "seconds": 0.0,
                }
            return outcome

        # the span is opened before the first await, so the cells' spans are numbered in order
        with run.span("cell", cell=digest, kind=params["kind"]):
            result: dict[str, Any] = await run.aeffect(CELL_KIND, request, perform)
        finished += 1
        if execution.progress is not None:
            execution.progress(finished, total)
        return {"digest": digest, **result}

    async def every() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(one(c) for c in cells)))

    if execution.progress is not None:
        execution.progress(0, total)
    try:
        outcomes = asyncio.run(every())
    finally:
        if execution.dispatcher is None:
            dispatcher.close()
    counts = counts_of(outcomes)
    run.outcome_status = (
        RunStatus.COMPLETED_WITH_WARNINGS if counts["failed"] else RunStatus.COMPLETED
    )
    return {"name": name, "counts": counts, "cells": outcomes}


def study(
    spec: StudySpec | Mapping[str, Any] | str | Path,
    *,
    store: Store | str | Path | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> StudyResult:
    """Run the grid ``spec`` (a :class:`StudySpec`, a mapping, or a YAML file's path) on Dask.

    ``scheduler``: ``tcp://host:port`` of a running Dask scheduler (default: a LocalCluster of
    ``workers`` single-threaded processes, one per core); ``connect_timeout`` bounds the wait
    for it, in seconds. Cells already finished in the store are
    reused, not run again; a failing cell is recorded with its error and the study goes on.
    Returns the study's run id and every cell's outcome; ``rar study report RUN`` reports it.
    """
    from rar.replay.engine import execute

    if not installed("distributed"):
        raise ConfigError(
            "rar study runs its cells on Dask, which is not installed here: "
            "pip install 'rar[study]' (dask[distributed])"
        )
    base: Path | None = None
    if isinstance(spec, str | Path):
        base = Path(spec).parent
        spec = load_study(Path(spec))
    elif not isinstance(spec, StudySpec):
        spec = parse_study(spec, "the study spec")
    grid: list[Cell] = cells_of(spec, base=base)
    store = store if isinstance(store, Store) else Store(store)
    store.ensure_writable()
    kinds = {c.params["kind"] for c in grid}
    preload = (
        *(FLOW_MODULES if "flow" in kinds else ()),
        *(QUESTION_MODULES if kinds - {"flow"} else ()),
    )
    dispatcher = Dispatcher(scheduler, workers, connect_timeout=connect_timeout, preload=preload)
    if scheduler is not None:
        dispatcher.client()  # an unreachable scheduler fails before anything is recorded
    token = _execution.set(_Execution(dispatcher, progress))
    try:
        run = execute(
            ENTRYPOINT,
            inputs={
                "name": spec.name,
                "cells": [{"digest": c.digest, "params": c.params} for c in grid],
            },
            goal=f"study {spec.name}: {len(grid)} cells",
            store=store,
            seed=0,
            config={
                "scheduler": scheduler or "local",
                "workers": workers or 0,
                "cells": len(grid),
            },
            tags={"kind": "study", "study": spec.name},
        )
    finally:
        _execution.reset(token)
        dispatcher.close()
    outcome = store.resolve_payload(_finished(store, run.id).get("result")) or {}
    return StudyResult(run.id, spec.name, run.manifest.status.value, list(outcome.get("cells", [])))


def _finished(store: Store, run_id: str) -> dict[str, Any]:
    events = store.events(run_id)
    return next((e for e in reversed(events) if e["type"] == "run.finished"), {})
