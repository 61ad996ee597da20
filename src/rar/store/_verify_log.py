"""One run's log and manifest, for ``rar verify``: every line, the end, the sealed final state."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import ValidationError

from rar.hashing import _AS_DIGIT_RUNS, _SIXTEEN_DIGITS, _restore_floats
from rar.store._verify_blobs import CHAIN_BYTES, BlobChecker
from rar.store._verify_report import Problem, VerifyReport
from rar.store._verify_shape import fast_checks
from rar.store.events import EVENT_ADAPTER, EVENT_TYPES, inline_payloads, payload_digests
from rar.store.log import CARRY_KEY, LOST_FOUND, continues_chain
from rar.store.manifest import Manifest
from rar.store.snapshot import diff_trees

_SEALED_FINAL: Final = ("status", "finished_at", "stats")


@dataclass(slots=True)
class RunView:
    """A run's manifest and log as read together (see ``rar.store.verify._read_run``)."""

    writing: bool  # a live writer held the run's lock
    manifest_exists: bool
    manifest: Manifest | None
    manifest_error: str | None
    log: bytes | None  # None: there is no log


@dataclass(slots=True)
class Walk:
    """What walking a log found, for the checks that need the whole log."""

    count: int = 0  # lines
    prev: str | None = None  # digest of the last line
    digests: list[str] = field(default_factory=list)  # of every line, in order
    started: dict[str, Any] | None = None
    finished: dict[int, dict[str, Any]] = field(default_factory=dict)  # seq → run.finished
    last_type: Any = None
    terminated: bool = True  # the last line has its newline
    torn: bytes = b""  # bytes after the last line: an unfinished write


