"""The closed set of event types in ``events.jsonl``.

Every event has the common fields of :class:`EventBase` and a ``type`` discriminator; the union
:data:`Event` and :data:`EVENT_ADAPTER` read and validate any line. ``docs/store-format.md``
documents every type and field; a test checks that the two agree.

Writers build events as plain dicts on the hot path (the log canonicalizes them); every event a
writer produces validates against this union, which the test-suite checks for each type.
New fields always get defaults, so older recordings keep loading.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Model(BaseModel):
    # schemas are built when first used: only ``rar verify``'s slow path and the tests validate
    # events, and building all of them costs ~40 ms on every command's import
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class PayloadRef(_Model):
    """A payload by digest; ``value`` holds it inline when its canonical form is small."""

    digest: str
    size: int
    value: Any = None

    def reference(self) -> dict[str, Any]:
        """The reference as :func:`rar.store.payloads.resolve` reads it: ``value`` only when
        the payload is inline. (A manifest's JSON writes ``"value": null`` for a payload held as
        a blob; only an inline ``null`` has the 4 bytes of ``null``.)"""
        ref: dict[str, Any] = {"digest": self.digest, "size": self.size}
        if self.value is not None or self.size == len(b"null"):
            ref["value"] = self.value
        return ref


class ErrorValue(_Model):
    """An exception as a value in the record: what failed and why, never disguised as output."""

    type: str
    message: str
    module: str | None = None


class EventBase(_Model):
    seq: int = Field(description="1-based position in the log")
    ts: str = Field(description="UTC time the event was written, ISO 8601 with microseconds")
    prev: str | None = Field(description="digest of the previous line's bytes; null for seq 1")
    span: str = Field(default="run", description="span path, e.g. run/planner/research#2")
    agent: str | None = None
    carry: dict[str, str] | None = Field(
        default=None,
        description="small blobs first needed by this event, carried in its line: digest → the "
        "blob's bytes (UTF-8 text) as a string; readers take them out of the event",
    )


class RunStarted(EventBase):
    type: Literal["run.started"] = "run.started"
    manifest: dict[str, Any] = Field(description="the immutable part of the manifest at start")


class RunFinished(EventBase):
    type: Literal["run.finished"] = "run.finished"
    status: str
    result: PayloadRef | None = None
    error: ErrorValue | None = None
    state_diff: dict[str, list[str]] | None = None
    effects: int = 0
    # the manifest's final state, sealed in the chain (absent from older logs)
    finished_at: str | None = Field(default=None, description="the manifest's finished_at")
    stats: dict[str, Any] | None = Field(default=None, description="the manifest's stats")


class EffectEvent(EventBase):
    type: Literal["effect"] = "effect"
    kind: str = Field(description="llm, tool, clock, random, uuid, sleep, ...")
    ordinal: int = Field(description="0-based index of this effect within its span")
    request: PayloadRef
    result: PayloadRef | None = None
    error: ErrorValue | None = None
    duration_us: int = 0


class SpanStart(EventBase):
    type: Literal["span.start"] = "span.start"
    name: str
    attributes: dict[str, Any] = Field(default_factory=dict)


class SpanEnd(EventBase):
    type: Literal["span.end"] = "span.end"
    status: Literal["ok", "error"] = "ok"
    error: ErrorValue | None = None
    duration_us: int = 0


class SnapshotEvent(EventBase):
    type: Literal["snapshot"] = "snapshot"
    phase: Literal["before", "after"]
    tree: str = Field(description="digest of the snapshot tree blob")
    files: int
    bytes: int


class ArtifactEvent(EventBase):
    type: Literal["artifact"] = "artifact"
    name: str
    digest: str
    size: int
    media_type: str = "application/octet-stream"


class ErrorEvent(EventBase):
    type: Literal["error"] = "error"
    error: ErrorValue
    fatal: bool = False


class MessageEvent(EventBase):
    """A message between agents (ACL performatives in the science runtime)."""

    type: Literal["message"] = "message"
    performative: str
    sender: str
    receivers: list[str]
    conversation_id: str | None = None
    reply_to: str | None = None
    content: PayloadRef
    protocol: str | None = Field(default=None, description="e.g. fipa-contract-net")
    artifacts: list[str] = Field(default_factory=list, description="artifact names it refers to")


class BdiUpdate(EventBase):
    type: Literal["bdi.update"] = "bdi.update"
    component: Literal["beliefs", "desires", "intentions"]
    op: Literal["add", "remove", "replace"]
    key: str
    value: PayloadRef | None = None


class EvidenceEvent(EventBase):
    type: Literal["evidence"] = "evidence"
    anchors: PayloadRef


class AuditEvent(EventBase):
    type: Literal["audit"] = "audit"
    report: PayloadRef
    stage: str | None = Field(default=None, description="which audit: draft or final")


class ReplanEvent(EventBase):
    """The planner revised its plan: which revision, and the challenges still open."""

    type: Literal["replan"] = "replan"
    revision: int = Field(ge=1)
    goal: str
    open_challenges: list[str] = Field(default_factory=list)


class CheckpointEvent(EventBase):
    type: Literal["checkpoint"] = "checkpoint"
    reason: str
    state: PayloadRef | None = None


class ReplayEvent(EventBase):
    """The report of a replay, stored in the replayed run before it finishes."""

    type: Literal["replay"] = "replay"
    report: PayloadRef


class FallbackEvent(EventBase):
    """A component gave up on what it was configured with and used something else instead."""

    type: Literal["fallback"] = "fallback"
    what: str = Field(description="the component, e.g. planner")
    failed: str = Field(description="what it was configured with, e.g. openai:gpt-4o-mini")
    instead: str = Field(description="what it used instead, e.g. planner:rule-based")
    error: ErrorValue | None = None


class FlowStep(EventBase):
    """One agent of a flow executed on one context (one split): a node of the flow's graph.

    ``node`` is the step's span path, so it is the same in every replay of the flow; ``parents``
    are the nodes it follows (the previous step, or the splits a merge joined). ``symbols`` are
    the execution-graph tokens this step added (``M``, the agent's name, ``⚠``, ``☢``, ...).
    """

    type: Literal["flow.step"] = "flow.step"
    flow: str
    node: str
    agent: str
    agent_type: str
    category: str | None = None
    parents: list[str] = Field(default_factory=list)
    split: list[int] | None = Field(default=None, description="[index, total], 1-based")
    status: Literal["ok", "skipped", "error"] = "ok"
    attempts: int = Field(default=0, ge=0, description="model calls made by the handler loop")
    grade: bool | None = None
    next: str | None = None
    symbols: list[str] = Field(default_factory=list)
    error: ErrorValue | None = None


class FlowMerge(EventBase):
    """The contexts of a depth-1 split merged into ``outputs`` contexts by the agent's merge."""

    type: Literal["flow.merge"] = "flow.merge"
    flow: str
    node: str
    agent: str
    parents: list[str] = Field(default_factory=list)
    inputs: int = Field(ge=0)
    outputs: int = Field(ge=0)
    errored: int = Field(default=0, ge=0)
    next: str | None = Field(default=None, description="the agent a single merged context chose")
    symbols: list[str] = Field(default_factory=list, description="e.g. 5↣1, →")


class FlowEnd(EventBase):
    """A flow walk ended: its resulting contexts' graphs, and its request statistics."""

    type: Literal["flow.end"] = "flow.end"
    flow: str
    graphs: list[str] = Field(default_factory=list)
    report: PayloadRef | None = Field(default=None, description="the statistics")
    contexts: int = Field(default=0, ge=0)
    errored: int = Field(default=0, ge=0)


class NoteEvent(EventBase):
    """Free-form bookkeeping from the runtime (a repaired torn tail, a warning)."""

    type: Literal["note"] = "note"
    level: Literal["info", "warning"] = "info"
    text: str


Event = Annotated[
    RunStarted
    | RunFinished
    | EffectEvent
    | SpanStart
    | SpanEnd
    | SnapshotEvent
    | ArtifactEvent
    | ErrorEvent
    | MessageEvent
    | BdiUpdate
    | EvidenceEvent
    | AuditEvent
    | CheckpointEvent
    | ReplayEvent
    | FallbackEvent
    | ReplanEvent
    | FlowStep
    | FlowMerge
    | FlowEnd
    | NoteEvent,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))
