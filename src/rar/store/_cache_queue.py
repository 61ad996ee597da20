"""Model-cache rows waiting to be written to the store's index (see ``cache_add``).

Writing each cached answer in a transaction of its own cost a commit per model call, ~18 kB of
SQLite WAL each. Rows are queued per index object instead and written together, by one
``executemany``: with the next write the index makes anyway (a finishing run indexes its blobs
and its row), as soon as :data:`CACHE_BATCH` rows wait, when the index is closed, and at
interpreter exit. Until then a look-up finds them here first, so this process never misses its
own answers.

A row lost with its process (``kill -9``, ``os._exit``) is a missed hit, never a wrong answer:
a row only points at an llm effect already written to its run's log, and
:meth:`rar.llm.cache.ResponseCache.rebuild` derives every row again from the logs.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Iterable
from typing import Final, Protocol

from rar.store._sqlite import row_crc

CACHE_BATCH: Final = 64
"""Queued cache rows that make the index write them at once."""

CheckedRow = tuple[str, str, str, str, str, str, int, str, int]
"""A cache row (see ``CacheRow``) and its ``crc``, as the index stores it."""


class CacheQueue:
    """The rows one index object has yet to write, by key (a key seen twice keeps the first
    row, as ``INSERT OR IGNORE`` would)."""

    __slots__ = ("_lock", "_rows")

    def __init__(self) -> None:
        self._rows: dict[str, CheckedRow] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, rows: Iterable[tuple[str, str, str, str, str, str, int, str]]) -> int:
        """Queue ``rows``; returns how many rows wait now."""
        checked = [(*row, row_crc(row)) for row in rows]
        with self._lock:
            for row in checked:
                self._rows.setdefault(row[0], row)
            return len(self._rows)

    def get(self, key: str) -> CheckedRow | None:
        return self._rows.get(key)

    def rows(self) -> list[CheckedRow]:
        """The queued rows, left queued."""
        with self._lock:
            return list(self._rows.values())

    def take(self) -> list[CheckedRow]:
        """Every queued row, in key order (writers lock rows in the same order), and empty the
        queue: the caller writes them, or they are lost (missed hits)."""
        with self._lock:
            taken, self._rows = self._rows, {}
        return [taken[key] for key in sorted(taken)]


class _Flushes(Protocol):
    def cache_flush(self) -> None: ...


_WAITING: weakref.WeakSet[_Flushes] = weakref.WeakSet()
_WAITING_LOCK = threading.Lock()


def flush_at_exit(index: _Flushes) -> None:
    """Make sure ``index`` writes its queued rows at interpreter exit if nobody closes it."""
    with _WAITING_LOCK:
        _WAITING.add(index)


def _flush_all() -> None:
    with _WAITING_LOCK:
        waiting = list(_WAITING)
    for index in waiting:
        with contextlib.suppress(Exception):  # derived data: exiting never fails for it
            index.cache_flush()


atexit.register(_flush_all)
