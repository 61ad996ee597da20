"""Reading a run store for the viewer without ever writing a run: logs read up to their first
damaged line, manifests, verification, and what a run's page shows (:func:`build_run_detail`).
Parsed logs, manifests and verifications are cached until their files change."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from rar.errors import CorruptionError, RarError
from rar.hashing import from_canonical
from rar.store._fs import not_regular, read_regular
from rar.store.layout import EVENTS_NAME, MANIFEST_NAME
from rar.store.log import CARRY_KEY, iter_lines, read_tail
from rar.store.store import Store

T = TypeVar("T")


@dataclass(slots=True)
class LogRead:
    """A run's events up to the first damaged line."""

    events: list[dict[str, Any]]
    problems: list[dict[str, Any]] = field(default_factory=list)
    torn_bytes: int = 0

    @property
    def complete(self) -> bool:
        return not self.problems


def read_log(path: Path) -> LogRead:
    """Every event of a log that parses; reading stops at the first malformed line. A log that
    is a symbolic link is not read (it could name a file outside the store)."""
    problem = not_regular(path)
    if problem is not None:
        return LogRead([], [{"what": "log", "detail": f"{EVENTS_NAME} {problem}"}])
    if not path.is_file():
        return LogRead([])
    events: list[dict[str, Any]] = []
    for raw in iter_lines(path):
        try:
            event = from_canonical(raw.data)  # as rar.store.log.read_events reads it
        except orjson.JSONDecodeError as exc:
            return LogRead(events, [_line_problem(raw.number, f"not valid JSON ({exc})")])
        if not isinstance(event, dict) or "type" not in event or "seq" not in event:
            return LogRead(events, [_line_problem(raw.number, "not an event")])
        event.pop(CARRY_KEY, None)  # carried blobs are read through the store
        events.append(event)
    try:
        torn = read_tail(path).torn_bytes
    except CorruptionError:
        torn = 0
    return LogRead(events, torn_bytes=torn)


def _line_problem(line: int, detail: str) -> dict[str, Any]:
    return {"what": "malformed-line", "detail": f"line {line} of the log is {detail}", "line": line}


LOG_CACHE_SIZE = 4
"""Parsed logs kept by the viewer (the most recently read ones), so paging through a big run
reads its log once, not once per page."""


_Table = dict[str, tuple[tuple[int, ...], Any]]


@dataclass(slots=True)
class _Caches:
    lock: threading.Lock = field(default_factory=threading.Lock)
    logs: _Table = field(default_factory=dict)
    verify: _Table = field(default_factory=dict)
    manifests: _Table = field(default_factory=dict)

    def get(
        self,
        table: _Table,
        run_id: str,
        key: tuple[int, ...],
        compute: Callable[[], T],
        *,
        keep: int | None = None,
    ) -> T:
        """``table[run_id]`` while its files' ``key`` is unchanged, else ``compute()``, stored;
        ``keep``: at most that many entries, the least recently stored dropped first."""
        with self.lock:
            cached = table.get(run_id)
        if cached is not None and cached[0] == key:
            value: T = cached[1]
            return value
        value = compute()
        with self.lock:
            table.pop(run_id, None)
            table[run_id] = (key, value)
            while keep is not None and len(table) > keep:
                table.pop(next(iter(table)))
        return value


