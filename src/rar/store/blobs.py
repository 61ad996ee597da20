"""Content-addressed blobs in append-only pack files.

Layout under ``<store>/blobs/``::

    packs/<writer>.pack     append-only records, one writer (one recording run) per pack
    (locations live in the store's index.sqlite, table ``blobs``: derived, rebuilt by scanning)

A pack starts with the 8-byte magic ``RARPACK1`` and holds records::

    b"B" | sha256 (32 raw bytes) | codec (1 byte: 0 raw, 1 zstd) | raw length (u32 BE)
         | stored length (u32 BE) | stored bytes

Why packs and not one file per blob: a durable blob needs an fsync of its file (and, for a new
file, of its directory). A step of a conversation writes several small blobs (new messages, chain
nodes, the request); one fsync per pack and per effect keeps per-step durability under a
millisecond, where one file per blob costs one to two fsyncs per blob (``bench/blob_layout.py``).

Blobs are identified by the digest of their *raw* bytes and verified on every read. A torn record
at the end of a pack (a crash mid-write) is never referenced, because a blob is fsynced before any
event names it. Packs are never reopened for appending (a writer session always starts a new one),
so a torn tail is never cut either: scans ignore it and ``rar verify`` reports it as harmless.

Damage is told from a torn tail by what follows it: a scan that meets a record it cannot parse
looks for the next intact record (a header whose bytes re-hash to its digest). If there is one, the
bytes in between are damage in the middle of the pack, reported with their offsets, and the intact
records after them are still found; if there is none, they are the pack's tail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import zstandard

from rar.errors import AppendError, CorruptionError
from rar.hashing import DIGEST_PREFIX
from rar.store._fs import AppendOnlyFile, fsync_dir, make_dirs

PACK_MAGIC: Final = b"RARPACK1"
_HEADER = struct.Struct(">c32sBII")
HEADER_SIZE: Final = _HEADER.size  # 42
CODEC_RAW: Final = 0
CODEC_ZSTD: Final = 1
CODEC_CARRIED: Final = 2  # not in a pack: carried in a run's log line (see _carried.py)
COMPRESS_MIN: Final = 1024  # smaller blobs are stored raw: zstd gains little and costs time
_ZSTD_FAST_LEVEL: Final = 1  # small blobs: level 3 saves < 2 % more and costs 25 % more time
_ZSTD_LEVEL: Final = 3
_FAST_LIMIT: Final = 16 << 10


@dataclass(frozen=True, slots=True)
class BlobLocation:
    pack: str
    offset: int  # offset of the record header
    codec: int
    raw_size: int
    stored_size: int


@dataclass(frozen=True, slots=True)
class PackRecord:
    digest: str
    location: BlobLocation


@dataclass(frozen=True, slots=True)
class PackDamage:
    """Bytes of a pack that hold no intact record."""

    offset: int
    end: int  # where the next intact record starts; the file's size for a tail
    detail: str
    digest: str | None = None  # the blob its record header names, when the header is readable
    torn: bool = False  # the start of a record cut short by the end of the file (a crash mid-write)


@dataclass(frozen=True, slots=True)
class PackScan:
    records: list[PackRecord]
    end: int  # offset after the last intact record (where an unparsable tail starts)
    size: int  # file size
    problem: str | None  # the first thing wrong (damage skipped, or the tail), if anything
    damage: tuple[PackDamage, ...] = ()  # every region without an intact record, in order

    @property
    def tail(self) -> PackDamage | None:
        """The unparsable end of the pack: no intact record follows it."""
        if self.damage and self.damage[-1].end == self.size:
            return self.damage[-1]
        return None


def digest_of(raw: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(raw).hexdigest()


class PackWriter:
    """Appends blobs to one pack file owned by one writer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.stem
        self._fast = zstandard.ZstdCompressor(level=_ZSTD_FAST_LEVEL)
        self._compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
        try:
            make_dirs(path.parent)
        except OSError as exc:
            raise AppendError(path, exc.strerror or str(exc), what="pack") from exc
        self._file = AppendOnlyFile(path, what="pack", new=True)
        try:
            self._file.write(PACK_MAGIC, sync=True)
            fsync_dir(path.parent)
        except (AppendError, OSError) as exc:
            # A pack that never got its header holds nothing: remove it rather than leave a
            # file that is not a pack.
            self._file.discard()
            if isinstance(exc, AppendError):
                raise
            raise AppendError(path, exc.strerror or str(exc), what="pack") from exc

    @property
    def size(self) -> int:
        return self._file.size

    def append(self, digest: str, raw: bytes) -> BlobLocation:
        return self.append_many([(digest, raw)])[0]

    def append_many(self, blobs: list[tuple[str, bytes]]) -> list[BlobLocation]:
        """Append several blobs with one write; all or none of them land in the pack."""
        chunks: list[bytes] = []
        locations: list[BlobLocation] = []
        offset = self._file.size
        for digest, raw in blobs:
            stored, codec = raw, CODEC_RAW
            if len(raw) >= COMPRESS_MIN:
                compressor = self._fast if len(raw) < _FAST_LIMIT else self._compressor
                packed = compressor.compress(raw)
                if len(packed) < len(raw):
                    stored, codec = packed, CODEC_ZSTD
            chunks.append(
                _HEADER.pack(b"B", bytes.fromhex(digest[7:]), codec, len(raw), len(stored))
            )
            chunks.append(stored)
            locations.append(BlobLocation(self.name, offset, codec, len(raw), len(stored)))
            offset += HEADER_SIZE + len(stored)
        self._write(b"".join(chunks))
        return locations

    def _write(self, data: bytes) -> None:
        self._file.write(data)

    def sync(self) -> None:
        """Make every appended blob durable."""
        self._file.sync()

    @property
    def dirty(self) -> bool:
        return self._file.unsynced

    def close(self) -> None:
        self._file.close()


