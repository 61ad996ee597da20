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
event names it; scans stop there and ``rar verify`` reports it as a harmless torn tail.
"""

from __future__ import annotations

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
from rar.store._fs import AppendOnlyFile, fsync_dir

PACK_MAGIC: Final = b"RARPACK1"
_HEADER = struct.Struct(">c32sBII")
HEADER_SIZE: Final = _HEADER.size  # 42
CODEC_RAW: Final = 0
CODEC_ZSTD: Final = 1
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
class PackScan:
    records: list[PackRecord]
    end: int  # offset after the last complete record
    size: int  # file size
    problem: str | None  # why the scan stopped early, if it did


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
            path.parent.mkdir(parents=True, exist_ok=True)
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

    def __init__(self, packs_dir: Path) -> None:
        self.packs_dir = packs_dir
        self._files: dict[str, int] = {}
        self._decompressor = zstandard.ZstdDecompressor()

    def pack_path(self, name: str) -> Path:
        return self.packs_dir / f"{name}.pack"

    def read(self, digest: str, location: BlobLocation, *, verify: bool = True) -> bytes:
        fd = self._fd(location.pack)
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
            try:
                return self._decompressor.decompress(stored, max_output_size=raw_size)
            except zstandard.ZstdError as exc:
                raise CorruptionError(
                    f"blob {digest} cannot be decompressed: {exc}", path=path
                ) from exc
        raise CorruptionError(f"blob {digest} has unknown codec {codec}", path=path)

    def _fd(self, name: str) -> int:
        fd = self._files.get(name)
        if fd is None:
            fd = os.open(self.pack_path(name), os.O_RDONLY)
            self._files[name] = fd
        return fd

    def scan(self, name: str, start: int = 0) -> PackScan:
        """Parse the records of a pack from ``start`` (0 = from the magic)."""
        with open(self.pack_path(name), "rb") as handle:
            return self._scan_bytes(name, handle.read(), start)

    def verify_pack(self, name: str) -> tuple[PackScan, list[tuple[PackRecord, str]]]:
        """Scan a pack and re-hash every record; return the scan and the failures (why)."""
        path = self.pack_path(name)
        with open(path, "rb") as handle:
            data = handle.read()
        scan = self._scan_bytes(name, data, 0)
        failures: list[tuple[PackRecord, str]] = []
        for record in scan.records:
            location = record.location
            start = location.offset + HEADER_SIZE
            stored = data[start : start + location.stored_size]
            try:
                raw = self._decode(location.codec, stored, location.raw_size, record.digest, path)
            except CorruptionError as exc:
                failures.append((record, str(exc)))
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

    def _scan_bytes(self, name: str, data: bytes, start: int) -> PackScan:
        size = len(data)
        records: list[PackRecord] = []
        if start == 0:
            if data[: len(PACK_MAGIC)] != PACK_MAGIC:
                return PackScan(records, 0, size, "not a pack file (bad magic)")
            start = len(PACK_MAGIC)
        pos = start
        while pos < size:
            if size - pos < HEADER_SIZE:
                return PackScan(records, pos, size, f"torn record header at offset {pos}")
            marker, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(data, pos)
            if marker != b"B" or codec not in (CODEC_RAW, CODEC_ZSTD):
                return PackScan(records, pos, size, f"damaged record header at offset {pos}")
            if pos + HEADER_SIZE + stored_size > size:
                return PackScan(records, pos, size, f"torn record at offset {pos}")
            location = BlobLocation(name, pos, codec, raw_size, stored_size)
            records.append(PackRecord(DIGEST_PREFIX + raw_digest.hex(), location))
            pos += HEADER_SIZE + stored_size
        return PackScan(records, pos, size, None)

    def iter_pack_names(self) -> Iterator[str]:
        if not self.packs_dir.is_dir():
            return
        for entry in sorted(os.scandir(self.packs_dir), key=lambda e: e.name):
            if entry.name.endswith(".pack") and entry.is_file(follow_symlinks=False):
                yield entry.name[: -len(".pack")]

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
