"""How a Run serves effects from a record (replay, fork, resume): the replay side of the door.

These functions are part of :class:`~rar.runtime.run.Run`; they live here to keep the recording
path of ``run.py`` short and readable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.runtime.run import Run, Span


def from_source(
    run: Run, span: Span, ordinal: int, kind: str, request_ref: dict[str, Any]
) -> dict[str, Any] | None:
    """The recorded event to serve this effect from, or None to perform it live."""
    from rar.replay.source import NondeterminismError

    assert run._source is not None
    try:
        served = run._source.serve(span.path, ordinal, kind, request_ref["digest"])
    except NondeterminismError as exc:
        expected = exc.details.get("expected") or {}
        if expected.get("seq") is not None:
            exc.details["differences"] = request_differences(run, int(expected["seq"]), request_ref)
            exc.differences = exc.details["differences"]  # type: ignore[attr-defined]
        raise
    return None if served is None else served.event


def request_differences(run: Run, seq: int, request_ref: dict[str, Any]) -> list[dict[str, Any]]:
    from rar.replay.fields import field_differences

    assert run._source is not None
    recorded = next(e for e in run._source.by_identity.values() if int(e["seq"]) == seq)
    try:
        expected = run.store.resolve_payload(recorded["request"])
        actual = run.store.resolve_payload(_plain_ref(request_ref))
    except Exception:  # the diff is an explanation; the error stands without it
        return []
    return field_differences(expected, actual)


def serve(
    run: Run,
    span: Span,
    ordinal: int,
    kind: str,
    request_ref: dict[str, Any],
    event: dict[str, Any],
) -> Any:
    """Record a served effect in this run and hand back its recorded result or error."""
    from rar.replay.source import exception_from_record, served_ref

    duration = int(event.get("duration_us", 0))
    result = served_ref(event.get("result"))
    run._append_effect(
        span,
        kind,
        ordinal,
        request_ref,
        duration,
        result=result,
        error=event.get("error"),
    )
    span.last_served = True
    source = run._source
    if source is not None and source.on_served is not None:
        source.on_served(source.served, len(source.by_identity))
    if "error" in event:
        raise exception_from_record(event["error"])
    return run.store.resolve_payload(result)


def already_recorded(run: Run, event: dict[str, Any]) -> int | None:
    """Resume: the seq of this event when the log holds it already (the replayed prefix)."""
    pending = run._resume_log
    if not pending:
        return None
    from rar.replay.source import NondeterminismError

    expected = pending[0]
    same = expected.get("type") == event.get("type") and expected.get("span") == event.get(
        "span", "run"
    )
    if same and event.get("type") == "effect":
        same = (expected.get("ordinal"), expected["request"]["digest"]) == (
            event.get("ordinal"),
            event["request"]["digest"],
        )
    if not same and int(expected.get("seq", 0)) > run._resume_effects_until:
        # past the last recorded effect: what the log has there is how the earlier session
        # ended (unwinding spans, a checkpoint), not work to redo; from here on, go live
        pending.clear()
        return None
    if not same:
        raise NondeterminismError(
            f"the re-executed code writes a {event.get('type')} event where the log has a "
            f"{expected.get('type')} event (seq {expected.get('seq')})",
            run_id=run.id,
            span=str(event.get("span", "run")),
            ordinal=int(event.get("ordinal", -1)),
            kind=str(event.get("kind", "")),
        )
    pending.popleft()
    return int(expected["seq"])


def _plain_ref(ref: dict[str, Any]) -> dict[str, Any]:
    """A payload reference whose inline value is plain JSON (not a Canonical part)."""
    from rar.hashing import Canonical, from_canonical

    value = ref.get("value")
    if isinstance(value, Canonical):
        return {**ref, "value": from_canonical(value.data)}
    return ref
