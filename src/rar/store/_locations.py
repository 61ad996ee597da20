"""Blob locations checked against the packs themselves, for the index (:mod:`rar.store.index`):
whether a location's record header names the digest, and where a blob really is when the index
cannot say or says something the packs contradict."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any, Final, Literal

from rar.errors import CorruptionError, StoreError
from rar.store._carried import is_log_pack
from rar.store._carried import read as read_carried
from rar.store.blobs import (
    CODEC_CARRIED,
    HEADER_SIZE,
    PACK_MAGIC,
    BlobLocation,
    PackReader,
    PackRecord,
)
from rar.store.remote import RemotePackReader, pack_size


def location_of(row: tuple[Any, ...]) -> BlobLocation | None:
    """A blob location from an index row; None when the row is not one the index writes."""
    pack, offset, codec, raw_size, stored_size = row
    carried = codec == CODEC_CARRIED and isinstance(pack, str) and is_log_pack(pack)
    if (
        isinstance(pack, str)
        and isinstance(offset, int)
        and offset >= (0 if carried else len(PACK_MAGIC))
        and (codec in (0, 1) or carried)
        and isinstance(raw_size, int)
        and isinstance(stored_size, int)
        and raw_size >= 0
        and stored_size >= 0
    ):
        return BlobLocation(pack, offset, codec, raw_size, stored_size)
    return None


# a pack record's header (docs/store-format.md): "B", sha256, codec, raw length, stored length
_RECORD_HEADER: Final = struct.Struct(">c32sBII")


class HeaderCheck:
    """Whether the record header at a location names the digest with the same sizes (one open
    file per pack); None when the pack cannot be read (an I/O error is not a contradiction)."""

    def __init__(self, reader: PackReader) -> None:
        self._reader = reader
        self._fds: dict[str, int] = {}

    def __enter__(self) -> Callable[[str, BlobLocation], bool | None]:
        return self.holds

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            if fd >= 0:
                os.close(fd)

    def holds(self, digest: str, location: BlobLocation) -> bool | None:
        fd = self._fds.get(location.pack)
        if fd is None:
            try:
                fd = os.open(self._reader.pack_path(location.pack), os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                fd = -1  # no such pack here: the location is wrong, unless it is remote
            except OSError:
                return None
            self._fds[location.pack] = fd
        # a pack with no local copy may be at the blob URL (blobs carried in logs never are)
        remote = self._reader.remote if isinstance(self._reader, RemotePackReader) else None
        missing = fd < 0 and (remote is None or location.codec == CODEC_CARRIED)
        if missing or not digest.startswith("sha256:"):
            return False
        if location.codec == CODEC_CARRIED:
            try:
                read_carried(fd, digest, location, self._reader.pack_path(location.pack))
            except CorruptionError:
                return False
            except OSError:
                return None
            return True
        try:
            if fd >= 0:
                head = os.pread(fd, HEADER_SIZE, location.offset)
            elif remote is not None:  # only at the blob URL: the object's (cached) header
                head = remote.read_at(location.pack, location.offset, HEADER_SIZE)
        except FileNotFoundError:
            return False
        except (OSError, StoreError):
            return None
        if len(head) != HEADER_SIZE:
            return False
        marker, raw_digest, codec, raw_size, stored_size = _RECORD_HEADER.unpack(head)
        return (
            marker == b"B"
            and raw_digest.hex() == digest[7:]
            and (codec, raw_size, stored_size)
            == (location.codec, location.raw_size, location.stored_size)
        )


Verdict = Literal["right", "damaged", "lie", "unknown"]


class PackScanner:
    """Blob locations found by scanning the packs themselves, for when the index cannot say (or
    said something the packs contradict). Each pack is scanned once, and again from where the
    scan ended when it grew."""

    def __init__(self, reader: PackReader) -> None:
        self.reader = reader
        self._ends: dict[str, int] = {}
        self._damage: dict[str, list[tuple[int, int]]] = {}  # pack -> regions without a record
        self._by_digest: dict[str, BlobLocation] = {}
        self._at: dict[tuple[str, int], PackRecord] = {}
        self.unreadable: set[str] = set()  # packs an I/O error kept from being scanned

    def refresh(self) -> None:
        for name in self.reader.iter_pack_names():
            start = self._ends.get(name, 0)
            try:
                if pack_size(self.reader, name) <= start:
                    continue
                scan = self.reader.scan(name, start)
            except FileNotFoundError:
                continue
            except OSError:
                self.unreadable.add(name)
                continue
            self.unreadable.discard(name)
            for record in scan.records:
                self._by_digest.setdefault(record.digest, record.location)
                self._at[(name, record.location.offset)] = record
            self._ends[name] = scan.end
            regions = [r for r in self._damage.get(name, []) if r[1] <= start]
            self._damage[name] = regions + [(d.offset, d.end) for d in scan.damage]

    def locations(self) -> dict[str, BlobLocation]:
        self.refresh()
        return dict(self._by_digest)

    def find(self, digest: str) -> BlobLocation | None:
        if digest not in self._by_digest:
            self.refresh()
        return self._by_digest.get(digest)

    def verdict(self, digest: str, claimed: BlobLocation) -> Verdict:
        """Why the blob did not read back from ``claimed``: ``right`` (the index is right; the
        record's bytes are damaged), ``damaged`` (a record of those sizes starts there but its
        header is damaged, or the pack cannot be parsed there), ``lie`` (the index is wrong;
        :meth:`find` says where the blob is, if anywhere) or ``unknown`` (a pack could not be
        read: an I/O error, which says nothing about the index)."""
        self.refresh()
        record = self._at.get((claimed.pack, claimed.offset))
        if record is not None and record.digest == digest:
            return "right"
        if self.find(digest) is not None:
            return "lie"
        if self.unreadable:
            return "unknown"
        if record is not None and (
            record.location.codec,
            record.location.raw_size,
            record.location.stored_size,
        ) == (claimed.codec, claimed.raw_size, claimed.stored_size):
            return "damaged"
        if any(begin <= claimed.offset < end for begin, end in self._damage.get(claimed.pack, [])):
            return "damaged"  # the pack cannot be parsed there
        return "lie"
