"""The write side of one run: lock, event log, blob pack and payload linker together.

This is the store's ``append(event)`` protocol as the runtime sees it. Ordering rules:

* a blob is written (and, when durable, fsynced) before any event that references it;
* ``append(event, sync=True)`` returns only once the event is on disk;
* bookkeeping events (``sync=False``) are written at once (a crashed process loses none of them)
  and become durable with the next synced event or at close (group commit).

Reopening a run (``create=False``, e.g. ``rar resume``) is the one place where a log's torn end
is repaired (see :class:`~rar.store.log.EventLog`); the writer records what it did as a ``note``.
Packs are never reopened: every writer session starts a new one, so a pack's torn tail is never
cut (readers and ``rar verify`` pass over it).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path
from typing import Any, Final

from rar.errors import RunExistsError, StoreNotWritableError
from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.store._fs import fsync_dir
from rar.store.blobs import PackRecord, PackWriter
from rar.store.layout import EVENTS_NAME
from rar.store.lock import RunLock
from rar.store.log import EventLog
from rar.store.manifest import Manifest, write_manifest
from rar.store.payloads import Linker, resolve
from rar.store.store import Store, utc_now_iso

# Payloads up to this many canonical bytes are kept in the event. Larger ones are blobs, so a
# model reply that a later request carries again as a message is stored once, not twice.
INLINE_LIMIT: Final = 256


class RunWriter:
    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        redactor: Redactor,
        durable: bool = True,
        create: bool = True,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.dir = store.run_dir(run_id)
        self.durable = durable
        store.ensure_writable()
        try:
            self.dir.mkdir(exist_ok=not create)
            if create:
                fsync_dir(store.root)  # the run's directory entry, durable before its events
        except FileExistsError:
            raise RunExistsError(run_id, self.dir) from None
        except OSError as exc:
            raise StoreNotWritableError(self.dir, exc.strerror or str(exc)) from exc
        self._lock = RunLock(self.dir, run_id).acquire()
        try:
            self.log = EventLog(self.dir / EVENTS_NAME)
        except BaseException:
            self._lock.release()
            raise
        self._pack: PackWriter | None = None
        self._written: set[str] = set()
        self._pending: dict[str, bytes] = {}
        self._new: list[PackRecord] = []
        self._mutex = threading.RLock()
        self.linker = Linker(self.put_blob, redactor)
        self.redactor = redactor
        self.closed = False
        if self.log.repair is not None:
            self._note_repair(self.log.repair)

    def _note_repair(self, text: str) -> None:
        """Record in the run's own log what reopening it repaired (see ``EventLog``)."""
        try:
            self.append({"type": "note", "level": "warning", "text": text}, sync=True)
        except BaseException:
            self.log.close()
            self._lock.release()
            raise

    # --- blobs -------------------------------------------------------------------------------

    def _pack_writer(self) -> PackWriter:
        if self._pack is None:
            session = 1
            while (self.store.packs_dir / f"{self.run_id}.{session}.pack").exists():
                session += 1
            self._pack = PackWriter(self.store.packs_dir / f"{self.run_id}.{session}.pack")
        return self._pack

    def put_blob(self, digest: str, raw: bytes) -> None:
        """Store raw bytes under their digest unless the store has them already.

        Blobs are collected and written together by :meth:`flush_blobs`, which runs before
        the next event is appended, so a blob always reaches the pack before an event names it.
        """
        with self._mutex:
            if digest in self._written:
                return
            self._written.add(digest)
            self._pending[digest] = raw
            self.store.pending_blobs[digest] = raw

    def flush_blobs(self) -> None:
        """Write pending blobs the store does not hold yet: one index query, one write."""
        with self._mutex:
            if not self._pending:
                return
            known = self.store.known_blobs(list(self._pending))
            fresh = [(d, raw) for d, raw in self._pending.items() if d not in known]
            if fresh:
                locations = self._pack_writer().append_many(fresh)
                for (digest, _), location in zip(fresh, locations, strict=True):
                    self.store.remember_blob(digest, location)
                    self._new.append(PackRecord(digest, location))
            for digest in self._pending:
                self.store.pending_blobs.pop(digest, None)
            self._pending.clear()

    def payload(self, value: Any, *, redacted: bool = False) -> dict[str, Any]:
        """Redact and link ``value``; return its reference (inline when small)."""
        with self._mutex:
            linked = self.linker.link(value, redacted=redacted)
            return self.ref_for(linked)

    def recorded_payload(self, value: Any, *, redacted: bool = False) -> tuple[dict[str, Any], Any]:
        """The reference of ``value`` and the value exactly as a reader of the record gets it.

        Canonical JSON changes some values (``2.0`` is written ``2``, tuples become lists); the
        second item is what a replay will serve (:func:`~rar.store.payloads.resolve`), so live
        code can be handed the same thing.
        """
        with self._mutex:
            linked = self.linker.link(value, redacted=redacted)
            ref = self.ref_for(linked)
        return ref, resolve({**ref, "value": linked}, self.store.get_blob)

    def plain_payload(self, value: Any) -> dict[str, Any]:
        """Like :meth:`payload`, with the inline value as plain JSON (for the manifest)."""
        ref = self.payload(value)
        if "value" in ref:
            ref["value"] = ref["value"].value
        return ref

    def ref_for(self, linked: Canonical) -> dict[str, Any]:
        ref: dict[str, Any] = {"digest": linked.digest, "size": len(linked.data)}
        if len(linked.data) <= INLINE_LIMIT:
            ref["value"] = linked
        else:
            self.put_blob(linked.digest, linked.data)
        return ref

    # --- events ------------------------------------------------------------------------------

    def append(self, event: dict[str, Any], *, sync: bool = False) -> tuple[int, str]:
        with self._mutex:
            self.flush_blobs()
            if self._pack is not None and self._pack.dirty and self.durable:
                self._pack.sync()  # blobs before the event that names them
            event.setdefault("span", "run")
            event["ts"] = utc_now_iso()
            return self.log.append(event, sync=sync and self.durable)

    def write_manifest(self, manifest: Manifest) -> None:
        with self._mutex:
            write_manifest(self.dir, manifest, durable=self.durable)

    def close(self) -> None:
        with self._mutex:
            if self.closed:
                return
            self.closed = True
            failures: list[Exception] = []
            for step in (self.flush_blobs, self._close_pack, self.log.close):
                try:
                    step()
                except Exception as exc:  # every step runs; the first failure is raised
                    failures.append(exc)
            self._lock.release()
            if failures:
                raise failures[0]

    def _close_pack(self) -> None:
        if self._pack is not None:
            self._pack.close()
            self.store.index_blobs(self._pack.name, self._new, self._pack.size)

    def abandon(self) -> None:
        """Give up a run that failed to start: close, and remove it if nothing was recorded."""
        with contextlib.suppress(Exception):
            self.close()
        if self.log.seq == 0:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.dir)

    @property
    def path(self) -> Path:
        return self.dir
