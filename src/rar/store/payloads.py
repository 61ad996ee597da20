"""Structured payloads stored by reference, so a conversation costs linear space.

A model request carries the whole conversation so far. Stored whole, step *n* repeats the *n − 1*
messages before it and a conversation costs O(N²) bytes and O(N²) hashing. Instead, before a
payload is stored it is put in its **linked form**:

* every list under the key ``"messages"`` becomes ``{"$chain": <head>, "length": n}``;
* each message is a blob of its own (its canonical JSON), digest ``d_i``;
* the list is a hash-linked chain of small node blobs ``{"item": d_i, "prev": H_(i-1)}``
  (``prev`` absent for the first), ``H_i`` the digest of node *i*; the head is ``H_n``.

A request that extends an earlier one shares that request's chain: only the new messages and
their nodes are written, and only they are hashed (node digests are memoised per writer, message
digests are carried by :class:`~rar.hashing.Canonical` values or, for plain dicts, remembered
per distinct content). The digest of a payload is the digest of its linked form, a pure function
of the content: the same conversation always yields the same digest, in any process, whatever
was stored before.

**The prefix a conversation shares with the last one linked** is found with one C-level list
comparison, not a walk: the Linker keeps, per position, the ``Canonical`` it was given, or a
*snapshot* of the plain message (a deep copy of its dicts and lists that shares the immutable
strings, so a message changed in place afterwards no longer equals it). ``==`` is exact for the
snapshot's leaves: strings compare by content; numbers and booleans are held by
:class:`_Exactly`, which also demands the same type (``True == 1 == 1.0`` in Python, not in
JSON). Messages of other types (a ``str`` subclass, an enum) get no snapshot: the prefix ends
there and the rest is hashed per message, as before.

:func:`unlink` turns a linked form back into the plain value; :func:`resolve` turns a payload
reference (inline or a blob) into it, reading canonical bytes with
:func:`~rar.hashing.from_canonical`, so the value read back hashes to the recorded digest again.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable
from typing import Any, Final, TypeGuard

import orjson

from rar.errors import CorruptionError
from rar.hashing import Canonical, from_canonical, is_digest
from rar.redaction import Redactor

CHAIN_KEY: Final = "$chain"
CHAINED_FIELDS: Final = frozenset({"messages"})
_CHAIN_MARK: Final = f'"{CHAIN_KEY}"'.encode()  # in the bytes of every linked form with a chain
_MEMO_LIMIT: Final = 200_000
_PLAIN_CACHE_BYTES: Final = 64 << 20
_LEAVES: Final = frozenset({str, int, float, bool, type(None)})  # nothing to structure in them

PutBlob = Callable[[str, bytes], None]
GetBlob = Callable[[str], bytes]


def is_payload_ref(value: Any) -> TypeGuard[dict[str, Any]]:
    """True for a payload reference as events hold it: ``{"digest", "size"[, "value"]}``."""
    return isinstance(value, dict) and is_digest(value.get("digest")) and "size" in value


class Linker:
    """Turns plain payloads into linked form, writing message and node blobs as it goes.

    One Linker serves one writer; its memo tables make extending a known chain cost only the
    new messages. ``put`` is called for every blob the linked form needs (it must be idempotent).
    """

    def __init__(self, put: PutBlob, redactor: Redactor) -> None:
        self._put = put
        self._redact = redactor
        self._nodes: dict[tuple[str | None, str], str] = {}
        self._messages: dict[str, Canonical] = {}  # digest of a given Canonical -> redacted one
        self._plain: dict[bytes, Canonical] = {}  # marshal bytes of a plain message -> redacted
        self._plain_bytes = 0
        # per position of the last chain linked: what proves the same message (see _chain)
        self._last: tuple[list[Any], list[str]] = ([], [])

    def link(self, value: Any, *, redacted: bool = False) -> Canonical:
        """Redact, link and canonicalize ``value``; blobs it needs are written via ``put``.

        ``redacted=True`` says the caller already passed ``value`` through the same redactor
        (pre-hashed parts and messages are still redacted here, once per distinct content).
        """
        structured = self._structure(value)
        return Canonical(structured if redacted else self._redact(structured))

    def _structure(self, value: Any) -> Any:
        """Replace chained lists and pre-hashed parts; everything else is returned as is.

        (Strings and numbers, most of every payload, are passed over in their container's
        loop without a call.)"""
        kind = type(value)
        if kind is dict:
            out: dict[str, Any] | None = None
            for key, item in value.items():
                leaf = type(item)
                if leaf in _LEAVES:
                    continue
                if key in CHAINED_FIELDS and (leaf is list or leaf is tuple) and item:
                    new: Any = self._chain(item)
                else:
                    new = self._structure(item)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            return value if out is None else out
        if kind is list or kind is tuple:
            items: list[Any] | None = None
            for index, item in enumerate(value):
                if type(item) in _LEAVES:
                    continue
                new = self._structure(item)
                if new is not item:
                    if items is None:
                        items = list(value)
                    items[index] = new
            return value if items is None else items
        if isinstance(value, Canonical):
            return self._redacted(value)
        return value

    def _redacted(self, part: Canonical) -> Canonical:
        cached = self._messages.get(part.digest)
        if cached is not None:
            return cached
        redacted = self._redact(part.value)
        result = part if redacted is part.value else Canonical(redacted)
        if len(self._messages) > _MEMO_LIMIT:
            self._messages.clear()
        self._messages[part.digest] = result
        return result

    def _plain_message(self, item: Any) -> Canonical:
        """Redact and hash a plain message, once per distinct content.

        The cache key is ``marshal.dumps(item)``: exact about types (``True`` vs ``1``, ``1.0``
        vs ``1``, NaN) and unable to encode anything but built-in types, so a hit always stands
        for a value that canonicalizes to the same bytes, and a mutated message is a miss.
        """
        try:
            key = marshal.dumps(item)
        except ValueError:  # not built-in types only: no caching
            return Canonical(self._redact(self._structure(item)))
        message = self._plain.get(key)
        if message is None:
            message = Canonical(self._redact(self._structure(item)))
            self._plain_bytes += len(key)
            if self._plain_bytes > _PLAIN_CACHE_BYTES:
                self._plain.clear()
                self._plain_bytes = len(key)
            self._plain[key] = message
        return message

    def _chain(self, items: list[Any] | tuple[Any, ...]) -> dict[str, Any]:
        # A conversation usually extends the last one linked: skip the prefix it shares with
        # it. ``last_items`` holds per position the Canonical given (immutable; equal only to
        # one with the same bytes) or a snapshot of the plain message (see _snapshot), so one
        # list comparison in C proves the whole prefix unchanged.
        last_items, last_heads = self._last
        start = _shared_prefix(items, last_items)
        head: str | None = last_heads[start - 1] if start else None
        heads = last_heads[:start]
        known = last_items[:start]
        for item in items[start:]:
            if isinstance(item, Canonical):
                message = self._redacted(item)
                known.append(item)
            else:
                message = self._plain_message(item)
                known.append(_snapshot(item))
            key = (head, message.digest)
            node = self._nodes.get(key)
            if node is None:
                self._put(message.digest, message.data)
                body: dict[str, Any] = {"item": message.digest}
                # canonical JSON written directly: keys in order, digests need no escaping
                if head is None:
                    data = b'{"item":"' + message.digest.encode() + b'"}'
                else:
                    body["prev"] = head
                    data = (
                        b'{"item":"'
                        + message.digest.encode()
                        + b'","prev":"'
                        + head.encode()
                        + b'"}'
                    )
                node_c = Canonical(body, data)
                self._put(node_c.digest, data)
                node = node_c.digest
                if len(self._nodes) > _MEMO_LIMIT:
                    self._nodes.clear()
                self._nodes[key] = node
            head = node
            heads.append(node)
        self._last = (known, heads)
        return {CHAIN_KEY: head, "length": len(items)}


class _Exactly:
    """A number or boolean in a snapshot: equal only to a value of the very same type and value
    (Python's ``True == 1 == 1.0`` would let a changed message pass for the recorded one)."""

    __slots__ = ("value",)

    def __init__(self, value: bool | int | float) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self.value) and other == self.value

    __hash__ = None  # type: ignore[assignment]


