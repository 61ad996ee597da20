"""Fuzzing what comes back from a model provider: any byte stream through the SSE reader, any
JSON answer through the OpenAI (chat and text), Anthropic and Gemini providers, plain and
streamed. The result is a :class:`~rar.llm.types.Response`, or a
:class:`~rar.errors.ProviderError` (a :class:`~rar.errors.MalformedResponseError` for an answer
RAR cannot read); never a ``KeyError``, ``TypeError``, ``AttributeError`` or ``ValueError``, and
never a hang.

The answers are JSON values shaped like each provider's answers, with any subtree replaced by
any JSON value, so that the fuzzer reaches deep into the parsers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fuzzing import budget, json_values, no_hang
from rar.errors import MalformedResponseError, ProviderError, RarError
from rar.llm.providers._http import sse_events
from rar.llm.providers.anthropic import Anthropic
from rar.llm.providers.gemini import Gemini
from rar.llm.providers.openai import OpenAIChat, OpenAIText
from rar.llm.types import Message, Request, Response, StreamChunk

REQUEST = Request(model="m", messages=(Message(role="user", content="hi"),))
WORDS = [
    *("choices", "message", "delta", "content", "refusal", "reasoning_content", "reasoning"),
    *("tool_calls", "function", "name", "arguments", "id", "index", "finish_reason", "text"),
    *("usage", "prompt_tokens", "completion_tokens", "model", "error", "type", "input"),
    *("thinking", "stop_reason", "candidates", "parts", "functionCall", "args", "thought"),
    *("finishReason", "usageMetadata", "promptFeedback", "blockReason", "modelVersion"),
]
KEYS = st.sampled_from(WORDS) | st.text(max_size=4)
ANY = json_values(KEYS, leaves=6)
TEXT = st.text(max_size=8)
INT = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what JSON readers hold


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` most of the time, else any JSON value in its place."""
    return st.one_of(strategy, strategy, ANY)


