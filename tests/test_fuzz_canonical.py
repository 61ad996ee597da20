"""Fuzzing canonical JSON (:func:`rar.hashing.canonical`): for any JSON-like value it returns
the RFC 8785 bytes of the ``rfc8785`` reference, which read back as the same value, or raises
:class:`~rar.errors.CanonicalizationError`; it never raises anything else and never hangs.

``tests/test_hashing.py`` proves the fast path byte-identical on well-formed values; here the
values are hostile: NaN and infinities, integers past 2**53, lone surrogates, keys outside the
Basic Multilingual Plane, tuples, and deep nesting.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st

from fuzzing import budget, no_hang
from rar.errors import CanonicalizationError
from rar.hashing import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    canonical,
    canonical_record,
    digest_value,
    from_canonical,
)

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
any_text = st.text(st.characters(codec=None) | surrogates, max_size=12)
astral_text = st.text(st.characters(min_codepoint=0x10000), min_size=1, max_size=3)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.integers(),  # past 2**53 too
    st.floats(),  # NaN and infinities too
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2.0**53, -(2.0**53), 1e21, 1e-7, 5e-324, -0.0, 1.7976931348623157e308]),
    any_text,
)
keys = any_text | astral_text
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=30,
)


def _reference(value: Any) -> bytes | None:
    """The reference's bytes, or None where it refuses the value."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError, OverflowError):
        return None


