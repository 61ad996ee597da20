"""Rows of ``query.sqlite`` derived from a run's events and manifest (see :mod:`rar.store.query`).

Payloads are read only through :meth:`Store.resolve_payload` (inline or blob, message chains
resolved). A payload that cannot be read (a missing or damaged blob) leaves the row's digests in
place and its derived rows (usage, anchors, messages) out; it is counted in ``problems``.
Recorded text was redacted when it was recorded and is copied as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rar.errors import RarError
from rar.store.store import Store

_USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_tokens",
)


@dataclass(slots=True)
class Line:
    """One checked line of a log: its event, bytes and digest."""

    event: dict[str, Any]
    data: bytes
    digest: str


@dataclass(slots=True)
class RunRows:
    """The rows one pass over (part of) a run's log adds."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    effects: list[tuple[Any, ...]] = field(default_factory=list)
    usage: list[tuple[Any, ...]] = field(default_factory=list)
    anchors: list[tuple[Any, ...]] = field(default_factory=list)
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class RowMaker:
    """Turns checked lines of one run into rows. ``seen`` holds the messages already indexed
    for the run (role, name, text), so that each distinct message is indexed once."""

    def __init__(self, store: Store, run_id: str, seen: set[tuple[Any, ...]]) -> None:
        self.store = store
        self.run_id = run_id
        self.seen = seen
        self.rows = RunRows()

    def add(self, line: Line) -> None:
        event = line.event
        kind = event.get("kind") if event.get("type") == "effect" else None
        self.rows.events.append(
            (
                self.run_id,
                event.get("seq"),
                _text(event.get("ts")),
                str(event.get("type")),
                _text(event.get("span")),
                _text(event.get("agent")),
                _text(kind),
                line.digest,
                _text(event.get("prev")),
                len(line.data),
                line.data.decode("utf-8"),
            )
        )
        handler = _HANDLERS.get(str(event.get("type")))
        if handler is not None:
            handler(self, event)

    def payload(self, event: dict[str, Any], key: str) -> Any:
        ref = event.get(key)
        if not isinstance(ref, dict):
            return None
        try:
            return self.store.resolve_payload(ref)
        except (RarError, ValueError, KeyError, TypeError, OSError) as exc:
            self.rows.problems.append(
                f"seq {event.get('seq')}: its {key} cannot be read ({_short_error(exc)})"
            )
            return None

    # --- by event type ---------------------------------------------------------------------------

    def effect(self, event: dict[str, Any]) -> None:
        kind = str(event.get("kind"))
        request = self.payload(event, "request")
        result = self.payload(event, "result") if "result" in event else None
        name = provider = version = None
        inner = request.get("request") if isinstance(request, dict) else None
        if kind == "llm" and isinstance(request, dict):
            provider = _text(request.get("provider"))
            name = _text(inner.get("model") if isinstance(inner, dict) else request.get("model"))
        elif isinstance(request, dict):
            name = _text(request.get("name") or request.get("op"))
            version = _text(request.get("version"))
        error = event.get("error") if isinstance(event.get("error"), dict) else None
        status = "error" if error is not None else "ok"
        if kind == "tool" and isinstance(result, dict) and result.get("ok") is False:
            status = "failed"
        cached = None
        if kind == "llm":
            cached = int(bool(isinstance(result, dict) and result.get("cached")))
        request_ref, result_ref = event.get("request") or {}, event.get("result") or {}
        self.rows.effects.append(
            (
                self.run_id,
                event.get("seq"),
                _text(event.get("span")),
                event.get("ordinal"),
                kind,
                name,
                provider,
                version,
                request_ref.get("digest"),
                request_ref.get("size"),
                result_ref.get("digest"),
                result_ref.get("size"),
                status,
                _text(error.get("type")) if error else None,
                _text(error.get("message")) if error else None,
                event.get("duration_us"),
                cached,
            )
        )
        if kind != "llm":
            return
        # the client records {"provider", "request": {...}}; a bare effect the request itself
        conversation = inner if isinstance(inner, dict) else _dict(request)
        for position, message in enumerate(_dicts(conversation.get("messages"))):
            self.message(event, "request", message, position)
        if isinstance(result, dict) and isinstance(result.get("response"), dict):
            self.usage(event, request, result)
        elif isinstance(result, dict) and isinstance(result.get("content"), str):
            self.message(event, "response", {"role": "assistant", **result}, 0)

    def usage(self, event: dict[str, Any], request: Any, result: dict[str, Any]) -> None:
        response = result.get("response")
        if not isinstance(response, dict):
            return
        self.message(event, "response", {"role": "assistant", **response}, 0)
        usage = _dict(response.get("usage"))
        counts = [_int(usage.get(name)) for name in _USAGE_FIELDS]
        served = _dict(result.get("served_by"))
        asked = _dict(request)
        self.rows.usage.append(
            (
                self.run_id,
                event.get("seq"),
                _text(event.get("span")),
                _text(served.get("provider") or response.get("provider") or asked.get("provider")),
                _text(response.get("model") or served.get("model")),
                *counts,
                counts[0] + counts[3],
                int(bool(result.get("cached"))),
                _text(response.get("finish_reason")),
            )
        )

    def message(self, event: dict[str, Any], source: str, message: Any, position: int) -> None:
        if not isinstance(message, dict):
            return
        role = _text(message.get("role"))
        name = _text(message.get("name"))
        text = _message_text(message)
        key = (source == "acl", role, name, text)
        if not text or key in self.seen:
            return
        self.seen.add(key)
        self.rows.messages.append(
            (
                self.run_id,
                event.get("seq"),
                _text(event.get("span")),
                source,
                role,
                name,
                position,
                text,
            )
        )

    def acl(self, event: dict[str, Any]) -> None:
        content = self.payload(event, "content")
        text = "\n".join(_strings(content))
        message = {
            "role": _text(event.get("performative")),
            "name": _text(event.get("sender")),
            "content": text,
        }
        self.message(event, "acl", message, 0)

    def evidence(self, event: dict[str, Any]) -> None:
        for anchor in _dicts(self.payload(event, "anchors")):
            self.anchor(event, "evidence", None, None, anchor)

    def finished(self, event: dict[str, Any]) -> None:
        result = self.payload(event, "result") if "result" in event else None
        if not isinstance(result, dict) or not isinstance(result.get("claims"), list):
            return
        cited = {f"{a.get('doc_id')}#{a.get('location')}": a for a in _dicts(result.get("anchors"))}
        for index, claim in enumerate(result["claims"]):
            if not isinstance(claim, dict):
                continue
            for ref in claim.get("anchors") or []:
                anchor = cited.get(str(ref))
                if anchor is None and isinstance(ref, dict):
                    anchor = ref
                if anchor is None:
                    doc_id, _, location = str(ref).partition("#")
                    anchor = {"doc_id": doc_id, "location": location}
                self.anchor(event, "answer", index, _text(claim.get("text")), anchor)

    def anchor(
        self,
        event: dict[str, Any],
        source: str,
        claim_index: int | None,
        claim: str | None,
        anchor: dict[str, Any],
    ) -> None:
        doc_id, location = _text(anchor.get("doc_id")), _text(anchor.get("location"))
        score = anchor.get("relevance_score")
        self.rows.anchors.append(
            (
                self.run_id,
                event.get("seq"),
                source,
                claim_index,
                claim,
                f"{doc_id}#{location}",
                doc_id,
                location,
                _text(anchor.get("doc_title")),
                _text(anchor.get("content_hash")),
                float(score) if isinstance(score, (int, float)) else None,
                _text(anchor.get("snippet")),
            )
        )


