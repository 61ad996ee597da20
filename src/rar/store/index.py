"""``index.sqlite``: a derived, rebuildable index of runs and blob locations.

The logs, manifests and packs are the source of truth. This index only makes look-ups fast:

* ``runs``: one row per run (status, goal, created time, event count, ...) plus the manifest
  mtime and log size it was read at; a row whose files changed since is re-read on access;
* ``packs`` / ``blobs``: where each blob lives; packs are scanned from the last indexed offset
  whenever a blob is not found, so blobs written by another process are found too.

Several processes may use it at once (WAL mode, busy timeout); every write is idempotent.

Being derived, a failing index never fails its caller. Every error is classified
(:func:`classify`, from ``sqlite_errorcode``) and handled by its kind (:class:`IndexFault`):

* **corrupt**: SQLITE_CORRUPT or SQLITE_NOTADB confirmed by ``PRAGMA quick_check`` on a fresh
  connection (a failed read can make SQLite report corruption), an unknown schema, text that
  does not decode, a row that does not match its ``crc``, a blob location its pack contradicts
  (an index that lies). The files are moved aside (the newest :data:`KEEP_QUARANTINED` copies
  are kept) and a fresh index is derived again from the logs and packs;
* **busy**: SQLITE_BUSY, SQLITE_LOCKED: waited for, up to :data:`BUSY_TIMEOUT` seconds;
* **full**, **io**, **read-only**: SQLITE_FULL; SQLITE_IOERR, SQLITE_CANTOPEN, ...;
  SQLITE_READONLY, SQLITE_PERM. Nothing is moved aside: a read answers "not indexed" (the caller
  reads the files instead) and a write is skipped (the index catches up later). Each kind is
  logged once per process and index, as a warning on the ``rar.store`` logger.

An index that cannot be kept in the store (a read-only store, a full disk, a damaged index that
cannot be moved aside) is replaced by a private temporary copy (seeded from the store's index
when that can be read) or, failing that, one in memory: reading a store never needs to write it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import orjson

from rar.hashing import is_digest
from rar.store._cache_queue import CACHE_BATCH, CacheQueue, flush_at_exit
from rar.store._locations import PackScanner, location_of
from rar.store._sqlite import (
    BUSY_TIMEOUT,
    CACHE_COLUMNS,
    FAULTS,
    KEEP_QUARANTINED,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    IndexFault,
    IndexLies,
    classify,
    confirm_damage,
    connect,
    describe,
    file_id,
    is_symlink,
    prepare,
    prune_quarantined,
    quarantine,
    retry_busy,
    row_crc,
    seed,
    temporary_copy,
)
from rar.store.blobs import BlobLocation, PackReader, PackRecord
from rar.store.index_backend import (
    CacheHit,
    CacheRow,
    checked_cache_rows,
    checked_hit,
    checked_locations,
    scan_new_records,
    sound_existing,
)

__all__ = [
    "BUSY_TIMEOUT",
    "KEEP_QUARANTINED",
    "RUN_COLUMNS",
    "SCHEMA_VERSION",
    "Index",
    "IndexFault",
    "IndexLies",
    "PackScanner",
    "RunRow",
    "classify",
    "prune_quarantined",
]

log = logging.getLogger("rar.store")
_T = TypeVar("_T")
Location = Literal["store", "temporary", "memory"]


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    status: str
    goal: str | None
    created_at: str
    finished_at: str | None
    events: int
    parent: str | None
    head: str | None
    dir_mtime_ns: int
    log_size: int
    problem: str | None = None
    """Why the directory could not be read as a run (status ``incomplete``); never indexed."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RUN_COLUMNS}

    def is_sound(self) -> bool:
        """Whether the row has the shape the index stores (anything else read back lies)."""

        # written out (no helper calls): listing a store without its index checks 10k rows
        return (
            isinstance(self.run_id, str)
            and bool(self.run_id)
            and isinstance(self.status, str)
            and (self.goal is None or isinstance(self.goal, str))
            and isinstance(self.created_at, str)
            and (self.finished_at is None or isinstance(self.finished_at, str))
            and (self.parent is None or isinstance(self.parent, str))
            and (self.head is None or is_digest(self.head))
            and isinstance(self.dir_mtime_ns, int)
            and isinstance(self.events, int)
            and self.events >= 0
            and isinstance(self.log_size, int)
            and self.log_size >= 0
        )


