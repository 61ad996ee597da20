"""``query.sqlite``: where it lives, opening it (a damaged one is moved aside and rebuilt), and
bringing it up to date with the runs' files (see :mod:`rar.store.query`).

Each run's log is read once and then only where it grew: ``sources`` remembers how many bytes of
the log were indexed and the SHA-256 of those bytes. When the log's ``stat`` changes, the file is
read again; if it still starts with the bytes indexed (an append-only log that grew), only the
new lines are parsed; if not (a rewritten log), the run is indexed again from its first line.
Every line is checked as it is read (JSON, ``seq``, ``prev`` = digest of the line before):
indexing stops at the first line that fails, which is never indexed, and the run's
``problem`` says so.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

from rar.hashing import digest_bytes, from_canonical
from rar.store._fs import read_problem, read_regular
from rar.store._query_rows import Line, RowMaker, RunRows, run_row
from rar.store._query_schema import ROW_TABLES, SCHEMA, SCHEMA_VERSION, TABLES, columns
from rar.store._sqlite import IndexFault, classify, connect, describe, quarantine, retry_busy
from rar.store.index import warn
from rar.store.layout import EVENTS_NAME, MANIFEST_NAME
from rar.store.store import Store

QUERY_NAME: Final = "query.sqlite"
_RACY_NS: Final = 2_000_000_000
_INTERNAL: Final = frozenset({"meta", "sources"})
Progress = Callable[[int, int], None]


class QueryDatabase:
    """The query database of a store: ``<store>/query.sqlite``, or a private copy in a
    temporary directory (removed at exit) when the store must not or cannot be written."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.notes: list[str] = []
        in_store = not store.read_only and store.root.is_dir() and store.writable
        self.location = "store" if in_store else "temporary"
        self.path = store.root / QUERY_NAME if in_store else _temporary_copy(store.root)
        self.conn = self._open()

    # --- opening ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            conn: sqlite3.Connection | None = None
            try:
                if stat.S_ISLNK(_lstat_mode(self.path)):
                    raise _Damaged("it is a symbolic link")
                conn = connect(str(self.path))
                retry_busy(lambda c=conn: _prepare(c))  # type: ignore[misc]
                return conn
            except (sqlite3.Error, UnicodeDecodeError, _Damaged) as exc:
                if conn is not None:
                    conn.close()
                fault = IndexFault.CORRUPT if isinstance(exc, _Damaged) else classify(exc)
                if fault is not IndexFault.CORRUPT or attempt:
                    raise
                self._move_aside(describe(exc))
        raise AssertionError("unreachable")  # pragma: no cover

    def _move_aside(self, why: str) -> None:
        moved = quarantine(self.path)
        message = (
            f"the query database {self.path} was damaged ({why}); moved aside as {moved} and "
            "rebuilt from the runs' files"
        )
        self.notes.append(message)
        warn(str(self.path), "query-damaged", f"warning: {message}", once=False)

    def rebuild(self) -> None:
        """Forget everything indexed: the next update reads every run from its first line."""
        self.conn.execute("BEGIN IMMEDIATE")
        for table in (*ROW_TABLES, "runs", "sources"):
            self.conn.execute(f"DELETE FROM {table}")
        self.conn.execute("COMMIT")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # keep the main file whole for readers
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()

    # --- bringing it up to date ------------------------------------------------------------

    def update(self, progress: Progress | None = None) -> int:
        """Index what changed in the store's runs since the last update; returns the number of
        runs read. A damaged database found on the way is moved aside and built again."""
        try:
            return self._update(progress)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            if classify(exc) is not IndexFault.CORRUPT:
                raise
            self.conn.close()
            self._move_aside(describe(exc))
            self.conn = self._open()
            return self._update(progress)

    def _update(self, progress: Progress | None) -> int:
        known = {row[0]: row for row in self.conn.execute("SELECT * FROM sources")}
        present = self.store.run_ids()
        changed = []
        for run_id in present:
            run_dir = self.store.run_dir(run_id)
            keys = (_file_key(run_dir / EVENTS_NAME), _file_key(run_dir / MANIFEST_NAME))
            old = known.get(run_id)
            # a file changed too recently for its stat to tell ("racy") is always read again
            if old is None or (old[1], old[2]) != keys or "racy" in (old[1], old[2]):
                changed.append((run_id, keys))
        for number, (run_id, keys) in enumerate(changed, start=1):
            self._index_run(run_id, keys)
            if progress is not None:
                progress(number, len(changed))
        gone = [(run_id,) for run_id in set(known) - set(present)]
        if gone:
            self.conn.execute("BEGIN IMMEDIATE")
            for table in (*ROW_TABLES, "runs", "sources"):
                self.conn.executemany(f"DELETE FROM {table} WHERE run_id=?", gone)
            self.conn.execute("COMMIT")
        return len(changed)

    def _index_run(self, run_id: str, keys: tuple[str, str]) -> None:
        for _ in range(3):  # another process may index the same run meanwhile
            old = self.conn.execute("SELECT * FROM sources WHERE run_id=?", (run_id,)).fetchone()
            pass_ = _Pass(self.store, run_id, old, self.conn)
            if self._apply(pass_, old, keys):
                return

    def _apply(self, pass_: _Pass, old: Any, keys: tuple[str, str]) -> bool:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = conn.execute("SELECT * FROM sources WHERE run_id=?", (pass_.run_id,)).fetchone()
            if now != old:
                conn.execute("ROLLBACK")
                return False
            pass_.write(conn, keys)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        for problem in pass_.problems:
            warn(str(self.store.root), f"query:{pass_.run_id}:{problem}", f"warning: {problem}")
        return True


