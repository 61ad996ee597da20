"""Canonical JSON (RFC 8785) and tagged digests.

Every digest in RAR is ``sha256:<64 lowercase hex>`` over bytes; the tag names the algorithm so
that it can change later without ambiguity. Values are hashed over their RFC 8785 (JCS) canonical
form: object keys sorted by UTF-16 code units, no whitespace, strings as UTF-8 with the minimal
JSON escapes, numbers formatted as ECMAScript does.

Two implementations produce those bytes:

* :func:`canonical_reference` calls the ``rfc8785`` package, the reference (about 80 ms per MB);
* :func:`canonical` is the fast path used everywhere: a single Python walk that validates the
  value and formats floats the ECMAScript way, then ``orjson`` with sorted keys. Property tests
  prove both byte-identical; objects with keys outside the Basic Multilingual Plane (where UTF-8
  and UTF-16 key orders differ) are handed to the reference.

The rules, all tested:

* key order and whitespace never change a digest; ``PYTHONHASHSEED`` does not either;
* strings are hashed as given: NFC and NFD spellings of "é" hash differently, because those are
  different bytes and a model sees bytes;
* NaN and ±Infinity are rejected (JSON has no spelling for them);
* integers must lie within ±(2**53 − 1), the range where every JSON reader agrees on the value
  (I-JSON, RFC 7493). Larger integers are rejected with :class:`CanonicalizationError` rather
  than silently rounded: pass them as strings;
* ``-0.0`` is written ``0`` and ``1.0`` is written ``1`` (RFC 8785), so a float and the equal
  integer hash the same; a float of 2**53 or more is written with integer digits (``2.0**60``
  is ``1152921504606847000``), so :func:`from_canonical` reads integers beyond ±(2**53 − 1)
  back as the floats they can only have been, and what is read back hashes the same again;
* arrays and objects nest at most :data:`MAX_DEPTH` (254) levels deep, the deepest value
  ``orjson`` writes; deeper values are refused with :class:`CanonicalizationError` naming the
  depth. (The ``rfc8785`` reference has no limit of its own: it recurses until Python's
  recursion limit, about 990 levels from the top of a thread's stack and fewer from deeper.)
  A :class:`Canonical` part counts as one value: its own nesting was checked when it was made;
* only ``dict`` (with ``str`` keys), ``list``/``tuple``, ``str``, ``int``, ``float``, ``bool`` and
  ``None`` are accepted; anything else is an error naming its JSON path.
"""

from __future__ import annotations

import hashlib
import math
import re
from decimal import Decimal
from typing import Any, Final

import orjson
import rfc8785

from rar.errors import CanonicalizationError

__all__ = [
    "DIGEST_PREFIX",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "Canonical",
    "canonical",
    "canonical_record",
    "canonical_reference",
    "digest_bytes",
    "digest_value",
    "es_number",
    "from_canonical",
    "is_digest",
]

DIGEST_PREFIX: Final = "sha256:"
MAX_SAFE_INTEGER: Final = 2**53 - 1
MAX_DEPTH: Final = 254
"""The deepest nesting of arrays and objects that can be hashed (``orjson``'s own limit)."""
_ORJSON_OPTS: Final = orjson.OPT_SORT_KEYS
_Fragment = orjson.Fragment


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")


def is_digest(text: object) -> bool:
    """True when ``text`` is a well-formed tagged digest: ``sha256:`` and 64 lowercase hex."""
    return isinstance(text, str) and _DIGEST_RE.fullmatch(text) is not None


class Canonical:
    """A value whose canonical bytes and digest were computed once.

    Embedding a ``Canonical`` inside a larger value reuses its bytes instead of walking it
    again, which is how a message hashed once is never re-hashed when a later request carries
    it again. The wrapped value must not be mutated afterwards (it is not copied).
    """

    __slots__ = ("_digest", "data", "value")

    def __init__(self, value: Any, data: bytes | None = None) -> None:
        self.value = value
        self.data = canonical(value) if data is None else data
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = digest_bytes(self.data)
        return self._digest

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Canonical) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"Canonical({self.digest}, {len(self.data)} bytes)"


def es_number(value: float) -> str:
    """Format a finite float the way ECMAScript's ``Number.prototype.toString`` does."""
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    text = repr(value)
    if "e" not in text and not value.is_integer():
        return text  # plain notation with a fraction: repr and ECMAScript agree digit for digit
    sign = "-" if value < 0 else ""
    # repr() gives the shortest round-trip digits, the same digits ECMAScript chooses
    _, digit_tuple, exp = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exp, int)  # finite values only
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    stripped = digits.rstrip("0")
    exponent = exp + len(digits) - len(stripped)
    digits = stripped
    # value = 0.<digits> * 10**n  (ECMA-262 Number::toString, with k = len(digits))
    n = len(digits) + exponent
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp_text = ("+" if e >= 0 else "-") + str(abs(e))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + exp_text
    return sign + body