def _verify(store: Store, run_id: str) -> tuple[dict[str, Any], LogRead | None]:
    """The run's verification, and its log as :func:`read_log` would read it when the same
    pass can tell (one read, parse and hash of the log instead of two); None otherwise."""
    run_dir = store.run_dir(run_id)
    log = run_dir / EVENTS_NAME
    linked = [
        {"what": "not-a-file", "detail": f"{path.name} {problem}", "path": str(path)}
        for path in (log, run_dir / MANIFEST_NAME)
        if (problem := not_regular(path)) is not None
    ]
    if linked:  # not verified: that would read through the link
        return {"ok": False, "checked": False, "problems": linked, "notes": []}, None
    from rar.store.verify import verify_run

    checked, events = verify_run(store, run_id)
    report = checked.as_dict()
    result = {
        "ok": report["ok"],
        "checked": True,
        "problems": report["problems"],
        "notes": report["notes"] + [w["detail"] for w in report.get("warnings", [])],
        "blobs": report["blobs"],
        "events": report["events"],
    }
    parsed: LogRead | None = None
    # read_log stops at the first line that is not a JSON event with a type and a seq; when
    # there is none, what verify parsed is what read_log returns
    if (
        checked.events == len(events)
        and not any(p.what in ("malformed-line", "log-missing") for p in checked.problems)
        and all("type" in e and "seq" in e for e in events)
    ):
        try:
            torn = read_tail(log).torn_bytes
        except CorruptionError:
            torn = 0
        parsed = LogRead(events, torn_bytes=torn)
    return result, parsed


def _stat_key(*paths: Path) -> tuple[int, ...]:
    key: list[int] = []
    for path in paths:
        try:
            st = path.stat()
            key += [st.st_size, st.st_mtime_ns, st.st_ino]
        except OSError:
            key += [-1, -1, -1]
    return tuple(key)


class StoreReader:
    """A store's path and the caches over it. A :class:`Store` is opened per use (its index
    connection belongs to one thread)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.caches = _Caches()

    def open(self) -> Store:
        return Store(self.root)

    def log(self, store: Store, run_id: str) -> LogRead:
        """The run's events (:func:`read_log`), cached until the log file changes."""
        path = store.run_dir(run_id) / EVENTS_NAME
        return self.caches.get(
            self.caches.logs,
            run_id,
            _stat_key(path),
            lambda: read_log(path),
            keep=LOG_CACHE_SIZE,
        )

    def manifest_data(self, store: Store, run_id: str) -> dict[str, Any] | None:
        """The manifest as stored (raw JSON), cached by the file's size and mtime."""
        path = store.run_dir(run_id) / MANIFEST_NAME

        def load() -> dict[str, Any] | None:
            try:
                data = orjson.loads(read_regular(path))
            except (OSError, orjson.JSONDecodeError):
                return None
            return data if isinstance(data, dict) else None

        return self.caches.get(self.caches.manifests, run_id, _stat_key(path), load)

    def verification(self, store: Store, run_id: str) -> dict[str, Any]:
        """``verify_store`` for one run, cached until its log or manifest changes.

        ``verify`` is read-only, so a damaged or torn log is verified and reported like any other.
        """
        run_dir = store.run_dir(run_id)
        log_key = _stat_key(run_dir / EVENTS_NAME)  # taken before the log is read
        key = _stat_key(run_dir / EVENTS_NAME, run_dir / MANIFEST_NAME)

        def compute() -> dict[str, Any]:
            result, parsed = _verify(store, run_id)
            if parsed is not None:  # the log, parsed by the same pass: cached for the page
                self.caches.get(
                    self.caches.logs, run_id, log_key, lambda: parsed, keep=LOG_CACHE_SIZE
                )
            return result

        return self.caches.get(self.caches.verify, run_id, key, compute)

    def run_row(self, store: Store, row: Any) -> dict[str, Any]:
        manifest = self.manifest_data(store, row.run_id) or {}
        config = manifest.get("config")
        config = config if isinstance(config, dict) else {}
        return {
            "id": row.run_id,
            "status": store.display_status(row),
            "goal": row.goal,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
            "events": row.events,
            "parent": row.parent,
            "mode": _scalar(config.get("mode")),
            "model": _scalar(config.get("model")) or _first_model(manifest),
            "url": f"/api/runs/{row.run_id}",
        }


def _first_model(manifest: dict[str, Any]) -> str | None:
    models = manifest.get("models")
    if isinstance(models, list) and models and isinstance(models[0], dict):
        name = models[0].get("model")
        return str(name) if name is not None else None
    return None