class _Pass:
    """One reading of a run's files: the lines added since the last one (or all of them)."""

    def __init__(self, store: Store, run_id: str, old: Any, conn: sqlite3.Connection) -> None:
        self.run_id = run_id
        run_dir = store.run_dir(run_id)
        self.problems: list[str] = []
        self.manifest = self._manifest(run_dir / MANIFEST_NAME)
        try:
            data = read_regular(run_dir / EVENTS_NAME)
        except OSError as exc:
            data = b""
            if not isinstance(exc, FileNotFoundError):
                self.problems.append(f"run {run_id}: its events.jsonl {read_problem(exc)}")
        self.size = len(data)
        self.rebuild = not (
            old is not None
            and old[7]  # complete: the last indexed line had its newline
            and len(data) >= old[3]
            and hashlib.sha256(data[: old[3]]).hexdigest() == old[4]
        )
        start, self.lines = (0, 0) if self.rebuild else (int(old[3]), int(old[6]))
        self.last: str | None = None if self.rebuild else old[5]
        seen: set[tuple[Any, ...]] = set()
        if not self.rebuild:
            seen = set(
                conn.execute(
                    "SELECT source = 'acl', role, name, text FROM messages WHERE run_id=?",
                    (run_id,),
                )
            )
        self.maker = RowMaker(store, run_id, seen)
        self.stopped: str | None = None
        self.end, self.complete = self._read(data, start)
        self.prefix = hashlib.sha256(data[: self.end]).hexdigest()
        self.problems.extend(f"run {run_id}: {p}" for p in self.maker.rows.problems)

    def _manifest(self, path: Path) -> dict[str, Any] | None:
        try:
            data = orjson.loads(read_regular(path))
        except OSError as exc:
            self.problems.append(f"run {self.run_id}: its manifest.json {read_problem(exc)}")
            return None
        except orjson.JSONDecodeError:
            self.problems.append(f"run {self.run_id}: its manifest.json is not valid JSON")
            return None
        return data if isinstance(data, dict) else None

    def _read(self, data: bytes, start: int) -> tuple[int, bool]:
        """Check the lines from ``start`` and add those that pass; (bytes indexed, whether
        they end with a newline). Lines are all checked before any is added: a broken link
        of the chain makes the line before it as suspect as the line itself."""
        checked: list[tuple[Line, int]] = []  # each line, and the offset just after it
        position, complete = start, True
        while (newline := data.find(b"\n", position)) >= 0:
            line, why = self._check(data[position:newline], checked)
            if line is None:
                self._stop(why, checked)
                break
            checked.append((line, newline + 1))
            position = newline + 1
        else:
            rest = data[position:]
            line, _ = self._check(rest, checked) if rest else (None, "")
            if line is not None:  # a complete last event without its newline (not a torn write)
                checked.append((line, len(data)))
                complete = False  # read again from the start next time
        for line, _ in checked:
            self.maker.add(line)
        if checked:
            self.lines += len(checked)
            self.last = checked[-1][0].digest
            return checked[-1][1], complete
        return start, True

    def _check(self, raw: bytes, checked: list[tuple[Line, int]]) -> tuple[Line | None, str]:
        number = self.lines + len(checked) + 1
        last = checked[-1][0].digest if checked else self.last
        try:
            event = from_canonical(raw)
        except orjson.JSONDecodeError:
            return None, f"line {number} of the log is not valid JSON"
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return None, f"line {number} of the log is not an event"
        if event.get("seq") != number:
            return None, f"line {number} of the log has seq {event.get('seq')!r}"
        if event.get("prev") != last:
            if checked:
                checked.pop()
                return None, (
                    f"line {number} of the log does not continue the hash chain (line "
                    f"{number - 1} or line {number} was changed)"
                )
            return None, f"line {number} of the log does not continue the hash chain"
        digest = digest_bytes(raw)
        manifest = self.manifest or {}
        if manifest.get("events") == number and manifest.get("head") not in (None, digest):
            return None, f"line {number} of the log is not the head its manifest seals"
        return Line(event, raw, digest), ""

    def _stop(self, why: str, checked: list[tuple[Line, int]]) -> None:
        first = self.lines + len(checked) + 1
        self.stopped = (
            f"{why}: lines from {first} on are not indexed (rar verify {self.run_id} reports "
            "the damage)"
        )
        self.problems.append(f"run {self.run_id}: {self.stopped}")

    def write(self, conn: sqlite3.Connection, keys: tuple[str, str]) -> None:
        run_id = self.run_id
        if self.rebuild:
            for table in ROW_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE run_id=?", (run_id,))
        rows: RunRows = self.maker.rows
        for table in ROW_TABLES:
            values = getattr(rows, table)
            names = [c for c in columns(table) if not (table == "messages" and c == "id")]
            if values:
                conn.executemany(
                    f"INSERT INTO {table} ({', '.join(names)}) "
                    f"VALUES ({', '.join('?' * len(names))})",
                    values,
                )
        effects = conn.execute("SELECT count(*) FROM effects WHERE run_id=?", (run_id,)).fetchone()
        problem = self.stopped or (self.maker.rows.problems[0] if rows.problems else None)
        if problem is None and not self.rebuild:
            kept = conn.execute("SELECT problem FROM runs WHERE run_id=?", (run_id,)).fetchone()
            problem = kept[0] if kept else None
        conn.execute(
            f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * len(columns('runs')))})",
            run_row(run_id, self.manifest, self.lines, effects[0], problem),
        )
        conn.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, *keys, self.end, self.prefix, self.last, self.lines, int(self.complete)),
        )