class PackReader:
    """Random access to the records of pack files, with handle caching."""

    def __init__(self, packs_dir: Path, runs_root: Path | None = None) -> None:
        self.packs_dir = packs_dir
        # the store's root: blobs carried in a run's log are read from <root>/<run>/events.jsonl
        self.runs_root = runs_root if runs_root is not None else packs_dir.parent.parent
        self._files: dict[str, int] = {}
        self._decompressor = zstandard.ZstdDecompressor()

    def pack_path(self, name: str) -> Path:
        from rar.store import _carried

        if _carried.is_log_pack(name):
            return _carried.log_path(self.runs_root, name)
        return self.packs_dir / f"{name}.pack"

    def read(self, digest: str, location: BlobLocation, *, verify: bool = True) -> bytes:
        fd = self._fd(location.pack)
        if location.codec == CODEC_CARRIED:
            from rar.store import _carried

            return _carried.read(
                fd, digest, location, lambda: self.pack_path(location.pack), verify=verify
            )
        record = os.pread(fd, HEADER_SIZE + location.stored_size, location.offset)
        if len(record) != HEADER_SIZE + location.stored_size:
            raise CorruptionError(f"blob {digest} is cut short", path=self.pack_path(location.pack))
        marker, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(record)
        if marker != b"B" or raw_digest.hex() != digest[7:] or stored_size != location.stored_size:
            raise CorruptionError(
                f"blob {digest} record header is damaged", path=self.pack_path(location.pack)
            )
        stored = record[HEADER_SIZE:]
        raw = (
            stored
            if codec == CODEC_RAW
            else self._decode(codec, stored, raw_size, digest, self.pack_path(location.pack))
        )
        if verify and digest_of(raw) != digest:
            raise CorruptionError(
                f"blob {digest} does not match its digest", path=self.pack_path(location.pack)
            )
        return raw

    def _decode(self, codec: int, stored: bytes, raw_size: int, digest: str, path: Path) -> bytes:
        if codec == CODEC_RAW:
            return stored
        if codec == CODEC_ZSTD:
            # decompress() allocates whatever size the frame header claims (max_output_size only
            # bounds frames that claim none), so one damaged header byte could ask for exabytes
            try:
                claimed = zstandard.frame_content_size(stored)
                if claimed not in (-1, raw_size):
                    raise CorruptionError(
                        f"blob {digest}: its zstd frame claims {claimed} bytes, its record "
                        f"header {raw_size}",
                        path=path,
                    )
                raw = self._decompressor.decompress(stored, max_output_size=raw_size)
            except zstandard.ZstdError as exc:
                raise CorruptionError(
                    f"blob {digest} cannot be decompressed: {exc}", path=path
                ) from exc
            if len(raw) != raw_size:
                raise CorruptionError(
                    f"blob {digest} decompresses to {len(raw)} bytes, its record header "
                    f"says {raw_size}",
                    path=path,
                )
            return raw
        raise CorruptionError(f"blob {digest} has unknown codec {codec}", path=path)

    def _fd(self, name: str) -> int:
        fd = self._files.get(name)
        if fd is None:
            fd = os.open(self.pack_path(name), os.O_RDONLY | os.O_NOFOLLOW)
            self._files[name] = fd
        return fd

    def scan(self, name: str, start: int = 0) -> PackScan:
        """Parse the records of a pack from ``start`` (0 = from the magic), reading only headers.

        Stored bytes are skipped, not read, until something cannot be parsed; then the rest of
        the file is read to find the next intact record (see the module docstring).
        """
        from rar.store import _carried

        if _carried.is_log_pack(name):
            return _carried.scan_log(name, self.pack_path(name), start)[0]
        with open(self.pack_path(name), "rb") as handle:
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            records: list[PackRecord] = []
            if start == 0:
                if os.pread(fd, len(PACK_MAGIC), 0) != PACK_MAGIC:
                    return self._scan_bytes(name, os.pread(fd, size, 0), 0)
                start = len(PACK_MAGIC)
            pos = _walk_headers(name, fd, start, size, records)
            if pos == size:
                return PackScan(records, pos, size, None)
            rest = self._scan_bytes(name, os.pread(fd, size - pos, pos), pos, base=pos)
        return dataclasses.replace(rest, records=records + rest.records)

    def verify_pack(
        self, name: str, start: int = 0
    ) -> tuple[PackScan, list[tuple[PackRecord, str]]]:
        """Scan a pack from ``start`` and re-hash every record; return the scan and the failures."""
        from rar.store import _carried

        path = self.pack_path(name)
        if _carried.is_log_pack(name):
            return _carried.scan_log(name, path, start, rehash=True)
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
        scan = self._scan_bytes(name, data, start, base=start)
        failures: list[tuple[PackRecord, str]] = []
        for record in scan.records:
            location = record.location
            begin = location.offset - start + HEADER_SIZE
            stored = data[begin : begin + location.stored_size]
            if location.codec == CODEC_ZSTD and not _frame_fits(stored, location.raw_size):
                failures.append(
                    (
                        record,
                        f"record at offset {location.offset}: its zstd frame does not hold "
                        f"the {location.raw_size} bytes its header names",
                    )
                )
                continue
            try:
                raw = self._decode(location.codec, stored, location.raw_size, record.digest, path)
            except CorruptionError as exc:
                failures.append((record, f"record at offset {location.offset}: {exc}"))
                continue
            if len(raw) != location.raw_size or digest_of(raw) != record.digest:
                failures.append(
                    (
                        record,
                        f"record at offset {location.offset} does not match "
                        f"its digest {record.digest}",
                    )
                )
        return scan, failures

    def _scan_bytes(self, name: str, data: bytes, start: int, *, base: int = 0) -> PackScan:
        """Parse records in ``data`` (the file's bytes from offset ``base``) from ``start``."""
        size = base + len(data)
        records: list[PackRecord] = []
        damage: list[PackDamage] = []
        if start == 0:
            start = len(PACK_MAGIC)
            if data[: len(PACK_MAGIC)] != PACK_MAGIC:
                if PACK_MAGIC.startswith(data):  # created, its header never (fully) written
                    damage = [PackDamage(0, size, "torn pack header (bad magic)", torn=True)]
                    return PackScan(records, 0, size, damage[0].detail, tuple(damage))
                resume = self._next_intact(data, 0)
                detail = "not a pack file (bad magic)"
                if resume is None:
                    damage = [PackDamage(0, size, detail)]
                    return PackScan(records, 0, size, detail, tuple(damage))
                detail += f"; {resume} bytes skipped to the next intact record"
                damage.append(PackDamage(0, resume, detail))
                start = resume
        pos = start
        while pos < size:
            at = pos - base
            why = _unparsable(data, at)
            if why is None:
                _, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(data, at)
                location = BlobLocation(name, pos, codec, raw_size, stored_size)
                records.append(PackRecord(DIGEST_PREFIX + raw_digest.hex(), location))
                pos += HEADER_SIZE + stored_size
                continue
            named = None  # what the header names, if it is one (a guess when its marker is off)
            if len(data) - at >= HEADER_SIZE:
                named = DIGEST_PREFIX + data[at + 1 : at + 33].hex()
            resume = self._next_intact(data, at + 1)
            if resume is None:
                detail, torn = why
                damage.append(PackDamage(pos, size, f"{detail} at offset {pos}", named, torn))
                break
            what = (
                "damaged record header"
                if why[0].startswith("damaged")
                else "damaged record (its header claims more bytes than the pack holds)"
            )
            damage.append(
                PackDamage(
                    pos,
                    base + resume,
                    f"{what} at offset {pos}; {resume - at} bytes skipped to the next intact "
                    f"record at offset {base + resume}",
                    named,
                )
            )
            pos = base + resume
        end = damage[-1].offset if damage and damage[-1].end == size else pos
        return PackScan(records, end, size, damage[0].detail if damage else None, tuple(damage))

    def _next_intact(self, data: bytes, at: int) -> int | None:
        """The offset in ``data`` of the first record from ``at`` that re-hashes to its digest."""
        last = len(data) - HEADER_SIZE
        while True:
            at = data.find(b"B", at, last + 1)
            if at < 0:
                return None
            if _unparsable(data, at) is None and self._sound(data, at):
                return at
            at += 1

    def _sound(self, data: bytes, at: int) -> bool:
        _, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(data, at)
        stored = data[at + HEADER_SIZE : at + HEADER_SIZE + stored_size]
        # cheap tests first: a raw record's sizes agree, a zstd record starts with a zstd frame
        if codec == CODEC_RAW and raw_size != stored_size:
            return False
        if codec == CODEC_ZSTD and not (
            stored[:4] == _ZSTD_FRAME and _frame_fits(stored, raw_size)
        ):
            return False
        try:
            raw = self._decode(codec, stored, raw_size, "", self.packs_dir)
        except CorruptionError:
            return False
        return len(raw) == raw_size and bool(hashlib.sha256(raw).digest() == raw_digest)

    def iter_pack_names(self, *, logs: bool = True) -> Iterator[str]:
        """Every pack, then (with ``logs``) every run's log, whose lines may carry small blobs."""
        from rar.store import _carried

        if self.packs_dir.is_dir():
            for entry in sorted(os.scandir(self.packs_dir), key=lambda e: e.name):
                if entry.name.endswith(".pack") and entry.is_file(follow_symlinks=False):
                    yield entry.name[: -len(".pack")]
        if logs:
            yield from _carried.iter_log_packs(self.runs_root)

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


