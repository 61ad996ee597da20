"""The blobs a run refers to, for ``rar verify``: found in the packs, re-hashed, each once."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import orjson
import zstandard

from rar.errors import CorruptionError
from rar.store._verify_report import Problem, VerifyReport
from rar.store.blobs import _HEADER, CODEC_RAW, CODEC_ZSTD, HEADER_SIZE, BlobLocation
from rar.store.catalog import PackCatalog
from rar.store.payloads import CHAIN_KEY
from rar.store.store import Store

CHAIN_BYTES = f'"{CHAIN_KEY}"'.encode()
_MAP_LIMIT = 64 << 20  # packs larger than this are read blob by blob
_MAP_BUDGET = 256 << 20  # at most this much of the packs is held in memory at once


class BlobChecker:
    """Checks referenced blobs once each, following message chains and snapshot trees."""

    def __init__(self, store: Store, report: VerifyReport, catalog: PackCatalog) -> None:
        self.store = store
        self.report = report
        self.catalog = catalog
        self.seen: set[str] = set()
        self._maps: dict[str, bytes] = {}
        self._unmapped: set[str] = set()
        self._mapped_bytes = 0
        self._decompress = zstandard.ZstdDecompressor().decompress
        self._carried: dict[str, str] = {}  # digest → text, carried by the lines walked
        self.carried_count = 0  # blobs carried by the lines walked (a record per line)

    def carried(self, blobs: dict[str, str]) -> None:
        """Blobs a line of the log being walked carries: checked from these bytes, not looked
        up (a later line can only name them after this one)."""
        self.carried_count += len(blobs)
        self._carried.update(blobs)

    def begin_run(self) -> None:
        """The run's log was just read: blobs it names that are not known yet are looked for."""
        self.catalog.stale = True

    def check(
        self,
        digest: str,
        run_id: str,
        seq: int | None,
        *,
        kind: str = "blob",
        content: bool = True,
    ) -> bytes | None:
        """Check one blob (once); return its bytes when ``content`` is wanted and it is sound."""
        if digest in self.seen:
            return None
        self.seen.add(digest)
        text = self._carried.pop(digest, None)
        if text is not None:
            carried = text.encode("utf-8")
            if hashlib.sha256(carried).hexdigest() == digest[7:]:
                return carried
            self.report.problems.append(
                Problem(run_id, "blob-corrupt", f"{kind} {digest} carried in the log does not "
                        "match its digest", seq=seq)
            )  # fmt: skip
            return None
        location = self.catalog.locations.get(digest) or self.catalog.locate(digest)
        if location is None:
            damaged = self.catalog.damaged.get(digest)
            if damaged is not None:
                what, detail = "blob-corrupt", f"is damaged ({damaged})"
            else:
                what, detail = "blob-missing", "is not in the store"
            self.report.problems.append(Problem(run_id, what, f"{kind} {digest} {detail}", seq=seq))
            return None
        if self.catalog.rehash and not content:
            return b""
        raw = self._mapped(digest, location)
        if raw is not None:
            return raw
        try:
            raw = self.store.reader.read(digest, location, verify=not self.catalog.rehash)
            if len(raw) != location.raw_size:
                raise CorruptionError(f"the record header of blob {digest} is damaged (raw size)")
            return raw
        except (CorruptionError, OSError) as exc:
            self.report.problems.append(
                Problem(run_id, "blob-corrupt", f"{kind} {digest}: {exc}", seq=seq)
            )
        except MemoryError:  # a damaged zstd frame header claiming an absurd size
            self.report.problems.append(
                Problem(
                    run_id,
                    "blob-corrupt",
                    f"{kind} {digest}: its zstd frame claims more bytes than can be decompressed",
                    seq=seq,
                )
            )
        return None

    def _mapped(self, digest: str, location: BlobLocation) -> bytes | None:
        """A sound record's raw bytes, from its pack read into memory (one read per pack, not
        one per blob); None for anything else, which the reader then reads from the file and
        reports in detail (so every problem is described exactly as before)."""
        data = self._maps.get(location.pack)
        if data is None:
            data = self._map(location.pack)
            if data is None:
                return None
        start = location.offset + HEADER_SIZE
        end = start + location.stored_size
        if end > len(data):
            return None  # appended after it was mapped, or cut short
        marker, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(
            data, location.offset
        )
        if marker != b"B" or stored_size != location.stored_size or raw_size != location.raw_size:
            return None
        if codec == CODEC_RAW:
            if raw_size != stored_size:
                return None
            raw = data[start:end]
        elif codec == CODEC_ZSTD:
            try:
                stored = data[start:end]
                if zstandard.frame_content_size(stored) not in (-1, raw_size):
                    return None
                raw = self._decompress(stored, max_output_size=raw_size)
            except (zstandard.ZstdError, MemoryError):
                return None
            if len(raw) != raw_size:
                return None
        else:
            return None
        if not self.catalog.rehash:  # (the whole-store check re-hashed every record already)
            if hashlib.sha256(raw).digest() != raw_digest or raw_digest.hex() != digest[7:]:
                return None
        elif raw_digest.hex() != digest[7:]:
            return None
        return raw

    def _map(self, pack: str) -> bytes | None:
        """The pack's bytes, read whole once (not memory-mapped: a writer rolling back a failed
        append truncates its pack, and a mapping would then fault); None past the budget."""
        if pack in self._unmapped or self._mapped_bytes >= _MAP_BUDGET:
            return None
        try:
            with open(self.store.reader.pack_path(pack), "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > _MAP_LIMIT or self._mapped_bytes + size > _MAP_BUDGET:
                    self._unmapped.add(pack)
                    return None
                data = handle.read()
        except OSError:
            self._unmapped.add(pack)
            return None
        self._mapped_bytes += len(data)
        self._maps[pack] = data
        return data

    def close(self) -> None:
        """Drop the packs read into memory (the checker can still be used)."""
        self._maps.clear()
        self._unmapped.clear()
        self._mapped_bytes = 0

    def check_json(self, digest: str, run_id: str, seq: int | None) -> None:
        raw = self.check(digest, run_id, seq, kind="payload")
        if raw is not None and CHAIN_BYTES in raw:  # only linked payloads refer onwards
            self.follow(orjson.loads(raw), run_id, seq)

    def follow(self, value: Any, run_id: str, seq: int | None) -> None:
        """Check every blob a linked payload refers to."""
        stack = [value]
        pop, extend = stack.pop, stack.extend
        while stack:
            current = pop()
            kind = type(current)
            if kind is dict:
                head = current.get(CHAIN_KEY)
                # a chain reference is exactly {"$chain": <head>, "length": n}
                if type(head) is str and len(current) == 2 and "length" in current:
                    self._chain(head, run_id, seq)
                else:
                    extend(current.values())
            elif kind is list:
                extend(current)

    def _chain(self, head: str, run_id: str, seq: int | None) -> None:
        node: str | None = head
        while node is not None and node not in self.seen:
            raw = self.check(node, run_id, seq, kind="chain node")
            if raw is None:
                return
            body = orjson.loads(raw)
            item = self.check(body["item"], run_id, seq, kind="message")
            if item is not None and CHAIN_BYTES in item:  # only linked values refer onwards
                self.follow(orjson.loads(item), run_id, seq)
            node = body.get("prev")

    def check_tree(self, digest: str, run_id: str, seq: int | None) -> dict[str, Any] | None:
        seen = digest in self.seen
        raw = self.check(digest, run_id, seq, kind="snapshot tree")
        if raw is None:
            location = self.catalog.locations.get(digest)
            if not seen or location is None:
                return None
            try:
                raw = self.store.reader.read(digest, location)
            except (CorruptionError, OSError):
                return None  # reported when it was first checked
        tree: dict[str, Any] = orjson.loads(raw)
        for path, entry in tree.get("entries", {}).items():
            if "digest" in entry:
                self.check(
                    entry["digest"], run_id, seq, kind=f"workspace file {path}", content=False
                )
        return tree


class LogsOnly(BlobChecker):
    """A blob checker that checks nothing: for verifying logs and manifests alone."""

    def check(
        self, digest: str, run_id: str, seq: int | None, *, kind: str = "blob", content: bool = True
    ) -> bytes | None:
        return None

    def check_json(self, digest: str, run_id: str, seq: int | None) -> None:
        return None

    def follow(self, value: Any, run_id: str, seq: int | None) -> None:
        return None

    def check_tree(self, digest: str, run_id: str, seq: int | None) -> dict[str, Any] | None:
        return None
