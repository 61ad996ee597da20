"""``rar verify``: re-hash what the store holds and list everything that no longer matches.

Checked per run: the manifest parses; every log line parses as an event of a known type; ``seq``
counts up from 1; every ``prev`` is the digest of the line before (the hash chain); the manifest's
immutable part equals the copy sealed in ``run.started``; a finished run's manifest names the
chain's head and event count; every blob an event refers to (payloads, message chains, snapshot
trees and the files in them, artifacts) exists and re-hashes to its digest; the state diff in
``run.finished`` equals the diff of the two snapshots.

Checked for the whole store (``rar verify`` without run ids): every record of every pack re-hashes
to its digest and packs parse to their end.

A torn last line (or pack record) left by a crashed writer is repaired, since it was never
acknowledged; it is listed under ``repaired``, not as a problem. A run whose writer is still alive
is checked up to its last complete line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from rar.errors import CorruptionError, ManifestMissingError, RunLockedError
from rar.hashing import digest_bytes
from rar.store.blobs import BlobLocation
from rar.store.events import EVENT_TYPES, inline_payloads, payload_digests
from rar.store.layout import EVENTS_NAME, MANIFEST_NAME
from rar.store.lock import RunLock, is_locked
from rar.store.log import iter_lines, read_tail
from rar.store.manifest import Manifest, immutable_part, read_manifest
from rar.store.payloads import CHAIN_KEY
from rar.store.snapshot import diff_trees
from rar.store.store import Store

_CHAIN_BYTES = f'"{CHAIN_KEY}"'.encode()


@dataclass(frozen=True, slots=True)
class Problem:
    run_id: str | None
    what: str
    detail: str
    seq: int | None = None
    expected: str | None = None
    actual: str | None = None
    path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class VerifyReport:
    runs: int = 0
    events: int = 0
    blobs: int = 0
    packs: int = 0
    problems: list[Problem] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runs": self.runs,
            "events": self.events,
            "blobs": self.blobs,
            "packs": self.packs,
            "problems": [p.as_dict() for p in self.problems],
            "repaired": self.repaired,
            "notes": self.notes,
        }


def verify_store(
    store: Store,
    run_ids: Iterable[str] | None = None,
    *,
    blobs: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """Verify the given runs (ids already resolved), or the whole store when ``None``.

    ``blobs=False`` checks logs and manifests only (blobs are verified anyway whenever they are
    read); replay uses it before trusting a record. ``progress(done, total)`` is called after
    each run.
    """
    report = VerifyReport()
    if run_ids is not None and not blobs:
        checker: _BlobChecker = _LogsOnly(store, report, {}, verified=True, bad=set())
        for run_id in run_ids:
            _verify_run(store, run_id, report, checker)
        return report
    if run_ids is None:
        # every pack re-hashed once; runs then only need to find their blobs among the good ones
        good, bad = _verify_packs(store, report)
        checker = _BlobChecker(store, report, good, verified=True, bad=bad)
        ids = sorted(_all_run_dirs(store))
    else:
        if store.packs_dir.is_dir():
            store.index.catch_up(store.reader)
        locations = store.index.all_blob_locations() if store.exists else {}
        checker = _BlobChecker(store, report, locations, verified=False, bad=set())
        ids = list(run_ids)
    for done, run_id in enumerate(ids, start=1):
        _verify_run(store, run_id, report, checker)
        if progress is not None:
            progress(done, len(ids))
    if run_ids is not None:
        report.blobs = len(checker.seen)
    return report


def _all_run_dirs(store: Store) -> list[str]:
    if not store.root.is_dir():
        return []
    found = []
    for entry in os.scandir(store.root):
        if entry.is_dir(follow_symlinks=False) and (
            os.path.exists(os.path.join(entry.path, MANIFEST_NAME))
            or os.path.exists(os.path.join(entry.path, EVENTS_NAME))
        ):
            found.append(entry.name)
    return found


class _BlobChecker:
    """Checks referenced blobs once each, following message chains and snapshot trees."""

    def __init__(
        self,
        store: Store,
        report: VerifyReport,
        locations: dict[str, BlobLocation],
        *,
        verified: bool,
        bad: set[str],
    ) -> None:
        self.store = store
        self.report = report
        self.seen: set[str] = set()
        self._locations = locations
        self._verified = verified  # locations hold only blobs already re-hashed
        self._bad = bad

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
        location = self._locations.get(digest)
        if location is None:
            what = "blob-corrupt" if digest in self._bad else "blob-missing"
            detail = "is damaged in its pack" if digest in self._bad else "is not in the store"
            self.report.problems.append(Problem(run_id, what, f"{kind} {digest} {detail}", seq=seq))
            return None
        if self._verified and not content:
            return b""
        try:
            return self.store.reader.read(digest, location, verify=not self._verified)
        except (CorruptionError, OSError) as exc:
            self.report.problems.append(
                Problem(run_id, "blob-corrupt", f"{kind} {digest}: {exc}", seq=seq)
            )
        return None

    def check_json(self, digest: str, run_id: str, seq: int | None) -> None:
        raw = self.check(digest, run_id, seq, kind="payload")
        if raw is not None and _CHAIN_BYTES in raw:  # only linked payloads refer onwards
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
            if not seen or digest not in self._locations:
                return None
            raw = self.store.reader.read(digest, self._locations[digest])
        tree: dict[str, Any] = orjson.loads(raw)
        for path, entry in tree.get("entries", {}).items():
            if "digest" in entry:
                self.check(
                    entry["digest"], run_id, seq, kind=f"workspace file {path}", content=False
                )
        return tree


class _LogsOnly(_BlobChecker):
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


def _verify_run(store: Store, run_id: str, report: VerifyReport, blobs: _BlobChecker) -> None:
    report.runs += 1
    run_dir = store.run_dir(run_id)
    problems = report.problems
    if _never_started(run_dir):
        report.notes.append(
            f"{run_id}: a run that failed to start left an empty directory; nothing was recorded"
        )
        return
    manifest: Manifest | None = None
    try:
        manifest = read_manifest(run_dir, run_id)
    except ManifestMissingError as exc:
        problems.append(Problem(run_id, "manifest", exc.message, path=str(run_dir / MANIFEST_NAME)))
    log_path = run_dir / EVENTS_NAME
    if not log_path.exists():
        problems.append(
            Problem(run_id, "log-missing", "events.jsonl is missing", path=str(log_path))
        )
        return
    _repair_log_tail(run_id, run_dir, log_path, report)
    prev: str | None = None
    expected_seq = 1
    snapshots: dict[str, dict[str, Any] | None] = {}
    state_diff: Any = None
    started: dict[str, Any] | None = None
    last_type = None
    for raw in iter_lines(log_path):
        try:
            event = orjson.loads(raw.data)
            if not isinstance(event, dict):
                raise ValueError("not a JSON object")
        except (orjson.JSONDecodeError, ValueError) as exc:
            problems.append(
                Problem(
                    run_id,
                    "malformed-line",
                    f"line {raw.number}: {exc}",
                    seq=expected_seq,
                    path=str(log_path),
                )
            )
            prev = digest_bytes(raw.data)
            expected_seq += 1
            continue
        seq = event.get("seq")
        if seq != expected_seq:
            problems.append(
                Problem(
                    run_id,
                    "seq",
                    f"line {raw.number} has the wrong seq",
                    seq=expected_seq,
                    expected=str(expected_seq),
                    actual=str(seq),
                )
            )
        if event.get("prev") != prev:
            problems.append(
                Problem(
                    run_id,
                    "chain",
                    f"line {raw.number} does not follow the line "
                    "before it (changed, removed or reordered lines)",
                    seq=expected_seq,
                    expected=prev,
                    actual=event.get("prev"),
                )
            )
        kind = event.get("type")
        if kind not in EVENT_TYPES:
            problems.append(
                Problem(run_id, "event-type", f"unknown event type {kind!r}", seq=expected_seq)
            )
        for digest in payload_digests(event):
            if kind == "snapshot":
                continue
            if kind == "artifact":
                blobs.check(digest, run_id, expected_seq, kind="artifact", content=False)
            else:
                blobs.check_json(digest, run_id, expected_seq)
        if _CHAIN_BYTES in raw.data:
            for value in inline_payloads(event):
                blobs.follow(value, run_id, expected_seq)
        if kind == "snapshot":
            snapshots[str(event.get("phase"))] = blobs.check_tree(
                event["tree"], run_id, expected_seq
            )
        elif kind == "run.started":
            started = event.get("manifest")
        elif kind == "run.finished":
            state_diff = event.get("state_diff")
        last_type = kind
        prev = digest_bytes(raw.data)
        expected_seq += 1
    count = expected_seq - 1
    report.events += count
    if manifest is None:
        return
    if started is not None and started != immutable_part(manifest):
        changed = sorted(
            k
            for k in set(started) | set(immutable_part(manifest))
            if started.get(k) != immutable_part(manifest).get(k)
        )
        problems.append(
            Problem(
                run_id,
                "manifest-changed",
                f"manifest.json differs from the copy sealed in run.started: {', '.join(changed)}",
                seq=1,
            )
        )
    elif started is None and count:
        problems.append(Problem(run_id, "manifest-unsealed", "the log has no run.started event"))
    if manifest.status.finished:
        if manifest.head != prev or manifest.events != count:
            problems.append(
                Problem(
                    run_id,
                    "head",
                    "the manifest's head does not match the log "
                    "(lines added or removed after the run finished)",
                    expected=f"{manifest.head} ({manifest.events} events)",
                    actual=f"{prev} ({count} events)",
                )
            )
        if last_type != "run.finished" and manifest.status.value != "waiting":
            problems.append(
                Problem(
                    run_id,
                    "unfinished-log",
                    "the manifest says finished but the log has no run.finished",
                )
            )
    before, after = snapshots.get("before"), snapshots.get("after")
    if (
        state_diff is not None
        and before is not None
        and after is not None
        and diff_trees(before, after) != state_diff
    ):
        problems.append(
            Problem(run_id, "state-diff", "the recorded state diff does not match the snapshots")
        )


def _never_started(run_dir: Path) -> bool:
    """A run directory whose start failed before its first event: nothing to verify.

    ``record()`` removes such a directory itself; a crash at that moment can leave one behind.
    """
    log = run_dir / EVENTS_NAME
    try:
        empty_log = log.stat().st_size == 0
    except FileNotFoundError:
        empty_log = True
    if not empty_log or is_locked(run_dir):
        return False
    manifest = run_dir / MANIFEST_NAME
    if not manifest.exists():
        return True
    try:
        return bool(orjson.loads(manifest.read_bytes()).get("status") in ("pending", "running"))
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return False


def _repair_log_tail(run_id: str, run_dir: Any, log_path: Any, report: VerifyReport) -> None:
    try:
        tail = read_tail(log_path)
    except CorruptionError:
        return  # reported line by line
    if not tail.torn_bytes:
        return
    if is_locked(run_dir):
        report.notes.append(f"{run_id}: being written; checked up to its last complete line")
        return
    lock = RunLock(run_dir, run_id)
    try:
        lock.acquire()
    except RunLockedError:
        report.notes.append(f"{run_id}: being written; checked up to its last complete line")
        return
    try:
        with open(log_path, "r+b") as handle:
            handle.truncate(tail.size)
            os.fsync(handle.fileno())
        report.repaired.append(
            f"{run_id}: dropped a torn last line ({tail.torn_bytes} bytes never acknowledged)"
        )
    finally:
        lock.release()


def _pack_owner(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _verify_packs(store: Store, report: VerifyReport) -> tuple[dict[str, BlobLocation], set[str]]:
    """Re-hash every record of every pack; return the sound blobs and the damaged digests."""
    reader = store.reader
    good: dict[str, BlobLocation] = {}
    bad: set[str] = set()
    for name in reader.iter_pack_names():
        report.packs += 1
        path = reader.pack_path(name)
        scan, failures = reader.verify_pack(name)
        torn = bool(scan.problem and scan.problem.startswith("torn"))
        if torn and not is_locked(store.run_dir(_pack_owner(name))):
            # a crashed writer's last record: never referenced (blobs precede their events)
            with open(path, "r+b") as handle:
                handle.truncate(scan.end)
                os.fsync(handle.fileno())
            report.repaired.append(
                f"pack {name}: dropped a torn last record "
                f"({scan.size - scan.end} bytes never referenced)"
            )
        elif scan.problem and not torn:
            report.problems.append(Problem(None, "pack", scan.problem, path=str(path)))
        report.blobs += len(scan.records)
        failed = {id(record) for record, _ in failures}
        for record, why in failures:
            bad.add(record.digest)
            report.problems.append(Problem(None, "blob-corrupt", why, path=str(path)))
        for record in scan.records:
            if id(record) not in failed:
                good.setdefault(record.digest, record.location)
    for digest in good:
        bad.discard(digest)  # a sound copy elsewhere serves it
    return good, bad