_HANDLERS = {
    "effect": RowMaker.effect,
    "message": RowMaker.acl,
    "evidence": RowMaker.evidence,
    "run.finished": RowMaker.finished,
}


def run_row(
    run_id: str, manifest: dict[str, Any] | None, events: int, effects: int, problem: str | None
) -> tuple[Any, ...]:
    """The ``runs`` row of a run from its manifest's JSON (None: it cannot be read)."""
    data = manifest or {}
    config = _dict(data.get("config"))
    tags = _dict(data.get("tags"))
    parent = _dict(data.get("parent"))
    stats = _dict(data.get("stats"))
    llm = _dict(stats.get("llm"))
    models = [m for m in data.get("models") or [] if isinstance(m, dict)]
    model = f"{models[0].get('provider')}:{models[0].get('model')}" if models else None
    cost = llm.get("cost")
    return (
        run_id,
        _text(data.get("status")) or "incomplete",
        _text(data.get("goal")),
        _text(data.get("created_at")),
        _text(data.get("finished_at")),
        _text(parent.get("run_id")),
        parent.get("seq") if isinstance(parent.get("seq"), int) else None,
        _text(data.get("head")),
        _text(tags.get("kind")),
        _text(config.get("mode")),
        config.get("seed") if isinstance(config.get("seed"), int) else None,
        model,
        orjson.dumps(tags).decode(),
        events,
        effects,
        _int_or_none(llm.get("calls")),
        _int_or_none(llm.get("input_tokens")),
        _int_or_none(llm.get("output_tokens")),
        float(cost) if isinstance(cost, (int, float)) else None,
        _int_or_none(stats.get("wall_time_us")),
        problem,
    )


# --- text ----------------------------------------------------------------------------------------


def _message_text(message: dict[str, Any]) -> str:
    parts = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif content is not None:
        parts.extend(_strings(content))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            parts.append(f"{call.get('name')}({_text(call.get('arguments')) or ''})")
    reasoning = message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(reasoning)
    return "\n".join(p for p in parts if p)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (its keys left out), in order."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if current:
                found.append(current)
        elif isinstance(current, dict):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))
    return found


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _short_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:160]}"
