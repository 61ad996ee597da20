"""The model response cache: recorded answers served again without any HTTP request.

The cache key is the digest of the recorded request of an ``llm`` effect: the canonical,
redacted, provider-neutral request plus the provider, base URL and, for text completion, the
prompt template (credentials, timeouts and retry settings are never part of it; sampling
parameters, seed, tools, tool_choice and response format are). It is the same digest the
record holds, so the cache is nothing but an index over recorded calls: the rows live in the
store's ``index.sqlite`` and are rebuilt from the logs when the index is.

Answers that were cut short (``finish_reason == "length"``), errors and interrupted streams are
never cached. A miss explains itself: :meth:`ResponseCache.explain` names the nearest cached
request of the same provider and model and the fields that differ.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from rar.redaction import Redactor, default_redactor
from rar.store.payloads import Linker
from rar.store.store import Store, utc_now_iso

_CANDIDATES = 50


@dataclass(frozen=True, slots=True)
class FieldDifference:
    field: str
    cached: Any
    requested: Any


@dataclass(frozen=True, slots=True)
class CacheExplanation:
    key: str
    hit: bool
    nearest: str | None = None
    nearest_run: str | None = None
    differences: list[FieldDifference] = field(default_factory=list)
    candidates: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        if self.hit:
            return f"cache hit ({self.key[:19]}…)"
        if self.nearest is None:
            return "cache miss: nothing cached yet for this provider and model"
        parts = ", ".join(d.field for d in self.differences) or "(no field differs)"
        return f"cache miss: the nearest cached request (run {self.nearest_run}) differs in {parts}"


def cacheable(result: Any) -> bool:
    """A recorded llm result that may be served again: complete and not itself a cache hit."""
    if not isinstance(result, dict) or result.get("cached"):
        return False
    response = result.get("response")
    return isinstance(response, dict) and response.get("finish_reason", "stop") != "length"


class ResponseCache:
    """Look-ups and explanations over the llm effects recorded in a store."""

    def __init__(self, store: Store, *, redactor: Redactor | None = None) -> None:
        self.store = store
        self._linker = Linker(lambda digest, raw: None, redactor or default_redactor())
        self._checked = False

    def key(self, payload: Any) -> str:
        """The cache key of an effect request (computed exactly as the record computes it)."""
        return self._linker.link(payload).digest

    def _ready(self) -> None:
        if not self._checked:
            self._checked = True
            if self.store.index.meta("llm_cache") != "1":
                self.rebuild()

    def get(self, key: str) -> dict[str, Any] | None:
        """The recorded result (``{"response": ..., ...}``) for a key, or None."""
        if not self.store.exists:
            return None
        self._ready()
        row = self.store.index.cache_get(key)
        if row is None:
            return None
        result = self.store.resolve_payload(orjson.loads(row[0]))
        return result if isinstance(result, dict) else None

    def add(self, event: dict[str, Any], *, run_id: str, provider: str, model: str) -> None:
        """Index a just-recorded llm effect event whose result the caller found cacheable."""
        if event.get("result") is None or "error" in event:
            return
        row = _row(event, run_id=run_id, provider=provider, model=model)
        self.store.index.cache_put([row])

    def rebuild(self) -> int:
        """Re-derive every cache row from the logs; returns how many rows were found."""
        rows = []
        for run_id in self.store.run_ids():
            try:
                events = self.store.events(run_id)
            except Exception:  # a damaged log is verify's business; skip it here
                continue
            for event in events:
                if event.get("type") != "effect" or event.get("kind") != "llm":
                    continue
                if "error" in event or "result" not in event:
                    continue
                try:
                    result = self.store.resolve_payload(event["result"])
                    request = self.store.resolve_payload(event["request"])
                except Exception:
                    continue
                if not cacheable(result) or not isinstance(request, dict):
                    continue
                rows.append(
                    _row(
                        event,
                        run_id=run_id,
                        provider=str(request.get("provider", "")),
                        model=str((request.get("request") or {}).get("model", "")),
                    )
                )
        self.store.index.cache_put(rows)
        self.store.index.set_meta("llm_cache", "1")
        return len(rows)

    def explain(self, payload: dict[str, Any]) -> CacheExplanation:
        """Whether ``payload`` is cached, and if not, how the nearest cached request differs."""
        key = self.key(payload)
        if self.get(key) is not None:
            return CacheExplanation(key=key, hit=True)
        asked = _plain(payload)
        provider = str(asked.get("provider", ""))
        model = str((asked.get("request") or {}).get("model", ""))
        candidates = self.store.index.cache_candidates(provider, model, _CANDIDATES)
        if not candidates:
            candidates = [(k, r) for k, _, _, r in self.store.index.cache_recent(_CANDIDATES)]
        best: tuple[int, str, list[FieldDifference]] | None = None
        for cand_key, request_ref in candidates:
            try:
                cached = self.store.resolve_payload(orjson.loads(request_ref))
            except Exception:
                continue
            differences = diff_requests(cached, asked)
            if best is None or len(differences) < len(best[2]):
                best = (len(differences), cand_key, differences)
        if best is None:
            return CacheExplanation(key=key, hit=False, candidates=len(candidates))
        row = self.store.index.cache_get(best[1])
        return CacheExplanation(
            key=key,
            hit=False,
            nearest=best[1],
            nearest_run=row[1] if row else None,
            differences=best[2],
            candidates=len(candidates),
        )


def _row(
    event: dict[str, Any], *, run_id: str, provider: str, model: str
) -> tuple[str, str, str, str, str, str, int, str]:
    return (
        event["request"]["digest"],
        provider,
        model,
        orjson.dumps(_plain(event["request"])).decode(),
        orjson.dumps(_plain(event["result"])).decode(),
        run_id,
        int(event["seq"]),
        str(event.get("ts") or utc_now_iso()),
    )


def _plain(value: Any) -> Any:
    """JSON-plain copy of a value that may hold Canonical parts."""
    from rar.hashing import Canonical, from_canonical

    if isinstance(value, Canonical):
        return from_canonical(value.data)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def diff_requests(cached: Any, asked: Any) -> list[FieldDifference]:
    """Field-level differences between two recorded llm requests (plain JSON)."""
    differences: list[FieldDifference] = []
    cached_outer = cached if isinstance(cached, dict) else {}
    asked_outer = asked if isinstance(asked, dict) else {}
    for name in sorted(set(cached_outer) | set(asked_outer)):
        if name == "request":
            continue
        if cached_outer.get(name) != asked_outer.get(name):
            differences.append(FieldDifference(name, cached_outer.get(name), asked_outer.get(name)))
    old = cached_outer.get("request") or {}
    new = asked_outer.get("request") or {}
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if name == "messages":
            differences.extend(_diff_messages(a or [], b or []))
        elif a != b:
            differences.append(FieldDifference(name, a, b))
    return differences


def _diff_messages(old: list[Any], new: list[Any]) -> list[FieldDifference]:
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return [FieldDifference(f"messages[{index}]", a, b)]
    if len(old) != len(new):
        return [FieldDifference("messages.length", len(old), len(new))]
    return []