def _scalar(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def event_type(event: dict[str, Any]) -> str:
    kind = str(event.get("type"))
    return f"effect:{event.get('kind')}" if kind == "effect" else kind


def event_matcher(
    kind: str = "", agent: str = "", span: str = ""
) -> Callable[[dict[str, Any]], bool] | None:
    """A test for events of type ``kind`` (``effect``, ``effect:llm``, ``message``, …), by
    ``agent``, in ``span`` (a span path and everything under it); None when nothing is asked."""
    if not (kind or agent or span):
        return None

    def wanted(event: dict[str, Any]) -> bool:
        if kind and kind not in (str(event.get("type")), event_type(event)):
            return False
        if agent and event.get("agent") != agent:
            return False
        where = str(event.get("span") or "run")
        return not span or where == span or where.startswith(span + "/")

    return wanted


def event_types(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        kind = event_type(event)
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def build_run_detail(
    viewer: StoreReader, store: Store, run_id: str
) -> tuple[dict[str, Any], LogRead]:
    """What ``/api/runs/{id}`` answers (a damaged run answers with its problems), and the log."""
    problems: list[dict[str, Any]] = []
    manifest: dict[str, Any] | None = None
    try:
        manifest = store.manifest(run_id).model_dump(mode="json")
    except RarError as exc:
        problems.append({"what": "manifest", "detail": exc.message})
    verify = viewer.verification(store, run_id)  # first: its pass also reads the log
    log = viewer.log(store, run_id)
    if log.problems and verify.get("ok") is not False:
        verify = {**verify, "ok": False, "problems": [*verify["problems"], *log.problems]}
    if problems:
        verify = {**verify, "ok": False, "problems": [*problems, *verify["problems"]]}
    row = store.row_from_files(run_id)
    anchors = _anchor_check(store, run_id, log.events)
    replay = replay_report(store, log.events)
    detail = {
        "id": run_id,
        "status": store.display_status(row) if row is not None else None,
        "manifest": manifest,
        "summary": {
            "events": len(log.events),
            "complete": log.complete,
            "torn_bytes": log.torn_bytes,
            "event_types": event_types(log.events),
            "agents": sorted({str(e["agent"]) for e in log.events if e.get("agent")}),
            "stats": (manifest or {}).get("stats", {}),
            "parent": ((manifest or {}).get("parent") or {}).get("run_id"),
        },
        "verify": verify,
        "anchors": anchors,
        "replay": replay,
        "links": {
            "events": f"/api/runs/{run_id}/events",
            "flow": f"/api/runs/{run_id}/flow",
            "home": "/",
        },
    }
    return detail, log


REPLAY_FIELDS = ("replay_status", "mode", "served", "live", "mismatched", "result_equal")


def replay_report(store: Store, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The report of the run's ``replay`` event (a run that is a replay), shortened."""
    event = next((e for e in reversed(events) if e.get("type") == "replay"), None)
    if event is None:
        return None
    try:
        report = store.resolve_payload(event.get("report"))
    except RarError as exc:
        return {"replay_status": None, "error": exc.message, "seq": event.get("seq")}
    if not isinstance(report, dict):
        return None
    first = report.get("first_divergence")
    return {
        **{key: report.get(key) for key in REPLAY_FIELDS},
        "unconsumed": len(report.get("unconsumed") or []),
        "first_divergence": (
            {k: first.get(k) for k in ("span", "ordinal", "kind", "reason")}
            if isinstance(first, dict)
            else None
        ),
        "seq": event.get("seq"),
    }


def _anchor_check(store: Store, run_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether each cited passage still matches its content hash in the corpus, now."""
    from rar.evidence.runs import check_anchors

    try:
        return check_anchors(store, run_id, events).as_dict()
    except RarError as exc:
        return {"checked": False, "corpus": None, "error": exc.message, "anchors": {}}