def _object(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    return _maybe(
        st.fixed_dictionaries(
            {k: _maybe(v) for k, v in required.items()},
            optional={k: _maybe(v) for k, v in optional.items()},
        )
    )


def _list(item: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _maybe(st.lists(item, max_size=3))


openai_call = _object(
    {},
    {
        "id": TEXT,
        "index": st.integers(0, 3),
        "function": _object({}, {"name": TEXT, "arguments": TEXT | ANY}),
    },
)
openai_message = _object(
    {},
    {
        "content": TEXT | _list(_object({}, {"type": TEXT, "text": TEXT})),
        "refusal": TEXT,
        "reasoning_content": TEXT,
        "tool_calls": _list(openai_call),
    },
)
openai_usage = _object({}, {"prompt_tokens": INT, "completion_tokens": INT})
OPENAI = _object(
    {
        "choices": _list(
            _object({}, {"message": openai_message, "text": TEXT, "finish_reason": TEXT})
        )
    },
    {"usage": openai_usage, "model": TEXT},
)
OPENAI_CHUNKS = _object(
    {},
    {
        "choices": _list(
            _object(
                {},
                {
                    "index": st.integers(0, 1),
                    "delta": openai_message,
                    "text": TEXT,
                    "finish_reason": TEXT,
                },
            )
        ),
        "usage": openai_usage,
        "model": TEXT,
        "error": ANY,
    },
)
anthropic_block = _object(
    {"type": st.sampled_from(["text", "thinking", "tool_use", "redacted_thinking"])},
    {"text": TEXT, "thinking": TEXT, "id": TEXT, "name": TEXT, "input": ANY},
)
anthropic_usage = _object(
    {},
    {"input_tokens": INT, "output_tokens": INT, "cache_read_input_tokens": ANY},
)
ANTHROPIC = _object(
    {"content": _list(anthropic_block)},
    {"stop_reason": TEXT, "usage": anthropic_usage, "model": TEXT},
)
ANTHROPIC_EVENTS = st.one_of(
    _object({"type": st.just("message_start"), "message": ANTHROPIC}, {}),
    _object(
        {"type": st.just("content_block_start"), "index": st.integers(0, 2)},
        {"content_block": anthropic_block},
    ),
    _object(
        {
            "type": st.just("content_block_delta"),
            "index": st.integers(0, 2),
            "delta": _object(
                {
                    "type": st.sampled_from(
                        ["text_delta", "thinking_delta", "input_json_delta", "signature_delta"]
                    )
                },
                {"text": TEXT, "thinking": TEXT, "partial_json": TEXT, "signature": TEXT},
            ),
        },
        {},
    ),
    _object({"type": st.just("content_block_stop"), "index": st.integers(0, 2)}, {}),
    _object(
        {"type": st.just("message_delta")},
        {"delta": _object({}, {"stop_reason": TEXT}), "usage": anthropic_usage},
    ),
    _object({"type": st.sampled_from(["message_stop", "ping", "error"])}, {"error": ANY}),
)
gemini_part = _object(
    {},
    {
        "text": TEXT,
        "thought": st.booleans(),
        "functionCall": _object({"name": TEXT}, {"args": ANY, "id": TEXT}),
    },
)
GEMINI = _object(
    {
        "candidates": _list(
            _object(
                {"content": _object({"parts": _list(gemini_part)}, {})},
                {"finishReason": st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY"]) | TEXT},
            )
        )
    },
    {
        "usageMetadata": _object({}, {"promptTokenCount": INT}),
        "promptFeedback": _object({}, {"blockReason": TEXT}),
        "modelVersion": TEXT,
        "error": _object({}, {"code": INT, "message": TEXT}),
    },
)

PROVIDERS: dict[str, tuple[Callable[..., Any], Any, Any]] = {
    # name: (the provider class, its answers, its streamed events)
    "openai-chat": (OpenAIChat, OPENAI, OPENAI_CHUNKS),
    "openai-text": (OpenAIText, OPENAI, OPENAI_CHUNKS),
    "anthropic": (Anthropic, ANTHROPIC, ANTHROPIC_EVENTS),
    "gemini": (Gemini, GEMINI, GEMINI),
}


def _client(status: int, body: bytes, content_type: str) -> httpx2.Client:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body, headers={"content-type": content_type})

    return httpx2.Client(transport=httpx2.MockTransport(answer))


def _call(run: Callable[[], Response]) -> Response | RarError:
    try:
        with no_hang():
            return run()
    except RarError as exc:
        return exc


def _complete(name: str, body: bytes, status: int = 200) -> Response | RarError:
    make = PROVIDERS[name][0]
    with _client(status, body, "application/json") as client:
        provider = make("m", api_key="k", http_client=client)
        return _call(lambda: provider.complete(REQUEST))


def _stream(name: str, events: list[Any]) -> Response | RarError:
    lines = []
    for event in events:
        data = event if isinstance(event, str) else orjson.dumps(event).decode()
        kind = event.get("type") if isinstance(event, dict) else None
        head = f"event: {kind}\n" if isinstance(kind, str) and "\n" not in kind else ""
        lines.append(f"{head}data: {data}\n\n")
    body = "".join(lines).encode()
    chunks: list[StreamChunk] = []
    make = PROVIDERS[name][0]
    with _client(200, body, "text/event-stream") as client:
        provider = make("m", api_key="k", http_client=client)
        result = _call(lambda: provider.stream(REQUEST, chunks.append))
    assert all(isinstance(chunk, StreamChunk) for chunk in chunks)
    return result


def _assert_answer(result: Response | RarError) -> None:
    if isinstance(result, RarError):
        assert isinstance(result, ProviderError), result
        return
    assert isinstance(result, Response)
    for call in result.tool_calls:
        assert isinstance(call.id, str) and isinstance(call.name, str)
        assert isinstance(call.arguments, str)


# --- plain answers ------------------------------------------------------------------------------


def _answers(name: str) -> st.SearchStrategy[bytes]:
    shaped = PROVIDERS[name][1].map(orjson.dumps)
    return st.one_of(shaped, shaped, ANY.map(orjson.dumps), st.binary(max_size=64))


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_well_formed_answer_is_read(name: str) -> None:
    answers = {
        "openai-chat": {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]},
        "openai-text": {"choices": [{"text": "hi", "finish_reason": "stop"}]},
        "anthropic": {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"},
        "gemini": {
            "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]
        },
    }
    result = _complete(name, orjson.dumps(answers[name]))
    assert isinstance(result, Response) and result.content == "hi"


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@budget(100)
@given(data=st.data())
def test_any_answer_is_a_response_or_a_provider_error(name: str, data: st.DataObject) -> None:
    body = data.draw(_answers(name), label="body")
    _assert_answer(_complete(name, body))


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@budget(30)
@given(data=st.data())
def test_any_error_answer_is_a_provider_error(name: str, data: st.DataObject) -> None:
    status = data.draw(st.sampled_from([400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 529]))
    body = data.draw(_answers(name) | ANY.map(lambda v: orjson.dumps({"error": v})))
    result = _complete(name, body, status)
    assert isinstance(result, ProviderError), result


# --- streamed answers ---------------------------------------------------------------------------


def _events(name: str) -> st.SearchStrategy[list[Any]]:
    event = PROVIDERS[name][2]
    return st.lists(st.one_of(event, event, event, ANY, st.just("[DONE]"), TEXT), max_size=8)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@budget(120)
@given(data=st.data())
def test_any_stream_is_a_response_or_a_provider_error(name: str, data: st.DataObject) -> None:
    _assert_answer(_stream(name, data.draw(_events(name), label="events")))


# --- the SSE reader -----------------------------------------------------------------------------


class _Chunks(httpx2.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


def _sse(chunks: list[bytes], *, event_bytes: int = 512, stream_bytes: int = 4096) -> Any:
    response = httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Chunks(chunks),
        request=httpx2.Request("POST", "http://127.0.0.1/"),
    )
    with no_hang():
        try:
            return list(
                sse_events(
                    response,
                    provider="p",
                    max_event_bytes=event_bytes,
                    max_stream_bytes=stream_bytes,
                )
            )
        except MalformedResponseError as exc:
            return exc


SSE_PIECES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"data: ", b"event: ", b"id: ", b"retry: ", b":", b"\n", b"\r", b"\r\n"]),
    st.sampled_from([b"\xff", b"\xef\xbb\xbf", b"\xc3", b"\x00", b"data:" + b"x" * 600]),
)


