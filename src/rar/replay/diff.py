"""Diff two recorded runs: where they first diverge, and why.

::

    d = diff_runs(store, "20261130-061555-97b3305c", "1c0ffee5")
    d.equivalent, d.first_divergence, d.answer.diff, d.as_dict()

**Steps** are a run's ``effect`` events, keyed by (span path, kind), and its ``message``,
``evidence`` and ``audit`` events (kind = the event type, ordinal = the index among such events in
the span); ``span.*``, ``snapshot``, ``note``, ``run.*`` and the rest are not steps. ``ts``,
``duration_us``, ``seq``, ``prev`` and latencies never count as divergence.

**Order.** Steps are compared in a canonical order, not as they happen to lie in the log, so
that concurrent work interleaving differently from run to run does not look like divergence:

* Sibling spans (children of one span, whatever their names) *overlap* when one opens (its
  ``span.start``) before an earlier-opened sibling, or any sibling grouped with it, has ended (its
  ``span.end``; a span never closed never ends). Each maximal set of two or more overlapping
  siblings is a *concurrent group*: its steps, those of the siblings and of all their descendants,
  are listed as one block, sibling by sibling in the order the spans were opened (deterministic:
  ``#k`` numbers that order), at the place of the group's first ``span.start``. Every other step
  keeps its log position relative to the block, so a step of the parent taken while the group ran
  comes after the block. Inside one sibling the same rule applies to its own children.
* The effects of one span keep their ordinals' order: if concurrent tasks in the same span
  finish out of order, the effects are put back in ordinal order among that span's log
  positions.

A run without concurrency (no two sibling spans overlap, no span's effects finish out of order)
is compared in log order, as it always was. The order is per run, so a group that overlapped in
one run only still lines up: non-overlapping siblings already lie block by block in the log.
``Step.seq`` stays the step's log position (``steps[i].a.seq`` need not increase with ``i``).

**Alignment** (deterministic, O(n log n)): first the longest common subsequence of
(span, kind, request digest, occurrence) tokens, unique within a run, so unchanged steps pair up
around inserted and removed ones; then, inside each stretch left unpaired, the longest common
subsequence of (span, kind, occurrence), so a step whose request or result changed still pairs
with its counterpart. With unique tokens the LCS is a longest increasing subsequence, as in
patience diff (:class:`difflib.SequenceMatcher` is quadratic when differences are many and
scattered). Unpaired steps are ``extra-in-a`` (removed in B) or ``extra-in-b`` (inserted in B).

A pair is, first match wins: ``different-request`` (request digests differ), ``error-differs``
(an error in one run only, or different errors), ``different-response`` (llm) or
``different-result`` (other kinds) when the results differ, else ``same``. An llm result's
``cached`` and ``failures`` (cache hits, retried attempts) are ignored. A ``message``'s request is
its header (performative, sender, receivers, conversation_id, reply_to, and protocol and
artifacts when it has them), its result the content;
``evidence`` and ``audit`` only have a result (anchors, report).

**Verdict.** ``equivalent`` iff every aligned step is ``same`` and the final answers are equal
(same answer text and same final status). Manifest differences (seed, config, models, tools,
inputs, corpus, environment) are reported and count only through their effects on steps and the
answer. Usage, cost, latency and cache hits (``manifest.stats``) are reported as values and
deltas (B - A), never as divergence.

**JSON** (:meth:`RunDiff.as_dict`, ``rar diff --json``)::

    {"a": {"run_id", "goal", "status", "events", "steps"}, "b": {...},
     "equivalent": bool,
     "counts": {"same": n, "different-request": n, ..., "extra-in-b": n},
     "first_divergence": null | {"index", "status", "span", "kind",
         "a": {"seq", "ordinal"} | null, "b": ..., "reason", "compared": "request" | "result"
         | "error" | null, "fields": [field], "fields_omitted": n, "detail": str | null},
     "steps": [{"index", "status", "span", "kind", "a": {"seq", "ordinal"} | null, "b": ...}],
     "answer": {"equal", "a", "b", "status_a", "status_b", "diff": [unified diff lines]},
     "evidence": {"added": [anchor], "removed": [anchor],
                  "changed": [{"doc_id", "location", "a", "b", "snippet"}]},
     "metrics": [{"name", "a", "b", "delta"}],
     "manifest": [field], "manifest_omitted": n}

A field is ``{"path", "change": "changed" | "added" (only in B) | "removed", "a", "b"}`` with
paths like ``request.messages[3].content`` (``$``: the whole value) and values over ~80 characters
cut to strings ending in ``…``; an anchor is ``{"doc_id", "location", "content_hash", "snippet",
"relevance_score"}``.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rar.hashing import canonical, digest_value
from rar.replay.diff_model import (
    STATUSES,
    AlignedStep,
    AnswerDiff,
    Divergence,
    EvidenceDiff,
    Metric,
    Pair,
    RunDiff,
    RunSide,
    SpanSummary,
    Step,
)
from rar.replay.fields import FieldDiff, field_diff, json_text, shorten

__all__ = [
    "STATUSES",
    "AlignedStep",
    "AnswerDiff",
    "Divergence",
    "EvidenceDiff",
    "FieldDiff",
    "Metric",
    "RunDiff",
    "RunSide",
    "SpanSummary",
    "Step",
    "align",
    "canonical_order",
    "diff_runs",
    "field_diff",
    "steps_of",
]

if TYPE_CHECKING:
    from rar.store.manifest import Manifest
    from rar.store.store import Store

PAYLOAD_FIELD = {"message": "content", "evidence": "anchors", "audit": "report"}
IGNORED_RESULT_FIELDS = {"llm": frozenset({"cached", "failures"})}
_MANIFEST_SKIP = frozenset(
    {"run_id", "created_at", "workspace", "status", "finished_at", "events", "head", "stats"}
)
_HEADER = ("performative", "sender", "receivers", "conversation_id", "reply_to")
_OPTIONAL_HEADER = ("protocol", "artifacts")
_REASONS = {
    "different-request": "the {kind} request differs",
    "different-response": "same request; the model answered differently",
    "different-result": "same request; the {kind} step produced a different result",
    "error-differs": "{errors}",
    "extra-in-a": "a {kind} step in A only (removed in B)",
    "extra-in-b": "a {kind} step in B only (inserted in B)",
}


@dataclass(frozen=True, slots=True)
class _Run:
    run_id: str
    manifest: Manifest
    events: list[dict[str, Any]]
    steps: list[Step]  # in the canonical order
    concurrent: tuple[tuple[str, ...], ...]  # the concurrent groups of sibling spans

    @classmethod
    def load(cls, store: Store, ref: str) -> _Run:
        run_id = store.resolve(ref)
        events = store.events(run_id)
        order = _SpanOrder(events)
        steps = order.apply(steps_of(events))
        return cls(run_id, store.manifest(run_id), events, steps, order.groups)

    def side(self) -> RunSide:
        manifest = self.manifest
        return RunSide(
            self.run_id, manifest.goal, manifest.status.value, len(self.events), len(self.steps)
        )


# --- the diff ----------------------------------------------------------------------------------


def diff_runs(store: Store, a_id: str, b_id: str) -> RunDiff:
    """Compare run ``a_id`` with run ``b_id`` (ids or unique prefixes) in ``store``."""
    a, b = _Run.load(store, a_id), _Run.load(store, b_id)
    aligned = [AlignedStep(_classify(store, x, y), x, y) for x, y in align(a.steps, b.steps)]
    first = next((i for i, s in enumerate(aligned) if s.status != "same"), None)
    manifest, omitted = field_diff(_manifest_view(a.manifest), _manifest_view(b.manifest), 100)
    return RunDiff(
        a=a.side(),
        b=b.side(),
        steps=tuple(aligned),
        first_divergence=None if first is None else _divergence(store, first, aligned[first]),
        answer=_answers(store, a, b),
        evidence=_evidence(_anchors(store, a.steps), _anchors(store, b.steps)),
        metrics=tuple(_metrics(a.manifest.stats, b.manifest.stats)),
        manifest=tuple(manifest),
        manifest_omitted=omitted,
        concurrent=tuple(dict.fromkeys([*a.concurrent, *b.concurrent])),
    )


def steps_of(events: Iterable[dict[str, Any]]) -> list[Step]:
    """The steps of a run, in log order."""
    steps: list[Step] = []
    counters: dict[tuple[str, str], int] = {}
    for event in events:
        kind, span, seq = event.get("type"), str(event.get("span", "run")), int(event["seq"])
        if kind == "effect":
            request, result = _digest(event.get("request")), _digest(event.get("result"))
            ordinal, error, kind = int(event["ordinal"]), event.get("error"), str(event["kind"])
            steps.append(Step(seq, span, kind, ordinal, request, result, error, event))
        elif kind in PAYLOAD_FIELD:
            ordinal = counters[span, kind] = counters.get((span, kind), -1) + 1
            request = digest_value(_header(event)) if kind == "message" else None
            result = _digest(event.get(PAYLOAD_FIELD[kind]))
            steps.append(Step(seq, span, kind, ordinal, request, result, None, event))
    return steps


def canonical_order(steps: Sequence[Step], events: Iterable[dict[str, Any]]) -> list[Step]:
    """``steps`` (of the run whose log is ``events``) in the canonical order of the module
    docstring: concurrent sibling spans block by block, each span's effects in ordinal order."""
    return _SpanOrder(events).apply(steps)


