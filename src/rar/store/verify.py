"""``rar verify``: re-hash what the store holds and list everything that no longer matches.

Verify is read-only: it leaves every file of the store as it found it (logs, packs, manifests
and ``index.sqlite``, which it never opens: blobs are found by reading the packs, see
:mod:`rar.store.catalog`). It reports; only a writer reopening its own run repairs anything.

Checked per run: the manifest parses; every log line parses as an event of a known type; ``seq``
counts up from 1; every ``prev`` is the digest of the line before (the hash chain); the manifest's
immutable part equals the copy sealed in ``run.started``; a finished run's manifest names the
chain's head and event count, and its final ``status``, ``finished_at`` and ``stats`` equal those
sealed in its last ``run.finished`` (as far as that event carries them: older logs do not); every
blob an event refers to (payloads, message chains, snapshot trees and the files in them,
artifacts) exists and re-hashes to its digest; the state diff in each ``run.finished`` equals the
diff of the snapshots before it.

Checked for the whole store (``rar verify`` without run ids): every record of every pack re-hashes
to its digest, and every byte of a pack belongs to a record.

Damage in the middle of a log or pack is a problem, reported with where it is. The end a crashed
writer may leave is a *warning* when it is provably harmless: a log's torn last line in a run not
sealed as finished (never acknowledged), a complete last line that lacks only its newline, a
pack's torn last record no event refers to. Nothing is cut; reopening the run (``rar resume``)
repairs a log's end and moves what it cuts to ``lost+found``; packs are never reopened.

A run being written (its lock held by a live writer) is checked as a consistent view: its
manifest, then its log up to the last complete line, then the blobs that part refers to (written
before the events naming them, so they are found by re-reading the packs). A run without a
manifest yet, or with lines after a sealed head, is then *being written*, not broken.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import orjson

from rar.errors import ManifestMissingError
from rar.store._verify_blobs import BlobChecker, LogsOnly
from rar.store._verify_log import RunView, check_finished, check_log_end, walk_log
from rar.store._verify_remote import check_remote_copies
from rar.store._verify_report import Problem, VerifyReport
from rar.store.catalog import PackCatalog
from rar.store.layout import EVENTS_NAME, MANIFEST_NAME
from rar.store.lock import is_locked
from rar.store.manifest import immutable_part, read_manifest
from rar.store.remote import pack_where
from rar.store.store import Store

__all__ = ["Problem", "VerifyReport", "verify_run", "verify_store"]

_READ_ATTEMPTS: Final = 5


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
    each run. Nothing is written, whatever is found.
    """
    report = VerifyReport()
    if run_ids is not None and not blobs:
        for run_id in run_ids:
            _verify_run(store, run_id, report, LogsOnly(store, report, PackCatalog(store.reader)))
        return report
    whole = run_ids is None
    catalog = PackCatalog(store.reader, rehash=whole)
    checker = BlobChecker(store, report, catalog)
    if whole:
        # every pack re-hashed once; runs then look their blobs up in it (blobs carried in log
        # lines are checked by the walk of their run, which reads those lines anyway)
        catalog.refresh(logs=False)
        _report_findings(catalog, report)
    ids = sorted(_all_run_dirs(store)) if run_ids is None else list(run_ids)
    for done, run_id in enumerate(ids, start=1):
        _verify_run(store, run_id, report, checker)
        checker.close()  # one run's packs at a time in memory
        if progress is not None:
            progress(done, len(ids))
    if whole:
        catalog.refresh(logs=False)  # a record seen half written may be whole by now
        _report_findings(catalog, report)
        _report_tails(store, catalog, checker.seen, report)
        check_remote_copies(store, report)  # blobs at a URL: the objects too
        report.packs = catalog.packs
        report.blobs = catalog.records + checker.carried_count
    else:
        report.blobs = len(checker.seen)
    return report


def verify_run(store: Store, run_id: str) -> tuple[VerifyReport, list[dict[str, Any]]]:
    """``verify_store(store, [run_id])`` that also returns the run's events as it parsed them.

    The log is read once, and every line parsed and hashed once: the events returned are
    exactly the bytes that were verified (as :meth:`Store.events` reads them), so a replay that
    trusts them neither verifies nor reads the log a second time. Use them only when the
    report is ``ok``.
    """
    report = VerifyReport()
    checker = BlobChecker(store, report, PackCatalog(store.reader))
    events: list[dict[str, Any]] = []
    try:
        _verify_run(store, run_id, report, checker, events)
    finally:
        checker.close()
    report.blobs = len(checker.seen)
    return report, events


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


# --- packs -------------------------------------------------------------------------------------


def _report_findings(catalog: PackCatalog, report: VerifyReport) -> None:
    for finding in catalog.findings:
        report.problems.append(
            Problem(
                None, finding.what, finding.detail, path=str(finding.path), offset=finding.offset
            )
        )
    catalog.findings.clear()


