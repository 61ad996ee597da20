"""SQLite plumbing for ``index.sqlite`` (see :mod:`rar.store.index`): what an error means,
waiting out a busy index, checking and creating the schema, moving a damaged index aside, and
the private stand-ins used when the store's own index cannot be.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

import orjson

SCHEMA_VERSION: Final = 2
KEEP_QUARANTINED: Final = 3
"""Damaged indexes moved aside that are kept (the newest); they are derived data."""
BUSY_TIMEOUT: Final = 10.0
"""Seconds to wait for another process's lock on the index before doing without it."""

_T = TypeVar("_T")

SCHEMA: Final = """
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
    log_size INTEGER NOT NULL,
    crc INTEGER NOT NULL
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
    created_at TEXT NOT NULL,
    crc INTEGER NOT NULL
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
RUN_COLUMNS: Final = (
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
CACHE_COLUMNS: Final = (
    "key",
    "provider",
    "model",
    "request",
    "result",
    "run_id",
    "seq",
    "created_at",
)
TABLES: Final = {
    "meta": ("key", "value"),
    "runs": (*RUN_COLUMNS, "crc"),
    "llm_cache": (*CACHE_COLUMNS, "crc"),
    "packs": ("name", "indexed_to"),
    "blobs": ("digest", "pack", "offset", "codec", "raw_size", "stored_size"),
}


# --- what an error means -----------------------------------------------------------------------


class IndexFault(enum.StrEnum):
    CORRUPT = "corrupt"
    BUSY = "busy"
    FULL = "full"
    IO = "io"
    READ_ONLY = "read-only"


class IndexLies(ValueError):
    """What the index says contradicts the files, or is not of a shape it ever writes."""


_BY_CODE = {
    sqlite3.SQLITE_CORRUPT: IndexFault.CORRUPT,
    sqlite3.SQLITE_NOTADB: IndexFault.CORRUPT,
    sqlite3.SQLITE_BUSY: IndexFault.BUSY,
    sqlite3.SQLITE_LOCKED: IndexFault.BUSY,
    sqlite3.SQLITE_FULL: IndexFault.FULL,
    sqlite3.SQLITE_IOERR: IndexFault.IO,
    sqlite3.SQLITE_CANTOPEN: IndexFault.IO,
    sqlite3.SQLITE_PROTOCOL: IndexFault.IO,
    sqlite3.SQLITE_NOMEM: IndexFault.IO,
    sqlite3.SQLITE_INTERRUPT: IndexFault.IO,
    sqlite3.SQLITE_NOLFS: IndexFault.IO,
    sqlite3.SQLITE_READONLY: IndexFault.READ_ONLY,
    sqlite3.SQLITE_PERM: IndexFault.READ_ONLY,
    sqlite3.SQLITE_AUTH: IndexFault.READ_ONLY,
}
FAULTS: Final = (sqlite3.Error, UnicodeDecodeError, IndexLies)
"""What an index operation may raise that :func:`classify` knows."""


def classify(exc: BaseException) -> IndexFault | None:
    """The kind of an index failure; None for errors that are not the index's (bugs).

    SQLite's primary result code decides (``sqlite_errorcode & 0xff``). Text that does not decode
    as UTF-8 (a damaged row, or a damaged schema that spoils SQLite's own error message) and a row
    the index never writes are corruption. Any other SQLite code (SQLITE_ERROR, SQLITE_SCHEMA,
    SQLITE_MISMATCH, ...) means an index this version did not write: corrupt as well.
    """
    if isinstance(exc, (UnicodeDecodeError, IndexLies)):
        return IndexFault.CORRUPT
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself: misuse (closed, bad parameter)
        return None
    return _BY_CODE.get(code & 0xFF, IndexFault.CORRUPT)


def row_crc(values: Iterable[object]) -> int:
    """The check stored with a ``runs`` or ``llm_cache`` row: a damaged byte that still decodes
    (a goal, a count, a cached answer) makes the row disagree with it."""
    return zlib.crc32(orjson.dumps(list(values)))


def describe(exc: BaseException) -> str:
    name = getattr(exc, "sqlite_errorname", None)
    return f"{exc} ({name})" if name else f"{type(exc).__name__}: {exc}"


# --- connections -------------------------------------------------------------------------------


def _utf8(data: bytes) -> str:
    return data.decode("utf-8")  # strict: damaged text raises UnicodeDecodeError (corrupt)


def connect(target: str, *, uri: bool = False, timeout: float | None = None) -> sqlite3.Connection:
    wait = BUSY_TIMEOUT if timeout is None else timeout
    # one connection may serve several threads (a client streaming in a worker thread); the
    # index serialises its use of it with a lock
    conn = sqlite3.connect(
        target, timeout=wait, isolation_level=None, uri=uri, check_same_thread=False
    )
    conn.text_factory = _utf8
    return conn


def retry_busy(operation: Callable[[], _T]) -> _T:
    """``operation()``, tried again while the index is busy (beyond SQLite's own busy wait,
    which does not cover every case, e.g. a snapshot that went stale)."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.01
    while True:
        try:
            return operation()
        except sqlite3.Error as exc:
            if classify(exc) is not IndexFault.BUSY or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def prepare(conn: sqlite3.Connection) -> None:
    """Check that an opened index is one this version writes; create the schema in an empty one.

    Only reads when the index exists, so that opening works on a full disk or a read-only file.
    """
    tables = _tables(conn)
    if not tables:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(
            "BEGIN IMMEDIATE;"
            + SCHEMA
            + f"INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', '{SCHEMA_VERSION}');"
            + "COMMIT;"
        )
    else:
        check_schema(conn, tables)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] not in ("wal", "memory"):
            conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA journal_size_limit=1048576")


