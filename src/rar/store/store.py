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
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from rar.errors import (
    AmbiguousRunIdError,
    BlobMissingError,
    CorruptionError,
    RunNotFoundError,
    StoreNotWritableError,
)
from rar.store.blobs import BlobLocation, PackReader, PackRecord
from rar.store.index import Index, RunRow
from rar.store.layout import EVENTS_NAME, INDEX_NAME, MANIFEST_NAME
from rar.store.lock import is_locked
from rar.store.log import read_events, read_tail

if TYPE_CHECKING:
    from rar.store.manifest import Manifest

ENV_HOME = "RAR_HOME"
_OPEN_STATUSES = frozenset({"pending", "running"})
_RACY_NS = 2_000_000_000
DEFAULT_DIR = "runs"
_T = TypeVar("_T")


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
    """Read access to a store, and the place run writers are created from."""

    def __init__(self, root: Path | str | None = None, *, create: bool = False) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        self.packs_dir = self.root / "blobs" / "packs"
        if create:
            self.ensure_writable()
        self._index: Index | None = None
        self._reader = PackReader(self.packs_dir)
        self._local_blobs: dict[str, BlobLocation] = {}
        # blobs a writer of this process collected and has not written yet (see RunWriter)
        self.pending_blobs: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def ensure_writable(self) -> None:
        try:
            self.packs_dir.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreNotWritableError(self.root, exc.strerror or str(exc)) from exc

    @property
    def exists(self) -> bool:
        return self.root.is_dir()

    # --- index -------------------------------------------------------------------------------

    @property
    def index(self) -> Index:
        if self._index is None:
            if not self.root.is_dir():
                self.ensure_writable()
            self._index = Index(self.root / INDEX_NAME)
        return self._index

    def _with_index(self, action: Callable[[Index], _T]) -> _T:
        """Run an index operation; an index found corrupt is rebuilt once and retried."""
        try:
            return action(self.index)
        except sqlite3.DatabaseError:
            self.index.close()
            self._index = None
            Index(self.root / INDEX_NAME)._quarantine()
            return action(self.index)

    # --- blobs -------------------------------------------------------------------------------

    def locate_blob(self, digest: str) -> BlobLocation | None:
        location = self._local_blobs.get(digest)
        if location is not None:
            return location
        location = self._with_index(lambda index: index.lookup_blob(digest))
        if location is None and self.packs_dir.is_dir():
            self._with_index(lambda index: index.catch_up(self._reader))
            location = self._with_index(lambda index: index.lookup_blob(digest))
        return location

    def known_blobs(self, digests: list[str]) -> set[str]:
        """Which of ``digests`` the store holds already (a writer's dedup check; no pack scan)."""
        known = {d for d in digests if d in self._local_blobs}
        rest = [d for d in digests if d not in known]
        if rest:
            known |= self._with_index(lambda index: index.existing_blobs(rest))
        return known

    def index_blobs(self, pack: str, records: list[PackRecord], end: int) -> None:
        self._with_index(lambda index: index.add_blobs(pack, records, end))

    def has_blob(self, digest: str) -> bool:
        return self.locate_blob(digest) is not None

    def get_blob(self, digest: str) -> bytes:
        pending = self.pending_blobs.get(digest)
        if pending is not None:
            return pending
        location = self.locate_blob(digest)
        if location is None:
            raise BlobMissingError(digest, self.root)
        return self._reader.read(digest, location)

    def get_json(self, digest: str) -> Any:
        return orjson.loads(self.get_blob(digest))

    def resolve_payload(self, ref: dict[str, Any] | None) -> Any:
        """The plain value of a payload reference from an event (inline or blob, unlinked)."""
        if ref is None:
            return None
        from rar.store.payloads import CHAIN_KEY, unlink

        if "value" in ref:
            value = ref["value"]
            if not isinstance(value, (dict, list)):
                return value
            raw = orjson.dumps(value)
        else:
            raw = self.get_blob(ref["digest"])
            value = orjson.loads(raw)
        if f'"{CHAIN_KEY}"'.encode() not in raw:
            return value  # nothing linked inside: no walk needed
        return unlink(value, self.get_blob)

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
            and os.path.exists(os.path.join(entry.path, MANIFEST_NAME))
        )

    def resolve(self, ref: str) -> str:
        """A full run id from a unique prefix of the id or of its random last part."""
        ref = ref.strip()
        if not ref:
            raise RunNotFoundError(ref, self.root)
        if (self.root / ref / MANIFEST_NAME).exists():
            return ref
        ids = self.run_ids()
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

        return read_manifest(self.run_dir(run_id), run_id)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        path = self.run_dir(run_id) / EVENTS_NAME
        if not path.exists():
            return []
        return read_events(path, run_id)

    def is_writing(self, run_id: str) -> bool:
        return is_locked(self.run_dir(run_id))

    def display_status(self, row: RunRow) -> str:
        """The stored status, or ``interrupted`` for a run left RUNNING by a dead writer."""
        if row.status == "running" and not self.is_writing(row.run_id):
            return "interrupted"
        return row.status

    def list_runs(self) -> list[RunRow]:
        """All runs, newest first, with the index brought up to date with the files.

        A run's row is re-read when its directory's mtime changed (the manifest is replaced by
        a rename, which changes it) or, for a run still being written, when its log grew. One
        ``stat`` per run keeps this fast for large stores.
        """
        rows = self._with_index(lambda index: index.run_rows())
        stale: list[RunRow] = []
        present: set[str] = set()
        if self.root.is_dir():
            for entry in os.scandir(self.root):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                row = rows.get(entry.name)
                try:
                    changed = row is None or row.dir_mtime_ns != entry.stat().st_mtime_ns
                    if not changed and row is not None and row.status in _OPEN_STATUSES:
                        log = os.path.join(entry.path, EVENTS_NAME)
                        changed = os.stat(log).st_size != row.log_size
                except FileNotFoundError:
                    changed = True
                if changed:
                    fresh = self.row_from_files(entry.name)
                    if fresh is None:
                        continue  # not a run (no usable manifest)
                    stale.append(fresh)
                    rows[entry.name] = fresh
                present.add(entry.name)
        gone = [run_id for run_id in rows if run_id not in present]
        if stale:
            self._with_index(lambda index: index.upsert_runs(stale))
        if gone:
            self._with_index(lambda index: index.delete_runs(gone))
            for run_id in gone:
                rows.pop(run_id)
        return sorted(rows.values(), key=lambda r: (r.created_at, r.run_id), reverse=True)

    def row_from_files(self, run_id: str) -> RunRow | None:
        """An index row read from a run's files (None when the manifest is unusable)."""
        run_dir = self.run_dir(run_id)
        try:
            dir_mtime = run_dir.stat().st_mtime_ns
            data = orjson.loads((run_dir / MANIFEST_NAME).read_bytes())
            parent = data.get("parent") or {}
            row = RunRow(
                run_id=run_id,
                status=str(data["status"]),
                goal=data.get("goal"),
                created_at=str(data["created_at"]),
                finished_at=data.get("finished_at"),
                events=0,
                parent=parent.get("run_id"),
                head=data.get("head"),
                # a directory changed within the clock's granularity may change again with the
                # same mtime: store 0 so that it is read again next time ("racy" entries)
                dir_mtime_ns=0 if time.time_ns() - dir_mtime < _RACY_NS else dir_mtime,
                log_size=0,
            )
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            return None
        log = run_dir / EVENTS_NAME
        try:
            tail = read_tail(log) if log.exists() else None
        except CorruptionError:
            tail = None
        if tail is None:
            return row
        return dataclasses.replace(row, events=tail.seq, log_size=tail.size + tail.torn_bytes)

    def index_run(self, run_id: str) -> None:
        row = self.row_from_files(run_id)
        if row is not None:
            self._with_index(lambda index: index.upsert_runs([row]))

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self._reader.close()
