"""The run store: a directory of runs, content-addressed blobs and a derived index.

::

    <store>/
      index.sqlite          derived, rebuildable (runs, blob locations)
      blobs/packs/*.pack    content-addressed blobs (see blobs.py)
      <run_id>/
        manifest.json       see manifest.py
        events.jsonl        see log.py
        lock                held by the one process writing the run
        workspace/          the run's default workspace (snapshotted before and after)
        artifacts/          files the run produced, also stored as blobs

The store location is ``--store DIR``, else ``$RAR_HOME``, else ``./runs``.

Reading a store needs no write access: a read-only store (an archive, a colleague's runs on a
read-only mount) keeps its index in a private temporary copy, and anything that would write is
refused with :class:`StoreNotWritableError`. Run files are never read through symbolic links.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import time
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rar.errors import (
    AmbiguousRunIdError,
    BlobMissingError,
    CorruptionError,
    ManifestMissingError,
    RunNotFoundError,
    StoreError,
    StoreNotWritableError,
)
from rar.hashing import from_canonical
from rar.store._fs import make_dirs, not_regular, read_problem, read_regular
from rar.store.blobs import BlobLocation, PackReader, PackRecord, digest_of
from rar.store.index import PackScanner, RunRow, log, warn
from rar.store.index_backend import IndexBackend
from rar.store.layout import EVENTS_NAME, LOCK_NAME, MANIFEST_NAME
from rar.store.lock import is_locked
from rar.store.log import read_events, read_tail
from rar.store.remote import RemoteBlobs, RemotePackReader, open_reader

if TYPE_CHECKING:
    from rar.store.manifest import Manifest

ENV_HOME = "RAR_HOME"
INCOMPLETE = "incomplete"
"""The status listed for a run directory that cannot be read as a run (see ``RunRow.problem``)."""
_OPEN_STATUSES = frozenset({"pending", "running"})
_STATUSES = frozenset(
    {"pending", "running", "completed", "completed_with_warnings", "failed", "waiting"}
)
_RACY_NS = 2_000_000_000
_QUICK_TAIL = 8192  # bytes read from a log's end to find its last line when listing
_QUICK_MANIFEST = 1 << 20  # a manifest longer than this is read the careful way
_ID_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})-")
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
DEFAULT_DIR = "runs"
_CARRIED_KEEP = 64 << 20  # characters of carried blobs remembered from the logs read


def default_store_path() -> Path:
    env = os.environ.get(ENV_HOME)
    return Path(env) if env else Path(DEFAULT_DIR)


def new_run_id(now: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-xxxxxxxx``: sortable by creation time, unique by its random tail."""
    now = now or datetime.now(UTC)  # nondeterminism-ok: a run's identity, not agent logic
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)


def utc_now_iso() -> str:
    """The wall-clock time for event timestamps (agents read time through ``run.now()``)."""
    now = datetime.now(UTC)  # nondeterminism-ok: when an event was written, not agent logic
    return now.isoformat(timespec="microseconds").replace("+00:00", "Z")


