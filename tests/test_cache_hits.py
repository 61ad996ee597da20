"""A cache hit: keyed exactly as the record keys it, read in one look-up, never served damaged.

The key of a request is the digest its llm effect records (``ResponseCache.key`` takes a
shortcut around redacting the linked form; it must give the same digest for every request).
A hit reads the row and its answer's location in one query and the answer's bytes from there,
checked against their digest; a row that fails its check, an answer whose bytes were damaged
and a location that lies are never served.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rar.hashing import Canonical
from rar.llm import Message, Request, Response, ScriptedModel
from rar.llm.cache import ResponseCache
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.blobs import HEADER_SIZE
from rar.store.payloads import Linker
from rar.store.store import Store

SECRET = "s3cr3t-Value-0123456789abcdef"
REDACTOR = Redactor(env={"SERVICE_API_KEY": SECRET})
ANSWER = "the recorded answer, long enough to be a blob of its own. " * 30


class Counting:
    name = "scripted"
    base_url = None

    def __init__(self, answer: str) -> None:
        self.model = "scripted"
        self.calls = 0
        self._inner = ScriptedModel(lambda request: answer)

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self._inner.complete(request)


def _ask(store: Store, provider: Counting, question: str) -> str:
    with record("ask", store=store, redactor=Redactor(env={})) as run:
        answer = Client(provider, run=run, profiles=Profiles()).complete(
            messages=[Message.user(question)]
        )
    return answer.content or ""


def _result_digest(store: Store, run_id: str) -> str:
    (event,) = [e for e in store.events(run_id) if e.get("kind") == "llm"]
    digest: str = event["result"]["digest"]
    return digest


def _location(root: Path, digest: str) -> tuple[str, int, int, int, int]:
    with contextlib.closing(sqlite3.connect(root / "index.sqlite")) as conn:
        row = conn.execute(
            "SELECT pack, offset, codec, raw_size, stored_size FROM blobs WHERE digest=?",
            (digest,),
        ).fetchone()
    assert row is not None, digest
    return row  # type: ignore[no-any-return]


# --- the key ------------------------------------------------------------------------------------

_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from([SECRET, f"Bearer {SECRET}", "sk-" + "A1b2" * 10, "messages", "$chain"]),
)
_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53) + 1, 2**53 - 1),
        _text,
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(_text, st.sampled_from(["api_key", "messages"])), inner, max_size=3
        ),
    ),
    max_leaves=8,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": _text}
)


@st.composite
def _payloads(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[Any] = draw(st.lists(_message, min_size=0, max_size=4))
    if draw(st.booleans()):
        messages = [Canonical(m) for m in messages]
    request: dict[str, Any] = {"model": draw(_text), "messages": messages}
    request.update(
        draw(
            st.dictionaries(
                st.sampled_from(["temperature", "tools", "seed", "stop", "authorization"]),
                _json,
                max_size=3,
            )
        )
    )
    payload: dict[str, Any] = {
        "provider": draw(_text),
        "base_url": draw(st.one_of(st.none(), _text)),
        "request": request,
    }
    if draw(st.booleans()):
        payload["template"] = draw(_json)
    return payload


@settings(max_examples=150, deadline=None)
@given(payloads=st.lists(_payloads(), min_size=1, max_size=3))
def test_the_key_is_the_digest_the_record_computes(payloads: list[dict[str, Any]]) -> None:
    cache = ResponseCache(Store("/nonexistent-store"), redactor=REDACTOR)
    for payload in payloads * 2:  # twice: the memoised settings give the same key again
        recorded = Linker(lambda digest, raw: None, REDACTOR).link(payload).digest
        assert cache.key(payload) == recorded


def test_a_setting_changed_in_place_after_keying_changes_the_key() -> None:
    cache = ResponseCache(Store("/nonexistent-store"), redactor=REDACTOR)
    tools: list[Any] = [{"name": "search"}]
    payload = {
        "provider": "p",
        "base_url": None,
        "request": {"model": "m", "tools": tools, "messages": [{"role": "user", "content": "q"}]},
    }
    before = cache.key(payload)
    tools.append({"name": "fetch"})
    tools[0]["name"] = "look up"
    after = cache.key(payload)
    assert after != before
    assert after == Linker(lambda digest, raw: None, REDACTOR).link(payload).digest


# --- reading a hit --------------------------------------------------------------------------------


def test_a_hit_is_one_query_for_the_row_and_the_answers_location(store: Store) -> None:
    provider = Counting(ANSWER)
    _ask(store, provider, "q")
    reader = Store(store.root)
    try:
        client = Client(provider, store=reader, profiles=Profiles())
        payload = client.targets[0].payload(client.request(messages=[Message.user("q")]))
        cache = ResponseCache(reader, redactor=Redactor(env={}))
        key = cache.key(payload)
        cache.get(key)  # the first look-up checks that the cache was derived from the logs
        statements: list[str] = []
        reader.index._conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        result = cache.get(key)
        reader.index._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    finally:
        reader.close()
    assert result is not None and result["response"]["content"] == ANSWER
    assert len(statements) == 1 and "JOIN blobs" in statements[0]


@pytest.mark.parametrize("where", ["carried", "pack"])
def test_an_answer_whose_bytes_were_damaged_is_never_served(
    store: Store, where: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if where == "pack":
        monkeypatch.setenv("RAR_CARRY_LIMIT", "0")
    assert _ask(store, Counting(ANSWER), "q") == ANSWER
    (run_id,) = store.run_ids()
    pack, offset, _codec, _raw, stored = _location(store.root, _result_digest(store, run_id))
    store.close()
    if where == "carried":
        path = store.root / run_id / "events.jsonl"
        start = offset + stored // 2  # inside the answer's text, still valid JSON and UTF-8
    else:
        path = store.root / "blobs" / "packs" / f"{pack}.pack"
        start = offset + HEADER_SIZE + stored // 2
    data = bytearray(path.read_bytes())
    data[start] = ord("x") if data[start] != ord("x") else ord("y")
    path.write_bytes(bytes(data))

    provider = Counting("a fresh answer")
    reader = Store(store.root)
    try:
        with caplog.at_level(logging.WARNING):
            assert _ask(reader, provider, "q") == "a fresh answer"
    finally:
        reader.close()
    assert provider.calls == 1
    assert "cannot be read" in caplog.text and "the model is asked again" in caplog.text


def test_a_location_that_names_another_answer_is_never_served(store: Store) -> None:
    right = _ask(store, Counting(ANSWER), "q")
    _ask(store, Counting("another answer, " * 40), "other")
    first, second = store.run_ids()
    digest, other = _result_digest(store, first), _result_digest(store, second)
    store.close()
    with contextlib.closing(sqlite3.connect(store.root / "index.sqlite")) as conn:
        conn.execute(
            "UPDATE blobs SET (pack, offset, codec, raw_size, stored_size) = "
            "(SELECT pack, offset, codec, raw_size, stored_size FROM blobs WHERE digest=?) "
            "WHERE digest=?",
            (other, digest),
        )
        conn.commit()
    provider = Counting("asked again")
    reader = Store(store.root)
    try:
        served = _ask(reader, provider, "q")
    finally:
        reader.close()
    assert served == right == ANSWER  # read where it really is, once the index was caught lying
    assert provider.calls == 0


def test_a_damaged_cache_row_is_never_served(store: Store) -> None:
    _ask(store, Counting(ANSWER), "q")
    store.close()
    with contextlib.closing(sqlite3.connect(store.root / "index.sqlite")) as conn:
        conn.execute("UPDATE llm_cache SET seq = seq + 1")  # a value that still decodes
        conn.commit()
    provider = Counting("asked again")
    reader = Store(store.root)
    try:
        served = _ask(reader, provider, "q")
        notes = reader.notes
    finally:
        reader.close()
    assert provider.calls == 1 and served == "asked again"
    assert any("does not match its check" in note for note in notes)