# --- the file ------------------------------------------------------------------------------------


class _Damaged(Exception):
    """The database is not one this version writes."""


def _prepare(conn: sqlite3.Connection) -> None:
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not names:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(
            "BEGIN IMMEDIATE;"
            + SCHEMA
            + f"INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}');COMMIT;"
        )
    else:
        if not (set(TABLES) | _INTERNAL) <= names:
            raise _Damaged("its tables are not those of this version")
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None or row[0] != str(SCHEMA_VERSION):
            raise _Damaged(f"unknown schema version {row[0] if row else None!r}")
        verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise _Damaged(f"quick_check: {verdict}")
    conn.execute("PRAGMA synchronous=NORMAL")


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return stat.S_IFREG


def _file_key(path: Path) -> str:
    """What changes when the file does: inode, size, mtime and ctime (``racy`` when it changed
    too recently for its mtime to tell a later change apart, so it is read again next time)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"missing:{exc.errno}"
    if stat.S_ISLNK(info.st_mode):
        return "link"
    if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _RACY_NS:
        return "racy"
    return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


_TEMPORARY: dict[str, Path] = {}


def _temporary_copy(root: Path) -> Path:
    """This process's private query database for a store it must not write: seeded from the
    store's own ``query.sqlite`` when there is one that reads (``immutable=1``: nothing is
    created in the store), else empty."""
    key = os.path.realpath(root)
    path = _TEMPORARY.get(key)
    if path is not None:
        return path
    directory = Path(tempfile.mkdtemp(prefix="rar-query-"))
    atexit.register(shutil.rmtree, directory, True)
    path = directory / QUERY_NAME
    source = root / QUERY_NAME
    with contextlib.suppress(OSError, sqlite3.Error, UnicodeDecodeError, _Damaged):
        if stat.S_ISREG(os.lstat(source).st_mode):
            original = connect(f"{source.resolve().as_uri()}?immutable=1", uri=True, timeout=1)
            target = connect(str(path))
            try:
                original.backup(target)
                _prepare(target)
            except BaseException:
                target.close()
                path.unlink(missing_ok=True)
                raise
            finally:
                original.close()
            target.close()
    _TEMPORARY[key] = path
    return path