def walk_log(
    run_id: str,
    log_path: Path,
    data: bytes,
    report: VerifyReport,
    blobs: BlobChecker,
    events: list[dict[str, Any]] | None = None,
) -> Walk:
    """Check every line: parse, seq, chain, type, the blobs it refers to, state diffs.

    One pass over the bytes: each line is parsed once and hashed once. With ``events`` given,
    every parsed event is appended to it as :func:`rar.store.log.read_events` would return it
    (a replay is then served from exactly the bytes that were verified, without reading the
    log again).
    """
    problems = report.problems
    walk = Walk()
    digests = walk.digests
    expected_seq = 1
    snapshots: dict[str, dict[str, Any] | None] = {}
    checks = fast_checks()
    sha256 = hashlib.sha256
    loads = orjson.loads
    check_json = blobs.check_json
    # integers beyond 2**53 (floats written with all their digits) need from_canonical's walk;
    # one translate of the whole log finds the lines that have a run of 16 digits
    wide = events is not None and _SIXTEEN_DIGITS in data.translate(_AS_DIGIT_RUNS)
    end = data.rfind(b"\n") + 1
    start = 0
    number = 0
    rest = data[end:]
    tail_line = rest if rest and continues_chain(rest, _last_line(data, end)) else None
    while True:
        if start < end:
            stop = data.index(b"\n", start)
            line = data[start:stop]
            line_at = start
            start = stop + 1
        elif tail_line is not None:
            line, line_at = tail_line, end
            tail_line = None
            walk.terminated = False
        else:
            break
        number += 1
        digest = "sha256:" + sha256(line).hexdigest()
        try:
            event = loads(line)
            if type(event) is not dict:
                raise ValueError("not a JSON object")
        except (orjson.JSONDecodeError, ValueError) as exc:
            problems.append(
                Problem(
                    run_id,
                    "malformed-line",
                    f"line {number} (offset {line_at}): {exc}",
                    seq=expected_seq,
                    path=str(log_path),
                    offset=line_at,
                )
            )
            walk.prev = digest
            digests.append(digest)
            walk.last_type = None
            expected_seq += 1
            continue
        carried = event.pop(CARRY_KEY, None)  # not part of the event a reader gets
        if carried is not None:
            if type(carried) is dict and all(type(t) is str for t in carried.values()):
                blobs.carried(carried)  # checked from memory when the line's refs are
                if events is not None:
                    blobs.store.remember_carried(carried)  # a replay reads them without look-up
            else:
                problems.append(
                    Problem(
                        run_id,
                        "event-shape",
                        f"line {number} (offset {line_at}): its carried blobs are not an object "
                        "of strings",
                        seq=expected_seq,
                        path=str(log_path),
                        offset=line_at,
                    )
                )
        if events is not None:
            if wide and _SIXTEEN_DIGITS in line.translate(_AS_DIGIT_RUNS):
                event = _restore_floats(event)
            events.append(event)
        seq = event.get("seq")
        if seq != expected_seq:
            problems.append(
                Problem(
                    run_id,
                    "seq",
                    f"line {number} has the wrong seq",
                    seq=expected_seq,
                    expected=str(expected_seq),
                    actual=str(seq),
                    path=str(log_path),
                    offset=line_at,
                )
            )
        if event.get("prev") != walk.prev:
            problems.append(
                Problem(
                    run_id,
                    "chain",
                    f"line {number} does not follow the line "
                    "before it (changed, removed or reordered lines)",
                    seq=expected_seq,
                    expected=walk.prev,
                    actual=event.get("prev"),
                    path=str(log_path),
                    offset=line_at,
                )
            )
        kind = event.get("type")
        fast = checks.get(kind) if type(kind) is str else None
        if fast is not None and fast(event):
            # the common case: a sound event of a known type (see rar.store._verify_shape)
            for key in _PAYLOAD_KEYS:
                ref = event.get(key)
                if ref is not None and "value" not in ref and kind not in _NOT_JSON:
                    check_json(ref["digest"], run_id, expected_seq)
            if kind == "artifact":
                blobs.check(event["digest"], run_id, expected_seq, kind="artifact", content=False)
            elif CHAIN_BYTES in line:
                for value in inline_payloads(event):
                    blobs.follow(value, run_id, expected_seq)
        elif type(kind) is not str or kind not in EVENT_TYPES:  # (a list is not hashable)
            problems.append(
                Problem(run_id, "event-type", f"unknown event type {kind!r}", seq=expected_seq)
            )
            _follow_payloads(event, kind, line, run_id, expected_seq, blobs)
        elif (shape := _shape_problem(event)) is not None:
            # a line that parses but is not an event of its type (a flipped key, a wrong type):
            # corruption, reported; nothing in it is followed
            problems.append(
                Problem(
                    run_id,
                    "event-shape",
                    f"line {number} (offset {line_at}) is not a valid {kind} event: {shape}",
                    seq=expected_seq,
                    path=str(log_path),
                    offset=line_at,
                )
            )
            walk.last_type = kind
            walk.prev = digest
            digests.append(digest)
            expected_seq += 1
            continue
        else:
            _follow_payloads(event, kind, line, run_id, expected_seq, blobs)
        if kind == "snapshot":
            snapshots[str(event.get("phase"))] = blobs.check_tree(
                event["tree"], run_id, expected_seq
            )
        elif kind == "run.started":
            walk.started = event.get("manifest")
        elif kind == "run.finished":
            walk.finished[expected_seq] = event
            _check_state_diff(run_id, expected_seq, event, snapshots, problems)
        walk.last_type = kind
        walk.prev = digest
        digests.append(digest)
        expected_seq += 1
    walk.count = expected_seq - 1
    if walk.terminated:
        walk.torn = rest
    return walk


_NOT_JSON: Final = frozenset({"snapshot", "artifact"})
_PAYLOAD_KEYS: Final = ("request", "result", "content", "value", "anchors", "report", "state")


def _last_line(data: bytes, end: int) -> bytes | None:
    """The last newline-terminated line of ``data`` (``end``: just after its newline)."""
    if end == 0:
        return None
    return data[data.rfind(b"\n", 0, end - 1) + 1 : end - 1]


def _follow_payloads(
    event: dict[str, Any], kind: Any, line: bytes, run_id: str, seq: int, blobs: BlobChecker
) -> None:
    """The blobs an event refers to, for events the fast shape check did not vouch for."""
    for digest in payload_digests(event):
        if kind == "snapshot":
            continue
        if kind == "artifact":
            blobs.check(digest, run_id, seq, kind="artifact", content=False)
        else:
            blobs.check_json(digest, run_id, seq)
    if CHAIN_BYTES in line:
        for value in inline_payloads(event):
            blobs.follow(value, run_id, seq)


