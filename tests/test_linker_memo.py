"""The Linker skips the prefix a conversation shares with the last one it linked, for plain
dicts too, and never lets a message changed since stand for the one recorded."""

from __future__ import annotations

import copy
import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rar.errors import CanonicalizationError
from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.store.payloads import Linker, unlink
from test_payloads import MemoryBlobs as Blobs


def _linker(blobs: Blobs | None = None) -> Linker:
    return Linker((blobs or Blobs()).put, Redactor(env={}))


def _fresh_digest(messages: list[Any]) -> str:
    """The digest a Linker with no history gives (deep copy: nothing shared with the caller)."""
    return _linker().link({"messages": copy.deepcopy(messages)}).digest


def _conversation(steps: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 300}
        for i in range(steps)
    ]


def test_extending_a_plain_conversation_writes_and_hashes_only_the_new_messages() -> None:
    blobs = Blobs()
    linker = _linker(blobs)
    messages = _conversation(50)
    linker.link({"messages": messages})
    before = blobs.puts
    messages.append({"role": "user", "content": "one more"})
    linked = linker.link({"messages": messages})
    assert blobs.puts - before == 2  # the new message and its chain node
    assert linked.digest == _fresh_digest(messages)


def test_a_recorded_message_changed_in_place_gets_a_new_digest() -> None:
    linker = _linker()
    messages = _conversation(6)
    first = linker.link({"messages": messages}).digest
    messages[2]["content"] = "rewritten"
    second = linker.link({"messages": messages}).digest
    assert second != first
    assert second == _fresh_digest(messages)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m["parts"].append({"text": "more"}),
        lambda m: m["parts"][0].update(text="changed"),
        lambda m: m.update(extra="added"),
        lambda m: m.pop("name"),
        lambda m: m.update(name=None),
        lambda m: m["meta"].update(count=True),  # True == 1 in Python, not in JSON
        lambda m: m["meta"].update(count=1.5),
        lambda m: m["meta"].update(flag=1),  # was True
        lambda m: m["meta"].update(ratio=0),  # was 0.0: the same JSON, must still be exact
        lambda m: m.update(parts=tuple(m["parts"])),  # a tuple hashes as the list it equals
    ],
)
def test_every_kind_of_in_place_change_is_seen(mutate: Any) -> None:
    message = {
        "role": "tool",
        "name": "calc",
        "parts": [{"text": "a"}, {"text": "b"}],
        "meta": {"count": 1, "flag": True, "ratio": 0.0},
    }
    messages = [{"role": "user", "content": "q"}, message]
    linker = _linker()
    linker.link({"messages": messages})
    mutate(message)
    assert linker.link({"messages": messages}).digest == _fresh_digest(messages)


def test_an_equal_message_rebuilt_from_new_objects_keeps_its_digest() -> None:
    linker = _linker()
    messages = _conversation(4)
    first = linker.link({"messages": messages}).digest
    rebuilt = [{"role": m["role"], "content": "".join(list(m["content"]))} for m in messages]
    assert linker.link({"messages": rebuilt}).digest == first


def test_plain_and_prehashed_messages_mix_in_any_order() -> None:
    linker = _linker()
    plain = _conversation(4)
    mixed: list[Any] = [Canonical(plain[0]), plain[1], Canonical(plain[2]), plain[3]]
    expected = _fresh_digest(plain)
    assert linker.link({"messages": mixed}).digest == expected
    assert linker.link({"messages": plain}).digest == expected  # Canonical replaced by plain
    assert linker.link({"messages": [Canonical(m) for m in plain]}).digest == expected
    assert linker.link({"messages": tuple(plain)}).digest == expected


def test_a_shorter_or_branched_conversation_shares_only_what_is_equal() -> None:
    linker = _linker()
    messages = _conversation(8)
    linker.link({"messages": messages})
    assert linker.link({"messages": messages[:5]}).digest == _fresh_digest(messages[:5])
    branched = [*messages[:3], {"role": "user", "content": "other"}, *messages[4:]]
    assert linker.link({"messages": branched}).digest == _fresh_digest(branched)


class Role(enum.StrEnum):
    USER = "user"


def test_messages_without_a_snapshot_are_hashed_again_each_time() -> None:
    linker = _linker()
    messages: list[Any] = [{"role": Role.USER, "content": "hi"}, *_conversation(3)]
    first = linker.link({"messages": messages}).digest
    assert first == _fresh_digest([{"role": "user", "content": "hi"}, *_conversation(3)])
    messages[0]["content"] = "changed"
    assert linker.link({"messages": messages}).digest == _fresh_digest(
        [{"role": "user", "content": "changed"}, *_conversation(3)]
    )


class Touchy:
    """A value whose comparison raises (as pandas.NA's truth value does)."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("no truth value")

    __hash__ = None  # type: ignore[assignment]


def test_a_value_that_cannot_be_compared_is_refused_as_before() -> None:
    linker = _linker()
    messages: list[Any] = _conversation(3)
    linker.link({"messages": messages})
    messages[1]["content"] = Touchy()
    with pytest.raises(CanonicalizationError):
        linker.link({"messages": messages})
    messages[1]["content"] = "fine again"
    assert linker.link({"messages": messages}).digest == _fresh_digest(messages)


def test_a_message_that_failed_to_link_does_not_poison_the_next_call() -> None:
    linker = _linker()
    messages: list[Any] = _conversation(3)
    linker.link({"messages": messages})
    messages.append({"role": "user", "content": float("nan")})
    with pytest.raises(CanonicalizationError):
        linker.link({"messages": messages})
    messages[-1] = {"role": "user", "content": "ok"}
    assert linker.link({"messages": messages}).digest == _fresh_digest(messages)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.0, 1.0, 1.5]),
    st.text(max_size=3),
)
_json = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
_message = st.dictionaries(st.sampled_from(["role", "content", "x"]), _json, min_size=1)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_message, min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(0, 10), st.sampled_from(["role", "content", "x"]), _json)),
    st.lists(_message, max_size=2),
)
def test_the_digest_is_what_a_fresh_linker_gives_whatever_changed_in_between(
    start: list[dict[str, Any]],
    edits: list[tuple[int, str, Any]],
    appended: list[dict[str, Any]],
) -> None:
    blobs = Blobs()
    linker = _linker(blobs)
    messages = start
    linked = linker.link({"messages": messages})
    assert unlink(linked.value, blobs.blobs.__getitem__) == {"messages": messages}
    for index, key, value in edits:
        messages[index % len(messages)][key] = value  # in place, the way callers mutate
        assert linker.link({"messages": messages}).digest == _fresh_digest(messages)
    messages.extend(appended)
    assert linker.link({"messages": messages}).digest == _fresh_digest(messages)
