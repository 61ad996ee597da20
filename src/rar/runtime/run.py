"""The Run context: the one door every nondeterministic effect passes through.

::

    with rar.record("What is 17 * 23?", seed=7) as run:
        answer = run.effect("tool", {"name": "calc", "args": {"expr": "17*23"}}, lambda: 391)
        when = run.now()          # clock, through the record
        x = run.random()          # seeded per span, through the record
        rid = run.uuid()          # derived from the seed, through the record

``effect(kind, request, perform)`` performs the effect and appends one ``effect`` event holding
the request's digest (the payload inline when small, else as a blob), the result or the error as
a value, and the duration; the event is durable before the result is handed back. The replay
modes of the reproducibility engine serve results from a record through the same call, so agent
code written against ``effect`` never changes between recording and replay.

**Effect identity.** An effect is identified by its span path (``run/planner/research#2``) and
its ordinal within that span, not by its global position: parallel branches that interleave
differently from run to run still line up. Spans are opened with :meth:`Run.span`; a span's path
is its parent's path plus its name, with ``#k`` appended for the k-th sibling of the same name.
The current span follows ``contextvars`` (asyncio tasks inherit it; new threads start at the
root, so open a span per thread).

**Observers.** :meth:`Run.observe` registers a :class:`RunObserver`, which is called after each
span opens or closes, each effect and bookkeeping event is written, and the run finishes (live
OpenTelemetry spans, :mod:`rar.interop.otel`, are one). Observers only watch: they see what
the record holds, an exception in one is caught and reported once, and with none registered
the hook costs one falsy check per event.

**What the agent sees is what was recorded.** Results pass the redactor before they are returned:
if a response carried a credential, the agent gets the redacted text, exactly what a replay will
serve.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import random as _random
import threading
import time
import uuid as _uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rar.errors import CanonicalizationError, RunClosedError
from rar.redaction import Redactor
from rar.runtime import replaying as _replaying
from rar.runtime.pending import PendingEffect, Staged
from rar.store._fs import WhileSyncing, call_hook
from rar.store.manifest import Manifest, RunStatus, immutable_part
from rar.store.snapshot import Snapshot, diff_trees, take_snapshot
from rar.store.store import Store, utc_now_iso
from rar.store.writer import RunWriter

if TYPE_CHECKING:
    from rar.replay.source import RecordedEffects

T = TypeVar("T")
ROOT_SPAN = "run"


def error_value(exc: BaseException, redactor: Redactor | None = None) -> dict[str, Any]:
    """An exception as a record value: its type, message and module."""
    message = str(exc)
    if redactor is not None:
        message = redactor.redact_text(message)
    return {"type": type(exc).__qualname__, "message": message, "module": type(exc).__module__}


class RunWaiting(Exception):
    """Raised by agent code to stop a run WAITING; ``rar resume`` continues it later."""

    def __init__(self, until: str, reason: str) -> None:
        super().__init__(f"waiting until {until}: {reason}")
        self.until = until
        self.reason = reason


class RunObserver:
    """Watches a run: subclass it (or write any object with some of these methods) and pass it
    to :meth:`Run.observe`.

    Each method gets the run and the event as it was written (``seq`` and ``ts`` included; in a
    resumed run, events of the replayed prefix are not written again and come without them).
    ``on_effect`` also gets the request as the agent passed it (**not redacted**: redact what
    you keep with ``run.redactor``; None when the effect was prepared elsewhere, then
    ``event["request"]`` is its payload reference) and the result as the agent received it
    (redacted, as recorded; None when the effect raised, see ``event["error"]``). Observers are
    called synchronously, in the thread of the event, and may be called from several threads at
    once. An exception raised by an observer is caught: the run goes on and the first failure of
    each observer is logged (logger ``rar.runtime``). Observers must not change the run (no
    effects, no events).
    """

    def on_span_start(self, run: Run, event: dict[str, Any]) -> None:
        """A ``span.start`` event was written."""

    def on_span_end(self, run: Run, event: dict[str, Any]) -> None:
        """A ``span.end`` event was written."""

    def on_effect(self, run: Run, event: dict[str, Any], request: Any, result: Any) -> None:
        """An ``effect`` event was written (recorded live, or served from a record)."""

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        """Any other event was written: ``message``, ``artifact``, ``bdi.update``, ..."""

    def on_finish(self, run: Run, event: dict[str, Any]) -> None:
        """The run finished (``run.finished``; without ``seq`` if writing it failed)."""


_log = logging.getLogger("rar.runtime")
_SPAN_HOOKS = {"span.start": "on_span_start", "span.end": "on_span_end"}


class Span:
    """A node of the span tree: its path, its effect ordinal and its seeded random stream."""

    def __init__(self, path: str, seed: int, parent: Span | None = None) -> None:
        self.path = path
        self.parent = parent
        self._children: Counter[str] = Counter()
        self._ordinal = 0
        self._lock = threading.Lock()
        self.last_effect: dict[str, Any] | None = None  # the event of this span's latest effect
        self.last_served = False  # whether that effect was served from a record (replay)
        self.requests: dict[int, Any] = {}  # observers only: requests of effects under way
        material = hashlib.sha256(f"{seed}\x00{path}".encode()).digest()
        self.rng = _random.Random(int.from_bytes(material[:16], "big"))

    def next_ordinal(self) -> int:
        with self._lock:
            ordinal = self._ordinal
            self._ordinal += 1
            return ordinal

    def child_path(self, name: str) -> str:
        if not name or "/" in name or "#" in name:
            raise ValueError(f"span name {name!r} must be non-empty without '/' or '#'")
        with self._lock:
            self._children[name] += 1
            count = self._children[name]
        return f"{self.path}/{name}" + (f"#{count}" if count > 1 else "")


class Run:
    """A run being recorded. Create it with :func:`record`; use it as a context manager."""

    def __init__(
        self,
        writer: RunWriter,
        manifest: Manifest,
        *,
        seed: int,
        workspace: Path,
    ) -> None:
        self._writer = writer
        self.manifest = manifest
        self.seed = seed
        self.workspace = workspace
        self._root = Span(ROOT_SPAN, seed)
        self._current: contextvars.ContextVar[Span] = contextvars.ContextVar(
            f"rar-span-{manifest.run_id}", default=self._root
        )
        self._effects: Counter[str] = Counter()
        self._stats: dict[str, dict[str, float | int]] = {}
        self._stats_lock = threading.Lock()
        self._effect_us = 0
        self._before: Snapshot | None = None
        self._source: RecordedEffects | None = None
        self.outcome_status: RunStatus | None = None  # set by agent code, e.g. with warnings
        self._resume_log: deque[dict[str, Any]] = deque()  # resume: events to re-encounter
        self._resume_effects_until = 0  # resume: seq of the last recorded effect
        self._started = time.perf_counter_ns()
        self.finished = False
        # what a replay found different around the code (e.g. configuration); see note_boundary
        self.boundary: dict[str, list[dict[str, Any]]] = {}
        self._observers: tuple[Any, ...] = ()  # see observe(); empty: the hook is one check
        self._observer_failed: set[int] = set()

    # --- identity ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.manifest.run_id

    @property
    def store(self) -> Store:
        return self._writer.store

    @property
    def dir(self) -> Path:
        return self._writer.dir

    @property
    def config(self) -> dict[str, Any]:
        """The run's settings (``seed``, ``mode``, ``model``, ...), as recorded in its manifest."""
        return self.manifest.config

    @property
    def redactor(self) -> Redactor:
        """The redactor every payload of this run passes through."""
        return self._writer.redactor

    @property
    def mode(self) -> str:
        return "record" if self._source is None else self._source.mode

    @property
    def span_path(self) -> str:
        return self._current.get().path

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.mode} {self.manifest.status.value}>"

    # --- the effect boundary -----------------------------------------------------------------

    def effect(self, kind: str, request: Any, perform: Callable[[], T]) -> T:
        """Perform an effect through the record; return its (recorded) result."""
        span, ordinal, request_ref = self._prepare(kind, request)
        if self._source is not None:
            served = _replaying.from_source(self, span, ordinal, kind, request_ref)
            if served is not None:
                return _replaying.serve(self, span, ordinal, kind, request_ref, served)  # type: ignore[no-any-return]
        start = time.perf_counter_ns()
        try:
            result = perform()
        except Exception as exc:
            self._record_error(span, kind, ordinal, request_ref, exc, start)
            raise
        return self._record_result(span, kind, ordinal, request_ref, result, start)

    def begin_effect(
        self, kind: str, request: Any, *, started: int | None = None, waiting: bool = False
    ) -> PendingEffect:
        """Take an effect's place now and record its result later (a stream, a long call).

        The effect gets its ordinal in the current span at once, where a replay looks it up;
        :meth:`PendingEffect.served <rar.runtime.pending.PendingEffect.served>` hands back the
        recorded result in a replay, and :meth:`~rar.runtime.pending.PendingEffect.finish` or
        :meth:`~rar.runtime.pending.PendingEffect.fail` records the outcome when it is whole.
        ``started`` is when the effect began (``time.perf_counter_ns()``) if before this call.
        ``waiting=True`` says the caller now waits for the outcome (a request on its way): the
        store is asked meanwhile which of the request's blobs it holds, a question recording
        the outcome then need not ask.
        """
        effect = PendingEffect(self, kind, request, started=started)
        if waiting:
            self._writer.check_pending()
        return effect

    def serve_from(self, source: RecordedEffects) -> None:
        """Serve this run's effects from a record (replay, fork, ``rar proxy --mode replay``).

        Called once, before the re-executed code makes its first effect; :attr:`mode` then
        says the source's mode.
        """
        if self.finished:
            raise RunClosedError(self.id)
        if self._source is not None:
            raise RuntimeError(f"run {self.id} is already served from run {self._source.run_id}")
        self._source = source

    async def aeffect(self, kind: str, request: Any, perform: Callable[[], Awaitable[T]]) -> T:
        """The asynchronous form of :meth:`effect`."""
        span, ordinal, request_ref = self._prepare(kind, request)
        if self._source is not None:
            served = _replaying.from_source(self, span, ordinal, kind, request_ref)
            if served is not None:
                return _replaying.serve(self, span, ordinal, kind, request_ref, served)  # type: ignore[no-any-return]
        start = time.perf_counter_ns()
        try:
            result = await perform()
        except Exception as exc:
            self._record_error(span, kind, ordinal, request_ref, exc, start)
            raise
        return self._record_result(span, kind, ordinal, request_ref, result, start)

    def _prepare(self, kind: str, request: Any) -> tuple[Span, int, dict[str, Any]]:
        if self.finished:
            raise RunClosedError(self.id)
        if not isinstance(kind, str) or not kind:
            raise ValueError("effect kind must be a non-empty string such as 'llm' or 'tool'")
        span = self._current.get()
        request_ref = self._writer.payload(request)  # a request that fails here takes no ordinal
        ordinal = span.next_ordinal()
        if self._observers:  # handed to on_effect with the event, then dropped
            span.requests[ordinal] = request
        return span, ordinal, request_ref

    def _record_result(
        self,
        span: Span,
        kind: str,
        ordinal: int,
        request_ref: dict[str, Any],
        result: T,
        start: int,
        *,
        read_back: bool = True,
        unseen: bool = False,
        staged: Staged | None = None,
    ) -> T:
        duration = (time.perf_counter_ns() - start) // 1000
        redacted = self._writer.redactor.redact(result)
        try:
            # what the agent sees is what was recorded: a replay serves exactly `recorded`
            if read_back:
                result_ref, recorded = self._writer.recorded_payload(redacted, redacted=True)
            else:  # the caller reads only strings and integers of it (see PendingEffect.finish)
                result_ref = self._writer.payload(redacted, redacted=True, unseen=unseen)
                recorded = redacted
        except CanonicalizationError as exc:
            self._record_error(span, kind, ordinal, request_ref, exc, start)
            raise CanonicalizationError(
                f"the result of this {kind} effect cannot be recorded: {exc.message}",
                path=exc.details.get("path", "$"),
            ) from exc
        self._append_effect(
            span,
            kind,
            ordinal,
            request_ref,
            duration,
            result=result_ref,
            value=recorded,
            while_syncing=None if staged is None else lambda: staged(recorded),
        )
        return recorded  # type: ignore[no-any-return]

    def _record_error(
        self,
        span: Span,
        kind: str,
        ordinal: int,
        request_ref: dict[str, Any],
        exc: BaseException,
        start: int,
    ) -> None:
        duration = (time.perf_counter_ns() - start) // 1000
        error = error_value(exc, self._writer.redactor)
        self._append_effect(span, kind, ordinal, request_ref, duration, error=error)

    def _append_effect(
        self,
        span: Span,
        kind: str,
        ordinal: int,
        request_ref: dict[str, Any],
        duration: int,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        value: Any = None,
        while_syncing: WhileSyncing | None = None,
    ) -> None:
        event: dict[str, Any] = {
            "type": "effect",
            "span": span.path,
            "kind": kind,
            "ordinal": ordinal,
            "request": request_ref,
            "duration_us": duration,
        }
        if result is not None:
            event["result"] = result
        if error is not None:
            event["error"] = error
        if _replaying.already_recorded(self, event) is None:
            self._writer.append(event, sync=True, while_syncing=while_syncing)
        elif while_syncing is not None:  # recorded (and durable) already
            done = call_hook(while_syncing)
            if done is not None:
                call_hook(done)
        span.last_effect = event
        span.last_served = False
        self._effects[kind] += 1
        self._effect_us += duration
        if self._observers:
            self._notify_effect(event, span.requests.pop(ordinal, None), value)

    def settle(self) -> None:
        """Do now the store's bookkeeping of the records written last (where their lines hold
        the blobs they carry), which is otherwise done before the next record: a caller that
        hands a result on first (``rar proxy`` sends its answer) calls this afterwards."""
        self._writer.settle()

    def add_stats(self, section: str, values: dict[str, float | int]) -> None:
        """Add numbers to the run's statistics (``manifest.stats[section]``), e.g. model usage."""
        with self._stats_lock:
            totals = self._stats.setdefault(section, {})
            for name, value in values.items():
                totals[name] = totals.get(name, 0) + value

    def note_boundary(self, section: str, differences: list[dict[str, Any]]) -> None:
        """Note what differs around the code in a replay (the report's ``boundary``)."""
        if differences:
            self.boundary.setdefault(section, []).extend(differences)

    def last_effect(self) -> dict[str, Any] | None:
        """The event just recorded for the current span's latest effect (seq, request, result)."""
        return self._current.get().last_effect

    def last_effect_served(self) -> bool:
        """Whether the current span's latest effect was served from a record (a replay)."""
        return self._current.get().last_served

    # --- clock, randomness, ids ----------------------------------------------------------------

    def now(self) -> datetime:
        """The current UTC time, through the record."""
        text = self.effect("clock", {"op": "now"}, utc_now_iso)
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    def random(self) -> float:
        """A float in [0, 1) from the run's seeded stream for the current span."""
        span = self._current.get()
        return self.effect("random", {"op": "random"}, span.rng.random)

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high] from the run's seeded stream for the current span."""
        span = self._current.get()
        return self.effect(
            "random",
            {"op": "randint", "low": low, "high": high},
            lambda: span.rng.randint(low, high),
        )

    def uuid(self) -> _uuid.UUID:
        """A version-4 UUID derived from the run's seed, through the record."""
        span = self._current.get()
        text = self.effect(
            "uuid",
            {"op": "uuid4"},
            lambda: str(_uuid.UUID(int=span.rng.getrandbits(128), version=4)),
        )
        return _uuid.UUID(text)

    def sleep(self, seconds: float) -> None:
        """Sleep, through the record (a replay does not wait)."""
        self.effect("sleep", {"seconds": seconds}, lambda: time.sleep(seconds))

    # --- spans and bookkeeping ---------------------------------------------------------------

    @contextmanager
    def span(self, name: str, *, agent: str | None = None, **attributes: Any) -> Iterator[Span]:
        """Open a child span of the current one for the duration of the block."""
        parent = self._current.get()
        span = Span(parent.child_path(name), self.seed, parent)
        start: dict[str, Any] = {"type": "span.start", "span": span.path, "name": name}
        if attributes:
            start["attributes"] = self._writer.redactor.redact(attributes)
        if agent:
            start["agent"] = agent
        self._emit(start)
        token = self._current.set(span)
        begun = time.perf_counter_ns()
        try:
            yield span
        except BaseException as exc:
            end: dict[str, Any] = {"type": "span.end", "span": span.path, "status": "error"}
            end["error"] = error_value(exc, self._writer.redactor)
            raise
        else:
            end = {"type": "span.end", "span": span.path, "status": "ok"}
        finally:
            self._current.reset(token)
            end["duration_us"] = (time.perf_counter_ns() - begun) // 1000
            if agent:
                end["agent"] = agent
            if not self.finished:
                self._emit(end)

    def log_event(self, event_type: str, **fields: Any) -> int:
        """Append a bookkeeping event (message, bdi.update, evidence, ...) in the current span.

        Values of payload fields (``content``, ``value``, ``anchors``, ``report``, ``state``)
        are stored as payload references.
        """
        from rar.store.events import EVENT_TYPES

        if event_type not in EVENT_TYPES or event_type in {"run.started", "run.finished", "effect"}:
            raise ValueError(f"{event_type!r} is not a bookkeeping event type")
        event: dict[str, Any] = {"type": event_type, "span": self.span_path}
        for key, value in fields.items():
            if key in {"content", "value", "anchors", "report", "state"}:
                event[key] = self._writer.payload(value)
            else:
                event[key] = self._writer.redactor.redact(value)
        return self._emit(event)

    def payload(self, value: Any) -> dict[str, Any]:
        """Store a value as a payload of this run and return its reference."""
        return self._writer.payload(value)

    def _emit(self, event: dict[str, Any], *, sync: bool = False) -> int:
        if self.finished:
            raise RunClosedError(self.id)
        recorded = _replaying.already_recorded(self, event)
        if recorded is not None:
            if self._observers:
                self._notify(_SPAN_HOOKS.get(event["type"], "on_event"), event)
            return recorded
        seq, _ = self._writer.append(event, sync=sync)
        if self._observers:
            self._notify(_SPAN_HOOKS.get(event["type"], "on_event"), event)
        return seq

    def artifact(
        self,
        name: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        agent: str | None = None,
    ) -> str:
        """Save a file the run produced under ``artifacts/`` and record it (in the current span,
        by ``agent`` when given); returns its digest."""
        from rar.hashing import digest_bytes

        if not name or name.startswith(("/", ".")) or ".." in Path(name).parts or "\\" in name:
            raise ValueError(f"artifact name {name!r} must be a relative path inside artifacts/")
        digest = digest_bytes(data)
        target = self.dir / "artifacts" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self._writer.put_blob(digest, data)
        self._emit(
            {
                "type": "artifact",
                "span": self.span_path,
                **({"agent": agent} if agent is not None else {}),
                "name": name,
                "digest": digest,
                "size": len(data),
                "media_type": media_type,
            }
        )
        return digest

    # --- observers ---------------------------------------------------------------------------

    def observe(self, observer: Any) -> Any:
        """Call ``observer`` (a :class:`RunObserver`, or any object with some of its methods)
        for every event of this run from now on; return it."""
        self._observers = (*self._observers, observer)
        return observer

    def unobserve(self, observer: Any) -> None:
        """Stop calling ``observer``."""
        self._observers = tuple(o for o in self._observers if o is not observer)

    def _notify(self, hook: str, event: dict[str, Any], *extra: Any) -> None:
        for observer in self._observers:
            method = getattr(observer, hook, None)
            if method is None:
                continue
            try:
                method(self, event, *extra)
            except Exception as exc:  # an observer never breaks the run
                self._observer_error(observer, hook, exc)

    def _notify_effect(self, event: dict[str, Any], request: Any, value: Any) -> None:
        if value is None and "result" in event:  # served from a record: read what it holds
            try:
                value = self.store.resolve_payload(event["result"])
            except Exception:  # the run reads it too, and fails there if it must
                value = None
        self._notify("on_effect", event, request, value)

    def _observer_error(self, observer: Any, hook: str, exc: Exception) -> None:
        if id(observer) in self._observer_failed:
            return
        self._observer_failed.add(id(observer))
        _log.warning(
            "observer %s of run %s failed in %s: %s: %s (the run goes on; further failures "
            "of this observer are not reported)",
            type(observer).__name__,
            self.id,
            hook,
            type(exc).__name__,
            exc,
        )

    # --- life cycle --------------------------------------------------------------------------

    def _begin(self) -> None:
        self._writer.write_manifest(self.manifest)
        self._writer.append(
            {"type": "run.started", "manifest": immutable_part(self.manifest)}, sync=True
        )
        self._before = self._snapshot("before")

    def _snapshot(self, phase: str) -> Snapshot:
        snap = take_snapshot(self.workspace, self._writer.put_small)
        self._emit(
            {
                "type": "snapshot",
                "phase": phase,
                "tree": snap.digest,
                "files": snap.files,
                "bytes": snap.bytes,
            }
        )
        return snap

    def finish(
        self,
        status: RunStatus | str = RunStatus.COMPLETED,
        *,
        result: Any = None,
        error: BaseException | None = None,
    ) -> Manifest:
        """Snapshot the workspace, append ``run.finished``, seal the manifest, release the run.

        ``run.finished`` carries the manifest's final ``status``, ``finished_at`` and ``stats``
        (its ``events`` and ``head`` are the event's own position and digest), so ``rar verify``
        notices a manifest edited afterwards.
        """
        from rar.hashing import canonical

        if self.finished:
            return self.manifest
        status = RunStatus(status)
        event: dict[str, Any] = {"type": "run.finished", "status": status.value}
        try:
            after = self._snapshot("after")
            if self._before is not None:
                event["state_diff"] = diff_trees(self._before.tree, after.tree)
            if result is not None:
                event["result"] = self._writer.payload(result)
            if error is not None:
                event["error"] = error_value(error, self._writer.redactor)
            event["effects"] = sum(self._effects.values())
            finished_at = utc_now_iso()
            stats = {
                "effects": dict(sorted(self._effects.items())),
                "effect_time_us": self._effect_us,
                "wall_time_us": (time.perf_counter_ns() - self._started) // 1000,
                **{section: dict(values) for section, values in sorted(self._stats.items())},
            }
            event["finished_at"] = finished_at
            try:
                canonical(stats)
                event["stats"] = stats
            except CanonicalizationError:
                pass  # a stat canonical JSON cannot hold (NaN) stays in the manifest, unsealed
            seq, head = self._writer.append(event, sync=True)
            self.finished = True
            self.manifest.status = status
            self.manifest.finished_at = finished_at
            self.manifest.events = seq
            self.manifest.head = head
            self.manifest.stats = stats
            self._writer.write_manifest(self.manifest)
        finally:
            self.finished = True
            if self._observers:
                self._notify("on_finish", event)
            self._writer.close()
            self.store.index_run(self.id)
        return self.manifest

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self.finished:
            return
        if exc is None:
            self.finish(RunStatus.COMPLETED)
        else:
            self.finish(RunStatus.FAILED, error=exc)