@budget(300)
@given(st.lists(st.lists(SSE_PIECES, max_size=6).map(b"".join), max_size=10))
@example([b"data: " + b"x" * 600 + b"\n\n"])  # one event past its limit
@example([b"data: " + b"y" * 400 + b"\n\n"] * 12)  # a stream past its limit
@example([b"data: \xc3", b"\xa9\n\n"])  # a character split between chunks
@example([b"data: \xff\xfe\n\n"])  # not UTF-8
def test_the_sse_reader_reads_any_bytes_or_refuses_them(chunks: list[bytes]) -> None:
    result = _sse(chunks)
    if isinstance(result, MalformedResponseError):
        return
    total = 0
    for name, data in result:
        assert isinstance(name, str) and isinstance(data, str) and data
        total += len(data.encode())
    assert total <= 4096


sse_fields = st.text(
    st.characters(exclude_characters="\r\n\x00", exclude_categories=("Cs",)), max_size=30
)


@budget(200)
@given(
    st.lists(st.tuples(st.sampled_from(["", "message_start", "delta"]), sse_fields), max_size=6),
    st.integers(1, 64),
)
def test_well_formed_events_come_back_whole_however_the_stream_is_cut(
    events: list[tuple[str, str]], size: int
) -> None:
    text = "".join(
        (f"event: {name}\n" if name else "") + f"data: {data}\n\n" for name, data in events
    )
    body = text.encode()
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    result = _sse(chunks, event_bytes=1 << 20, stream_bytes=1 << 20)
    expected = [(name or "message", data) for name, data in events if data]
    assert result == expected


# --- the bugs found -------------------------------------------------------------------------


def _malformed(name: str, how: str, body: Any, where: str) -> Any:
    """An answer the fuzzer found once raising TypeError/ValueError at ``where``."""
    return pytest.param(name, how, body, id=f"{name}-{where}")


MALFORMED_ANSWERS = [
    _malformed("openai-chat", "complete", {"choices": [{"message": {}, "finish_reason": [None]}]},
               "_openai_wire.py finish_reason (unhashable finish_reason)"),
    _malformed("openai-text", "complete", {"choices": [{"text": "", "finish_reason": [1]}]},
               "_openai_wire.py finish_reason (unhashable finish_reason)"),
    _malformed("openai-chat", "stream",
               [{"choices": [{"delta": {}, "finish_reason": [1]}]}, "[DONE]"],
               "_openai_wire.py finish_reason (unhashable streamed finish_reason)"),
    _malformed("openai-chat", "complete", {"choices": [{"message": {"content": [{"text": 1}]}}]},
               "_openai_wire.py text (a content part whose text is not a string)"),
    _malformed("openai-chat", "stream", [{"choices": [{"delta": {"content": [{"text": 2}]}}]}],
               "_openai_wire.py text (a streamed content part whose text is not a string)"),
    _malformed("openai-chat", "complete", {"choices": [{"message": {"tool_calls": 5}}]},
               "_openai_wire.py tool_calls (tool_calls is not a list)"),
    _malformed("openai-chat", "stream", [{"choices": [{"delta": {"tool_calls": 5}}]}],
               "_openai_wire.py StreamState.feed (streamed tool_calls is not a list)"),
    _malformed("openai-chat", "stream", [{"choices": 1}],
               "openai.py _read_stream (a chunk's choices is not a list)"),
    _malformed("anthropic", "stream", [{"type": "message_start", "message": {"usage": 5}}],
               "_anthropic_wire.py StreamAssembler.feed (message_start usage is not an object)"),
    _malformed("anthropic", "stream", [{"type": "message_start", "message": {"usage": "ab"}}],
               "_anthropic_wire.py StreamAssembler.feed (message_start usage is a string)"),
    _malformed("anthropic", "stream",
               [{"type": "message_start", "message": {"content": []}},
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": 5}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": "x"}}],
               "_anthropic_wire.py StreamAssembler._delta (a started block's text is not a "
               "string)"),
    _malformed("gemini", "stream",
               [{"candidates": [{"content": {"parts": [{"text": 5}, {"text": "a"}]},
                                 "finishReason": "STOP"}]}],
               "_google.py StreamAssembler.feed (a part's text is not a string)"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "how", "body"), MALFORMED_ANSWERS)
def test_a_malformed_answer_is_a_malformed_response_error(name: str, how: str, body: Any) -> None:
    result = _complete(name, orjson.dumps(body)) if how == "complete" else _stream(name, body)
    assert isinstance(result, MalformedResponseError), result