def _shape_problem(event: dict[str, Any]) -> str | None:
    """Why ``event`` does not match its type's schema, or None (rar.store.events)."""
    try:
        EVENT_ADAPTER.validate_python(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "(event)"
        return f"{where}: {first['msg']}"
    return None


def _check_state_diff(
    run_id: str,
    seq: int,
    event: dict[str, Any],
    snapshots: dict[str, dict[str, Any] | None],
    problems: list[Problem],
) -> None:
    """A run.finished's state diff against the snapshots before it (a resumed run has two)."""
    before, after = snapshots.get("before"), snapshots.get("after")
    state_diff = event.get("state_diff")
    if (
        state_diff is not None
        and before is not None
        and after is not None
        and diff_trees(before, after) != state_diff
    ):
        problems.append(
            Problem(
                run_id,
                "state-diff",
                "the recorded state diff does not match the snapshots",
                seq=seq,
            )
        )


def check_log_end(
    run_id: str, log_path: Path, view: RunView, walk: Walk, report: VerifyReport
) -> None:
    """What follows the last complete line: nothing, a missing newline, or a torn write.

    Harmless (a warning) unless the manifest sealed the run as finished after that line: then
    no crash can have left it, and it is damage.
    """
    if view.writing or view.log is None:
        return  # a writer is appending: its unfinished line is read next time
    sealed = view.manifest is not None and view.manifest.status.finished
    size = len(view.log)
    if not walk.terminated:
        if sealed:
            report.problems.append(
                Problem(
                    run_id,
                    "unterminated-line",
                    f"the last line (seq {walk.count}) has lost its newline; the run was sealed "
                    "as finished after it was written whole, so no crash left it so",
                    seq=walk.count,
                    path=str(log_path),
                    offset=size,
                )
            )
        else:
            report.warnings.append(
                Problem(
                    run_id,
                    "unterminated-line",
                    f"the last line (seq {walk.count}) is a complete event without its newline "
                    "(a write cut just before it); it is checked as a line, and the next writer "
                    "to reopen the run (rar resume) completes it",
                    seq=walk.count,
                    path=str(log_path),
                    offset=size,
                )
            )
    if walk.torn:
        at = size - len(walk.torn)
        if sealed:
            report.problems.append(
                Problem(
                    run_id,
                    "torn-line",
                    f"{len(walk.torn)} bytes at offset {at} follow the last complete line of a "
                    "run sealed as finished: not an unfinished write, since the run was sealed "
                    "after its last line",
                    seq=walk.count + 1,
                    path=str(log_path),
                    offset=at,
                )
            )
        else:
            report.warnings.append(
                Problem(
                    run_id,
                    "torn-line",
                    f"the log ends with a torn line ({len(walk.torn)} bytes at offset {at}): a "
                    "crashed writer's unfinished write, never acknowledged. It is left in place; "
                    f"reopening the run (rar resume) moves it to {run_id}/{LOST_FOUND}/.",
                    seq=walk.count + 1,
                    path=str(log_path),
                    offset=at,
                )
            )


def check_finished(
    run_id: str, manifest: Manifest, writing: bool, walk: Walk, report: VerifyReport
) -> None:
    """The manifest of a finished run against the log: head, event count, sealed final state."""
    sealed_at = manifest.events
    head_ok = manifest.head == walk.prev and sealed_at == walk.count
    if (
        not head_ok
        and writing
        and 0 < sealed_at < walk.count
        and walk.digests[sealed_at - 1] == manifest.head
    ):
        head_ok = True  # resumed: the writer appends after the head the manifest still names
    if not head_ok:
        report.problems.append(
            Problem(
                run_id,
                "head",
                "the manifest's head does not match the log "
                "(lines added or removed after the run finished)",
                expected=f"{manifest.head} ({manifest.events} events)",
                actual=f"{walk.prev} ({walk.count} events)",
            )
        )
    if head_ok:
        final = walk.finished.get(sealed_at)
    else:
        final = walk.finished[max(walk.finished)] if walk.finished else None
    ends_unfinished = final is None if head_ok else walk.last_type != "run.finished"
    if ends_unfinished and manifest.status.value != "waiting":
        report.problems.append(
            Problem(
                run_id,
                "unfinished-log",
                "the manifest says finished but the log has no run.finished",
            )
        )
    if final is None:
        return
    current = {
        "status": manifest.status.value,
        "finished_at": manifest.finished_at,
        "stats": manifest.stats,
    }
    changed = [k for k in _SEALED_FINAL if k in final and final[k] != current[k]]
    if changed:
        report.problems.append(
            Problem(
                run_id,
                "manifest-changed",
                f"manifest.json differs from the final state sealed in run.finished "
                f"(seq {final.get('seq')}): {', '.join(changed)}",
                seq=final.get("seq"),
                expected=_json({k: final[k] for k in changed}),
                actual=_json({k: current[k] for k in changed}),
            )
        )


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
