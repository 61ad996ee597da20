"""``index.sqlite``: a derived, rebuildable index of runs and blob locations.

The logs, manifests and packs are the source of truth. This index only makes look-ups fast:

* ``runs``: one row per run (status, goal, created time, event count, ...) plus the manifest
  mtime and log size it was read at; a row whose files changed since is re-read on access;
* ``packs`` / ``blobs``: where each blob lives; packs are scanned from the last indexed offset
  whenever a blob is not found, so blobs written by another process are found too.

Deleted or unreadable, the index is moved aside and rebuilt from the files. Several processes
may use it at once (WAL mode, busy timeout); every write is idempotent.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rar.store.blobs import BlobLocation, PackReader, PackRecord

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    goal TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    events INTEGER NOT NULL,
    parent TEXT,
    head TEXT,
    dir_mtime_ns INTEGER NOT NULL,
    log_size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS llm_cache_model ON llm_cache (provider, model, created_at);
CREATE TABLE IF NOT EXISTS packs (name TEXT PRIMARY KEY, indexed_to INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    digest TEXT PRIMARY KEY,
    pack TEXT NOT NULL,
    offset INTEGER NOT NULL,
    codec INTEGER NOT NULL,
    raw_size INTEGER NOT NULL,
    stored_size INTEGER NOT NULL
) WITHOUT ROWID;
"""

RUN_COLUMNS = (
    "run_id",
    "status",
    "goal",
    "created_at",
    "finished_at",
    "events",
    "parent",
    "head",
    "dir_mtime_ns",
    "log_size",
)


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

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RUN_COLUMNS}


class Index:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            conn = self._connect()
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None or int(row[0]) != SCHEMA_VERSION:
                conn.close()
                raise sqlite3.DatabaseError("unknown schema version")
            return conn
        except sqlite3.DatabaseError:
            self._quarantine()
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA journal_size_limit=1048576")
        conn.executescript(_SCHEMA)
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
        )
        return conn

    def _quarantine(self) -> None:
        """Move an unreadable index aside; it is rebuilt from the logs and packs."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            old = self.path.with_name(self.path.name + suffix)
            if old.exists():
                old.replace(old.with_name(f"{old.name}.corrupt-{stamp}"))

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # best effort: keep the WAL file small
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._conn.close()

    # --- blobs -------------------------------------------------------------------------------

    def lookup_blob(self, digest: str) -> BlobLocation | None:
        row = self._conn.execute(
            "SELECT pack, offset, codec, raw_size, stored_size FROM blobs WHERE digest=?",
            (digest,),
        ).fetchone()
        return None if row is None else BlobLocation(*row)

    def existing_blobs(self, digests: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(digests), 500):
            chunk = digests[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            cursor = self._conn.execute(
                f"SELECT digest FROM blobs WHERE digest IN ({marks})", chunk
            )
            found.update(row[0] for row in cursor)
        return found

    def all_blob_locations(self) -> dict[str, BlobLocation]:
        cursor = self._conn.execute(
            "SELECT digest, pack, offset, codec, raw_size, stored_size FROM blobs"
        )
        return {row[0]: BlobLocation(*row[1:]) for row in cursor}

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
        with self._transaction():
            self._conn.executemany("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._conn.execute(
                "INSERT INTO packs (name, indexed_to) VALUES (?, ?) ON CONFLICT(name) DO UPDATE "
                "SET indexed_to = max(indexed_to, excluded.indexed_to)",
                (pack, indexed_to),
            )

    def catch_up(self, reader: PackReader) -> int:
        """Index records appended to packs since they were last indexed; returns how many."""
        known = dict(self._conn.execute("SELECT name, indexed_to FROM packs").fetchall())
        added = 0
        for name in reader.iter_pack_names():
            start = known.get(name, 0)
            try:
                size = reader.pack_path(name).stat().st_size
            except FileNotFoundError:
                continue
            if size <= start:
                continue
            scan = reader.scan(name, start)
            if scan.records or scan.end > start:
                self.add_blobs(name, scan.records, scan.end)
                added += len(scan.records)
        return added

    # --- the model response cache (rows derived from recorded llm effects) --------------------

    def cache_get(self, key: str) -> tuple[str, str, int] | None:
        """(result payload reference JSON, run_id, seq) of a cached response."""
        row = self._conn.execute(
            "SELECT result, run_id, seq FROM llm_cache WHERE key=?", (key,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def cache_put(self, rows: Iterable[tuple[str, str, str, str, str, str, int, str]]) -> None:
        with self._transaction():
            self._conn.executemany(
                "INSERT OR IGNORE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?)", list(rows)
            )

    def cache_candidates(self, provider: str, model: str, limit: int) -> list[tuple[str, str]]:
        """(key, request reference JSON) of recent entries for a provider and model."""
        cursor = self._conn.execute(
            "SELECT key, request FROM llm_cache WHERE provider=? AND model=? "
            "ORDER BY created_at DESC LIMIT ?",
            (provider, model, limit),
        )
        return [(row[0], row[1]) for row in cursor]

    def cache_recent(self, limit: int) -> list[tuple[str, str, str, str]]:
        cursor = self._conn.execute(
            "SELECT key, provider, model, request FROM llm_cache ORDER BY created_at DESC LIMIT ?",
            (limit,),
        )
        return [(row[0], row[1], row[2], row[3]) for row in cursor]

    def meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value)
            )

    # --- runs --------------------------------------------------------------------------------

    def run_rows(self) -> dict[str, RunRow]:
        cursor = self._conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs")
        return {row[0]: RunRow(*row) for row in cursor}

    def upsert_runs(self, rows: Iterable[RunRow]) -> None:
        rows = list(rows)
        if not rows:
            return
        placeholders = ", ".join("?" for _ in RUN_COLUMNS)
        with self._transaction():
            self._conn.executemany(
                f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({placeholders})",
                [tuple(getattr(r, c) for c in RUN_COLUMNS) for r in rows],
            )

    def delete_runs(self, run_ids: Iterable[str]) -> None:
        with self._transaction():
            self._conn.executemany("DELETE FROM runs WHERE run_id=?", [(r,) for r in run_ids])

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
