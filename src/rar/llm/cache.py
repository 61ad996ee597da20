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

A hit is served only as the record holds it: the row must match its check (``crc``) and the
answer's bytes their digest, read where the index says they are (one query gives both the row
and that location) or else through the store. An answer that cannot be read or does not verify
is a miss, with a warning: the provider is asked again. Rows of answers just recorded are
queued and written in batches (see :mod:`rar.store._cache_queue`); this process finds them
meanwhile.
"""

from __future__ import annotations

import marshal
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import orjson

from rar.errors import StoreError
from rar.hashing import canonical, digest_bytes
from rar.redaction import Redactor, default_redactor
from rar.store.blobs import BlobLocation
from rar.store.index import warn
from rar.store.payloads import Linker, resolve
from rar.store.store import Store, utc_now_iso

_CANDIDATES = 50
_FRAMES: Final = 256
"""Distinct request settings (everything but the messages) whose canonical bytes are kept."""
_PLACEHOLDER: Final = "\x00rar:messages\x00"
_PLACEHOLDER_BYTES: Final = canonical(_PLACEHOLDER)


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
        self._redactor = redactor or default_redactor()
        self._linker = Linker(lambda digest, raw: None, self._redactor)
        self._frames: dict[bytes, tuple[bytes, bytes]] = {}  # settings -> bytes around messages
        self._exists = False
        self._checked = False

    def key(self, payload: Any) -> str:
        """The cache key of an effect request (computed exactly as the record computes it).

        The record links a request (its messages become a chain of blobs), redacts the linked
        form, and hashes its canonical JSON. That redaction walks the settings around the
        messages (the same for every call of a client) and the digest naming the chain (a long
        hex run its detectors look into, and which it never changes in a readable record: a
        changed one would name no chain). So here the settings are redacted and put in
        canonical form once per distinct value, the messages are linked (and redacted, once per
        distinct message) as the record links them, and the chain's reference is spliced into
        the settings' bytes: the same bytes, so the same digest as the record's.
        """
        request = payload.get("request") if type(payload) is dict else None
        messages = request.get("messages") if type(request) is dict else None
        if type(messages) not in (list, tuple) or not messages:
            return self._linker.link(payload).digest
        assert isinstance(request, dict)
        frame = self._frame(payload, request)
        if frame is None:
            return self._linker.link(payload).digest
        linked = self._linker.link({"messages": messages}, redacted=True).data
        # b'{"messages":' + the chain reference + b'}'
        return digest_bytes(frame[0] + linked[12:-1] + frame[1])

    def _frame(
        self, payload: dict[str, Any], request: dict[str, Any]
    ) -> tuple[bytes, bytes] | None:
        """The canonical bytes of ``payload`` redacted, before and after its messages' place,
        once per distinct value of everything but the messages; None when the shortcut does
        not apply (a value that is not plain JSON, anything else named ``messages``, which the
        linker would link too, or settings holding the placeholder)."""
        settings = {**payload, "request": {k: v for k, v in request.items() if k != "messages"}}
        try:
            # exact about types (True vs 1, 1.0 vs 1) and refuses all but built-in types
            marshalled = marshal.dumps(settings)
        except ValueError:
            return None
        frame = self._frames.get(marshalled)
        if frame is None:
            if b"messages" in marshalled:
                return None
            redacted = self._redactor(settings)
            inner = redacted.get("request") if type(redacted) is dict else None
            if type(inner) is not dict:
                return None
            parts = canonical({**redacted, "request": {**inner, "messages": _PLACEHOLDER}}).split(
                _PLACEHOLDER_BYTES
            )
            if len(parts) != 2:
                return None
            frame = (parts[0], parts[1])
            if len(self._frames) >= _FRAMES:
                self._frames.clear()
            self._frames[marshalled] = frame
        return frame

    def _ready(self) -> None:
        if not self._checked:
            self._checked = True
            if self.store.index.meta("llm_cache") != "1":
                self.rebuild()

    def get(self, key: str) -> dict[str, Any] | None:
        """The recorded result (``{"response": ..., ...}``) for a key, or None.

        None too when the recorded answer cannot be read or does not match its digest (with a
        warning): a damaged cache is a miss, never a wrong answer.
        """
        if not self._exists:
            if not self.store.exists:
                return None
            self._exists = True
        self._ready()
        hit = self.store.index.cache_lookup(key)
        if hit is None:
            return None
        try:
            ref = orjson.loads(hit[0])
            result = resolve(ref, self._blob_reader(ref, hit[3]))
        except (StoreError, OSError, ValueError, TypeError, KeyError) as exc:
            warn(
                str(self.store.root),
                f"cache:{key}",
                f"warning: the cached answer {key} (run {hit[1]}, event {hit[2]}) cannot be read "
                f"({exc}); the model is asked again",
            )
            return None
        return result if isinstance(result, dict) else None

    def _blob_reader(self, ref: Any, location: BlobLocation | None) -> Any:
        """How to read the result's blobs: the one the index located is read there and checked
        against its digest (the pack reader re-hashes it); any other, or one that does not read
        back from there, through the store (which also finds out whether the index lied)."""
        store = self.store
        if location is None or type(ref) is not dict:
            return store.get_blob
        digest = ref.get("digest")
        reader = store.reader

        def get(wanted: str) -> bytes:
            if wanted == digest and location is not None:
                try:
                    return reader.read(wanted, location)
                except (StoreError, OSError):
                    pass
            return store.get_blob(wanted)

        return get

    def add(self, event: dict[str, Any], *, run_id: str, provider: str, model: str) -> None:
        """Index a just-recorded llm effect event whose result the caller found cacheable.

        The row is queued, written with the store index's next write or batch (this process
        finds it meanwhile; a process killed before loses it: a missed hit, never a wrong one).
        """
        if event.get("result") is None or "error" in event:
            return
        row = _row(event, run_id=run_id, provider=provider, model=model)
        self.store.index.cache_add([row])

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
