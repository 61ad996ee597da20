"""Where a study's cells run: a Dask ``LocalCluster`` by default, or an existing scheduler.

The cluster is started (or connected to) on the first cell that needs running: a study whose
cells are all done already, and the strict replay of a study, start nothing.

A LocalCluster's worker processes are forked from a ``forkserver`` that has imported Dask and
the modules a cell runs (:data:`CELL_MODULES`) once, rather than spawned as fresh interpreters
that each import them again before their first cell: on a loaded 2-core machine that took
1.6-4 s to start two workers, 0.8-2.2 s more for their first cell, and 0.4-1 s to stop them.
Each worker is given the environment of the process that starts the cluster (a forkserver
started by an earlier study would otherwise hand down its own).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rar.errors import ConfigError, RarError

CONNECT_TIMEOUT = 10  # seconds to reach an existing scheduler
CELL_MODULES = ("distributed", "rar.study.cells", "rar.replay.engine")
"""Imported once by the forkserver that a LocalCluster's workers are forked from."""
QUESTION_MODULES = ("rar.science.runtime",)
"""Imported too when the study has questions (science runs)."""
FLOW_MODULES = ("rar.llm", "rar.tools", "rar.loop", "rar.flow")
"""Imported too when the study has flows: what RAR's flows are made of. A flow's own module is
imported by each worker's first cell (a user's module is never run in the forkserver)."""


class SchedulerUnreachableError(RarError):
    """The Dask scheduler named by ``--scheduler`` cannot be reached (an environment failure)."""

    exit_code = 3


def default_workers() -> int:
    """One single-threaded worker process per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Dispatcher:
    """Submits cells to Dask and hands their outcomes to asyncio.

    ``scheduler``: ``tcp://host:port`` of a running scheduler, or None for a LocalCluster of
    ``workers`` processes with one thread each (default: :func:`default_workers`).
    ``preload``: modules the LocalCluster's workers import before their first cell (beyond
    :data:`CELL_MODULES`).
    """

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        preload: tuple[str, ...] = (),
    ) -> None:
        if scheduler is not None and "://" not in scheduler:
            raise ConfigError(
                f"the scheduler address {scheduler!r} has no protocol; give it as "
                "tcp://host:port (e.g. --scheduler tcp://127.0.0.1:8786)"
            )
        if workers is not None and workers < 1:
            raise ConfigError(f"--workers must be at least 1, not {workers}")
        self.scheduler = scheduler
        self.workers = workers
        self.connect_timeout = connect_timeout
        self.preload = preload
        self._cluster: Any = None
        self._client: Any = None
        self._connecting: asyncio.Lock | None = None

    @property
    def started(self) -> bool:
        return self._client is not None

    def client(self) -> Any:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self) -> Any:
        import logging

        if self.scheduler is None:  # it imports while this process imports Dask
            _start_forkserver((*CELL_MODULES, *self.preload))
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            try:
                return Client(self.scheduler, timeout=self.connect_timeout)  # type: ignore[no-untyped-call]
            except (OSError, TimeoutError, ValueError) as exc:
                raise SchedulerUnreachableError(
                    f"cannot reach the Dask scheduler at {self.scheduler} within "
                    f"{self.connect_timeout:g} s ({type(exc).__name__}); start one "
                    "(dask scheduler --host HOST --port PORT) or leave out --scheduler to run "
                    "on a LocalCluster"
                ) from None
        with _forked_workers():
            self._cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=self.workers or default_workers(),
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # a free port (None still takes 8787, warning when busy)
                silence_logs=logging.ERROR,
                env=dict(os.environ),
            )
        return Client(self._cluster)  # type: ignore[no-untyped-call]

    async def run(self, function: Any, *args: Any, key: str) -> Any:
        """``function(*args)`` on a worker; its result, or the exception the task ended with.

        Connecting and submitting are blocking calls of Dask's synchronous client: they run on
        a thread, never on the event loop that waits for the cells.
        """
        loop = asyncio.get_running_loop()
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            client = await loop.run_in_executor(None, self.client)
        future = await loop.run_in_executor(
            None, lambda: client.submit(function, *args, key=key, pure=False)
        )
        done: asyncio.Future[Any] = loop.create_future()

        def finished(task: Any) -> None:  # on a Dask thread: fetch there, settle on the loop
            try:
                outcome: tuple[bool, Any] = (True, task.result())
            except BaseException as exc:
                outcome = (False, exc)
            loop.call_soon_threadsafe(_settle, done, outcome)

        future.add_done_callback(finished)
        return await done

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _start_forkserver(modules: tuple[str, ...]) -> None:
    """Start the forkserver that a LocalCluster's workers are forked from, preloading
    ``modules`` (one already running keeps what it preloaded; the first cell imports the rest).
    It does not wait for the imports: a worker's start waits for them."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(dict.fromkeys(modules)))
    forkserver.ensure_running()


@contextmanager
def _forked_workers() -> Iterator[None]:
    """Worker processes started meanwhile are forked from the forkserver, and do not sample
    their own stacks every 10 ms (Dask's profiler, which a study never reads)."""
    import dask

    with dask.config.set(
        {
            "distributed.worker.multiprocessing-method": "forkserver",
            "distributed.worker.profile.enabled": False,
        }
    ):
        yield


def _settle(done: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if done.done():
        return
    ok, value = outcome
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)
