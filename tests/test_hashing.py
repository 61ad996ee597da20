"""Canonical JSON: the fast path is byte-identical to the RFC 8785 reference."""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from rar.errors import CanonicalizationError
from rar.hashing import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    Canonical,
    canonical,
    canonical_reference,
    digest_value,
    es_number,
    from_canonical,
    is_digest,
)

safe_ints = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.none() | st.booleans() | safe_ints | finite_floats | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=500)
@given(json_values)
def test_fast_path_is_byte_identical_to_the_reference(value: object) -> None:
    assert canonical(value) == rfc8785.dumps(value)


@settings(max_examples=2000)
@given(finite_floats)
def test_floats_are_formatted_as_ecmascript_does(value: float) -> None:
    assert es_number(value).encode() == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (0.1, "0.1"),
        (5e-324, "5e-324"),
        (123456789012345680000.0, "123456789012345680000"),
    ],
)
def test_known_float_spellings(value: float, text: str) -> None:
    assert es_number(value) == text


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=6), json_scalars, max_size=8))
def test_key_order_never_changes_the_digest(mapping: dict[str, object]) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert digest_value(mapping) == digest_value(reordered)


def test_keys_outside_the_bmp_sort_by_utf16_like_the_reference() -> None:
    value = {"\U0001f600": 1, "\uffff": 2, "a": 3}
    assert canonical(value) == rfc8785.dumps(value)
    # UTF-16 puts U+1F600 (surrogates D83D DE00) before U+FFFF; code-point order would not
    assert canonical(value).index("😀".encode()) < canonical(value).index("\uffff".encode())


def test_whitespace_in_the_source_json_does_not_matter() -> None:
    import json

    compact = json.loads('{"b":[1,2],"a":{"x":null}}')
    spaced = json.loads('{\n  "a" : { "x" : null },\n  "b" : [ 1 , 2 ]\n}')
    assert canonical(compact) == canonical(spaced) == b'{"a":{"x":null},"b":[1,2]}'


def test_nfc_and_nfd_spellings_hash_differently() -> None:
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    assert digest_value(nfc) != digest_value(nfd)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_rejected_with_their_path(bad: float) -> None:
    with pytest.raises(CanonicalizationError, match=r"\$\.scores\[1\]"):
        canonical({"scores": [1.0, bad]})


def test_integers_beyond_2_to_53_are_rejected_not_rounded() -> None:
    assert canonical(MAX_SAFE_INTEGER) == b"9007199254740991"
    assert canonical(-MAX_SAFE_INTEGER) == b"-9007199254740991"
    with pytest.raises(CanonicalizationError, match="pass it as a string"):
        canonical({"seed": 2**53})
    with pytest.raises(CanonicalizationError):
        canonical_reference({"seed": 2**53})


def test_a_float_and_the_equal_integer_hash_the_same() -> None:
    assert digest_value({"t": 1.0}) == digest_value({"t": 1})


def test_a_float_of_2_to_53_or_more_is_written_with_integer_digits_and_read_back_a_float() -> None:
    data = canonical({"big": 2.0**60})
    assert data == b'{"big":1152921504606847000}'  # ECMAScript's digits, as the reference writes
    assert data == rfc8785.dumps({"big": 2.0**60})
    back = from_canonical(data)
    assert back == {"big": 2.0**60} and type(back["big"]) is float
    assert canonical(back) == data


def test_values_nested_deeper_than_the_maximum_depth_are_rejected_naming_it() -> None:
    deep: object = 0
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert canonical(deep) == rfc8785.dumps(deep)
    with pytest.raises(CanonicalizationError, match=f"level {MAX_DEPTH + 1} starts here"):
        canonical({"x": deep})


@pytest.mark.parametrize("bad", [b"bytes", {1, 2}, object(), {1: "int key"}])
def test_non_json_values_are_rejected_with_a_clear_error(bad: object) -> None:
    with pytest.raises(CanonicalizationError, match="cannot hash value at"):
        canonical({"x": bad})


def test_lone_surrogates_are_rejected() -> None:
    with pytest.raises(CanonicalizationError):
        canonical("\ud800")


def test_tuples_and_str_enums_hash_as_their_json_values() -> None:
    import enum

    class Role(enum.StrEnum):
        USER = "user"

    assert canonical({"r": Role.USER, "t": (1, 2)}) == b'{"r":"user","t":[1,2]}'


def test_canonical_parts_are_embedded_without_rehashing() -> None:
    message = Canonical({"role": "user", "content": "hi", "score": 0.5})
    assert canonical({"messages": [message]}) == canonical(
        {"messages": [{"role": "user", "content": "hi", "score": 0.5}]}
    )
    assert message.digest == digest_value(message.value)
    assert digest_value(message) == message.digest


def test_digests_are_tagged_sha256() -> None:
    digest = digest_value({"a": 1})
    assert is_digest(digest)
    assert digest.startswith("sha256:") and len(digest) == 71
    assert not is_digest("sha256:" + "A" * 64)
    assert not is_digest("md5:abc")


def test_the_same_value_hashes_the_same_under_different_hash_seeds() -> None:
    code = (
        "from rar.hashing import digest_value;"
        "print(digest_value({'set-like': ['b', 'a'], 'k': {'z': 1, 'y': [1.5, None]}, 'é': 2}))"
    )
    digests = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.text(max_size=6),
        json_scalars | st.dictionaries(st.text(max_size=4), json_scalars, max_size=3),
        max_size=6,
    )
)
def test_the_record_fast_path_is_canonical_for_any_record(record: dict[str, object]) -> None:
    from rar.hashing import canonical_record

    assert canonical_record(record) == rfc8785.dumps(record)


def test_the_record_fast_path_embeds_canonical_parts() -> None:
    from rar.hashing import canonical_record

    part = Canonical({"b": 1.5, "a": [1, 2]})
    record = {"type": "effect", "request": {"digest": part.digest, "value": part}, "seq": 3}
    assert canonical_record(record) == canonical(record)
