"""Recorded effects as a source a replaying run is served from.

A :class:`RecordedEffects` holds the ``effect`` events of a source run, indexed by identity
(span path, ordinal) for the strict modes and by request digest for the cached mode. The Run
context asks it, for each effect the re-executed code causes, what to do: serve the recorded
result, go live, or stop with a :class:`NondeterminismError` that says exactly where and why.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from rar._moved import current_name
from rar.errors import RunError
from rar.hashing import Canonical, digest_bytes
from rar.store.store import Store

Mode = Literal["strict", "cached", "fork", "resume"]


class NondeterminismError(RunError):
    """The re-executed code asked for something other than what the record holds."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        span: str,
        ordinal: int,
        kind: str,
        expected: Any = None,
        actual: Any = None,
        differences: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(
            f"{message} at {span} #{ordinal} ({kind}) while replaying run {run_id}",
            run_id=run_id,
            span=span,
            ordinal=ordinal,
            kind=kind,
            expected=expected,
            actual=actual,
            differences=differences or [],
        )


class ReplayMissError(RunError):
    """Cached replay: an effect whose request was never recorded, and live calls are off."""


class RecordedError(RunError):
    """A recorded effect error whose exception class cannot be re-created here."""


@dataclass(slots=True)
class Served:
    """A recorded effect handed back to the re-executed code."""

    event: dict[str, Any]


@dataclass(slots=True)
class RecordedEffects:
    run_id: str
    mode: Mode
    until_seq: int | None = None  # fork/resume: serve events up to this seq, then go live
    allow_live: bool = False  # cached: perform a request that was never recorded
    by_identity: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    by_digest: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    consumed: set[tuple[str, int]] = field(default_factory=set)
    served: int = 0
    live: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)
    on_served: Callable[[int, int], None] | None = None  # progress: (served, recorded effects)

    @classmethod
    def load(
        cls,
        store: Store,
        run_id: str,
        mode: Mode,
        *,
        until_seq: int | None = None,
        allow_live: bool = False,
        events: list[dict[str, Any]] | None = None,
    ) -> RecordedEffects:
        source = cls(run_id=run_id, mode=mode, until_seq=until_seq, allow_live=allow_live)
        for event in store.events(run_id) if events is None else events:
            if event.get("type") != "effect":
                continue
            if until_seq is not None and int(event["seq"]) > until_seq:
                continue
            source.by_identity[(event["span"], int(event["ordinal"]))] = event
            source.by_digest[event["request"]["digest"]].append(event)
        return source

    def serve(self, span: str, ordinal: int, kind: str, request_digest: str) -> Served | None:
        """The recorded effect to serve, or None to perform it live."""
        if self.mode == "cached":
            candidates = self.by_digest.get(request_digest) or []
            for event in candidates:
                key = (event["span"], int(event["ordinal"]))
                if key not in self.consumed and event["kind"] == kind:
                    self.consumed.add(key)
                    self.served += 1
                    return Served(event)
            if candidates:  # the same request asked more often than recorded: reuse the last
                self.served += 1
                return Served(candidates[-1])
            self.misses.append(
                {"span": span, "ordinal": ordinal, "kind": kind, "request": request_digest}
            )
            if not self.allow_live:
                recorded = self.by_identity.get((span, ordinal))
                hint = (
                    f"; the record has request {recorded['request']['digest']} there"
                    if recorded
                    else ""
                )
                raise ReplayMissError(
                    f"cached replay of run {self.run_id}: the {kind} request at {span} "
                    f"#{ordinal} ({request_digest}) was never recorded{hint}. "
                    "Pass --allow-live to perform it, or replay in strict mode to see why.",
                    span=span,
                    ordinal=ordinal,
                    kind=kind,
                    request=request_digest,
                )
            self.live += 1
            return None
        found = self.by_identity.get((span, ordinal))
        if found is None:
            if self.mode in ("fork", "resume"):
                self.live += 1
                return None  # past the recorded part: live from here
            raise NondeterminismError(
                "an effect the record does not have (the code does more than it did)",
                run_id=self.run_id,
                span=span,
                ordinal=ordinal,
                kind=kind,
            )
        event = found
        self.consumed.add((span, ordinal))
        if event["kind"] != kind or event["request"]["digest"] != request_digest:
            raise NondeterminismError(
                "a different request than recorded",
                run_id=self.run_id,
                span=span,
                ordinal=ordinal,
                kind=kind,
                expected={
                    "kind": event["kind"],
                    "request": event["request"]["digest"],
                    "seq": event["seq"],
                },
                actual={"kind": kind, "request": request_digest},
            )
        self.served += 1
        return Served(event)

    def unconsumed(self) -> list[dict[str, Any]]:
        """Recorded effects the re-execution never asked for, in record order."""
        left = [e for key, e in self.by_identity.items() if key not in self.consumed]
        return sorted(left, key=lambda e: int(e["seq"]))


def served_ref(ref: dict[str, Any] | None) -> dict[str, Any] | None:
    """A recorded payload reference, ready to be written again without re-canonicalising.

    An inline value read from a log is plain JSON; written into the replay's log as is, it
    would be walked and re-serialised like any new value. Its canonical bytes are known,
    though: they are ``size`` bytes hashing to ``digest``. ``orjson`` with sorted keys gives
    them for almost every value (no floats, no keys outside the BMP); when its bytes have that
    length and digest they *are* the recorded bytes, and the value is handed on as a
    :class:`~rar.hashing.Canonical` carrying them. Anything else goes the general way, which
    writes the same bytes more slowly.
    """
    if ref is None or "value" not in ref:
        return ref
    value = ref["value"]
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return ref
    if len(data) != ref.get("size") or digest_bytes(data) != ref.get("digest"):
        return ref
    return {**ref, "value": Canonical(value, data)}


def exception_from_record(error: dict[str, Any]) -> BaseException:
    """Re-create a recorded exception as closely as possible (same class when importable)."""
    message = str(error.get("message", ""))
    module, name = error.get("module"), str(error.get("type", "Exception"))
    cls: Any = None
    if module:
        try:  # a module that moved since the recording is imported under its name today
            cls = importlib.import_module(current_name(str(module)))
            for part in name.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            cls = None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return RecordedError(f"{name}: {message}", recorded_type=name)
    exc: BaseException = cls.__new__(cls)
    BaseException.__init__(exc, message)
    from rar.errors import RarError

    if isinstance(exc, RarError):  # RAR errors print their message attribute
        exc.message, exc.details = message, {}
    return exc
