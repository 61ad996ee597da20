"""Execute a run from an entrypoint, and replay a recorded run against its record.

A run made with :func:`execute` names its **entrypoint** (``module:function``) and its inputs
in the manifest. The function is called as ``function(run, **inputs)`` and its return value is
the run's result. :func:`replay` re-creates that call against the record:

* ``strict``: every effect is served from the record by (span path, ordinal); anything else is
  a :class:`~rar.replay.source.NondeterminismError` with the expected and actual request and a
  field-level diff;
* ``cached``: effects are served by request digest in any order; a request never recorded is a
  miss (performed live only with ``allow_live``);
* ``fork``: strict up to event ``at``, then live — a branch, optionally with changed settings.

The replay is itself a new run (naming its parent) whose record ends with a ``replay`` event
holding the :class:`ReplayReport`: the status, counts of served / live / mismatched effects,
the first divergence and the reproducibility boundary (what differs in the environment, the
models, the tools and the inputs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rar.errors import CorruptionError, RarError, UserError
from rar.redaction import Redactor
from rar.replay.deadline import time_left
from rar.replay.fields import field_differences
from rar.replay.source import Mode, NondeterminismError, RecordedEffects, ReplayMissError
from rar.runtime.fingerprint import environment_fingerprint
from rar.runtime.run import Run, RunWaiting, error_value
from rar.runtime.start import check_seed, record
from rar.store.manifest import Manifest, RunStatus
from rar.store.store import Store

Entrypoint = str | Callable[..., Any]
STATUSES = ("reproducible", "partially-reproducible", "non-reproducible", "not-replayed")


class ReplayRefusedError(UserError):
    """The run cannot be replayed (no entrypoint, it no longer imports, damaged, in use)."""


@dataclass(frozen=True, slots=True)
class ReplayReport:
    source_run: str
    replay_run: str | None
    mode: str
    replay_status: str
    served: int = 0
    live: int = 0
    mismatched: int = 0
    first_divergence: dict[str, Any] | None = None
    unconsumed: list[dict[str, Any]] = field(default_factory=list)
    result_equal: bool | None = None
    boundary: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    @property
    def reproducible(self) -> bool:
        return self.replay_status == "reproducible"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def entrypoint_name(entrypoint: Entrypoint) -> str:
    if isinstance(entrypoint, str):
        return entrypoint
    return f"{entrypoint.__module__}:{entrypoint.__qualname__}"


def load_entrypoint(name: str) -> Callable[..., Any]:
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise ReplayRefusedError(f"entrypoint {name!r} is not of the form module:function")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ReplayRefusedError(
            f"the run's entrypoint {name} no longer imports ({type(exc).__name__}: {exc}); "
            "restore the code it was recorded with, or pass the function to replay()",
            entrypoint=name,
        ) from exc
    if not callable(target):
        raise ReplayRefusedError(f"entrypoint {name} is not callable")
    return target  # type: ignore[no-any-return]


def execute(
    entrypoint: Entrypoint,
    *,
    inputs: Mapping[str, Any] | None = None,
    goal: str | None = None,
    store: Store | str | None = None,
    **record_options: Any,
) -> Run:
    """Record a run of ``entrypoint(run, **inputs)``; return the finished run.

    An exception from the function finishes the run as failed (the error is in the record)
    and is raised again.
    """
    function = load_entrypoint(entrypoint) if isinstance(entrypoint, str) else entrypoint
    run = record(
        goal,
        store=store,
        inputs=dict(inputs or {}),
        entrypoint=entrypoint_name(entrypoint),
        **record_options,
    )
    failure = _call(run, function, dict(inputs or {}))
    if failure is not None:
        raise failure
    return run


def _call(run: Run, function: Callable[..., Any], inputs: dict[str, Any]) -> BaseException | None:
    """Run the function in the run; finish the run; return the exception it raised, if any."""
    try:
        result = function(run, **inputs)
    except RunWaiting as waiting:
        if not run.finished:
            run.finish(
                RunStatus.WAITING, result={"waiting_until": waiting.until, "reason": waiting.reason}
            )
        return None
    except Exception as exc:
        if not run.finished:
            run.finish(RunStatus.FAILED, error=exc)
        return exc
    if not run.finished:
        run.finish(run.outcome_status or RunStatus.COMPLETED, result=result)
    return None


def replay(
    source_ref: str,
    *,
    store: Store | str | None = None,
    mode: Mode = "strict",
    allow_live: bool = False,
    function: Callable[..., Any] | None = None,
    at: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    redactor: Redactor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Re-execute a recorded run against its record; return the report.

    ``overrides`` (fork) change the seed, a config key or an input of the new run;
    ``progress(served, recorded)`` is called as effects are served.
    """

    store = store if isinstance(store, Store) else Store(store)
    source_id = store.resolve(source_ref)
    manifest, function, events = _replayable(store, source_id, function)
    last_seq = int(events[-1]["seq"]) if events else 0
    if at is not None and not 0 <= at <= last_seq:
        raise ReplayRefusedError(f"run {source_id} has events 1..{last_seq}; cannot branch at {at}")
    if mode == "fork" and at is None:
        at = last_seq
    inputs = _inputs(store, manifest)
    config = {k: v for k, v in manifest.config.items() if k not in ("seed", "durable")}
    seed = manifest.config.get("seed")
    for key, value in (overrides or {}).items():
        if key == "seed":
            seed = check_seed(int(value) if isinstance(value, str) and value.isdigit() else value)
        elif key in inputs or key in config or key in ("model", "mode", "max_steps"):
            # a setting may be both an input and a config key (a science run's mode and model):
            # change both, so the branch's manifest says what it ran with
            if key in inputs:
                inputs[key] = value
            if key in config or key not in inputs:
                config[key] = value
        else:
            allowed = ", ".join(sorted({"seed", "model", "mode", "max_steps", *config, *inputs}))
            raise ReplayRefusedError(
                f"unknown setting {key!r} for run {source_id}; settable: {allowed}"
            )
    source = RecordedEffects.load(
        store, source_id, mode, until_seq=at, allow_live=allow_live, events=events
    )
    source.on_served = progress
    options: dict[str, Any] = {
        "seed": seed,
        "config": config,
        "durable": bool(manifest.config.get("durable", True)),
        "models": manifest.models,
        "tools": manifest.tools,
        "tags": {**manifest.tags, "replay_of": source_id, "replay_mode": mode},
        "corpus_digest": manifest.corpus_digest,
        "secrets": manifest.secrets,
    }
    if redactor is not None:
        options["redactor"] = redactor
    run = record(
        manifest.goal,
        store=store,
        inputs=inputs,
        entrypoint=manifest.entrypoint,
        parent=(source_id, at if at is not None else last_seq),
        **options,
    )
    run.serve_from(source)
    try:
        outcome: tuple[str, Any] = ("result", function(run, **inputs))
    except Exception as exc:
        outcome = ("error", exc)
    return _report(store, manifest, events, run, source, mode, outcome)


