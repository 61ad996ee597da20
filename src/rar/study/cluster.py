"""Where a study's cells run: a Dask ``LocalCluster`` by default, or an existing scheduler.

The cluster is started (or connected to) on the first cell that needs running: a study whose
cells are all done already, and the strict replay of a study, start nothing.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from rar.errors import ConfigError, RarError

CONNECT_TIMEOUT = 10  # seconds to reach an existing scheduler


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
    """

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
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
        self._cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=self.workers or default_workers(),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port (None still takes 8787, warning when busy)
            silence_logs=logging.ERROR,
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


def _settle(done: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if done.done():
        return
    ok, value = outcome
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)
