"""A run's agentic flows, shaped for the viewer's Flow panel (``/api/runs/{id}/flow``).

A flow run's log holds ``flow.step`` (one agent on one context: a node of the graph),
``flow.merge`` (the splits of a step joined again) and ``flow.end`` (the walk's resulting graphs
and its statistics) events, defined in :mod:`rar.store.events`. :func:`flow_document` groups
them by flow walk — the events of one ``flow`` name up to and including its ``flow.end``; a
name walked again after its end starts a second walk — and gives each node the range of the
events recorded in its span (its ``node`` is its span path). The statistics of ``flow.end``
(a payload) are read from the store.

An event that does not validate against its model (a missing or mistyped field, a ``split``
that is not ``[index, total]``, a node seen twice in one walk) or whose type is an unknown
``flow.*`` is left out of the flows and listed in ``skipped`` with the reason, so one damaged
event never hides the rest of the flow.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from rar.errors import RarError
from rar.store.events import EventBase, FlowEnd, FlowMerge, FlowStep
from rar.store.store import Store

__all__ = ["FLOW_MODELS", "flow_document", "is_flow_event"]

FLOW_MODELS: dict[str, type[EventBase]] = {
    "flow.step": FlowStep,
    "flow.merge": FlowMerge,
    "flow.end": FlowEnd,
}
"""The flow event types the viewer draws, and the models they must validate against."""

_STEP_FIELDS = (
    "node",
    "agent",
    "agent_type",
    "category",
    "parents",
    "split",
    "status",
    "attempts",
    "grade",
    "next",
    "symbols",
    "error",
)
_MERGE_FIELDS = ("node", "agent", "parents", "inputs", "outputs", "errored")
_MAX_REASONS = 4


def is_flow_event(event: dict[str, Any]) -> bool:
    return str(event.get("type") or "").startswith("flow.")


def _reason(exc: ValidationError) -> str:
    errors = exc.errors()
    parts = [
        f"{'.'.join(str(p) for p in error['loc']) or 'event'}: {error['msg']}"
        for error in errors[:_MAX_REASONS]
    ]
    if len(errors) > _MAX_REASONS:
        parts.append(f"and {len(errors) - _MAX_REASONS} more")
    return "; ".join(parts)


def _validate(event: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The event's fields as its model reads them, or why it cannot be read."""
    kind = str(event.get("type"))
    model = FLOW_MODELS.get(kind)
    if model is None:
        return None, f"unknown flow event type {kind!r}"
    # fields the model does not know are ignored (a newer writer may add some)
    known = {name: event[name] for name in model.model_fields if name in event}
    known.setdefault("ts", "")
    known.setdefault("prev", None)
    try:
        parsed = model.model_validate(known)
    except ValidationError as exc:
        return None, _reason(exc)
    value = parsed.model_dump(mode="json")
    if kind == "flow.step":
        split = value.get("split")
        if split is not None and not (len(split) == 2 and 1 <= split[0] <= split[1]):
            return None, f"split must be [index, total] with 1 <= index <= total, not {split}"
    if kind in ("flow.step", "flow.merge") and not value.get("node"):
        return None, "node must not be empty"
    return value, None


def _skip(event: dict[str, Any], reason: str) -> dict[str, Any]:
    flow = event.get("flow")
    return {
        "seq": event.get("seq"),
        "type": str(event.get("type")),
        "flow": flow if isinstance(flow, str) else None,
        "reason": reason,
    }


def _span_ranges(events: list[dict[str, Any]], nodes: set[str]) -> dict[str, list[int]]:
    """``node → [first seq, last seq, count]`` of the events in each node's span (the span or
    any span under it): one pass over the events, each walking up its span path."""
    ranges: dict[str, list[int]] = {}
    if not nodes:
        return ranges
    for event in events:
        seq = event.get("seq")
        path = event.get("span")
        if not isinstance(seq, int) or not isinstance(path, str):
            continue
        while True:
            if path in nodes:
                found = ranges.get(path)
                if found is None:
                    ranges[path] = [seq, seq, 1]
                else:
                    found[0] = min(found[0], seq)
                    found[1] = max(found[1], seq)
                    found[2] += 1
            cut = path.rfind("/")
            if cut <= 0:
                break
            path = path[:cut]
    return ranges


def _statistics(store: Store, ref: Any) -> tuple[Any, str | None]:
    if ref is None:
        return None, None
    try:
        return store.resolve_payload(ref), None
    except RarError as exc:
        return None, exc.message
    except (ValueError, TypeError, KeyError) as exc:  # a reference that names no readable blob
        return None, f"the statistics payload cannot be read ({type(exc).__name__}: {exc})"


def flow_document(store: Store, events: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"flows": [{name, walk, steps, merges, end}], "skipped": [...]}`` for a run's events.

    * a step: ``seq`` (of its ``flow.step`` event), ``span`` (where that event was recorded),
      ``node``, ``agent``, ``agent_type``, ``category``, ``parents``, ``split`` ([index, total] or
      None), ``status``, ``attempts``, ``grade``, ``next``, ``symbols``, ``error`` and ``events``:
      ``{first, last, count}`` of the events in the node's span (None when there are none);
    * a merge: ``seq``, ``span``, ``node``, ``agent``, ``parents``, ``inputs``, ``outputs``,
      ``errored`` and ``events``;
    * ``end``: ``seq``, ``span``, ``graphs``, ``contexts``, ``errored``, ``report`` (the statistics,
      read from the store) and ``report_error`` (why they could not be read), or None while the
      walk has not ended;
    * ``skipped``: ``{seq, type, flow, reason}`` for each flow event left out.

    Flows are in the order of their first event; steps and merges in the order recorded.
    """
    flows: list[dict[str, Any]] = []
    open_walks: dict[str, dict[str, Any]] = {}
    walks: dict[str, int] = {}
    seen: dict[int, set[str]] = {}  # id(flow) → its node ids
    skipped: list[dict[str, Any]] = []
    for event in events:
        if not is_flow_event(event):
            continue
        value, reason = _validate(event)
        if value is None:
            skipped.append(_skip(event, reason or "not readable"))
            continue
        name = value["flow"]
        flow = open_walks.get(name)
        if flow is None:
            walks[name] = walks.get(name, 0) + 1
            flow = {"name": name, "walk": walks[name], "steps": [], "merges": [], "end": None}
            open_walks[name] = flow
            seen[id(flow)] = set()
            flows.append(flow)
        base = {"seq": value["seq"], "span": value["span"]}
        kind = value["type"]
        if kind == "flow.end":
            report, problem = _statistics(store, event.get("report"))
            flow["end"] = {
                **base,
                "graphs": value["graphs"],
                "contexts": value["contexts"],
                "errored": value["errored"],
                "report": report,
                "report_error": problem,
            }
            del open_walks[name]
            continue
        nodes = seen[id(flow)]
        if value["node"] in nodes:
            skipped.append(_skip(event, f"node {value['node']!r} is already in this flow"))
            continue
        nodes.add(value["node"])
        fields = _STEP_FIELDS if kind == "flow.step" else _MERGE_FIELDS
        item = {**base, **{key: value[key] for key in fields}}
        flow["steps" if kind == "flow.step" else "merges"].append(item)

    ranges = _span_ranges(events, {node for nodes in seen.values() for node in nodes})
    for flow in flows:
        for item in (*flow["steps"], *flow["merges"]):
            found = ranges.get(item["node"])
            item["events"] = (
                {"first": found[0], "last": found[1], "count": found[2]} if found else None
            )
    return {"flows": flows, "skipped": skipped}