_FLOAT_TEXT: dict[float, bytes] = {}  # formatted floats: parameters like 0.7 recur constantly


class _NeedsReference(Exception):
    """Internal: the fast path cannot order these keys; use the reference implementation."""


class _Invalid(Exception):
    """Internal: a value canonical JSON refuses; ``keys`` name where, from the value up (the
    path is built only for an error, so the walk of a good value never formats one)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.keys: list[str] = []

    def error(self) -> CanonicalizationError:
        return CanonicalizationError(self.message, path="$" + "".join(reversed(self.keys)))


def _prepare(value: Any) -> Any:
    """Validate ``value`` and replace floats (and Canonical parts) with preformatted fragments.

    Leaves that need nothing (strings, booleans, None, safe integers) are passed over in the
    loops of their container without a call: they are most of every payload."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _Invalid(
            f"integer {value} is outside ±(2**53-1); JSON readers disagree on such numbers, "
            "so pass it as a string"
        )
    if kind is float:
        if math.isfinite(value):
            text = _FLOAT_TEXT.get(value)
            if text is None:
                text = es_number(value).encode()
                if len(_FLOAT_TEXT) < 4096:
                    _FLOAT_TEXT[value] = text
            return _Fragment(text)
        raise _Invalid(f"{value} is not a JSON number; use null or a string")
    if kind is dict:
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if type(key) is not str:
                raise _Invalid(
                    f"object key {key!r} is a {type(key).__name__}, keys must be strings"
                )
            if not key.isascii() and any(ord(c) > 0xFFFF for c in key):
                raise _NeedsReference
            leaf = type(item)
            if leaf is str or leaf is bool or item is None:
                continue
            if leaf is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            try:
                new = _prepare(item)
            except _Invalid as exc:
                exc.keys.append(f".{key}")
                raise
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            leaf = type(item)
            if leaf is str or leaf is bool or item is None:
                continue
            if leaf is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            try:
                new = _prepare(item)
            except _Invalid as exc:
                exc.keys.append(f"[{index}]")
                raise
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if kind is Canonical:
        return _Fragment(value.data)
    # subclasses (IntEnum, str-Enum, OrderedDict, ...) are hashed as their base JSON value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return _prepare(str(value))
    if isinstance(value, int):
        return _prepare(int(value))
    if isinstance(value, float):
        return _prepare(float(value))
    if isinstance(value, dict):
        return _prepare(dict(value))
    if isinstance(value, (list, tuple)):
        return _prepare(list(value))
    if isinstance(value, Canonical):
        return _Fragment(value.data)
    raise _Invalid(
        f"a {type(value).__name__} is not JSON; convert it first "
        "(pydantic: model_dump(mode='json'), bytes: base64 or a blob digest)"
    )


def _prepared(value: Any) -> Any:
    """:func:`_prepare`, its refusal as a :class:`CanonicalizationError` naming the path."""
    try:
        return _prepare(value)
    except _Invalid as exc:
        raise exc.error() from None


def _unwrap(value: Any) -> Any:
    """Replace Canonical parts with their plain values (for the reference implementation)."""
    if isinstance(value, Canonical):
        return _unwrap(value.value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unwrap(v) for v in value]
    return value