def _plain(value: Any) -> Any:
    """``value`` as JSON reads it back: tuples are lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@budget(300)
@given(values)
@example({"\U0001f600": 1, "\uffff": [2.0**53, (1e21,)]})
@example(["\ud800"])
@example({"a": float("nan")})
@example(2**53)
def test_canonical_matches_the_reference_or_refuses_the_value(value: Any) -> None:
    expected = _reference(value)
    with no_hang():
        try:
            data = canonical(value)
        except CanonicalizationError:
            assert expected is None, "the reference accepts what the fast path refuses"
            return
    assert expected is not None, f"the reference refuses what the fast path wrote: {data!r}"
    assert data == expected
    back = from_canonical(data)
    assert back == _plain(value)  # the same value comes back
    assert canonical(back) == data  # and hashes the same again
    assert digest_value(value) == "sha256:" + hashlib.sha256(data).hexdigest()


@budget(150)
@given(st.dictionaries(keys, scalars | st.dictionaries(keys, scalars, max_size=3), max_size=6))
def test_the_record_fast_path_matches_the_reference_or_refuses(record: dict[str, Any]) -> None:
    expected = _reference(record)
    try:
        data = canonical_record(record)
    except CanonicalizationError:
        assert expected is None
        return
    assert data == expected


def _nested(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [1, 100, MAX_DEPTH])
def test_deep_nesting_matches_the_reference(depth: int) -> None:
    value = _nested(depth, 0.5)
    assert canonical(value) == rfc8785.dumps(value)
    assert from_canonical(canonical(value)) == value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 900, 2_000, 100_000])
@pytest.mark.parametrize("astral", [False, True], ids=["bmp-keys", "astral-keys"])
def test_nesting_past_the_maximum_depth_is_a_canonicalization_error_naming_it(
    depth: int, astral: bool
) -> None:
    value = _nested(depth)
    if astral:  # keys outside the BMP take the reference's path
        value = {"\U0001f600": value}
    with pytest.raises(CanonicalizationError, match=f"more than {MAX_DEPTH} levels") as error:
        canonical(value)
    assert "…(" in error.value.details["path"]  # the path, its middle elided


def test_a_value_nested_to_the_maximum_depth_is_hashed_from_deep_in_a_call_stack() -> None:
    def call_from(depth: int) -> bytes:
        return canonical(_nested(MAX_DEPTH)) if depth == 0 else call_from(depth - 1)

    assert call_from(500) == rfc8785.dumps(_nested(MAX_DEPTH))


@pytest.mark.parametrize(
    "value", [5.163294155499739e16, 2.0**53, 1e19, -(2.0**60), [{"x": 2.0**63 + 2048}]]
)
def test_a_value_read_back_from_its_canonical_bytes_is_the_same_and_hashes_the_same(
    value: Any,
) -> None:
    # a float of 2**53 or more is written with integer digits (5.163294155499739e16 is
    # 51632941554997390), which orjson alone reads back as another number, and an int
    back = from_canonical(canonical(value))
    assert back == _plain(value) and type(back) is type(value)
    assert canonical(back) == canonical(value)


def test_integers_are_read_back_as_integers() -> None:
    back = from_canonical(canonical({"n": MAX_SAFE_INTEGER, "m": -MAX_SAFE_INTEGER, "f": 2.0**53}))
    assert type(back["n"]) is int and type(back["m"]) is int and type(back["f"]) is float


@pytest.mark.parametrize("value", [2.0**64, 1e20, 1e300, 2.0**53 - 1, 0.5])
def test_floats_that_read_back_as_floats_hash_the_same_again(value: float) -> None:
    again = from_canonical(canonical(value))
    assert again == value and (isinstance(again, float) or abs(again) <= MAX_SAFE_INTEGER)
    assert canonical(again) == canonical(value)
    assert not math.isnan(again)


def test_a_large_float_result_can_go_into_the_next_request(store: Any, redactor: Any) -> None:
    from rar.runtime.start import record

    run = record("g", store=store, seed=1, durable=False, redactor=redactor)
    with run:
        big = run.effect("tool", {"name": "power", "args": {}}, lambda: 2.0**60)
        assert big == 2.0**60 and type(big) is float
        assert run.effect("tool", {"name": "echo", "args": {"x": big}}, lambda: 1) == 1


def _powers(run: Any) -> dict[str, Any]:
    """A tool answering 2.0**60, its answer fed to the next requests: inline, in a blob (past
    the inline limit) and in a message chain."""
    big = run.effect("tool", {"name": "power", "args": {}}, lambda: 2.0**60)
    small = run.effect("tool", {"name": "echo", "args": {"x": big}}, lambda: [big, -big])
    padded = run.effect("tool", {"name": "pad", "args": {"x": big}}, lambda: [big, "x" * 400])
    chained = run.effect(
        "llm",
        {"messages": [{"role": "tool", "content": None, "value": big}]},
        lambda: {"content": "ok"},
    )
    assert chained == {"content": "ok"}
    return {"big": big, "small": small, "padded": padded[0]}


def test_a_large_float_result_records_and_replays_strictly(store: Any, redactor: Any) -> None:
    from rar.replay import execute, replay

    run = execute(_powers, store=store, redactor=redactor)
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert result == {"big": 2.0**60, "small": [2.0**60, -(2.0**60)], "padded": 2.0**60}
    report = replay(run.id, store=store, function=_powers, redactor=redactor)
    assert report.replay_status == "reproducible", report
    assert report.served == 4 and report.result_equal is True


@pytest.mark.parametrize(
    "value",
    [2.0**60, [2.0**60, "x" * 300], {"messages": [{"role": "tool", "n": -(2.0**60)}], "k": 1}],
    ids=["inline", "blob", "chained"],
)
def test_a_payload_reads_back_as_the_value_it_was_and_hashes_the_same(
    value: Any, redactor: Any
) -> None:
    from rar.store.payloads import Linker, resolve
    from rar.store.writer import INLINE_LIMIT

    blobs: dict[str, bytes] = {}
    linked = Linker(blobs.__setitem__, redactor).link(value)
    blobs[linked.digest] = linked.data
    inline = {"digest": linked.digest, "size": len(linked.data), "value": linked}
    logged = {**inline, "value": orjson.loads(linked.data)}  # as a log reader parses it
    stored = {"digest": linked.digest, "size": len(linked.data)}
    for ref in (inline, logged, stored) if len(linked.data) <= INLINE_LIMIT else (stored,):
        back = resolve(ref, blobs.__getitem__)
        assert back == value and canonical(back) == canonical(value)