EVENT_MODELS: dict[str, type[EventBase]] = {
    model.model_fields["type"].default: model
    for model in (
        RunStarted,
        RunFinished,
        EffectEvent,
        SpanStart,
        SpanEnd,
        SnapshotEvent,
        ArtifactEvent,
        ErrorEvent,
        MessageEvent,
        BdiUpdate,
        EvidenceEvent,
        AuditEvent,
        CheckpointEvent,
        ReplayEvent,
        FallbackEvent,
        ReplanEvent,
        FlowStep,
        FlowMerge,
        FlowEnd,
        NoteEvent,
    )
}
EVENT_TYPES: frozenset[str] = frozenset(EVENT_MODELS)


def payload_digests(event: dict[str, Any]) -> list[str]:
    """Digests of blobs an event refers to directly (payloads not held inline, trees, files)."""
    found: list[str] = []
    for key in ("request", "result", "content", "value", "anchors", "report", "state"):
        ref = event.get(key)
        if isinstance(ref, dict) and "digest" in ref and "value" not in ref:
            found.append(ref["digest"])
    if event.get("type") == "snapshot" and isinstance(event.get("tree"), str):
        found.append(event["tree"])
    elif event.get("type") == "artifact" and isinstance(event.get("digest"), str):
        found.append(event["digest"])
    return found


def inline_payloads(event: dict[str, Any]) -> list[Any]:
    """Inline payload values of an event (they may link to blobs, e.g. message chains)."""
    values: list[Any] = []
    for key in ("request", "result", "content", "value", "anchors", "report", "state"):
        ref = event.get(key)
        if isinstance(ref, dict) and "value" in ref:
            values.append(ref["value"])
    return values
