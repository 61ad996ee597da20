"""Blob locations read from the pack files themselves, for readers that must not write.

``index.sqlite`` is derived and may be stale; worse for ``rar verify``, using it writes (opening
it creates or checkpoints its WAL, a look-up that misses catches it up). A :class:`PackCatalog`
is the same map built in memory by scanning the packs, and :class:`ReadOnlyStore` is a
:class:`~rar.store.store.Store` that finds blobs through one, so reading a run through it changes
no file of the store.

A blob is written before any event names it, so a reader that reads a log first and then the
packs finds every blob that part of the log refers to. The catalog re-reads the packs (from where
it stopped) when a blob is not found, so packs that writers extended meanwhile are covered.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from rar.errors import StoreError
from rar.store._carried import is_log_pack
from rar.store.blobs import BlobLocation, PackDamage, PackReader, PackRecord, PackScan
from rar.store.index import Index
from rar.store.remote import pack_size, pack_where
from rar.store.store import Store


@dataclass(frozen=True, slots=True)
class PackFinding:
    """Damage a re-hashing catalog found: a record that does not match, or unparsable bytes."""

    pack: str
    path: Path | str  # a local pack's path, or the URL of a pack only at the blob URL
    offset: int
    what: str  # "blob-corrupt" (a record whose bytes do not match its digest) or "pack"
    detail: str


class PackCatalog:
    """Where each blob is, read from the packs (never from ``index.sqlite``).

    With ``rehash`` every record read is re-hashed, only sound records are served, and what does
    not match is listed in ``findings`` (the whole-store check of ``rar verify``); without it only
    record headers are read and blobs are checked when they are read.
    """

    def __init__(self, reader: PackReader, *, rehash: bool = False) -> None:
        self.reader = reader
        self.rehash = rehash
        self.locations: dict[str, BlobLocation] = {}
        self.damaged: dict[str, str] = {}  # digest → where its only record is damaged
        self.findings: list[PackFinding] = []
        self.tails: dict[str, PackDamage] = {}  # pack → its unparsable end, as last read
        self.records = 0
        self.stale = True  # re-read the packs before declaring a blob missing
        self._read: dict[str, tuple[int, int]] = {}  # pack → (records known up to, size seen)

    @property
    def packs(self) -> int:
        return sum(1 for name in self._read if not is_log_pack(name))

    def locate(self, digest: str) -> BlobLocation | None:
        location = self.locations.get(digest)
        if location is None and self.stale:
            # the packs first: the logs (whose lines carry small blobs) only when they lack it
            self.refresh(logs=False)
            location = self.locations.get(digest)
            if location is None:
                self.refresh()
                location = self.locations.get(digest)
        return location

    def refresh(self, *, logs: bool = True) -> None:
        """Read what was appended to the packs since they were last read (new packs too), and
        to the runs' logs unless ``logs`` is false."""
        if logs:
            self.stale = False
        for name in self.reader.iter_pack_names(logs=logs):
            start, seen = self._read.get(name, (0, -1))
            try:
                size = pack_size(self.reader, name)  # the local copy's, or the object's
                if size == seen:
                    continue
                if self.rehash:
                    scan, failures = self.reader.verify_pack(name, start)
                else:
                    scan, failures = self.reader.scan(name, start), []
            except FileNotFoundError:
                continue  # a pack whose header could not be written is removed by its writer
            self._add(name, scan, failures)

    def _add(self, name: str, scan: PackScan, failures: list[tuple[PackRecord, str]]) -> None:
        path = pack_where(self.reader, name)
        failed = {id(record) for record, _ in failures}
        for record in scan.records:
            if id(record) in failed:
                continue
            self.locations.setdefault(record.digest, record.location)
            self.damaged.pop(record.digest, None)  # a sound copy serves it
        for record, why in failures:
            offset = record.location.offset
            self.findings.append(PackFinding(name, path, offset, "blob-corrupt", why))
            self._damage(record.digest, f"pack {name}: {why}")
        tail = scan.tail
        for damage in scan.damage:
            if damage is not tail:
                self.findings.append(PackFinding(name, path, damage.offset, "pack", damage.detail))
            if damage.digest is not None:
                self._damage(damage.digest, f"pack {name}: {damage.detail}")
        if tail is None:
            self.tails.pop(name, None)
        else:
            self.tails[name] = tail
        if not is_log_pack(name):  # (carried blobs are counted by the walks of their logs)
            self.records += len(scan.records)
        self._read[name] = (scan.end, scan.size)

    def _damage(self, digest: str, where: str) -> None:
        if digest not in self.locations:
            self.damaged.setdefault(digest, where)


class ReadOnlyStore(Store):
    """A store read without writing anything: blobs are found through a :class:`PackCatalog`.

    Everything that reads runs (manifests, events, payloads, blobs) works as on a
    :class:`Store`; anything that needs the index (listing runs, recording) is refused.
    """

    def __init__(self, root: Path | str | None = None) -> None:
        super().__init__(root)
        self.catalog = PackCatalog(self.reader)

    @property
    def index(self) -> Index:
        raise StoreError(f"the store at {self.root} is open read-only: its index is not used")

    def locate_blob(self, digest: str) -> BlobLocation | None:
        self.catalog.stale = True  # a miss re-reads the packs: another process may be writing
        return self.catalog.locate(digest)

    def known_blobs(
        self, digests: list[str], *, index_for: Collection[str] | None = None
    ) -> set[str]:
        looked_up = digests if index_for is None else index_for
        return {d for d in looked_up if self.locate_blob(d) is not None}
