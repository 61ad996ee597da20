"""A run's events as trace entries with the fields of the RAR paper's ``TraceEntry`` (§3.2.1).

::

    for entry in trace_entries(store, run_id):
        entry.step_id, entry.event_type, entry.agent_id, entry.model, entry.deterministic
        entry.as_dict()          # one line of ``rar show RUN --trace --json``

Nothing new is recorded: every field is derived from the run's ``events.jsonl`` and payloads.

* ``step_id`` is the event's ``seq``; ``timestamp`` its ``ts``.
* ``event_type``: ``llm_call`` and ``tool_call`` for ``llm`` and ``tool`` effects,
  ``<kind>_effect`` for other effects (``uuid_effect``, ``clock_effect``, ``config_effect``),
  ``message_sent`` for messages, else the event's type with ``_`` for ``.`` (``run_started``,
  ``span_start``, ``bdi_update``, ``evidence``, ``audit``, ...).
* ``agent_id``: the event's ``agent``, else that of the innermost span around it that has one;
  ``agent_role`` is the agent's name without a numeric suffix (``planner_001`` → ``planner``):
  in RAR's science runs, agents are named by their roles.
* Messages: ``performative``, ``sender``, ``receivers``, ``conversation_id``, ``protocol`` and
  ``message_id`` (from the message's envelope).
* ``tool_name``: a tool effect's ``name``. LLM calls: ``model`` (``provider:model``),
  ``thinking_level`` (the request's ``reasoning_effort``; null when none was sent), ``cache_key``
  (the request's digest, the response cache's key) and ``response_hash`` (the digest of the
  model's response, the same whether it came live or from the cache).
* ``input_hash``: an effect's request digest. ``output_hash``: an effect's result digest (of
  its error value when it failed), or the digest of a bookkeeping event's payload (a message's
  content, anchors, an audit report, a BDI value, a run's result).
* ``latency_ms``: an effect's or a span's duration.
* ``deterministic``: whether the step gives the same output when done again from the same
  input. True for an effect a replay served from its source run's record (same kind, request
  and result there); for an ``llm`` call answered from the response cache or by an offline
  provider (``planner:*`` such as the rule-based planner, ``scripted``); for the offline tools
  ``search`` (BM25 over a corpus fixed by its digest), ``python`` (the sandbox, seeded by the
  run) and ``calculator``; for ``random`` and ``uuid`` (drawn from the run's seed), ``sleep``
  and ``wait``; and for every event that is not an effect (the agents' code writes it from
  recorded values). False for a live model call at record time, other tools (``http_get``,
  tools of your own), ``clock`` (the wall clock), ``config`` (resolved from the shell's
  profiles and variables) and effect kinds RAR does not know.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from rar.hashing import digest_value

if TYPE_CHECKING:
    from rar.store.store import Store

OFFLINE_PROVIDERS = frozenset({"planner", "scripted"})
OFFLINE_TOOLS = frozenset({"search", "python", "calculator"})
DETERMINISTIC_KINDS = frozenset({"random", "uuid", "sleep", "wait"})
_PAYLOAD_FIELDS = ("content", "anchors", "report", "value", "state", "result")
_ROLE = re.compile(r"[-_#.]?\d+$")


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One event of a run, in the RAR paper's trace vocabulary."""

    run_id: str
    step_id: int
    timestamp: str
    event_type: str
    span: str
    agent_id: str | None = None
    agent_role: str | None = None
    performative: str | None = None
    sender: str | None = None
    receivers: tuple[str, ...] | None = None
    message_id: str | None = None
    conversation_id: str | None = None
    protocol: str | None = None
    tool_name: str | None = None
    model: str | None = None
    thinking_level: str | None = None
    cache_key: str | None = None
    response_hash: str | None = None
    input_hash: str | None = None
    output_hash: str | None = None
    latency_ms: float | None = None
    deterministic: bool = True

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.receivers is not None:
            data["receivers"] = list(self.receivers)
        return data


def trace_entries(store: Store, run_id: str) -> list[TraceEntry]:
    """The trace entries of run ``run_id`` (a full id), one per event, in log order."""
    manifest = store.manifest(run_id)
    served = _recorded_effects(store, manifest.parent.run_id) if manifest.parent else set()
    span_agents: dict[str, str] = {}
    entries = []
    for event in store.events(run_id):
        span = str(event.get("span", "run"))
        if event.get("type") == "span.start" and event.get("agent"):
            span_agents[span] = str(event["agent"])
        entries.append(_entry(store, run_id, event, _agent(event, span, span_agents), served))
    return entries


