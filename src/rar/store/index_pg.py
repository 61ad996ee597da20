"""The store's index on a PostgreSQL server (``RAR_INDEX_URL=postgresql://...``, or ``"index"``
in ``<store>/store.json``).

The same derived data as ``index.sqlite`` (see :mod:`rar.store.index`): runs, blob locations
and pack positions, the model response cache and metadata, in tables named ``rar_*``. One
database may hold the indexes of several stores: every row is keyed by the store's id
(``store_id`` in ``store.json``, drawn on first use), so stores never see each other's rows.

Many processes may write at once: every write is one short transaction of idempotent upserts
(``ON CONFLICT``), rows locked in key order so that writers never deadlock; a serialization
failure, a deadlock or a lock timeout is tried again.

Being derived, the index never fails its caller. A server that cannot be reached, a dropped
connection, missing privileges or a full disk: the operation is done without (the caller reads
the runs' files and packs), with one ``warning:`` line naming the URL (which never holds a
password), and the server is tried again after :data:`RETRY_AFTER` seconds. Tables dropped
while in use are created again; rows that lie (a location its pack contradicts, a row that
fails its check) make the store's rows be deleted and derived again from the files.

psycopg is imported only when a PostgreSQL index is opened.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from rar._extras import installed
from rar.errors import ConfigError
from rar.store._cache_queue import CACHE_BATCH, CacheQueue, flush_at_exit
from rar.store._locations import location_of
from rar.store._sqlite import CACHE_COLUMNS, RUN_COLUMNS, IndexFault, IndexLies, row_crc
from rar.store.blobs import BlobLocation, PackReader, PackRecord
from rar.store.config import ensure_store_id, load_config
from rar.store.index import Index, RunRow, warn
from rar.store.index_backend import (
    CacheHit,
    CacheRow,
    IndexBackend,
    checked_cache_rows,
    checked_hit,
    checked_locations,
    scan_new_records,
    sound_existing,
)
from rar.store.layout import INDEX_NAME

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECT_TIMEOUT", "RETRY_AFTER", "SCHEMA_VERSION", "PgIndex", "open_index"]

SCHEMA_VERSION: Final = 1
CONNECT_TIMEOUT: Final = 5
"""Seconds to wait for the server when the URL does not say (``connect_timeout=``)."""
RETRY_AFTER: Final = 30.0
"""Seconds an unreachable server is done without before it is tried again."""
BUSY_TIMEOUT: Final = 10.0
"""Seconds to keep retrying a transaction that failed on a lock, deadlock or serialization."""
_SCHEMA_LOCK: Final = 0x5241_5249_4E44_4558  # advisory lock creating the tables ("RARINDEX")
_T = TypeVar("_T")

SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS rar_stores (
    store_id TEXT PRIMARY KEY,
    root TEXT NOT NULL,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS rar_meta (
    store_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (store_id, key)
);
CREATE TABLE IF NOT EXISTS rar_runs (
    store_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    goal TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    events BIGINT NOT NULL,
    parent TEXT,
    head TEXT,
    dir_mtime_ns BIGINT NOT NULL,
    log_size BIGINT NOT NULL,
    crc BIGINT NOT NULL,
    PRIMARY KEY (store_id, run_id)
);
CREATE TABLE IF NOT EXISTS rar_llm_cache (
    store_id TEXT NOT NULL,
    key TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    crc BIGINT NOT NULL,
    PRIMARY KEY (store_id, key)
);
CREATE INDEX IF NOT EXISTS rar_llm_cache_model
    ON rar_llm_cache (store_id, provider, model, created_at);
CREATE TABLE IF NOT EXISTS rar_packs (
    store_id TEXT NOT NULL, name TEXT NOT NULL, indexed_to BIGINT NOT NULL,
    PRIMARY KEY (store_id, name)
);
CREATE TABLE IF NOT EXISTS rar_blobs (
    store_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    pack TEXT NOT NULL,
    pack_offset BIGINT NOT NULL,
    codec INTEGER NOT NULL,
    raw_size BIGINT NOT NULL,
    stored_size BIGINT NOT NULL,
    PRIMARY KEY (store_id, digest)
);
INSERT INTO rar_meta VALUES ('', 'schema', '{SCHEMA_VERSION}') ON CONFLICT DO NOTHING;
"""
TABLES: Final = ("rar_meta", "rar_runs", "rar_llm_cache", "rar_packs", "rar_blobs")
"""The tables holding a store's rows (``rar_stores`` only names the stores)."""
_BLOB_COLUMNS: Final = "digest, pack, pack_offset, codec, raw_size, stored_size"
_RUN_SQL: Final = ", ".join(RUN_COLUMNS)
_CACHE_SQL: Final = ", ".join(CACHE_COLUMNS)
# SQL types of RUN_COLUMNS and CACHE_COLUMNS, then crc (what unnest casts each column to)
_RUN_TYPES: Final = ("text",) * 5 + ("bigint",) + ("text",) * 2 + ("bigint",) * 3
_CACHE_TYPES: Final = ("text",) * 6 + ("bigint", "text", "bigint")