_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def warn(where: str, kind: str, message: str, *, once: bool = True) -> None:
    """Log ``message`` as a warning (stderr, when nothing else is configured), by default
    once per process for each ``(where, kind)``."""
    if once:
        with _WARNED_LOCK:
            if (where, kind) in _WARNED:
                return
            _WARNED.add((where, kind))
    log.warning("%s", message)


def _reported_by_sqlite(exc: BaseException) -> bool:
    """SQLite's own SQLITE_CORRUPT / SQLITE_NOTADB, as opposed to content found to lie."""
    return isinstance(exc, sqlite3.Error)


def _replaced(why: str, moved: str | None, *, lied: bool = False) -> str:
    what = f"lied ({why})" if lied else f"was damaged ({why})"
    if moved is None:
        return f"{what}; another process had replaced it already"
    return f"{what}; moved aside as {moved} and rebuilt from the runs' files"


def _unconfirmed(exc: BaseException) -> str:
    return f"{describe(exc)}, though the file checks out: taken for a failed read"


class _Unavailable(Exception):
    def __init__(self, fault: IndexFault, detail: str) -> None:
        super().__init__(detail)
        self.fault = fault


class Index:
    """The store's index, or a stand-in for it where it cannot be used.

    ``location`` says where the index lives: ``store`` (at ``path``), ``temporary`` (a private
    copy for this process, removed at exit) or ``memory``. With ``writable=False`` nothing is
    ever written in the store. ``reader`` lets the index check blob locations against the packs.
    ``notes`` says what went wrong (each kind is also logged once); ``faulted`` is true once an
    operation had to do without the index.
    """

    def __init__(
        self, path: Path, *, reader: PackReader | None = None, writable: bool = True
    ) -> None:
        self.path = path
        self.reader = reader
        self.notes: list[str] = []
        self.faulted = False
        self.location: Location = "store"
        self._file: Path | None = path  # the file the connection is to (None: in memory)
        self._inode: int | None = None  # the store's index file this connection opened
        self._mutex = threading.RLock()  # one operation at a time on the shared connection
        self._cache_queue = CacheQueue()  # cache rows written with the next write (cache_add)
        self._conn = self._open(writable)

    # --- opening ---------------------------------------------------------------------------

    def _open(self, writable: bool) -> sqlite3.Connection:
        if writable:
            try:
                return self._open_in_store()
            except _Unavailable as exc:
                self._note(
                    exc.fault,
                    f"cannot be used ({exc}); a temporary index derived from the runs' files is "
                    "used instead",
                )
        return self._open_stand_in()

    def _open_in_store(self) -> sqlite3.Connection:
        for attempt in range(2):
            conn: sqlite3.Connection | None = None
            inode = file_id(self.path)
            try:
                if is_symlink(self.path):
                    raise IndexLies("it is a symbolic link")
                conn = connect(str(self.path))
                retry_busy(functools.partial(prepare, conn))
                self.location, self._file = "store", self.path
                self._inode = inode if inode is not None else file_id(self.path)
                return conn
            except OSError as exc:
                raise _Unavailable(IndexFault.IO, exc.strerror or str(exc)) from exc
            except FAULTS as exc:
                if conn is not None:
                    conn.close()
                fault = classify(exc)
                if fault is None:
                    raise
                if fault is not IndexFault.CORRUPT or attempt:
                    raise _Unavailable(fault, describe(exc)) from exc
                if _reported_by_sqlite(exc) and not confirm_damage(self.path):
                    # an I/O error can look like damage; a file that checks out is kept
                    raise _Unavailable(IndexFault.IO, _unconfirmed(exc)) from exc
                try:
                    moved = quarantine(self.path, inode)
                except OSError as move:
                    raise _Unavailable(
                        IndexFault.READ_ONLY,
                        f"damaged ({describe(exc)}) and it cannot be moved aside: {move.strerror}",
                    ) from exc
                self._note(IndexFault.CORRUPT, _replaced(describe(exc), moved), once=False)
        raise AssertionError("unreachable")  # pragma: no cover

    def _open_stand_in(self, *, fresh: bool = False) -> sqlite3.Connection:
        temporary = temporary_copy(self.path, fresh=fresh)
        if temporary is not None:
            conn: sqlite3.Connection | None = None
            try:
                conn = connect(str(temporary))
                prepare(conn)
                self.location, self._file = "temporary", temporary
                return conn
            except FAULTS as exc:
                if conn is not None:
                    conn.close()
                if classify(exc) is None:
                    raise
                self._note(IndexFault.IO, f"has no temporary stand-in ({describe(exc)})")
        conn = connect(":memory:")
        if fresh or not seed(self.path, conn):
            conn.close()
            conn = connect(":memory:")
        prepare(conn)
        self.location, self._file = "memory", None
        return conn

    def discard(self, reason: str) -> None:
        """The index lies (``reason``): move it aside and start again from the files."""
        with self._mutex:
            self._discard(reason)

    def _discard(self, reason: str) -> None:
        self._conn.close()
        if self.location == "store":
            try:
                moved = quarantine(self.path, self._inode)
                self._note(IndexFault.CORRUPT, _replaced(reason, moved, lied=True), once=False)
                self._conn = self._open_in_store()
                return
            except (OSError, _Unavailable) as exc:
                self._note(IndexFault.CORRUPT, f"lied ({reason}) and cannot be replaced ({exc})")
        self._conn = self._open_stand_in(fresh=True)

    def _note(self, fault: IndexFault, text: str, *, once: bool = True) -> None:
        message = f"the run index {self.path} {text}"
        self.notes.append(message)
        warn(str(self.path), str(fault), f"warning: {message}", once=once)

    def close(self) -> None:
        with self._mutex:
            self.cache_flush(checkpoint=False)
            self.checkpoint("TRUNCATE")  # keep the WAL file small
            self._conn.close()

    # --- doing without ---------------------------------------------------------------------

    def _attempt(self, what: str, operation: Callable[[sqlite3.Connection], _T]) -> _T | None:
        """``operation`` on the index; None when it had to be done without (noted)."""
        for attempt in range(2):
            try:
                with self._mutex:
                    return retry_busy(lambda: operation(self._conn))
            except FAULTS as exc:
                fault = classify(exc)
                if fault is None:
                    raise
                if (
                    fault is IndexFault.CORRUPT
                    and _reported_by_sqlite(exc)
                    and self._file is not None
                    and not confirm_damage(self._file)
                ):
                    fault = IndexFault.IO  # an I/O error that looked like damage
                    error = _unconfirmed(exc)
                else:
                    error = describe(exc)
                if fault is IndexFault.CORRUPT and not attempt:
                    self.discard(f"{what}: {error}")
                    continue  # once more, on the fresh index
                self.faulted = True
                self._note(fault, _WITHOUT[fault].format(what=what, error=error))
                return None
        return None  # pragma: no cover

    def _write(self, what: str, change: Callable[[sqlite3.Connection], object]) -> bool:
        """Apply ``change`` in one transaction; False when it was skipped (noted). The cache
        rows queued so far are written in the same transaction (lost with it if it fails: a
        missed hit, never a wrong one)."""
        queued = self._cache_queue.take()

        def transaction(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            try:
                change(conn)
                if queued:
                    conn.executemany(_CACHE_INSERT, queued)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite rolls back by itself after some errors
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
            return True

        return self._attempt(what, transaction) is True

    # --- blobs -------------------------------------------------------------------------------

    def lookup_blob(self, digest: str) -> BlobLocation | None:
        row = self._attempt(
            "looking up a blob",
            lambda conn: conn.execute(
                "SELECT pack, offset, codec, raw_size, stored_size FROM blobs WHERE digest=?",
                (digest,),
            ).fetchone(),
        )
        if row is None:
            return None
        location = location_of(row)
        if location is None:
            self.discard(f"the row of blob {digest} is malformed")
        return location

    def existing_blobs(self, digests: list[str]) -> set[str]:
        """Which of ``digests`` are indexed; each is checked against its pack, since a writer
        trusts this to skip writing a blob."""

        def query(conn: sqlite3.Connection) -> dict[str, BlobLocation | None]:
            found: dict[str, BlobLocation | None] = {}
            for start in range(0, len(digests), 500):
                chunk = digests[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                cursor = conn.execute(
                    "SELECT digest, pack, offset, codec, raw_size, stored_size FROM blobs "
                    f"WHERE digest IN ({marks})",
                    chunk,
                )
                found.update((row[0], location_of(row[1:])) for row in cursor)
            return found

        found = self._attempt("checking for stored blobs", query) or {}
        sound, lied = sound_existing(self.reader, found)
        if lied:
            self.discard("a blob location does not match its pack")
        return sound

    def all_blob_locations(self) -> dict[str, BlobLocation]:
        """Every blob location, each checked against its record header in the pack (see
        :func:`~rar.store.index_backend.checked_locations`)."""
        rows = self._attempt(
            "listing blob locations",
            lambda conn: conn.execute(
                "SELECT digest, pack, offset, codec, raw_size, stored_size FROM blobs"
            ).fetchall(),
        )
        claimed = None if rows is None else {row[0]: location_of(row[1:]) for row in rows}
        return checked_locations(self, self.reader, claimed)

    def add_blobs(self, pack: str, records: Iterable[PackRecord], indexed_to: int) -> None:
        rows = [
            (
                r.digest,
                r.location.pack,
                r.location.offset,
                r.location.codec,
                r.location.raw_size,
                r.location.stored_size,
            )
            for r in records
        ]

        def change(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?)", rows)
            conn.execute(
                "INSERT INTO packs (name, indexed_to) VALUES (?, ?) ON CONFLICT(name) DO UPDATE "
                "SET indexed_to = max(indexed_to, excluded.indexed_to)",
                (pack, indexed_to),
            )

        self._write("indexing blobs", change)

    def catch_up(self, reader: PackReader) -> int:
        """Index records appended to packs since they were last indexed; returns how many."""
        rows = self._attempt(
            "reading pack positions",
            lambda conn: conn.execute("SELECT name, indexed_to FROM packs").fetchall(),
        )
        if rows is None:
            return 0
        if not all(isinstance(name, str) and isinstance(end, int) for name, end in rows):
            self.discard("a pack position is malformed")
            return self.catch_up(reader)  # the fresh index has none
        return scan_new_records(reader, dict(rows), self.add_blobs)

    # --- the model response cache (rows derived from recorded llm effects) --------------------

    def cache_get(self, key: str) -> tuple[str, str, int] | None:
        """(result payload reference JSON, run_id, seq) of a cached response."""
        hit = self.cache_lookup(key)
        return None if hit is None else (hit[0], hit[1], hit[2])

    def cache_lookup(self, key: str) -> CacheHit | None:
        """(result reference JSON, run_id, seq, where the result's blob is) of a cached response.

        Rows queued by this index object are looked at first (their blob location is None: the
        caller reads the blob through the store). Otherwise one query reads the row, checked
        against its ``crc``, with the location of its result's blob when that is indexed: the
        caller still checks the blob against its digest when it reads it.
        """
        queued = self._cache_queue.get(key)
        if queued is not None:
            return (queued[4], queued[5], queued[6], None)

        def read(conn: sqlite3.Connection) -> Any:
            # SQLite's own strict UTF-8 decoding is several times faster than the connection's
            # (see run_rows); a value it cannot decode is read again the usual way
            factory = conn.text_factory
            conn.text_factory = str
            try:
                return conn.execute(_CACHE_HIT_SQL, (key,)).fetchone()
            except sqlite3.OperationalError:
                pass
            finally:
                conn.text_factory = factory
            return conn.execute(_CACHE_HIT_SQL, (key,)).fetchone()

        def query(conn: sqlite3.Connection) -> CacheHit | None:
            return checked_hit(key, read(conn))

        return self._attempt("looking up a cached answer", query)

    def cache_put(self, rows: Iterable[CacheRow]) -> None:
        """Write ``rows`` now, in one transaction (with any queued ones)."""
        values = [(*row, row_crc(row)) for row in rows]

        def change(conn: sqlite3.Connection) -> None:
            conn.executemany(_CACHE_INSERT, values)

        self._write("caching a model answer", change)

    def cache_add(self, rows: Iterable[CacheRow]) -> None:
        """Queue ``rows``: written with the index's next write, once :data:`CACHE_BATCH` rows
        wait, at close or at exit (see :mod:`rar.store._cache_queue`)."""
        if self._cache_queue.add(rows) >= CACHE_BATCH:
            self.cache_flush()
        else:
            flush_at_exit(self)

    def cache_flush(self, *, checkpoint: bool = True) -> None:
        """Write the queued cache rows (one transaction), then let SQLite copy its WAL back
        into the index file (a passive checkpoint: it waits for nobody)."""
        if not len(self._cache_queue):
            return
        if self._write("caching model answers", lambda conn: None) and checkpoint:
            self.checkpoint()

    def checkpoint(self, mode: Literal["PASSIVE", "TRUNCATE"] = "PASSIVE") -> None:
        """Copy the WAL back into the index file (best effort; TRUNCATE also empties it)."""
        with self._mutex:
            if self.location == "store":
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()

    def cache_candidates(self, provider: str, model: str, limit: int) -> list[tuple[str, str]]:
        """(key, request reference JSON) of recent entries for a provider and model."""
        self.cache_flush()
        rows = self._cache_rows(
            "listing cached answers",
            "WHERE provider=? AND model=? ORDER BY created_at DESC LIMIT ?",
            (provider, model, limit),
        )
        return [(row[0], row[3]) for row in rows]

    def cache_recent(self, limit: int) -> list[tuple[str, str, str, str]]:
        self.cache_flush()
        rows = self._cache_rows(
            "listing cached answers", "ORDER BY created_at DESC LIMIT ?", (limit,)
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]

    def _cache_rows(self, what: str, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Cache rows, each checked against its ``crc``: a damaged cached answer is never
        served (the index is rebuilt, and the cache with it, from the logs)."""

        def query(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            columns = ", ".join(CACHE_COLUMNS)
            rows = conn.execute(f"SELECT {columns}, crc FROM llm_cache {where}", params)
            return checked_cache_rows(rows.fetchall())

        return self._attempt(what, query) or []

    def meta(self, key: str) -> str | None:
        row = self._attempt(
            "reading index metadata",
            lambda conn: conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone(),
        )
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        def change(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

        self._write("writing index metadata", change)

    # --- runs --------------------------------------------------------------------------------

    def run_rows(self) -> dict[str, RunRow]:
        """Every indexed run; empty when the index cannot be read (the caller reads the files)."""

        sql = f"SELECT {', '.join(RUN_COLUMNS)}, crc FROM runs"

        def read(conn: sqlite3.Connection) -> dict[str, RunRow]:
            rows = {}
            crc32, dumps, make = zlib.crc32, orjson.dumps, RunRow
            for values in conn.execute(sql):
                # only sound rows are written (upsert_runs), so a row that matches its check is one
                data = values[:-1]
                if values[-1] != crc32(dumps(data)):  # row_crc(data), inlined: 10k rows here
                    raise IndexLies(f"the row of run {values[0]!r} does not match its check")
                rows[values[0]] = make(*data)
            return rows

        def query(conn: sqlite3.Connection) -> dict[str, RunRow]:
            # SQLite's own strict UTF-8 decoding (text_factory=str) is several times faster
            # than the Python decoder the connection uses; a value it cannot decode is read
            # again the usual way, which reports it as damage exactly as before
            factory = conn.text_factory
            conn.text_factory = str
            try:
                return read(conn)
            except sqlite3.OperationalError:
                pass
            finally:
                conn.text_factory = factory
            return read(conn)

        return self._attempt("listing runs", query) or {}

    def upsert_runs(self, rows: Iterable[RunRow]) -> None:
        values = []
        for row in rows:
            if row.is_sound():
                data = tuple(getattr(row, c) for c in RUN_COLUMNS)
                values.append((*data, row_crc(data)))
        if not values:
            return
        placeholders = ", ".join("?" * (len(RUN_COLUMNS) + 1))

        def change(conn: sqlite3.Connection) -> None:
            conn.executemany(
                f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}, crc) "
                f"VALUES ({placeholders})",
                values,
            )

        self._write("indexing runs", change)

    def delete_runs(self, run_ids: Iterable[str]) -> None:
        ids = [(r,) for r in run_ids]

        def change(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM runs WHERE run_id=?", ids)

        if ids:
            self._write("removing runs from the index", change)


_CACHE_INSERT: Final = f"INSERT OR IGNORE INTO llm_cache VALUES ({', '.join('?' * 9)})"
# the row, its crc, and the location of its result's blob: a result reference's JSON starts
# with {"digest":"sha256:<64 hex>" (its keys in that order), so the join needs no JSON parsing
_CACHE_HIT_SQL: Final = (
    f"SELECT {', '.join('c.' + c for c in CACHE_COLUMNS)}, c.crc, "
    "b.digest, b.pack, b.offset, b.codec, b.raw_size, b.stored_size "
    "FROM llm_cache AS c LEFT JOIN blobs AS b ON b.digest = substr(c.result, 12, 71) "
    "WHERE c.key = ?"
)


_WITHOUT = {
    IndexFault.BUSY: (
        "stayed locked by another process ({error}) while {what}; the runs' files are read "
        "instead, and the index catches up later"
    ),
    IndexFault.FULL: (
        "cannot be written, the disk is full ({error}), while {what}. The runs' files are read "
        "instead (slower); nothing recorded is affected, and the index catches up once there is "
        "space"
    ),
    IndexFault.IO: (
        "failed with an I/O error ({error}) while {what}. The runs' files are read instead; "
        "nothing recorded is affected, and the index catches up later"
    ),
    IndexFault.READ_ONLY: (
        "cannot be written ({error}) while {what}; the runs' files are read instead"
    ),
    IndexFault.CORRUPT: (
        "is damaged ({error}) while {what}, even once rebuilt; the runs' files are read instead"
    ),
}
