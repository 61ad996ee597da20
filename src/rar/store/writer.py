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
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Final

from rar.errors import ConfigError, RunExistsError, StoreNotWritableError
from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.store._carried import CARRY_LIMIT, LINE_CARRY_LIMIT, carried_literal, log_pack
from rar.store._fs import WhileSyncing, fsync_dir
from rar.store.blobs import CODEC_CARRIED, BlobLocation, PackRecord, PackWriter
from rar.store.layout import EVENTS_NAME
from rar.store.lock import RunLock
from rar.store.log import CARRY_KEY, EventLog
from rar.store.manifest import Manifest, write_manifest
from rar.store.payloads import Linker, resolve
from rar.store.store import Store, utc_now_iso

# Payloads up to this many canonical bytes are kept in the event. Larger ones are blobs, so a
# model reply that a later request carries again as a message is stored once, not twice.
INLINE_LIMIT: Final = 256
# The index is asked whether it holds a new blob (so that runs share one copy) only for blobs
# of at least this many bytes: for a smaller one the look-up (~0.1 ms on ``rar proxy``'s path
# from an answer to its client) costs more than the copy it saves. Blobs this process's writers
# stored are known without asking, whatever their size.
INDEX_QUESTION_MIN: Final = 1024
ENV_CARRY_LIMIT: Final = "RAR_CARRY_LIMIT"