_ZSTD_FRAME: Final = b"\x28\xb5\x2f\xfd"
_WINDOW: Final = 1 << 16


def _frame_fits(stored: bytes, raw_size: int) -> bool:
    """Whether a zstd frame's declared content size (when it declares one) is ``raw_size``.

    Decompressing allocates what the frame header claims, so damaged bytes are checked first.
    """
    try:
        claimed = zstandard.frame_content_size(stored)
    except zstandard.ZstdError:
        return False
    return claimed in (-1, raw_size)


def _unparsable(data: bytes, at: int) -> tuple[str, bool] | None:
    """Why no record can start at ``at`` (and whether it looks like one cut short), or None."""
    left = len(data) - at
    if left < HEADER_SIZE:
        prefix = data[at:]
        torn = prefix[:1] == b"B" and (left <= 33 or prefix[33] in (CODEC_RAW, CODEC_ZSTD))
        return ("torn record header" if torn else "damaged record header"), torn
    marker, _, codec, _, stored_size = _HEADER.unpack_from(data, at)
    if marker != b"B" or codec not in (CODEC_RAW, CODEC_ZSTD):
        return "damaged record header", False
    if HEADER_SIZE + stored_size > left:
        return f"torn record ({left - HEADER_SIZE} of {stored_size} stored bytes)", True
    return None


def _walk_headers(name: str, fd: int, pos: int, size: int, records: list[PackRecord]) -> int:
    """Follow record headers from ``pos`` with small reads; return where parsing stopped."""
    window, window_at = b"", pos
    while pos < size:
        at = pos - window_at
        if pos + HEADER_SIZE > size:
            return pos
        if at + HEADER_SIZE > len(window):
            window, window_at, at = os.pread(fd, _WINDOW, pos), pos, 0
            if len(window) < HEADER_SIZE:
                return pos
        marker, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(window, at)
        if (
            marker != b"B"
            or codec not in (CODEC_RAW, CODEC_ZSTD)
            or pos + HEADER_SIZE + stored_size > size
        ):
            return pos
        location = BlobLocation(name, pos, codec, raw_size, stored_size)
        records.append(PackRecord(DIGEST_PREFIX + raw_digest.hex(), location))
        pos += HEADER_SIZE + stored_size
    return pos
