"""Conversations are stored by reference: linear space, history-independent digests."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rar.hashing import Canonical, canonical
from rar.redaction import Redactor
from rar.store.payloads import CHAIN_KEY, Linker, chain_digests, unlink


class MemoryBlobs:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.puts = 0

    def put(self, digest: str, raw: bytes) -> None:
        self.puts += 1
        self.blobs.setdefault(digest, raw)

    def get(self, digest: str) -> bytes:
        return self.blobs[digest]


def _linker(blobs: MemoryBlobs) -> Linker:
    return Linker(blobs.put, Redactor(env={}))


def _conversation(steps: int) -> list[dict[str, Any]]:
    messages = []
    for i in range(steps):
        messages.append({"role": "user", "content": f"question {i} " + "u" * 200})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * 1000})
    return messages


def test_messages_become_a_chain_and_unlink_restores_the_request() -> None:
    blobs = MemoryBlobs()
    request = {"model": "m", "temperature": 0.2, "messages": _conversation(3)}
    linked = _linker(blobs).link(request)
    assert set(linked.value["messages"]) == {CHAIN_KEY, "length"}
    assert linked.value["messages"]["length"] == 6
    assert unlink(linked.value, blobs.get) == request


def test_storage_grows_linearly_with_the_conversation() -> None:
    blobs = MemoryBlobs()
    linker = _linker(blobs)
    messages: list[Any] = []
    sizes = []
    for step in range(200):
        messages = [*messages, Canonical({"role": "user", "content": f"q{step} " + "u" * 200})]
        linked = linker.link({"model": "m", "messages": messages})
        messages = [
            *messages,
            Canonical({"role": "assistant", "content": f"a{step} " + "a" * 1000}),
        ]
        sizes.append(sum(map(len, blobs.blobs.values())) + len(linked.data))
    # each step adds the same amount: no term grows with the step number
    growth_early = sizes[20] - sizes[19]
    growth_late = sizes[199] - sizes[198]
    assert abs(growth_late - growth_early) < 50
    assert sizes[-1] < 200 * 2 * 1400  # about the bytes of the messages themselves


def test_extending_a_known_chain_writes_only_the_new_messages() -> None:
    blobs = MemoryBlobs()
    linker = _linker(blobs)
    messages = [Canonical(m) for m in _conversation(50)]
    linker.link({"messages": messages})
    before = set(blobs.blobs)
    linker.link({"messages": [*messages, Canonical({"role": "user", "content": "one more"})]})
    assert len(set(blobs.blobs) - before) == 2  # the message and its chain node


def test_the_digest_does_not_depend_on_what_was_stored_before() -> None:
    conversation = _conversation(5)
    warm = _linker(MemoryBlobs())
    for k in range(1, len(conversation)):
        warm.link({"messages": conversation[:k]})
    cold = _linker(MemoryBlobs())
    request = {"model": "m", "messages": conversation}
    assert warm.link(request).digest == cold.link(request).digest


def test_a_changed_earlier_message_changes_the_digest() -> None:
    conversation = _conversation(4)
    changed = [dict(m) for m in conversation]
    changed[1]["content"] += "!"
    linker = _linker(MemoryBlobs())
    assert (
        linker.link({"messages": conversation}).digest != linker.link({"messages": changed}).digest
    )


def test_chain_digests_lists_every_blob_a_request_needs() -> None:
    blobs = MemoryBlobs()
    linked = _linker(blobs).link({"messages": _conversation(2)})
    assert set(chain_digests(linked.value, blobs.get)) == set(blobs.blobs)


def test_secrets_inside_prehashed_messages_are_redacted_before_storage() -> None:
    blobs = MemoryBlobs()
    key = "sk-ant-" + "x1Y2z3" * 6
    linked = _linker(blobs).link({"messages": [Canonical({"role": "user", "content": key})]})
    stored = b"".join(blobs.blobs.values()) + linked.data
    assert key.encode() not in stored and b"[REDACTED:anthropic:" in stored


messages_strategy = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=40)}
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=100)
@given(messages_strategy, st.integers(min_value=0, max_value=11))
def test_linking_round_trips_and_prefix_sharing_never_changes_a_digest(
    messages: list[dict[str, str]], cut: int
) -> None:
    blobs = MemoryBlobs()
    linker = _linker(blobs)
    prefix = messages[: cut % len(messages) + 1]
    linker.link({"messages": prefix})
    full = linker.link({"messages": messages})
    assert unlink(full.value, blobs.get) == {"messages": messages}
    assert full.digest == _linker(MemoryBlobs()).link({"messages": messages}).digest
    assert canonical(full.value) == full.data


def test_plain_messages_that_differ_only_in_type_never_share_a_cache_entry() -> None:
    blobs = MemoryBlobs()
    linker = _linker(blobs)
    variants = [{"flag": True}, {"flag": 1}, {"flag": 1.5}, {"flag": "1"}, {"flag": None}]
    digests = {linker.link({"messages": [v]}).digest for v in variants}
    assert len(digests) == len(variants)
    import pytest

    from rar.errors import CanonicalizationError

    with pytest.raises(CanonicalizationError):
        linker.link({"messages": [{"flag": float("nan")}]})


def test_a_message_mutated_in_place_is_hashed_again() -> None:
    linker = _linker(MemoryBlobs())
    message = {"role": "user", "content": "first"}
    first = linker.link({"messages": [message]}).digest
    message["content"] = "second"
    assert linker.link({"messages": [message]}).digest != first
    assert (
        linker.link({"messages": [message]}).digest
        == _linker(MemoryBlobs()).link({"messages": [{"role": "user", "content": "second"}]}).digest
    )


def test_chain_nodes_are_canonical_json() -> None:
    blobs = MemoryBlobs()
    _linker(blobs).link({"messages": _conversation(2)})
    import orjson

    for raw in blobs.blobs.values():
        value = orjson.loads(raw)
        if isinstance(value, dict) and "item" in value:
            assert canonical(value) == raw