def _agent(event: dict[str, Any], span: str, span_agents: dict[str, str]) -> str | None:
    if event.get("agent"):
        return str(event["agent"])
    path = span
    while path:
        if path in span_agents:
            return span_agents[path]
        path = path.rpartition("/")[0]
    return None


def _entry(
    store: Store,
    run_id: str,
    event: dict[str, Any],
    agent: str | None,
    served: set[tuple[str, str, str | None]],
) -> TraceEntry:
    kind = str(event.get("type"))
    fields: dict[str, Any] = {
        "run_id": run_id,
        "step_id": int(event["seq"]),
        "timestamp": str(event.get("ts", "")),
        "event_type": kind.replace(".", "_"),
        "span": str(event.get("span", "run")),
        "agent_id": agent,
        "agent_role": _ROLE.sub("", agent) if agent else None,
    }
    if "duration_us" in event:
        fields["latency_ms"] = round(int(event["duration_us"]) / 1000, 3)
    if kind == "effect":
        fields.update(_effect(store, event, served))
    else:
        fields["output_hash"] = next(
            (_digest(event[name]) for name in _PAYLOAD_FIELDS if _digest(event.get(name))), None
        )
    if kind == "message":
        fields["event_type"] = "message_sent"
        receivers = event.get("receivers") or []
        fields.update(
            performative=event.get("performative"),
            sender=event.get("sender"),
            receivers=tuple(str(r) for r in receivers),
            conversation_id=event.get("conversation_id"),
            protocol=event.get("protocol"),
        )
        envelope = _load(store, event.get("content"))
        if isinstance(envelope, dict) and envelope.get("message_id") is not None:
            fields["message_id"] = str(envelope["message_id"])
    return TraceEntry(**fields)


def _effect(
    store: Store, event: dict[str, Any], served: set[tuple[str, str, str | None]]
) -> dict[str, Any]:
    kind = str(event.get("kind"))
    request_digest = _digest(event.get("request"))
    output = _digest(event.get("result"))
    if output is None and event.get("error") is not None:
        output = digest_value(event["error"])
    fields: dict[str, Any] = {
        "event_type": {"llm": "llm_call", "tool": "tool_call"}.get(kind, f"{kind}_effect"),
        "input_hash": request_digest,
        "output_hash": output,
    }
    request = _load(store, event.get("request"))
    request = request if isinstance(request, dict) else {}
    deterministic = kind in DETERMINISTIC_KINDS
    if kind == "llm":
        nested = request.get("request")
        inner: dict[str, Any] = nested if isinstance(nested, dict) else {}
        provider = str(request.get("provider") or "")
        result = _load(store, event.get("result"))
        result = result if isinstance(result, dict) else {}
        response = result.get("response")
        fields.update(
            model=f"{provider}:{inner.get('model')}" if provider else inner.get("model"),
            thinking_level=inner.get("reasoning_effort"),
            cache_key=request_digest,
            response_hash=digest_value(response) if response is not None else None,
        )
        deterministic = bool(result.get("cached")) or provider in OFFLINE_PROVIDERS
    elif kind == "tool":
        fields["tool_name"] = request.get("name")
        deterministic = request.get("name") in OFFLINE_TOOLS
    elif kind == "config":
        fields["model"] = request.get("model")
    if request_digest is not None and (kind, request_digest, output) in served:
        deterministic = True  # served from the source run's record
    fields["deterministic"] = deterministic
    return fields


def _recorded_effects(store: Store, run_id: str) -> set[tuple[str, str, str | None]]:
    """(kind, request digest, result digest) of the effects of the run a replay came from."""
    from rar.errors import RarError

    try:
        events: Iterable[dict[str, Any]] = store.events(run_id)
    except RarError:  # the source run is gone or damaged: nothing counts as served
        return set()
    found = set()
    for event in events:
        if event.get("type") != "effect":
            continue
        request = _digest(event.get("request"))
        output = _digest(event.get("result"))
        if output is None and event.get("error") is not None:
            output = digest_value(event["error"])
        if request is not None:
            found.add((str(event.get("kind")), request, output))
    return found


def _digest(ref: Any) -> str | None:
    return str(ref["digest"]) if isinstance(ref, dict) and "digest" in ref else None


def _load(store: Store, ref: Any) -> Any:
    """A payload as stored (inline, or its blob with conversations still linked); None when it
    cannot be read (display only: ``rar verify`` reports damage)."""
    if not isinstance(ref, dict):
        return None
    if "value" in ref:
        return ref["value"]
    try:
        return store.get_json(ref["digest"])
    except Exception:
        return None