def _tables(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    names = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return {
        str(name): tuple(str(c[1]) for c in conn.execute(f"PRAGMA table_info('{name}')"))
        for (name,) in names
    }


def check_schema(
    conn: sqlite3.Connection, tables: dict[str, tuple[str, ...]] | None = None
) -> None:
    if (tables if tables is not None else _tables(conn)) != TABLES:
        raise IndexLies("its tables are not those of this version")
    row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if row is None or row[0] != str(SCHEMA_VERSION):
        raise IndexLies(f"unknown schema version {row[0] if row else None!r}")


def confirm_damage(path: Path, attempts: int = 3) -> bool:
    """Whether the index file at ``path`` is really damaged, by ``PRAGMA quick_check`` on fresh
    connections: twice damaged and never sound. A read that fails can make SQLite report
    SQLITE_CORRUPT, and quick_check lists a page it could not read ("unable to get the page.
    error code=266", an SQLITE_IOERR) among its findings; such a check tells nothing."""
    damaged = 0
    for _ in range(attempts):
        verdict = _quick_check(path)
        if verdict is False:
            return False
        damaged += verdict is True
        if damaged == 2:
            return True
    return False


_PAGE_ERROR = re.compile(r"error code=(\d+)")


def _quick_check(path: Path) -> bool | None:
    """True: damaged; False: sound; None: the check could not read the file."""
    try:
        conn = connect(str(path), timeout=1)
    except sqlite3.Error:
        return None
    try:
        findings = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    except FAULTS as exc:
        return True if classify(exc) is IndexFault.CORRUPT else None
    finally:
        conn.close()
    if findings == ["ok"]:
        return False
    codes = [int(m.group(1)) for line in findings for m in _PAGE_ERROR.finditer(line)]
    if any(code & 0xFF != sqlite3.SQLITE_CORRUPT for code in codes):
        return None
    return True


# --- moving a damaged index aside --------------------------------------------------------------

_SUFFIXES = ("", "-wal", "-shm")
_MARKER = ".corrupt-"


def quarantine(path: Path, inode: int | None = None) -> str | None:
    """Move the index files aside (``<name>.corrupt-<UTC time>``), keep the newest copies;
    return the new name of the main file. None when the file at ``path`` is no longer the one
    found damaged (``inode``): another process moved it aside first. OSError when the files
    cannot be moved."""
    if inode is not None and file_id(path) != inode:
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")  # nondeterminism-ok: a quarantine name
    moved = ""
    for suffix in _SUFFIXES:
        old = path.with_name(path.name + suffix)
        new = old.with_name(f"{old.name}{_MARKER}{stamp}")
        try:
            old.rename(new)
        except FileNotFoundError:
            continue
        moved = moved or new.name
    prune_quarantined(path)
    return moved or "(nothing to move)"


def file_id(path: Path) -> int | None:
    """The inode of ``path`` (not following a link), None when there is none."""
    try:
        return os.lstat(path).st_ino
    except OSError:
        return None


def prune_quarantined(path: Path, keep: int = KEEP_QUARANTINED) -> None:
    """Delete all but the ``keep`` newest copies of a damaged index moved aside."""
    stamps: dict[str, list[Path]] = {}
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            name, sep, stamp = entry.name.partition(_MARKER)
            if sep and name in {path.name + suffix for suffix in _SUFFIXES}:
                stamps.setdefault(stamp, []).append(entry)
    for stamp in sorted(stamps, reverse=True)[keep:]:
        for old in stamps[stamp]:
            with contextlib.suppress(OSError):
                old.unlink()


def is_symlink(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


# --- stand-ins -----------------------------------------------------------------------------------

_TEMPORARY: dict[str, Path] = {}
_TEMPORARY_LOCK = threading.Lock()


def temporary_copy(source: Path, *, fresh: bool = False) -> Path | None:
    """This process's private stand-in for the index at ``source``: a file in a temporary
    directory removed at exit, seeded once with a copy of ``source`` when that reads and checks
    out. ``fresh``: replace it with an empty one (the copy lied). None when there is no room."""
    key = os.path.realpath(source)
    with _TEMPORARY_LOCK:
        path = _TEMPORARY.get(key)
        if path is not None and fresh:
            for suffix in _SUFFIXES:  # connections still open keep reading the old file
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            return path
        if path is None:
            try:
                directory = Path(tempfile.mkdtemp(prefix="rar-index-"))
            except OSError:
                return None
            atexit.register(shutil.rmtree, directory, True)
            path = directory / "index.sqlite"
            try:
                target = connect(str(path))
                try:
                    seeded = seed(source, target)
                finally:
                    target.close()
            except sqlite3.Error:
                seeded = False
            if not seeded:
                for suffix in _SUFFIXES:
                    path.with_name(path.name + suffix).unlink(missing_ok=True)
            _TEMPORARY[key] = path
    return path


def seed(source: Path, target: sqlite3.Connection) -> bool:
    """Copy the store's index into ``target`` when it can be read and the copy checks out
    (schema and ``PRAGMA quick_check``). False when it did not: ``target`` is then to be
    replaced by an empty index.

    The source is opened ``immutable=1``, which creates no file (``mode=ro`` still creates the
    WAL's shared-memory file) and reads a read-only mount; it ignores a WAL not yet checkpointed,
    which only makes the copy older, and rows older than their files are read again anyway.
    """
    try:
        if not stat.S_ISREG(os.lstat(source).st_mode):
            return False
        conn = connect(f"{source.resolve().as_uri()}?immutable=1", uri=True, timeout=1)
    except (OSError, sqlite3.Error):
        return False
    try:
        check_schema(conn)
        conn.backup(target)
        check_schema(target)
        if target.execute("PRAGMA quick_check").fetchone()[0] == "ok":
            return True
    except FAULTS:
        pass
    finally:
        conn.close()
    return False  # the caller starts from an empty index instead