class _SpanOrder:
    """The span tree of a run's log, and where its concurrent groups of siblings are."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        start: dict[str, int] = {}
        end: dict[str, int] = {}
        for event in events:
            kind, path = event.get("type"), event.get("span")
            if not isinstance(path, str):
                continue
            if kind == "span.start":
                start.setdefault(path, int(event["seq"]))
            elif kind == "span.end" and path in start:
                end.setdefault(path, int(event["seq"]))
        children: dict[str, list[str]] = {}
        for path in sorted(start, key=start.__getitem__):  # siblings in the order they opened
            parent, slash, _ = path.rpartition("/")
            if slash:
                children.setdefault(parent, []).append(path)
        never = float("inf")  # a span never closed overlaps every sibling opened after it
        # path -> (seq of its group's first span.start, its place in the group)
        self.member: dict[str, tuple[int, int]] = {}
        groups: list[tuple[str, ...]] = []
        for siblings in children.values():
            group: list[str] = []
            reach = -1.0  # the latest end among the group's spans so far
            for path in [*siblings, None]:
                if path is not None and group and start[path] < reach:
                    group.append(path)
                else:
                    if len(group) > 1:
                        groups.append(tuple(group))
                        for place, member in enumerate(group):
                            self.member[member] = (start[group[0]], place)
                    group, reach = ([path], -1.0) if path is not None else ([], -1.0)
                if path is not None:
                    reach = max(reach, end.get(path, never))
        self.groups = tuple(sorted(groups, key=lambda g: start[g[0]]))
        self._prefix: dict[str, tuple[int, ...]] = {}

    def _key(self, span: str) -> tuple[int, ...]:
        """The sort key's prefix for the steps of ``span``: (group start, place) per level."""
        found = self._prefix.get(span)
        if found is None:
            parent, slash, _ = span.rpartition("/")
            found = self._key(parent) if slash else ()
            if span in self.member:
                found = (*found, *self.member[span])
            self._prefix[span] = found
        return found

    def apply(self, steps: Sequence[Step]) -> list[Step]:
        placed = list(steps)
        effects: dict[str, list[int]] = {}  # a span's effects, as indices in log order
        for index, step in enumerate(steps):
            if step.event.get("type") == "effect":
                effects.setdefault(step.span, []).append(index)
        for indices in effects.values():  # each span's effects in ordinal order, in its slots
            ordered = sorted((steps[i] for i in indices), key=lambda step: step.ordinal)
            for index, step in zip(indices, ordered, strict=True):
                placed[index] = step
        if not self.member:
            return placed
        keys = [(*self._key(step.span), steps[i].seq) for i, step in enumerate(placed)]
        return [placed[i] for i in sorted(range(len(placed)), key=keys.__getitem__)]