def _replayable(
    store: Store, run_id: str, function: Callable[..., Any] | None
) -> tuple[Manifest, Callable[..., Any], list[dict[str, Any]]]:
    """Refuse runs that cannot be trusted or re-created; return the manifest, the function and
    the run's events.

    The events are those the verification parsed, from the very bytes it checked: the log is
    read, parsed and hashed once (``verify_run``), not verified and then read again.
    """
    from rar.store._fs import not_regular
    from rar.store.layout import EVENTS_NAME
    from rar.store.verify import verify_run

    if store.is_writing(run_id):
        raise ReplayRefusedError(
            f"run {run_id} is still being written by another process; replay it when it "
            "has finished"
        )
    log_path = store.run_dir(run_id) / EVENTS_NAME
    problem = not_regular(log_path)
    if problem is not None:  # as Store.events: run files are never read through a link
        raise CorruptionError(f"the log of run {run_id} {problem}", path=log_path, run_id=run_id)
    # blobs included: a damaged recorded answer must refuse the replay, not be served
    check, events = verify_run(store, run_id)
    if not check.ok:
        listed = "; ".join(f"{p.what}: {p.detail}" for p in check.problems[:5])
        raise ReplayRefusedError(
            f"run {run_id} fails verification, so its record cannot be trusted for replay "
            f"({listed}). `rar verify {run_id}` lists every problem."
        )
    manifest = store.manifest(run_id)
    if function is None:
        if not manifest.entrypoint:
            raise ReplayRefusedError(
                f"run {run_id} records no entrypoint; pass the function to replay() or "
                "record runs with rar.execute()"
            )
        function = load_entrypoint(manifest.entrypoint)
    return manifest, function, events