def open_index(root: Path, *, reader: PackReader | None, writable: bool) -> IndexBackend:
    """The index ``root``'s configuration names: ``index.sqlite`` in the store, or a
    :class:`PgIndex` when the index URL is a PostgreSQL one. A ConfigError for a URL that
    cannot be used (a password in it, another scheme)."""
    url = index_url(root) if root.is_dir() else None
    if url is None:
        return Index(root / INDEX_NAME, reader=reader, writable=writable)
    store_id = ensure_store_id(root) if writable else load_config(root).store_id
    if store_id is None:  # never indexed there, and this process may not write the store
        return Index(root / INDEX_NAME, reader=reader, writable=False)
    return PgIndex(url, store_id, root=root, reader=reader, writable=writable)


def index_url(root: Path) -> str | None:
    """The PostgreSQL URL of the store's index, None for ``index.sqlite``; a ConfigError for a
    setting that cannot be used (a password in the URL, another scheme). Checked before a run
    is started, so that a bad setting stops it before anything is recorded."""
    url = load_config(root).index
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            f"the index URL {url!r} is not a PostgreSQL one: write postgresql://[user@]host"
            "[:port]/database, or leave RAR_INDEX_URL unset to keep the index in the store"
        )
    if url is not None and not installed("psycopg"):
        raise ConfigError(
            f"the store's index is on PostgreSQL ({url}), which needs psycopg: "
            "pip install 'rar[postgres]'"
        )
    return url