def align(a: Sequence[Step], b: Sequence[Step], *, content: bool = True) -> list[Pair]:
    """Pairs of aligned steps; ``(step, None)`` / ``(None, step)`` for a step in one run only.

    ``content``: pair by (span, kind, request) first, then each unpaired stretch by (span, kind).
    """
    if not a or not b:
        return [*((x, None) for x in a), *((None, y) for y in b)]
    pairs: list[Pair] = []
    i0 = j0 = 0
    for i, j in [*_common(_tokens(a, content), _tokens(b, content)), (len(a), len(b))]:
        if content:
            pairs.extend(align(a[i0:i], b[j0:j], content=False))
        else:
            pairs.extend([*((x, None) for x in a[i0:i]), *((None, y) for y in b[j0:j])])
        if i < len(a):
            pairs.append((a[i], b[j]))
        i0, j0 = i + 1, j + 1
    return pairs


def _tokens(steps: Sequence[Step], content: bool) -> list[tuple[Any, ...]]:
    """(span, kind[, request digest or else result digest], occurrence): unique in a run."""
    seen: dict[tuple[Any, ...], int] = {}
    tokens = []
    for step in steps:
        base: tuple[Any, ...] = step.key
        if content:
            base = (*base, step.request if step.request is not None else step.result)
        count = seen[base] = seen.get(base, -1) + 1
        tokens.append((*base, count))
    return tokens