def _report_tails(
    store: Store, catalog: PackCatalog, referenced: set[str], report: VerifyReport
) -> None:
    """A pack's unparsable end: a crashed writer's unfinished record, or damage."""
    for name, tail in sorted(catalog.tails.items()):
        path = pack_where(catalog.reader, name)
        size = tail.end - tail.offset
        owner = name.rsplit(".", 1)[0]
        if tail.torn and is_locked(store.run_dir(owner)):
            report.notes.append(f"pack {name}: being written; read up to its last complete record")
            continue
        needed = tail.digest is not None and tail.digest in referenced
        if tail.torn and not (needed and tail.digest not in catalog.locations):
            report.warnings.append(
                Problem(
                    None,
                    "torn-record",
                    f"pack {name}: {tail.detail} ({size} bytes): the unfinished write of a "
                    "writer that crashed; no event refers to it (a blob is written before the "
                    "event naming it), so nothing is lost. It is left in place.",
                    path=str(path),
                    offset=tail.offset,
                )
            )
            continue
        why = f"; it holds blob {tail.digest}, which the record refers to" if needed else ""
        report.problems.append(
            Problem(
                None,
                "pack",
                f"{tail.detail} ({size} bytes){why}",
                path=str(path),
                offset=tail.offset,
            )
        )


# --- runs --------------------------------------------------------------------------------------


def _read_run(run_dir: Path, run_id: str) -> RunView:
    """The manifest, then the log, read so that they belong together.

    A writer appends its last line before it rewrites the manifest, so a log read after its
    manifest holds at least what the manifest seals. If the manifest or the lock changed while
    they were read, they are read again.
    """
    manifest_path = run_dir / MANIFEST_NAME
    view = RunView(True, False, None, None, None)
    for _ in range(_READ_ATTEMPTS):
        locked, before = is_locked(run_dir), _stat(manifest_path)
        manifest, error = None, None
        try:
            manifest = read_manifest(run_dir, run_id)
        except ManifestMissingError as exc:
            error = exc.message
        try:
            log = (run_dir / EVENTS_NAME).read_bytes()
        except FileNotFoundError:
            log = None
        view = RunView(locked, before is not None, manifest, error, log)
        if is_locked(run_dir) == locked and _stat(manifest_path) == before:
            return view
    view.writing = True  # still changing: a writer is at work
    return view


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _verify_run(
    store: Store,
    run_id: str,
    report: VerifyReport,
    blobs: BlobChecker,
    events: list[dict[str, Any]] | None = None,
) -> None:
    report.runs += 1
    run_dir = store.run_dir(run_id)
    if not run_dir.is_dir():
        report.notes.append(f"{run_id}: the run directory is gone (removed while verifying)")
        return
    if _never_started(run_dir):
        report.notes.append(
            f"{run_id}: a run that failed to start left an empty directory; nothing was recorded"
        )
        return
    view = _read_run(run_dir, run_id)
    blobs.begin_run()
    problems = report.problems
    log_path = run_dir / EVENTS_NAME
    unborn = view.writing and not view.manifest_exists  # a writer creates it after the log
    if view.writing:
        state = "it has no manifest yet" if unborn else "checked up to its last complete line"
        report.notes.append(f"{run_id}: being written; {state}")
    if view.manifest_error is not None and not unborn:
        problems.append(
            Problem(run_id, "manifest", view.manifest_error, path=str(run_dir / MANIFEST_NAME))
        )
    if view.log is None:
        problems.append(
            Problem(run_id, "log-missing", "events.jsonl is missing", path=str(log_path))
        )
        return
    walk = walk_log(run_id, log_path, view.log, report, blobs, events)
    report.events += walk.count
    check_log_end(run_id, log_path, view, walk, report)
    manifest = view.manifest
    if manifest is None:
        return
    sealed = walk.started
    if sealed is not None and sealed != immutable_part(manifest):
        current = immutable_part(manifest)
        changed = sorted(k for k in set(sealed) | set(current) if sealed.get(k) != current.get(k))
        problems.append(
            Problem(
                run_id,
                "manifest-changed",
                f"manifest.json differs from the copy sealed in run.started: {', '.join(changed)}",
                seq=1,
            )
        )
    elif sealed is None and walk.count:
        problems.append(Problem(run_id, "manifest-unsealed", "the log has no run.started event"))
    if manifest.status.finished:
        check_finished(run_id, manifest, view.writing, walk, report)
    elif not view.writing and walk.last_type == "run.finished":
        report.notes.append(
            f"{run_id}: the log ends with run.finished but the manifest says "
            f"{manifest.status.value}: its writer stopped before sealing the manifest, or a "
            "resume stopped before recording anything"
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