def _inputs(store: Store, manifest: Manifest) -> dict[str, Any]:
    return {name: store.resolve_payload(ref.reference()) for name, ref in manifest.inputs.items()}


def resume(
    run_ref: str,
    *,
    store: Store | str | None = None,
    function: Callable[..., Any] | None = None,
    redactor: Redactor | None = None,
    early: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Continue a run that waited, crashed or was stopped, in the same run.

    The entrypoint runs again from the start: every recorded effect is served strictly and the
    events already in the log are recognised, not written twice; from the tail on, effects are
    performed live and appended to the same log.

    A run waiting for a deadline that has not come is refused with the time it is due, unless
    ``early`` (``rar resume --now``), which is noted in the log.
    """
    from collections import deque
    from pathlib import Path

    from rar.redaction import default_redactor
    from rar.store.snapshot import Snapshot
    from rar.store.writer import RunWriter

    store = store if isinstance(store, Store) else Store(store)
    run_id = store.resolve(run_ref)
    manifest, function, events = _replayable(store, run_id, function)
    if manifest.status.finished and manifest.status != RunStatus.WAITING:
        raise ReplayRefusedError(
            f"run {run_id} is {manifest.status.value}: there is nothing to resume. "
            f"Branch it instead: rar branch {run_id} --at K"
        )
    due = time_left(store, events) if manifest.status == RunStatus.WAITING else None
    if due is not None and not early:
        raise ReplayRefusedError(
            f"run {run_id} is waiting until {due[0]} ({due[1]} from now); resume it then, "
            f"or now with: rar resume {run_id} --now",
            run_id=run_id,
            until=due[0],
        )
    writer = RunWriter(
        store,
        run_id,
        redactor=redactor or default_redactor(),
        durable=bool(manifest.config.get("durable", True)),
        create=False,
    )
    before = next((e for e in events if e["type"] == "snapshot" and e["phase"] == "before"), None)
    tail = [e for e in events if e["type"] not in ("run.started", "snapshot", "note")]
    if tail and tail[-1]["type"] == "run.finished":  # a run that finished WAITING
        tail.pop()
    manifest.status = RunStatus.RUNNING
    run = Run(
        writer,
        manifest,
        seed=int(manifest.config.get("seed", 0)),
        workspace=Path(manifest.workspace or writer.dir / "workspace"),
    )
    writer.write_manifest(manifest)
    if before is not None:
        tree = store.get_json(before["tree"])
        run._before = Snapshot(before["tree"], tree, before["files"], before["bytes"])
    source = RecordedEffects.load(store, run_id, "resume", events=events)
    source.on_served = progress
    run.serve_from(source)
    if due is not None:
        run.log_event(
            "note",
            level="warning",
            text=f"resumed before its deadline {due[0]} ({due[1]} early), as asked (--now)",
        )
    run._resume_log = deque(tail)
    run._resume_effects_until = max(
        (int(e["seq"]) for e in tail if e["type"] == "effect"), default=0
    )
    try:
        outcome: tuple[str, Any] = ("result", function(run, **_inputs(store, manifest)))
    except Exception as exc:
        outcome = ("error", exc)
    run._resume_log.clear()
    return _report(store, manifest, events, run, source, "resume", outcome)


def _report(
    store: Store,
    manifest: Manifest,
    events: list[dict[str, Any]],
    run: Run,
    source: RecordedEffects,
    mode: str,
    outcome: tuple[str, Any],
) -> ReplayReport:
    """Judge the replay, log the report in the replayed run, and seal that run."""
    outcome_kind, value = outcome
    failure = value if outcome_kind == "error" else None
    original = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
    divergence: dict[str, Any] | None = None
    mismatched = 0
    result_equal: bool | None = None
    if isinstance(failure, NondeterminismError):
        mismatched = 1
        details = failure.details
        divergence = {
            "reason": failure.message,
            "span": details.get("span"),
            "ordinal": details.get("ordinal"),
            "kind": details.get("kind"),
            "expected": details.get("expected"),
            "actual": details.get("actual"),
            "differences": details.get("differences", []),
        }
    elif isinstance(failure, ReplayMissError):
        mismatched = 1
        divergence = {
            "reason": failure.message,
            **{k: failure.details.get(k) for k in ("span", "ordinal", "kind")},
        }
    unconsumed = (
        []
        if mode == "fork"
        else [
            {"span": e["span"], "ordinal": e["ordinal"], "kind": e["kind"], "seq": e["seq"]}
            for e in source.unconsumed()
        ]
    )
    if divergence is None and unconsumed and mode in ("strict", "resume"):
        first = unconsumed[0]
        divergence = {
            "reason": "the re-executed code stopped before effects the record has",
            **first,
        }
    if divergence is None and original is not None:
        recorded_error = original.get("error")
        judged = mode in ("strict", "cached")
        if outcome_kind == "error":
            mine = error_value(value)
            result_equal = bool(recorded_error) and recorded_error.get("type") == mine["type"]
            if not result_equal and judged:
                before = (
                    f"failed with {recorded_error.get('type')}"
                    if recorded_error
                    else "finished with a result"
                )
                divergence = {
                    "reason": f"the run now fails with {mine['type']}: {mine['message']} "
                    f"where the record {before}",
                }
        else:
            expected = store.resolve_payload(original.get("result"))
            result_equal = recorded_error is None and _same(expected, value)
            if not result_equal and judged:
                divergence = {
                    "reason": "the final result differs"
                    if recorded_error is None
                    else f"the run now finishes where the record failed with "
                    f"{recorded_error.get('type')}",
                    "differences": field_differences(expected, _jsonable(value)),
                }
    if divergence is not None:
        status = "non-reproducible"
    elif mode == "cached" and (source.live or source.misses):
        status = "partially-reproducible"
    else:
        status = "reproducible"
    report = ReplayReport(
        source_run=manifest.run_id,
        replay_run=run.id,
        mode=mode,
        replay_status=status,
        served=source.served,
        live=source.live,
        mismatched=mismatched,
        first_divergence=divergence,
        unconsumed=unconsumed,
        result_equal=result_equal,
        boundary={
            **_boundary(manifest, run.manifest, store, events, run.id, source),
            **run.boundary,
        },
        error=error_value(failure) if failure is not None else None,
    )
    run.log_event("replay", report=report.as_dict())
    if isinstance(failure, RunWaiting):
        run.finish(
            RunStatus.WAITING, result={"waiting_until": failure.until, "reason": failure.reason}
        )
    elif failure is not None:
        run.finish(RunStatus.FAILED, error=failure)
    else:
        run.finish(run.outcome_status or RunStatus.COMPLETED, result=value)
    return report


def _jsonable(value: Any) -> Any:
    import orjson

    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:
        return repr(value)


def _same(expected: Any, actual: Any) -> bool:
    from rar.hashing import digest_value

    try:
        return digest_value(expected) == digest_value(_jsonable(actual))
    except RarError:
        return False


def _served_models(store: Store, events: list[dict[str, Any]]) -> list[str]:
    """The model ids providers said served the recorded llm calls."""
    served: set[str] = set()
    for event in events:
        if event.get("type") == "effect" and event.get("kind") == "llm" and "result" in event:
            result = store.resolve_payload(event["result"])
            if isinstance(result, dict) and isinstance(result.get("response"), dict):
                served.add(str(result["response"].get("model", "")))
    return sorted(served)


def _boundary(
    source: Manifest,
    replayed: Manifest,
    store: Store,
    source_events: list[dict[str, Any]],
    replay_id: str,
    effects: RecordedEffects,
) -> dict[str, Any]:
    """What differs around the code: environment, models served, tools, inputs, corpus."""
    boundary: dict[str, Any] = {}
    if effects.live:  # live calls may have been served by another model version
        before, after = (
            _served_models(store, source_events),
            _served_models(store, store.events(replay_id)),
        )
        if before != after:
            boundary["served_models"] = [
                {"field": "served_models", "expected": before, "actual": after}
            ]
    env = field_differences(source.environment, environment_fingerprint())
    if env:
        boundary["environment"] = env
    for name in ("models", "tools", "corpus_digest"):
        a, b = getattr(source, name), getattr(replayed, name)
        if a != b:
            boundary[name] = field_differences(a, b)
    inputs = {k: v.digest for k, v in source.inputs.items()}
    replayed_inputs = {k: v.digest for k, v in replayed.inputs.items()}
    if inputs != replayed_inputs:
        boundary["inputs"] = field_differences(inputs, replayed_inputs)
    return boundary