class Store:
    """Read access to a store, and the place run writers are created from.

    ``read_only=True`` never writes anything in the store, whatever the permissions allow (the
    index is a private temporary copy; recording is refused).
    """

    def __init__(
        self, root: Path | str | None = None, *, create: bool = False, read_only: bool = False
    ) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        self.packs_dir = self.root / "blobs" / "packs"
        self.read_only = read_only
        self._index: IndexBackend | None = None
        self._reader = open_reader(self.root, self.packs_dir)  # remote-aware (store.json)
        self._scanner: PackScanner | None = None
        self._local_blobs: dict[str, BlobLocation] = {}
        # blobs a writer of this process collected and has not written yet (see RunWriter)
        self.pending_blobs: dict[str, bytes] = {}
        # blobs carried in the log lines read by events(), so reading a run's payloads needs no
        # look-up (digest -> the blob as a string, checked against its digest when used)
        self._carried_text: dict[str, str] = {}
        self._carried_size = 0
        if create:
            self.ensure_writable()

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    @property
    def writable(self) -> bool:
        """Whether runs can be recorded here: the store (or the directory it would be created
        in) may be written by this process. False for a read-only store."""
        if self.read_only:
            return False
        path = self.root
        while not path.exists() and path != path.parent:
            path = path.parent
        return path.is_dir() and os.access(path, os.W_OK | os.X_OK)

    def ensure_writable(self) -> None:
        """Create the store if needed; raise :class:`StoreNotWritableError` when it cannot be
        written, saying what can still be done with it."""
        if self.read_only:
            raise StoreNotWritableError(
                self.root, self._read_only_reason("it was opened read-only")
            )
        try:
            make_dirs(self.packs_dir)
            probe = self.root / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.errno in _READ_ONLY_ERRNOS and self.root.is_dir():
                reason = self._read_only_reason(f"it is read-only here ({reason})")
            raise StoreNotWritableError(self.root, reason) from exc
        if self._index is not None and self._index.location != "store":
            self._index.close()  # a stand-in from before the store existed: use the real one
            self._index = None
        from rar.store.index_pg import index_url

        index_url(self.root)  # a bad index setting stops a run here, before anything is recorded
        if self.remote is not None:
            self._ensure_remote(self.remote)

    def _ensure_remote(self, remote: RemoteBlobs) -> None:
        """Before anything is recorded: the blob URL can be written, and ``store.json`` names
        it, so that every process opening the store finds the blobs (see rar.store.remote)."""
        from rar.store.config import update_config

        remote.check_writable()
        update_config(self.root, lambda current: current)  # writes what the environment adds

    @property
    def remote(self) -> RemoteBlobs | None:
        """Where the store's blobs are uploaded when not only in ``blobs/packs``."""
        return self._reader.remote if isinstance(self._reader, RemotePackReader) else None

    def pack_taken(self, name: str) -> bool:
        """Whether a pack of that name exists, here or at the blob URL (a writer's new pack
        must never reuse the name of one whose local copy was removed)."""
        if (self.packs_dir / f"{name}.pack").exists():
            return True
        return self.remote is not None and self.remote.size(name, fresh=True) is not None

    def seal_packs(self, run_id: str) -> None:
        """Upload the closed packs of ``run_id`` (and of runs nobody is writing) to the blob
        URL. Never raises: the blobs are durable in the local packs already, and a pack left
        there is uploaded by the next writer or ``rar store push``."""
        remote = self.remote
        if remote is None:
            return
        from rar.store.remote import push

        try:
            report = push(self.root, self.packs_dir, remote, owner=run_id)
            problems = report.failed
        except StoreError as exc:
            problems = [("", exc.message)]
        for pack, why in problems[:1]:
            warn(
                str(self.root),
                f"push:{pack}",
                f"warning: {why}. The blobs are safe in {self.packs_dir}; `rar store push` "
                "uploads them",
                once=False,
            )

    def _read_only_reason(self, why: str) -> str:
        return (
            f"{why}. Its runs can be listed, shown, verified, exported and viewed, but nothing "
            "can be recorded into it, and a replay or branch writes a new run: copy the store "
            f"to a writable place first (cp -a {self.root} DIR) and replay there with --store DIR"
        )

    @property
    def exists(self) -> bool:
        return self.root.is_dir()

    # --- index -------------------------------------------------------------------------------

    @property
    def index(self) -> IndexBackend:
        """The derived index: the store's own (``index.sqlite``, or on the PostgreSQL server
        its configuration names), or a private stand-in when the store cannot be written (or
        does not exist yet: reading never creates it)."""
        if self._index is None:
            from rar.store.index_pg import open_index

            in_store = not self.read_only and self.root.is_dir() and self.writable
            self._index = open_index(self.root, reader=self._reader, writable=in_store)
        return self._index

    @property
    def notes(self) -> list[str]:
        """What went wrong with the index so far (it was done without, or rebuilt)."""
        return list(self._index.notes) if self._index is not None else []

    # --- blobs -------------------------------------------------------------------------------

    def locate_blob(self, digest: str) -> BlobLocation | None:
        location = self._local_blobs.get(digest)
        if location is not None:
            return location
        index = self.index
        location = index.lookup_blob(digest)
        if location is None and self.packs_dir.is_dir():
            index.catch_up(self._reader)
            location = index.lookup_blob(digest)
            if location is None:
                # the index says every pack is indexed up to its end: look for ourselves
                location = self._scan().find(digest)
                if location is not None and not index.faulted:
                    index.discard(f"blob {digest} is in pack {location.pack} but not indexed")
        return location

    def _scan(self) -> PackScanner:
        if self._scanner is None:
            self._scanner = PackScanner(self._reader)
        return self._scanner

    def known_blobs(
        self, digests: list[str], *, index_for: Collection[str] | None = None
    ) -> set[str]:
        """Which of ``digests`` the store holds already (a writer's dedup check; no pack scan):
        those this process's writers stored, and those the index holds, looked up among
        ``index_for`` only when it is given (the rest are then taken as new)."""
        known = {d for d in digests if d in self._local_blobs}
        looked_up = digests if index_for is None else index_for
        rest = [d for d in looked_up if d not in known]
        if rest:
            known |= self.index.existing_blobs(rest)
        return known

    def index_blobs(self, pack: str, records: list[PackRecord], end: int) -> None:
        """Index a closed pack's records. Never raises: they are durable already, and a later
        look-up finds them by scanning the pack if this did not make it to the index."""
        try:
            self.index.add_blobs(pack, records, end)
        except Exception as exc:  # the record is the truth; see index_run
            log.warning("warning: blobs of pack %s were not indexed (%s)", pack, exc)

    def has_blob(self, digest: str) -> bool:
        return self.locate_blob(digest) is not None

    def get_blob(self, digest: str) -> bytes:
        pending = self.pending_blobs.get(digest)
        if pending is not None:
            return pending
        text = self._carried_text.get(digest)
        if text is not None:  # carried in a log line this store object read: checked here
            raw = text.encode("utf-8")
            if digest_of(raw) == digest:
                return raw
        location = self.locate_blob(digest)
        if location is None:
            raise BlobMissingError(digest, self.root)
        try:
            return self._reader.read(digest, location)
        except (CorruptionError, FileNotFoundError):
            if self._index is None or self._local_blobs.get(digest) == location:
                raise  # not a location the index gave: the pack is at fault
            actual = self._check_location(digest, location)
            if actual is None:
                raise
            return self._reader.read(digest, actual)

    def _check_location(self, digest: str, claimed: BlobLocation) -> BlobLocation | None:
        """Where a blob that did not read back from the index's location really is: None when
        the index was right (the pack is damaged), else the blob's location found by scanning
        (the index lied: it is rebuilt), raising BlobMissingError when no pack holds it."""
        scanner = self._scan()
        verdict = scanner.verdict(digest, claimed)
        if verdict != "lie":
            return None
        self.index.discard(f"blob {digest} is not at {claimed.pack}:{claimed.offset}")
        actual = scanner.find(digest)
        if actual is None:
            raise BlobMissingError(digest, self.root)
        return actual

    def get_json(self, digest: str) -> Any:
        return from_canonical(self.get_blob(digest))

    def resolve_payload(self, ref: dict[str, Any] | None) -> Any:
        """The plain value of a payload reference from an event (inline or blob, unlinked)."""
        if ref is None:
            return None
        from rar.store.payloads import resolve

        return resolve(ref, self.get_blob)

    def remember_blob(self, digest: str, location: BlobLocation) -> None:
        """Called by this process's writers so their blobs are found before being indexed."""
        self._local_blobs[digest] = location

    @property
    def reader(self) -> PackReader:
        return self._reader

    # --- runs --------------------------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=False)
            and os.path.lexists(os.path.join(entry.path, MANIFEST_NAME))
        )

    def _is_run(self, name: str) -> bool:
        """A real directory (not a link to one) holding a manifest (possibly unreadable)."""
        path = self.root / name
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
        return os.path.lexists(path / MANIFEST_NAME)

    def resolve(self, ref: str) -> str:
        """A full run id from a unique prefix of the id or of its random last part.

        Only directories with a manifest are runs here; ``list_runs`` also lists directories
        without one (as ``incomplete``), which ``show`` and ``replay`` cannot use.
        """
        ref = ref.strip()
        if not ref:
            raise RunNotFoundError(ref, self.root)
        if "/" not in ref and ref not in (".", "..") and self._is_run(ref):
            return ref
        ids = [r for r in self.run_ids() if self._is_run(r)]
        matches = [r for r in ids if r.startswith(ref)]
        if not matches:
            matches = [r for r in ids if r.rsplit("-", 1)[-1].startswith(ref)]
        if not matches:
            raise RunNotFoundError(ref, self.root)
        if len(matches) > 1:
            raise AmbiguousRunIdError(ref, matches)
        return matches[0]

    def manifest(self, run_id: str) -> Manifest:
        from rar.store.manifest import read_manifest

        path = self.run_dir(run_id) / MANIFEST_NAME
        problem = not_regular(path)
        if problem is not None:
            raise ManifestMissingError(run_id, path, f"it {problem}")
        return read_manifest(self.run_dir(run_id), run_id)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        path = self.run_dir(run_id) / EVENTS_NAME
        problem = not_regular(path)
        if problem is not None:
            raise CorruptionError(f"the log of run {run_id} {problem}", path=path, run_id=run_id)
        if not path.exists():
            return []
        carried: dict[str, Any] = {}
        events = read_events(path, run_id, carried)
        self.remember_carried(carried)
        return events

    def remember_carried(self, carried: Any) -> None:
        """Blobs a log line carries (digest → string), read by someone reading the log: kept so
        that reading the run's payloads needs no look-up (each is checked when used). At most
        ``_CARRIED_KEEP`` bytes are kept; beyond, the oldest are forgotten (read again from the
        log through their locations)."""
        if type(carried) is not dict or not carried:
            return
        size = sum(len(text) for text in carried.values() if type(text) is str)
        if self._carried_size + size > _CARRIED_KEEP:
            self._carried_text.clear()
            self._carried_size = 0
        self._carried_text.update(carried)
        self._carried_size += size

    def is_writing(self, run_id: str) -> bool:
        return is_locked(self.run_dir(run_id))

    def display_status(self, row: RunRow) -> str:
        """The stored status, or ``interrupted`` for a run left RUNNING by a dead writer.

        ``row`` may have been read just before its run finished: a writer seals the manifest
        and only then releases the lock, so once the lock is seen free, the manifest read again
        says how the run ended. Only a manifest that still says ``running`` is interrupted.
        """
        if row.status == "running" and not self.is_writing(row.run_id):
            now = self.row_from_files(row.run_id)
            if now is not None and now.problem is None and now.status not in _OPEN_STATUSES:
                return now.status
            return "interrupted"
        return row.status

    def list_runs(self) -> list[RunRow]:
        """All runs, newest first, with the index brought up to date with the files.

        A run's row is re-read when its directory's mtime changed (the manifest is replaced by
        a rename, which changes it) or, for a run still being written, when its log grew. One
        ``stat`` per run keeps this fast for large stores. Without a usable index, every row is
        read from the files. A run directory without a readable manifest (a start killed before
        it was written, a damaged run) is listed as ``incomplete`` with ``problem`` saying why.
        """
        index = self.index
        indexed = index.run_rows()
        rows: dict[str, RunRow] = {}
        fresh_rows: list[RunRow] = []
        incomplete: list[RunRow] = []
        if self.root.is_dir():
            for entry in os.scandir(self.root):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                row = indexed.get(entry.name)
                try:
                    changed = row is None or row.dir_mtime_ns != entry.stat().st_mtime_ns
                    if not changed and row is not None and row.status in _OPEN_STATUSES:
                        log_path = os.path.join(entry.path, EVENTS_NAME)
                        changed = os.stat(log_path).st_size != row.log_size
                except OSError:
                    changed = True
                if changed:
                    row = self._quick_row(entry.name, entry.path) or self.row_from_files(entry.name)
                    if row is None:
                        continue  # not a run
                    (fresh_rows if row.problem is None else incomplete).append(row)
                assert row is not None
                rows[entry.name] = row
        index.upsert_runs(fresh_rows)
        # runs gone, and runs no longer readable (their rows are read from the files each time)
        index.delete_runs(r for r in indexed if r not in rows or rows[r].problem is not None)
        if incomplete:
            self._note_incomplete(incomplete)
        return sorted(rows.values(), key=lambda r: (r.created_at, r.run_id), reverse=True)

    def _note_incomplete(self, rows: list[RunRow]) -> None:
        shown = "; ".join(
            f"{r.run_id}: {r.problem}" for r in sorted(rows, key=lambda r: r.run_id)[:3]
        )
        more = f"; and {len(rows) - 3} more" if len(rows) > 3 else ""
        plural = "y is" if len(rows) == 1 else "ies are"
        warn(
            str(self.root),
            f"incomplete:{len(rows)}",
            f"note: {len(rows)} run director{plural} listed as {INCOMPLETE} in {self.root} "
            f"({shown}{more}); `rar verify` reports them",
        )

    def row_from_files(self, run_id: str) -> RunRow | None:
        """A run's row read from its files; None for a directory that is not a run at all.

        A directory with a log or a writer's lock but no usable manifest gives an ``incomplete``
        row whose ``problem`` says why (such rows are never indexed).
        """
        run_dir = self.run_dir(run_id)
        try:
            dir_mtime = os.lstat(run_dir).st_mtime_ns
        except OSError:
            return None
        tail_seq, log_size, log_problem = self._log_tail(run_dir / EVENTS_NAME)
        manifest_path = run_dir / MANIFEST_NAME
        try:
            data = orjson.loads(read_regular(manifest_path))
            row = _manifest_row(run_id, data, tail_seq, dir_mtime, log_size)
            status = row.status
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                if log_problem is None and not self._has_run_files(run_dir):
                    return None  # a directory that is not a run
                why = (
                    "never started: it has no manifest.json (the start was stopped before "
                    "writing it) and nothing was recorded"
                    if tail_seq == 0 and log_problem is None
                    else f"manifest.json is missing ({tail_seq} events in the log)"
                )
                return self._incomplete(run_id, dir_mtime, tail_seq, why)
            return self._incomplete(
                run_id, dir_mtime, tail_seq, f"manifest.json {read_problem(exc)}"
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            return self._incomplete(
                run_id, dir_mtime, tail_seq, f"manifest.json is unreadable ({type(exc).__name__})"
            )
        if status not in _STATUSES or not row.is_sound():
            return self._incomplete(
                run_id, dir_mtime, tail_seq, "manifest.json does not describe a run"
            )
        if log_problem is not None:
            return self._incomplete(run_id, dir_mtime, 0, log_problem)
        return row

    def _quick_row(self, run_id: str, run_dir: str) -> RunRow | None:
        """``row_from_files`` for the common case, with a few system calls and no pathlib:
        a regular log whose last line is whole (read with one ``pread`` of its end) and a
        readable manifest describing a run. Anything else returns None, and
        ``row_from_files`` reads the run the careful way (and says what is wrong with it).

        This is what makes listing a store whose index is missing or stale fast: the row it
        returns is the one ``row_from_files`` would return (tests/test_list_quick.py).
        """
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            dir_mtime = os.lstat(run_dir).st_mtime_ns
            fd = os.open(os.path.join(run_dir, EVENTS_NAME), flags)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    return None
                size = info.st_size
                chunk = min(size, _QUICK_TAIL)
                buffer = os.pread(fd, chunk, size - chunk) if size else b""
            finally:
                os.close(fd)
            if size == 0:
                seq = 0
            else:
                last = buffer.rfind(b"\n")
                if last != len(buffer) - 1:  # a torn or unterminated end: the careful way
                    return None
                previous = buffer.rfind(b"\n", 0, last)
                if previous < 0 and chunk < size:  # the last line is longer than the chunk
                    return None
                seq = orjson.loads(buffer[previous + 1 : last])["seq"]
                if type(seq) is not int or seq < 0:
                    return None
            fd = os.open(os.path.join(run_dir, MANIFEST_NAME), flags)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > _QUICK_MANIFEST:
                    return None
                data = orjson.loads(os.read(fd, info.st_size + 1))
            finally:
                os.close(fd)
            row = _manifest_row(run_id, data, seq, dir_mtime, size)
            status = row.status
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            return None  # orjson.JSONDecodeError is a ValueError
        if status not in _STATUSES or not row.is_sound():
            return None
        return row

    def _has_run_files(self, run_dir: Path) -> bool:
        return os.path.lexists(run_dir / LOCK_NAME) or os.path.lexists(run_dir / EVENTS_NAME)

    def _log_tail(self, log_path: Path) -> tuple[int, int, str | None]:
        """(last seq, bytes, problem) of a log, without following a link."""
        problem = not_regular(log_path)
        if problem is not None:
            return 0, 0, f"events.jsonl {problem}"
        try:
            tail = read_tail(log_path)
        except CorruptionError:
            return 0, 0, None  # a damaged last line: `rar verify` reports it
        except OSError as exc:
            return 0, 0, f"events.jsonl {read_problem(exc)}"
        if tail.seq < 0:
            return 0, 0, "events.jsonl ends with an event of a negative seq"
        return tail.seq, tail.size + tail.torn_bytes, None

    def _incomplete(self, run_id: str, dir_mtime: int, events: int, why: str) -> RunRow:
        match = _ID_TIME.match(run_id)
        if match:
            created = "{}-{}-{}T{}:{}:{}.000000Z".format(*match.groups())
        else:
            when = datetime.fromtimestamp(dir_mtime / 1e9, UTC)
            created = when.isoformat(timespec="microseconds").replace("+00:00", "Z")
        return RunRow(
            run_id=run_id,
            status=INCOMPLETE,
            goal=None,
            created_at=created,
            finished_at=None,
            events=events,
            parent=None,
            head=None,
            dir_mtime_ns=0,
            log_size=0,
            problem=why,
        )

    def index_run(self, run_id: str) -> None:
        """Bring a run's row up to date. Never raises: called once the run's record is durable,
        and the index, being derived, catches up on a later read if this fails."""
        try:
            row = self.row_from_files(run_id)
            if row is not None and row.problem is None:
                self.index.upsert_runs([row])
        except Exception as exc:  # the record is the truth: a stale index is noted, not raised
            log.warning("warning: run %s was recorded but not indexed (%s)", run_id, exc)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self._reader.close()


def _manifest_row(
    run_id: str, data: dict[str, Any], events: int, dir_mtime: int, log_size: int
) -> RunRow:
    """A run's index row from its manifest's JSON and its log's tail."""
    parent = data.get("parent") or {}
    return RunRow(
        run_id=run_id,
        status=data["status"],
        goal=data.get("goal"),
        created_at=data["created_at"],
        finished_at=data.get("finished_at"),
        events=events,
        parent=parent.get("run_id"),
        head=data.get("head"),
        # a directory changed within the clock's granularity may change again with the same
        # mtime: store 0 so that it is read again next time ("racy" entries)
        dir_mtime_ns=0 if time.time_ns() - dir_mtime < _RACY_NS else dir_mtime,
        log_size=log_size,
    )