def canonical_reference(value: Any) -> bytes:
    """RFC 8785 bytes via the reference ``rfc8785`` package (slow; used for checks)."""
    value = _unwrap(value)
    try:
        return rfc8785.dumps(value)
    except RecursionError:
        raise _recursion_error(value) from None
    except rfc8785.IntegerDomainError as exc:
        raise CanonicalizationError(str(exc)) from exc
    except (rfc8785.FloatDomainError, ValueError) as exc:
        raise CanonicalizationError(str(exc)) from exc
    except (TypeError, rfc8785.CanonicalizationError) as exc:
        raise CanonicalizationError(str(exc)) from exc


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical JSON bytes of ``value`` (fast path, byte-identical to the reference)."""
    try:
        prepared = _prepared(value)
    except _NeedsReference:
        too_deep = _too_deep(value)
        if too_deep is not None:
            raise too_deep from None
        _prepare_check_only(value)
        return canonical_reference(value)
    except RecursionError:
        raise _recursion_error(value) from None
    try:
        return orjson.dumps(prepared, option=_ORJSON_OPTS)
    except orjson.JSONEncodeError as exc:  # lone surrogates in a string, or nested too deep
        raise _too_deep(prepared) or CanonicalizationError(str(exc)) from exc


def _is_safe_scalar(value: Any) -> bool:
    kind = type(value)
    return (
        kind is str
        or kind is bool
        or value is None
        or (kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    )


def canonical_record(record: dict[str, Any]) -> bytes:
    """Canonical JSON of a shallow record such as a log event, without the general walk.

    Values may be strings, safe integers, booleans, None, :class:`Canonical` parts, or dicts of
    those with ASCII keys. Anything else (a float, a list, deeper nesting) sends the whole record
    through :func:`canonical`, so the bytes are canonical whatever the input.
    """
    prepared: dict[str, Any] = {}
    for key, value in record.items():
        kind = type(value)
        if _is_safe_scalar(value):
            prepared[key] = value
        elif kind is Canonical:
            prepared[key] = _Fragment(value.data)
        elif kind is dict:
            inner: dict[str, Any] = {}
            for name, item in value.items():
                if type(name) is not str or not name.isascii():
                    return canonical(record)
                if _is_safe_scalar(item):
                    inner[name] = item
                elif type(item) is Canonical:
                    inner[name] = _Fragment(item.data)
                else:
                    return canonical(record)
            prepared[key] = inner
        else:
            return canonical(record)
        if type(key) is not str or not key.isascii():
            return canonical(record)
    try:
        return orjson.dumps(prepared, option=_ORJSON_OPTS)
    except orjson.JSONEncodeError as exc:
        raise CanonicalizationError(str(exc)) from exc


def _prepare_check_only(value: Any) -> None:
    """Run the validations of ``_prepare`` for values that go to the reference implementation."""
    if isinstance(value, dict):
        for key, item in value.items():
            _prepare_check_only(item)
            if type(key) is not str:
                _prepared(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _prepare_check_only(item)
    elif not isinstance(value, Canonical):
        _prepared(value)


def _recursion_error(value: Any) -> CanonicalizationError:
    """The error for a RecursionError while hashing ``value``: nested too deep, or hashed from
    too deep in the call stack."""
    return _too_deep(value) or CanonicalizationError(
        "the value is nested too deeply to hash this deep in the call stack (Python's "
        "recursion limit); flatten it, or hash it from a shallower call"
    )


def _too_deep(value: Any) -> CanonicalizationError | None:
    """The error for a value nested deeper than :data:`MAX_DEPTH` (a walk without recursion,
    run only once hashing failed); None when the value is not that deep."""
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 0, ())]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue  # a scalar, a Canonical part or a fragment: one value
        depth += 1
        if depth > MAX_DEPTH:
            return CanonicalizationError(
                f"arrays and objects nest more than {MAX_DEPTH} levels deep (level {depth} "
                f"starts here), deeper than RAR hashes; store such a structure as a string",
                path=_path_text(where),
            )
        stack.extend((child, depth, (where, key)) for key, child in children)
    return None


def _path_text(where: tuple[Any, ...]) -> str:
    """A JSON path from the ``(parent, key)`` links of :func:`_too_deep`, middle elided."""
    keys: list[str] = []
    while where:
        where, key = where
        keys.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    keys.reverse()
    if len(keys) > 8:
        keys[4:-4] = [f"…({len(keys) - 8} more)…"]
    return "$" + "".join(keys)


# Every integer beyond 2**53 has 16 digits or more, so bytes without a run of 16 digits need no
# walk. Digits become "0" and all else " ", then a substring search: far faster than a regex.
_AS_DIGIT_RUNS: Final = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
_SIXTEEN_DIGITS: Final = b"0" * 16


def from_canonical(data: bytes) -> Any:
    """The value canonical JSON bytes stand for, so that hashing it gives ``data`` back.

    Canonical JSON writes a float of 2**53 or more with all its integer digits, which JSON
    readers return as an integer, one that :func:`canonical` refuses (it is beyond
    ±(2**53 − 1)) and may even be a different number (``5.163294155499739e16`` is written
    ``51632941554997390``). Since no integer that large is ever hashed, it can only have been
    written from a float: that float is what comes back.
    """
    value = orjson.loads(data)
    if _SIXTEEN_DIGITS not in data.translate(_AS_DIGIT_RUNS):
        return value
    return _restore_floats(value)


def _restore_floats(value: Any) -> Any:
    """``value``, just parsed, with its integers beyond ±(2**53 − 1) turned back into the
    floats they were written from (its lists and dicts are changed in place)."""
    if type(value) is int:
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            items: Any = node.items()
        elif type(node) is list:
            items = enumerate(node)
        else:
            continue
        for key, item in items:
            kind = type(item)
            if kind is int:
                if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                    node[key] = float(item)
            elif kind is dict or kind is list:
                stack.append(item)
    return value


def digest_value(value: Any) -> str:
    """Digest of the canonical JSON of ``value``."""
    if isinstance(value, Canonical):
        return value.digest
    return digest_bytes(canonical(value))