class _Opaque:
    """The snapshot of a message that cannot have one: equal to nothing, so the shared prefix
    ends there and the message is hashed again (exactly, per message) each time."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_OPAQUE: Final = _Opaque()
_SCALARS: Final = (bool, int, float)


def _snapshot(value: Any) -> Any:
    """A copy of a plain message that equals (``==``) only a message with the same canonical
    form: dicts and lists copied, strings and None shared (immutable), numbers and booleans held
    by :class:`_Exactly`; ``_OPAQUE`` for anything else (subclasses, enums: rare in messages)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return _OPAQUE
            copied = _snapshot(item)
            if copied is _OPAQUE:
                return _OPAQUE
            out[key] = copied
        return out
    if kind is list or kind is tuple:
        items = [_snapshot(item) for item in value]
        if any(item is _OPAQUE for item in items):
            return _OPAQUE
        return items if kind is list else tuple(items)
    if kind in _SCALARS:
        return _Exactly(value)
    return _OPAQUE


def _shared_prefix(items: list[Any] | tuple[Any, ...], known: list[Any]) -> int:
    """How many leading ``items`` equal the snapshots ``known`` of the last chain linked."""
    limit = min(len(items), len(known))
    if not limit:
        return 0
    current = items[:limit] if type(items) is list else list(items[:limit])
    try:
        if current == (known if limit == len(known) else known[:limit]):
            return limit
    except Exception:  # a value whose comparison raises: look item by item
        pass
    for index in range(limit):
        try:
            if current[index] != known[index]:
                return index
        except Exception:
            return index
    return limit