class PgIndex:
    """A store's index in PostgreSQL tables, its rows keyed by ``store_id``.

    ``writable=False`` reads the rows but never writes (a store opened read-only).
    ``notes`` says what went wrong (each kind is also logged once); ``faulted`` is true once an
    operation had to do without the index.
    """

    def __init__(
        self,
        url: str,
        store_id: str,
        *,
        root: Path,
        reader: PackReader | None = None,
        writable: bool = True,
    ) -> None:
        self.url = url
        self.path = url  # where the index is, as messages name it
        self.store_id = store_id
        self.root = root
        self.reader = reader
        self.writable = writable
        self.notes: list[str] = []
        self.faulted = False
        self.location = "store" if writable else "read-only"
        self._mutex = threading.RLock()  # one operation at a time on the shared connection
        self._cache_queue = CacheQueue()  # cache rows written with the next write (cache_add)
        self._conn: psycopg.Connection[Any] | None = None
        self._down_until = 0.0  # monotonic time before which the server is not tried again
        self._connection()

    # --- connecting ------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any] | None:
        """The open connection, a new one, or None while the server is done without."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        if time.monotonic() < self._down_until:
            return None
        import psycopg

        try:
            conn = psycopg.connect(self.url, **_connect_options(self.url))
        except psycopg.Error as exc:
            self._down(IndexFault.IO, f"cannot be reached ({_describe(exc)})", "opening it")
            return None
        try:
            self._prepare(conn)
        except psycopg.Error as exc:
            conn.close()
            fault = _classify(exc) or IndexFault.IO
            self._down(fault, f"cannot be used ({_describe(exc)})", "opening it")
            return None
        except IndexLies as exc:
            conn.close()
            self._down(IndexFault.CORRUPT, f"cannot be used ({exc})", "opening it")
            return None
        self._conn = conn
        return conn

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        """Check the tables are those of this version; create them in a database without."""
        import psycopg

        try:
            row = conn.execute(
                "SELECT value FROM rar_meta WHERE store_id = '' AND key = 'schema'"
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            row = None
        if row is None:
            if not self.writable:
                raise IndexLies("its tables do not exist yet")
            with conn.transaction():
                # concurrent CREATE TABLE IF NOT EXISTS can collide: one creator at a time
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute(SCHEMA)
                row = conn.execute(
                    "SELECT value FROM rar_meta WHERE store_id = '' AND key = 'schema'"
                ).fetchone()
        if row is None or row[0] != str(SCHEMA_VERSION):
            raise IndexLies(
                f"its tables are of schema version {row[0] if row else None!r}, not "
                f"{SCHEMA_VERSION} (another RAR version writes them); nothing is changed there"
            )
        if self.writable:
            conn.execute(
                "INSERT INTO rar_stores (store_id, root) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (self.store_id, str(self.root.resolve())),
            )

    def _down(self, fault: IndexFault, text: str, what: str) -> None:
        self.faulted = True
        self._down_until = time.monotonic() + RETRY_AFTER
        self._note(fault, f"{text} while {what}; {_WITHOUT}")

    def _note(self, fault: IndexFault, text: str, *, once: bool = True) -> None:
        message = f"the run index {self.url} {text}"
        self.notes.append(message)
        warn(self.url, str(fault), f"warning: {message}", once=once)

    def close(self) -> None:
        with self._mutex:
            self.cache_flush()
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None

    # --- doing without ---------------------------------------------------------------------

    def _attempt(self, what: str, operation: Callable[[psycopg.Connection[Any]], _T]) -> _T | None:
        """``operation`` on the index; None when it had to be done without (noted)."""
        import psycopg

        deadline = time.monotonic() + BUSY_TIMEOUT
        pause, retried, rebuilt = 0.01, False, False
        while True:
            with self._mutex:
                conn = self._connection()
                if conn is None:
                    self.faulted = True
                    return None
                try:
                    return operation(conn)
                except IndexLies as exc:
                    if rebuilt:
                        self._without(IndexFault.CORRUPT, what, str(exc))
                        return None
                    rebuilt = True
                    self._discard(f"{what}: {exc}")
                    continue
                except psycopg.Error as exc:
                    fault = _classify(exc)
                    if fault is None:
                        raise
                    error = _describe(exc)
                    lost = conn.closed or conn.broken
                    if fault is IndexFault.BUSY and time.monotonic() + pause < deadline:
                        pass  # waited for below, outside the lock
                    elif lost and not retried:  # a dropped connection: once more, on a new one
                        retried = True
                        self.close()
                        continue
                    elif fault is IndexFault.CORRUPT and not rebuilt:  # tables dropped
                        rebuilt = True
                        self._prepare_again(conn)
                        continue
                    else:
                        if lost:
                            self.close()
                            self._down(fault, f"failed ({error})", what)
                        else:
                            self._without(fault, what, error)
                        return None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _prepare_again(self, conn: psycopg.Connection[Any]) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error, IndexLies):
            self._prepare(conn)

    def _without(self, fault: IndexFault, what: str, error: str) -> None:
        self.faulted = True
        self._note(fault, f"failed ({error}) while {what}; {_WITHOUT}")

    def _write(self, what: str, change: Callable[[psycopg.Connection[Any]], object]) -> bool:
        """Apply ``change`` in one transaction; False when it was skipped (noted, or the index
        is read-only)."""
        if not self.writable:
            return False
        queued = [row for row in self._cache_queue.take() if _storable(row)]

        def transaction(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                change(conn)
                if queued:  # the cache rows queued so far (see cache_add), with this write
                    self._insert_cache_rows(conn, queued)
            return True

        return self._attempt(what, transaction) is True

    def discard(self, reason: str) -> None:
        """The index lies (``reason``): delete the store's rows, to be derived again from the
        runs' files and packs."""
        with self._mutex:
            self._discard(reason)

    def _discard(self, reason: str) -> None:
        if not self.writable:
            self._note(IndexFault.CORRUPT, f"lied ({reason}); it is read-only here and not used")
            self.faulted = True
            self._down_until = float("inf")
            return

        def clear(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                for table in TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE store_id = %s", (self.store_id,))

        self._note(
            IndexFault.CORRUPT,
            f"lied ({reason}); the store's rows there were deleted and are derived again from "
            "the runs' files",
            once=False,
        )
        self._attempt("deleting the store's rows", clear)

    # --- blobs -------------------------------------------------------------------------------

    def _blob_rows(self, what: str, digests: Sequence[str] | None) -> dict[str, Any] | None:
        sql = f"SELECT {_BLOB_COLUMNS} FROM rar_blobs WHERE store_id = %s"
        params: tuple[Any, ...] = (self.store_id,)
        if digests is not None:
            sql += " AND digest = ANY(%s)"
            params += (list(digests),)

        def query(conn: psycopg.Connection[Any]) -> dict[str, Any]:
            return {row[0]: location_of(row[1:]) for row in conn.execute(sql, params)}

        return self._attempt(what, query)

    def lookup_blob(self, digest: str) -> BlobLocation | None:
        rows = self._blob_rows("looking up a blob", [digest])
        if not rows:
            return None
        location: BlobLocation | None = rows.get(digest)
        if location is None:
            self.discard(f"the row of blob {digest} is malformed")
        return location

    def existing_blobs(self, digests: list[str]) -> set[str]:
        """Which of ``digests`` are indexed; each is checked against its pack, since a writer
        trusts this to skip writing a blob."""
        found = self._blob_rows("checking for stored blobs", digests) or {}
        sound, lied = sound_existing(self.reader, found)
        if lied:
            self.discard("a blob location does not match its pack")
        return sound

    def all_blob_locations(self) -> dict[str, BlobLocation]:
        """Every blob location, each checked against its pack (see
        :func:`~rar.store.index_backend.checked_locations`)."""
        claimed = self._blob_rows("listing blob locations", None)
        return checked_locations(self, self.reader, claimed)

    def add_blobs(self, pack: str, records: Iterable[PackRecord], indexed_to: int) -> None:
        rows = sorted(
            (
                r.digest,
                r.location.pack,
                r.location.offset,
                r.location.codec,
                r.location.raw_size,
                r.location.stored_size,
            )
            for r in records
        )
        types = ("text", "text", "bigint", "integer", "bigint", "bigint")
        sid = self.store_id

        def change(conn: psycopg.Connection[Any]) -> None:
            if rows:
                conn.execute(
                    f"INSERT INTO rar_blobs (store_id, {_BLOB_COLUMNS}) "
                    f"SELECT %s, * FROM {_unnest(types)} ON CONFLICT DO NOTHING",
                    (sid, *_columns(rows, len(types))),
                )
            conn.execute(
                "INSERT INTO rar_packs (store_id, name, indexed_to) VALUES (%s, %s, %s) "
                "ON CONFLICT (store_id, name) DO UPDATE "
                "SET indexed_to = GREATEST(rar_packs.indexed_to, excluded.indexed_to)",
                (sid, pack, indexed_to),
            )

        self._write("indexing blobs", change)

    def catch_up(self, reader: PackReader) -> int:
        """Index records appended to packs since they were last indexed; returns how many."""
        rows = self._attempt(
            "reading pack positions",
            lambda conn: conn.execute(
                "SELECT name, indexed_to FROM rar_packs WHERE store_id = %s", (self.store_id,)
            ).fetchall(),
        )
        if rows is None:
            return 0
        return scan_new_records(reader, dict(rows), self.add_blobs)

    # --- the model response cache -------------------------------------------------------------

    def cache_get(self, key: str) -> tuple[str, str, int] | None:
        """(result payload reference JSON, run_id, seq) of a cached response."""
        hit = self.cache_lookup(key)
        return None if hit is None else (hit[0], hit[1], hit[2])

    def cache_lookup(self, key: str) -> CacheHit | None:
        """(result reference JSON, run_id, seq, where the result's blob is): rows queued here
        first, else one query for the row (checked against its ``crc``) joined with its
        result blob's location (see :meth:`rar.store.index.Index.cache_lookup`)."""
        queued = self._cache_queue.get(key)
        if queued is not None:
            return (queued[4], queued[5], queued[6], None)
        params = (self.store_id, key)

        def query(conn: psycopg.Connection[Any]) -> CacheHit | None:
            return checked_hit(key, conn.execute(_CACHE_HIT_SQL, params).fetchone())

        return self._attempt("looking up a cached answer", query)

    def cache_put(self, rows: Iterable[CacheRow]) -> None:
        """Write ``rows`` now, in one transaction (with any queued ones)."""
        merged = {row[0]: (*row, row_crc(row)) for row in rows if _storable(row)}
        for row in self._cache_queue.take():  # one statement: every row locked in key order
            if _storable(row):
                merged.setdefault(row[0], row)
        values = [merged[key] for key in sorted(merged)]
        if not values:
            return

        def change(conn: psycopg.Connection[Any]) -> None:
            self._insert_cache_rows(conn, values)

        self._write("caching a model answer", change)

    def cache_add(self, rows: Iterable[CacheRow]) -> None:
        """Queue ``rows``: written with the index's next write, once :data:`CACHE_BATCH` rows
        wait, at close or at exit (see :mod:`rar.store._cache_queue`)."""
        if not self.writable:
            return
        if self._cache_queue.add(rows) >= CACHE_BATCH:
            self.cache_flush()
        else:
            flush_at_exit(self)

    def cache_flush(self) -> None:
        """Write the queued cache rows now (one transaction)."""
        if len(self._cache_queue):
            self._write("caching model answers", lambda conn: None)

    def _insert_cache_rows(self, conn: psycopg.Connection[Any], values: list[Any]) -> None:
        """Insert checked cache rows, in key order (concurrent writers never deadlock)."""
        conn.execute(
            f"INSERT INTO rar_llm_cache (store_id, {_CACHE_SQL}, crc) "
            f"SELECT %s, * FROM {_unnest(_CACHE_TYPES)} ON CONFLICT DO NOTHING",
            (self.store_id, *_columns(values, len(_CACHE_TYPES))),
        )

    def cache_candidates(self, provider: str, model: str, limit: int) -> list[tuple[str, str]]:
        """(key, request reference JSON) of recent entries for a provider and model."""
        self.cache_flush()
        rows = self._cache_rows(
            "listing cached answers",
            "AND provider = %s AND model = %s ORDER BY created_at DESC LIMIT %s",
            (provider, model, limit),
        )
        return [(row[0], row[3]) for row in rows]

    def cache_recent(self, limit: int) -> list[tuple[str, str, str, str]]:
        self.cache_flush()
        rows = self._cache_rows(
            "listing cached answers", "ORDER BY created_at DESC LIMIT %s", (limit,)
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]

    def _cache_rows(self, what: str, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Cache rows, each checked against its ``crc``: a damaged cached answer is never
        served (the store's rows are deleted, and the cache derived again from the logs)."""
        sql = f"SELECT {_CACHE_SQL}, crc FROM rar_llm_cache WHERE store_id = %s {where}"

        def query(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return checked_cache_rows(conn.execute(sql, (self.store_id, *params)).fetchall())

        return self._attempt(what, query) or []

    def meta(self, key: str) -> str | None:
        row = self._attempt(
            "reading index metadata",
            lambda conn: conn.execute(
                "SELECT value FROM rar_meta WHERE store_id = %s AND key = %s",
                (self.store_id, key),
            ).fetchone(),
        )
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        def change(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO rar_meta (store_id, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (store_id, key) DO UPDATE SET value = excluded.value",
                (self.store_id, key, value),
            )

        self._write("writing index metadata", change)

    # --- runs --------------------------------------------------------------------------------

    def run_rows(self) -> dict[str, RunRow]:
        """Every indexed run; empty when the index cannot be read (the caller reads the files)."""
        sql = f"SELECT {_RUN_SQL}, crc FROM rar_runs WHERE store_id = %s"

        def query(conn: psycopg.Connection[Any]) -> dict[str, RunRow]:
            rows = {}
            crc32, dumps, make = zlib.crc32, orjson.dumps, RunRow
            for values in conn.execute(sql, (self.store_id,)):
                data = values[:-1]
                if values[-1] != crc32(dumps(list(data))):  # row_crc(data), inlined
                    raise IndexLies(f"the row of run {values[0]!r} does not match its check")
                rows[values[0]] = make(*data)
            return rows

        return self._attempt("listing runs", query) or {}

    def upsert_runs(self, rows: Iterable[RunRow]) -> None:
        latest = {}
        for row in rows:
            if row.is_sound():
                data = tuple(getattr(row, c) for c in RUN_COLUMNS)
                if _storable(data):  # a row PostgreSQL cannot hold is read from the files
                    latest[row.run_id] = (*data, row_crc(data))
        if not latest:
            return
        values = [latest[run_id] for run_id in sorted(latest)]  # key order: no deadlocks
        updates = ", ".join(f"{c} = excluded.{c}" for c in (*RUN_COLUMNS[1:], "crc"))
        sid = self.store_id

        def change(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                f"INSERT INTO rar_runs (store_id, {_RUN_SQL}, crc) "
                f"SELECT %s, * FROM {_unnest(_RUN_TYPES)} "
                f"ON CONFLICT (store_id, run_id) DO UPDATE SET {updates}",
                (sid, *_columns(values, len(_RUN_TYPES))),
            )

        self._write("indexing runs", change)

    def delete_runs(self, run_ids: Iterable[str]) -> None:
        ids = sorted(set(run_ids))

        def change(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "DELETE FROM rar_runs WHERE store_id = %s AND run_id = ANY(%s)",
                (self.store_id, ids),
            )

        if ids:
            self._write("removing runs from the index", change)


# the row, its crc, and its result blob's location (see rar.store.index._CACHE_HIT_SQL)
_CACHE_HIT_SQL: Final = (
    f"SELECT {', '.join('c.' + c for c in CACHE_COLUMNS)}, c.crc, "
    "b.digest, b.pack, b.pack_offset, b.codec, b.raw_size, b.stored_size "
    "FROM rar_llm_cache AS c LEFT JOIN rar_blobs AS b "
    "ON b.store_id = c.store_id AND b.digest = substr(c.result, 12, 71) "
    "WHERE c.store_id = %s AND c.key = %s"
)

_WITHOUT: Final = (
    "the runs' files are read instead (slower); nothing recorded is affected, and the index "
    "catches up once it can be used"
)


def _connect_options(url: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    options: dict[str, Any] = {"autocommit": True}
    given = conninfo_to_dict(url)
    if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
        options["connect_timeout"] = CONNECT_TIMEOUT
    if "application_name" not in given and "PGAPPNAME" not in os.environ:
        options["application_name"] = "rar"
    return options


def _classify(exc: BaseException) -> IndexFault | None:
    """The kind of a PostgreSQL failure by its SQLSTATE class; None for a bug (bad SQL)."""
    import psycopg

    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        return IndexFault.IO  # no connection: refused, timed out, lost
    state = getattr(exc, "sqlstate", None) or ""
    if state in ("40001", "40P01", "55P03", "57014"):  # serialization, deadlock, lock, timeout
        return IndexFault.BUSY
    if state in ("42P01", "42703"):  # undefined table or column: dropped while in use
        return IndexFault.CORRUPT
    if state in ("42501", "25006"):  # insufficient privilege, read-only transaction
        return IndexFault.READ_ONLY
    if state.startswith("53"):  # insufficient resources: disk full, out of memory
        return IndexFault.FULL
    if state.startswith("42") or isinstance(exc, psycopg.InterfaceError):
        return None  # syntax or misuse: a bug in this module, not a fault of the index
    return IndexFault.IO


def _describe(exc: BaseException) -> str:
    """One line (libpq's messages span several), never a password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    secret = os.environ.get("PGPASSWORD")
    return text.replace(secret, "[REDACTED]") if secret else text


def _storable(values: Iterable[object]) -> bool:
    """Whether PostgreSQL's text can hold the row's strings (no NUL, valid UTF-8)."""
    for value in values:
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return False
        if isinstance(value, str) and "\x00" in value:
            return False
    return True


def _unnest(types: Sequence[str]) -> str:
    return "unnest(" + ", ".join(f"%s::{t}[]" for t in types) + ")"


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as one list per column (the arrays ``unnest`` turns back into rows)."""
    return [[row[i] for row in rows] for i in range(width)]