def carry_limit() -> int:
    """The largest blob a line carries: ``CARRY_LIMIT``, or ``$RAR_CARRY_LIMIT`` (bytes, at most
    ``CARRY_LIMIT``; 0 keeps every blob in packs, the layout of stores before carried blobs)."""
    value = os.environ.get(ENV_CARRY_LIMIT)
    if value is None or not value.strip():
        return CARRY_LIMIT
    try:
        return max(0, min(int(value), CARRY_LIMIT))
    except ValueError:
        raise ConfigError(
            f"{ENV_CARRY_LIMIT} is {value!r}: give a number of bytes (0 keeps every blob in "
            "packs), or unset it"
        ) from None


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
        carry_limit_setting = carry_limit()  # a bad setting is refused before anything is made
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
        self._carry: dict[str, bytes] = {}  # pending JSON blobs the next event may carry
        # pending blobs the store was asked about early (check_pending): held there or not
        self._checked: dict[str, bool] = {}
        self._unseen: set[str] = set()  # pending blobs not asked about at all (see payload)
        self._new: list[PackRecord] = []
        self._carried: list[PackRecord] = []  # blobs carried in this session's durable lines
        self._unshared: list[PackRecord] = []  # carried in lines not known to be durable yet
        # lines written whose carried blobs are not located yet (see settle), and whether the
        # last of them is durable
        self._unlocated: list[tuple[dict[str, tuple[str, bytes]], int, bytes]] = []
        self._share_due = False
        self._mutex = threading.RLock()
        self.linker = Linker(self.put_small, redactor)
        self._carry_limit = carry_limit_setting
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
            while self.store.pack_taken(f"{self.run_id}.{session}"):  # here or uploaded
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

    def put_small(self, digest: str, raw: bytes, *, unseen: bool = False) -> None:
        """Like :meth:`put_blob`, for a blob that may travel in the next event's line when it is
        small and UTF-8 text (a message, a chain node, a payload, a workspace file, a snapshot
        tree; see :mod:`rar.store._carried`); anything else goes to the pack. ``unseen``: see
        :meth:`payload`."""
        with self._mutex:
            if digest in self._written:
                return
            self.put_blob(digest, raw)
            if len(raw) <= self._carry_limit:
                self._carry[digest] = raw
            if unseen:
                self._unseen.add(digest)

    def check_pending(self) -> None:
        """Ask the store now which pending blobs it holds, so that the next append need not.

        For a writer about to wait (a request sent, its answer awaited): the question is then
        off the path from the answer to its record. A blob another writer stores in between
        is written again, as when two writers store one blob at the same moment: a second
        copy of the same bytes, never a missing one."""
        with self._mutex:
            ask = self._unasked()
            if ask:
                known = self._ask(ask)
                for digest in ask:
                    self._checked[digest] = digest in known

    def _unasked(self) -> list[str]:
        """Pending blobs the store has not been asked about, and is to be (not unseen)."""
        return [d for d in self._pending if d not in self._checked and d not in self._unseen]

    def _ask(self, digests: list[str]) -> set[str]:
        """Which of the pending ``digests`` the store holds (the index is asked about those of
        ``INDEX_QUESTION_MIN`` bytes or more only)."""
        pending = self._pending
        worth = [d for d in digests if len(pending[d]) >= INDEX_QUESTION_MIN]
        return self.store.known_blobs(digests, index_for=worth)

    def _known_pending(self) -> set[str]:
        """Which pending blobs the store holds (asked now, unless asked early or unseen)."""
        ask = self._unasked()
        known = self._ask(ask) if ask else set()
        if self._checked:
            known.update(d for d, held in self._checked.items() if held)
        return known

    def _take_carry(self, known: set[str]) -> dict[str, tuple[str, bytes]]:
        """The new pending text blobs the next line carries; the rest stay pending, for the pack
        (blobs the store holds already are not written again)."""
        taken: dict[str, tuple[str, bytes]] = {}
        total = 0
        for digest, raw in self._carry.items():
            if digest in known or total + len(raw) > LINE_CARRY_LIMIT:
                continue
            try:
                taken[digest] = (raw.decode("utf-8"), raw)
            except UnicodeDecodeError:  # not UTF-8 text: the pack takes it
                continue
            total += len(raw)
        self._carry.clear()
        for digest in taken:
            del self._pending[digest]
        return taken

    def _give_back(self, carry: dict[str, tuple[str, bytes]]) -> None:
        """A line that was to carry these blobs was not written: they are pending again."""
        for digest, (_, raw) in carry.items():
            self._pending[digest] = raw
            self._carry[digest] = raw
            self.store.pending_blobs[digest] = raw

    def settle(self) -> None:
        """Note where the lines written so far hold the blobs they carry, and share those of
        durable lines (:meth:`_share_carried`). ``append`` leaves this to be done later so that
        the caller can hand its result on first; it is done before anything else the writer
        does, and a carried blob is readable meanwhile (it stays among the pending blobs)."""
        with self._mutex:
            if self._unlocated:
                for carry, start, line in self._unlocated:
                    self._located(carry, start, line)
                self._unlocated.clear()
            if self._share_due:
                self._share_due = False
                self._share_carried()

    def _located(self, carry: dict[str, tuple[str, bytes]], start: int, line: bytes) -> None:
        """Where ``line``, written at ``start``, holds each blob it carries."""
        name = log_pack(self.run_id)
        for digest, (text, raw) in carry.items():
            found = carried_literal(line, digest, text)
            if found is None:  # cannot happen (the line holds the string); keep the blob safe
                self._pending[digest] = raw
                continue
            pos, literal_size = found
            location = BlobLocation(name, start + pos, CODEC_CARRIED, len(raw), literal_size)
            self._unshared.append(PackRecord(digest, location))

    def _share_carried(self) -> None:
        """Blobs carried in lines that are durable now: other writers of this process may rely
        on them from here on (before, only this run's later lines, in the same file, could)."""
        for record in self._unshared:
            self.store.remember_blob(record.digest, record.location)
            self.store.pending_blobs.pop(record.digest, None)
        self._carried.extend(self._unshared)
        self._unshared.clear()

    def flush_blobs(self) -> None:
        """Write pending blobs the store does not hold yet: one index query, one write."""
        with self._mutex:
            self.settle()
            if self._pending:
                self._write_pack(self._known_pending())

    def _write_pack(self, known: set[str]) -> None:
        fresh = [(d, raw) for d, raw in self._pending.items() if d not in known]
        if fresh:
            locations = self._pack_writer().append_many(fresh)
            for (digest, _), location in zip(fresh, locations, strict=True):
                self.store.remember_blob(digest, location)
                self._new.append(PackRecord(digest, location))
        for digest in self._pending:
            self.store.pending_blobs.pop(digest, None)
        self._pending.clear()
        self._carry.clear()
        self._checked.clear()
        self._unseen.clear()

    def payload(
        self, value: Any, *, redacted: bool = False, unseen: bool = False
    ) -> dict[str, Any]:
        """Redact and link ``value``; return its reference (inline when small).

        ``unseen=True`` says ``value`` holds bytes just received from outside (an upstream's
        answer, with its own id and date), which the store cannot be expected to hold: its blob
        is written without asking. Should the store hold it after all, it keeps a second copy,
        as it may when two writers store one blob at once."""
        with self._mutex:
            linked = self.linker.link(value, redacted=redacted)
            return self.ref_for(linked, unseen=unseen)

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

    def ref_for(self, linked: Canonical, *, unseen: bool = False) -> dict[str, Any]:
        ref: dict[str, Any] = {"digest": linked.digest, "size": len(linked.data)}
        if len(linked.data) <= INLINE_LIMIT:
            ref["value"] = linked
        else:
            self.put_small(linked.digest, linked.data, unseen=unseen)
        return ref

    # --- events ------------------------------------------------------------------------------

    def append(
        self,
        event: dict[str, Any],
        *,
        sync: bool = False,
        while_syncing: WhileSyncing | None = None,
    ) -> tuple[int, str]:
        """Write ``event`` as the log's next line (durable first when ``sync``), with the new
        small blobs it names; see :meth:`settle` for what is left for later.
        ``while_syncing`` is called once the line is written, before it is durable (see
        :meth:`AppendOnlyFile.write <rar.store._fs.AppendOnlyFile.write>`)."""
        with self._mutex:
            self.settle()
            carry = None
            try:
                if self._pending:
                    known = self._known_pending()
                    # a run's last line stays short: `rar list` reads it from the log's end
                    if self._carry and event.get("type") != "run.finished":
                        carry = self._take_carry(known)
                    self._write_pack(known)
                if self._pack is not None and self._pack.dirty and self.durable:
                    self._pack.sync()  # blobs before the event that names them
                event.setdefault("span", "run")
                event["ts"] = utc_now_iso()
                if not carry:
                    written = self.log.append(
                        event, sync=sync and self.durable, while_syncing=while_syncing
                    )
                    if self._unshared and sync:
                        self._share_carried()
                    return written
                start = self.log.size
                event[CARRY_KEY] = {digest: text for digest, (text, _) in carry.items()}
                try:
                    written = self.log.append(
                        event, sync=sync and self.durable, while_syncing=while_syncing
                    )
                finally:
                    del event[CARRY_KEY]  # the caller's event stays as it gave it
            except BaseException:
                if carry:
                    self._give_back(carry)
                raise
            self._unlocated.append((carry, start, self.log.last_line))
            if sync or not self.durable:  # durable now (or never promised to be): shared
                self._share_due = True
            return written

    def write_manifest(self, manifest: Manifest) -> None:
        with self._mutex:
            write_manifest(self.dir, manifest, durable=self.durable)

    def close(self) -> None:
        with self._mutex:
            if self.closed:
                return
            self.closed = True
            failures: list[Exception] = []
            for step in (self.flush_blobs, self._close_pack, self.log.close, self._index_carried):
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
        self.store.seal_packs(self.run_id)  # uploaded when blobs live at a URL

    def _index_carried(self) -> None:
        """Index the blobs carried in this session's lines (the log is closed: durable)."""
        self.settle()
        self._share_carried()
        if self._carried:
            self.store.index_blobs(log_pack(self.run_id), self._carried, self.log.size)

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