def resolve(ref: dict[str, Any], get: GetBlob) -> Any:
    """The plain value of a payload reference ``{"digest", "size"[, "value"]}``: the inline
    value or the blob's, message chains resolved, read as canonical JSON is read back
    (:func:`~rar.hashing.from_canonical`: ``2.0**60`` comes back the float it was written from).

    This is the one place where a payload is read back: the result a live effect hands the
    agent (``RunWriter.recorded_payload``) and every value a replay serves or compares.
    """
    if "value" in ref:
        value = ref["value"]
        # a writer's own reference holds a Canonical; one read from a log holds parsed JSON
        raw = value.data if isinstance(value, Canonical) else orjson.dumps(value)
    else:
        raw = get(ref["digest"])
    value = from_canonical(raw)
    if _CHAIN_MARK not in raw:
        return value  # nothing linked inside: no walk needed
    return unlink(value, get)


def unlink(value: Any, get: GetBlob) -> Any:
    """The plain value of a linked form (message chains resolved from blobs, each message read
    with :func:`~rar.hashing.from_canonical`)."""
    if isinstance(value, dict):
        if CHAIN_KEY in value and set(value) == {CHAIN_KEY, "length"}:
            return _read_chain(value[CHAIN_KEY], int(value["length"]), get)
        return {key: unlink(item, get) for key, item in value.items()}
    if isinstance(value, list):
        return [unlink(item, get) for item in value]
    return value


def _read_chain(head: str, length: int, get: GetBlob) -> list[Any]:
    items: list[Any] = []
    node: str | None = head
    while node is not None:
        body = orjson.loads(get(node))
        items.append(unlink(from_canonical(get(body["item"])), get))
        node = body.get("prev")
        if len(items) > length:
            raise CorruptionError(f"message chain {head} is longer than its recorded length")
    if len(items) != length:
        raise CorruptionError(
            f"message chain {head} has {len(items)} messages, its payload says {length}"
        )
    items.reverse()
    return items


def chain_digests(value: Any, get: GetBlob) -> list[str]:
    """Every blob digest a linked form refers to (chain nodes and their messages)."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            if CHAIN_KEY in current and isinstance(current[CHAIN_KEY], str):
                node: str | None = current[CHAIN_KEY]
                while node is not None:
                    found.append(node)
                    body = orjson.loads(get(node))
                    found.append(body["item"])
                    stack.append(orjson.loads(get(body["item"])))
                    node = body.get("prev")
            else:
                stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return found