def _common(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> list[tuple[int, int]]:
    """The longest common subsequence of two sequences of unique tokens, as index pairs.

    With unique tokens the LCS is the longest increasing subsequence of B's positions taken in
    A's order (patience sorting): O(n log n) whatever the number of differences.
    """
    where = {token: j for j, token in enumerate(b)}
    matches = [(i, where[token]) for i, token in enumerate(a) if token in where]
    tails: list[int] = []  # the smallest B position ending an increasing run of each length
    ends: list[int] = []  # index in matches of that run's last match
    before = [-1] * len(matches)
    for k, (_, j) in enumerate(matches):
        length = bisect.bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            ends.append(k)
        else:
            tails[length], ends[length] = j, k
        before[k] = ends[length - 1] if length else -1
    chain = []
    k = ends[-1] if ends else -1
    while k >= 0:
        chain.append(matches[k])
        k = before[k]
    return chain[::-1]


def _classify(store: Store, x: Step | None, y: Step | None) -> str:
    if x is None or y is None:
        return "extra-in-a" if y is None else "extra-in-b"
    if x.request != y.request:
        return "different-request"
    if x.error != y.error:
        return "error-differs"
    if x.result == y.result:
        return "same"
    ignored = x.kind in IGNORED_RESULT_FIELDS  # equal once cache hits and retries are left out?
    if ignored and canonical(_result(store, x)) == canonical(_result(store, y)):
        return "same"
    return "different-response" if x.kind == "llm" else "different-result"


def _divergence(store: Store, index: int, aligned: AlignedStep) -> Divergence:
    x, y, step = aligned.a, aligned.b, aligned.step
    compared, detail, omitted = None, None, 0
    found: list[FieldDiff] = []
    if x is None or y is None:
        value = _request(store, step)
        value = value if value is not None else _result(store, step)
        detail = shorten(value if isinstance(value, str) else json_text(value), width=160)
    elif aligned.status == "different-request":
        compared, (found, omitted) = "request", field_diff(_request(store, x), _request(store, y))
    elif aligned.status == "error-differs":
        compared, (found, omitted) = "error", field_diff(_outcome(store, x), _outcome(store, y))
    else:
        compared, (found, omitted) = "result", field_diff(_result(store, x), _result(store, y))
    errors = "the step failed in A only" if x is not None and x.error else ""
    if y is not None and y.error:
        errors = (
            "the step failed in both, with different errors"
            if errors
            else "the step failed in B only"
        )
    reason = _REASONS[aligned.status].format(kind=step.kind, errors=errors)
    return Divergence(index, aligned, reason, compared, tuple(found), omitted, detail)


def _request(store: Store, step: Step) -> Any:
    if step.event.get("type") == "effect":
        return store.resolve_payload(step.event.get("request"))
    return _header(step.event) if step.kind == "message" else None


def _result(store: Store, step: Step) -> Any:
    kind = str(step.event.get("type"))
    value = store.resolve_payload(step.event.get(PAYLOAD_FIELD.get(kind, "result")))
    ignored = IGNORED_RESULT_FIELDS.get(step.kind) if kind == "effect" else None
    if ignored and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in ignored}
    return value


def _outcome(store: Store, step: Step) -> dict[str, Any]:
    return {"error": step.error} if step.error else {"result": _result(store, step)}


def _header(event: dict[str, Any]) -> dict[str, Any]:
    header = {k: event.get(k) for k in _HEADER}
    for optional in _OPTIONAL_HEADER:  # only when recorded: older messages compare as before
        if event.get(optional):
            header[optional] = event[optional]
    return header


