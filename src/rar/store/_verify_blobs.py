"""The blobs a run refers to, for ``rar verify``: found in the packs, re-hashed, each once."""

from __future__ import annotations

from typing import Any

import orjson

from rar.errors import CorruptionError
from rar.store._verify_report import Problem, VerifyReport
from rar.store.catalog import PackCatalog
from rar.store.payloads import CHAIN_KEY
from rar.store.store import Store

CHAIN_BYTES = f'"{CHAIN_KEY}"'.encode()


class BlobChecker:
    """Checks referenced blobs once each, following message chains and snapshot trees."""

    def __init__(self, store: Store, report: VerifyReport, catalog: PackCatalog) -> None:
        self.store = store
        self.report = report
        self.catalog = catalog
        self.seen: set[str] = set()

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
        location = self.catalog.locate(digest)
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

    def check_json(self, digest: str, run_id: str, seq: int | None) -> None:
        raw = self.check(digest, run_id, seq, kind="payload")
        if raw is not None and CHAIN_BYTES in raw:  # only linked payloads refer onwards
            self.follow(orjson.loads(raw), run_id, seq)

    def follow(self, value: Any, run_id: str, seq: int | None) -> None:
        """Check every blob a linked payload refers to."""
        stack = [value]
        while stack:
            current = stack.pop()
            if isinstance(current, dict):
                head = current.get(CHAIN_KEY)
                if isinstance(head, str) and set(current) == {CHAIN_KEY, "length"}:
                    self._chain(head, run_id, seq)
                else:
                    stack.extend(current.values())
            elif isinstance(current, list):
                stack.extend(current)

    def _chain(self, head: str, run_id: str, seq: int | None) -> None:
        node: str | None = head
        while node is not None and node not in self.seen:
            raw = self.check(node, run_id, seq, kind="chain node")
            if raw is None:
                return
            body = orjson.loads(raw)
            item = self.check(body["item"], run_id, seq, kind="message")
            if item is not None:
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