def _digest(ref: Any) -> str | None:
    return str(ref["digest"]) if isinstance(ref, dict) and "digest" in ref else None


# --- answers, evidence, metrics, manifests -----------------------------------------------------


def _answers(store: Store, a: _Run, b: _Run) -> AnswerDiff:
    (text_a, status_a), (text_b, status_b) = _answer(store, a), _answer(store, b)
    lines_a, lines_b = (text_a or "").splitlines(), (text_b or "").splitlines()
    diff = difflib.unified_diff(
        lines_a, lines_b, fromfile=f"a/{a.run_id}", tofile=f"b/{b.run_id}", lineterm=""
    )
    return AnswerDiff(text_a, text_b, status_a, status_b, tuple(diff))


def _answer(store: Store, run: _Run) -> tuple[str | None, str]:
    """The answer (``result["answer"]`` or ``["text"]``, else the result's JSON) and status."""
    end: dict[str, Any] = next(
        (e for e in reversed(run.events) if e.get("type") == "run.finished"), {}
    )
    status = str(end.get("status", run.manifest.status.value))
    if end.get("result") is None:
        return None, status
    value = store.resolve_payload(end["result"])
    if isinstance(value, dict):
        value = next((value[k] for k in ("answer", "text") if isinstance(value.get(k), str)), value)
    return (value if isinstance(value, str) else canonical(value).decode()), status


def _anchors(store: Store, steps: list[Step]) -> dict[tuple[str, str], dict[str, Any]]:
    """Anchors of a run's evidence events by (doc_id, location); the first one of each wins."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for step in steps:
        if step.event.get("type") != "evidence":
            continue
        value = store.resolve_payload(step.event.get("anchors"))
        if isinstance(value, dict):
            value = value.get("anchors", [value])
        for anchor in value if isinstance(value, list) else []:
            if isinstance(anchor, dict):
                location = anchor.get("location")
                where = location if isinstance(location, str) else json_text(location)
                found.setdefault((str(anchor.get("doc_id")), where), anchor)
    return found


def _anchor(anchor: dict[str, Any]) -> dict[str, Any]:
    keys = ("doc_id", "doc_title", "location", "content_hash", "relevance_score")
    return {**{k: anchor.get(k) for k in keys}, "snippet": shorten(anchor.get("snippet"))}


def _evidence(a: dict[tuple[str, str], Any], b: dict[tuple[str, str], Any]) -> EvidenceDiff:
    changed = [
        {
            "doc_id": b[key].get("doc_id"),
            "doc_title": b[key].get("doc_title"),
            "location": b[key].get("location"),
            "a": a[key].get("content_hash"),
            "b": b[key].get("content_hash"),
            "snippet": shorten(b[key].get("snippet")),
        }
        for key in sorted(a.keys() & b.keys())
        if a[key].get("content_hash") != b[key].get("content_hash")
    ]
    return EvidenceDiff(
        added=tuple(_anchor(b[key]) for key in sorted(b.keys() - a.keys())),
        removed=tuple(_anchor(a[key]) for key in sorted(a.keys() - b.keys())),
        changed=tuple(changed),
    )


def _flatten(stats: dict[str, Any], prefix: str = "") -> dict[str, float]:
    flat: dict[str, float] = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = value
    if not prefix and flat.get("llm.calls"):
        flat["llm.cache_hit_rate"] = round(flat.get("llm.cached_calls", 0) / flat["llm.calls"], 4)
    return flat


def _metrics(stats_a: dict[str, Any], stats_b: dict[str, Any]) -> list[Metric]:
    a, b = _flatten(stats_a), _flatten(stats_b)
    metrics = []
    for name in sorted(a.keys() | b.keys()):
        delta = b.get(name, 0) - a.get(name, 0)
        delta = round(delta, 12) if isinstance(delta, float) else delta
        metrics.append(Metric(name, a.get(name), b.get(name), delta))
    return metrics


def _manifest_view(manifest: Manifest) -> dict[str, Any]:
    data = manifest.model_dump(mode="json")
    view = {k: v for k, v in data.items() if k not in _MANIFEST_SKIP}
    view["inputs"] = {name: ref.get("digest") for name, ref in data.get("inputs", {}).items()}
    return view


# --- field-level differences -------------------------------------------------------------------
