"""The OpenAI-compatible providers against a real local HTTP server speaking OpenAI's protocol.

The server (``tests/servers/openai_server.py``) builds its answers with the official SDK's
types, and the official client is shown to talk to it, so what is parsed here is the real wire
format. Nothing leaves 127.0.0.1 except the opt-in live test at the end.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
from collections.abc import Iterator

import httpx2
import openai
import orjson
import pytest

from rar.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    MalformedResponseError,
    MissingAPIKeyError,
    ModelNotFoundError,
    ProviderUnavailableError,
    RateLimitError,
    StreamInterruptedError,
)
from rar.llm.client import Client, RetryPolicy
from rar.llm.profiles import Profiles
from rar.llm.providers._http import parse_retry_after
from rar.llm.providers._openai_wire import is_reasoning_model
from rar.llm.providers.openai import OpenAIChat, OpenAIText, is_local_url
from rar.llm.providers.templates import get_template
from rar.llm.types import (
    FinishReason,
    Message,
    Request,
    Response,
    ResponseFormat,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
)
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from servers.openai_server import Answer, Call, OpenAIServer, Raw, chat_completion

KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"
LIVE_KEY = os.environ.get("OPENAI_API_KEY")
LIVE = bool(LIVE_KEY) and os.environ.get("RAR_LIVE_TESTS") == "1"

WEATHER = ToolSpec(
    name="weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CALLS = (
    Call("call_a", "weather", '{"city": "Paris"}'),
    Call("call_b", "weather", '{"city": "Tokyo"}'),
    Call("call_c", "clock", "{}"),
)


def ask(text: str = "Hello?", **fields: object) -> Request:
    return Request(model="test-model", messages=(Message.user(text),), **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def chat(server: OpenAIServer) -> Iterator[OpenAIChat]:
    with OpenAIChat(base_url=server.base_url, api_key=KEY) as provider:
        yield provider


def text_provider(server: OpenAIServer, template: str) -> OpenAIText:
    return OpenAIText(base_url=server.base_url, api_key=KEY, template=template)


def collect(
    provider: OpenAIChat | OpenAIText, request: Request
) -> tuple[Response, list[StreamChunk]]:
    chunks: list[StreamChunk] = []
    return provider.stream(request, chunks.append), chunks


# --- plain answers ----------------------------------------------------------------------------


def test_plain_answer_gives_content_served_model_and_provider(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="Hello, world.", model="gpt-test-2025"))
    response = chat.complete(ask())
    assert response.content == "Hello, world."
    assert response.tool_calls == ()
    assert response.finish_reason == FinishReason.STOP
    assert response.model == "gpt-test-2025"
    assert response.provider == "openai"
    assert server.last.path == "/v1/chat/completions"


def test_parallel_tool_calls_come_back_in_order(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Answer(tool_calls=CALLS))
    response = chat.complete(ask(tools=(WEATHER,)))
    assert response.tool_calls == tuple(
        ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in CALLS
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.content is None


def test_reasoning_content_becomes_the_response_reasoning(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="42", reasoning="Six times seven."))
    response = chat.complete(ask())
    assert (response.reasoning, response.content) == ("Six times seven.", "42")


def test_reasoning_field_is_read_when_the_server_names_it_reasoning(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="42", reasoning="Hmm.", reasoning_field="reasoning"))
    assert chat.complete(ask()).reasoning == "Hmm."


def test_usage_counts_cached_input_and_reasoning_tokens(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(
        Answer(
            content="ok",
            prompt_tokens=1000,
            completion_tokens=300,
            cached_tokens=768,
            reasoning_tokens=256,
        )
    )
    assert chat.complete(ask()).usage == Usage(
        input_tokens=1000, cached_input_tokens=768, output_tokens=300, reasoning_tokens=256
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("function_call", FinishReason.TOOL_CALLS),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_finish_reasons_are_mapped(
    server: OpenAIServer, chat: OpenAIChat, raw: str, expected: FinishReason
) -> None:
    server.script(Raw(200, _completion_with(finish_reason=raw)))
    assert chat.complete(ask()).finish_reason == expected


# --- what is sent -----------------------------------------------------------------------------


def test_every_request_field_is_mapped_to_the_wire_body(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    call = ToolCall(id="call_1", name="weather", arguments='{"city": "Oslo"}')
    request = Request(
        model="test-model",
        messages=(
            Message.system("Be brief."),
            Message.user("Weather in Oslo?"),
            Message.assistant(None, [call]),
            Message.tool(call, "-3 C, snow"),
        ),
        tools=(WEATHER,),
        tool_choice="weather",
        temperature=0.2,
        top_p=0.9,
        max_tokens=64,
        stop=("END", "STOP"),
        seed=7,
        response_format=ResponseFormat(
            type="json_schema", name="forecast", json_schema={"type": "object"}, strict=True
        ),
        reasoning_effort="low",
    )
    server.script(Answer(content="{}"))
    chat.complete(request)
    assert server.last.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "content": "-3 C, snow", "tool_call_id": "call_1"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "Current weather in a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "seed": 7,
        "stop": ["END", "STOP"],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "forecast", "schema": {"type": "object"}, "strict": True},
        },
        "reasoning_effort": "low",
    }


def test_unset_fields_are_not_sent(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Answer(content="hi"))
    chat.complete(ask("hi"))
    assert server.last.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
    }


@pytest.mark.parametrize(
    "model", ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5.1", "openai/o3"]
)
def test_reasoning_models_are_sent_max_completion_tokens_on_any_server(
    server: OpenAIServer, chat: OpenAIChat, model: str
) -> None:
    server.script(Answer(content="ok"))
    chat.complete(ask(max_tokens=64).model_copy(update={"model": model}))
    assert server.last.body["max_completion_tokens"] == 64
    assert "max_tokens" not in server.last.body


@pytest.mark.parametrize("model", ["llama3.1:8b", "gpt-4o-mini", "qwen2.5", "omni-moderation"])
def test_other_models_on_a_compatible_server_keep_max_tokens(
    server: OpenAIServer, chat: OpenAIChat, model: str
) -> None:
    server.script(Answer(content="ok"))
    chat.complete(ask(max_tokens=64).model_copy(update={"model": model}))
    assert server.last.body["max_tokens"] == 64
    assert "max_completion_tokens" not in server.last.body


def test_the_official_api_is_sent_max_completion_tokens_for_every_model() -> None:
    sent: list[dict[str, object]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(request.content))
        return httpx2.Response(200, json=chat_completion(Answer(content="ok")))

    with httpx2.Client(transport=httpx2.MockTransport(answer)) as client:
        provider = OpenAIChat(base_url="https://api.openai.com/v1", api_key=KEY, http_client=client)
        provider.complete(ask(max_tokens=32).model_copy(update={"model": "gpt-4o-mini"}))
    assert sent[0]["max_completion_tokens"] == 32 and "max_tokens" not in sent[0]


def test_text_completion_keeps_max_tokens_even_for_a_reasoning_model_name(
    server: OpenAIServer,
) -> None:
    server.script(Answer(text="ok"))
    with text_provider(server, "none") as provider:
        provider.complete(ask(max_tokens=8).model_copy(update={"model": "o3"}))
    assert server.last.body["max_tokens"] == 8


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_keywords_are_sent_as_they_are(
    server: OpenAIServer, chat: OpenAIChat, choice: str
) -> None:
    server.script(Answer(content="ok"))
    chat.complete(ask(tools=(WEATHER,), tool_choice=choice))
    assert server.last.body["tool_choice"] == choice


def test_json_object_response_format_is_sent(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Answer(content="{}"))
    chat.complete(ask(response_format=ResponseFormat(type="json_object")))
    assert server.last.body["response_format"] == {"type": "json_object"}


def test_the_key_is_sent_as_a_bearer_token(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Answer(content="ok"))
    chat.complete(ask())
    assert server.last.headers["authorization"] == f"Bearer {KEY}"


def test_a_local_server_without_a_key_gets_no_authorization_header(server: OpenAIServer) -> None:
    server.script(Answer(content="ok"))
    with OpenAIChat(base_url=server.base_url) as provider:
        assert provider.complete(ask()).content == "ok"
    assert "authorization" not in server.last.headers


def test_extra_headers_are_sent(server: OpenAIServer) -> None:
    server.script(Answer(content="ok"))
    with OpenAIChat(base_url=server.base_url, extra_headers={"X-Tenant": "t1"}) as provider:
        provider.complete(ask())
    assert server.last.headers["x-tenant"] == "t1"


# --- streaming --------------------------------------------------------------------------------


def test_streaming_delivers_reasoning_then_content_chunks_in_order(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="The answer is 42.", reasoning="Multiply 6 by 7.", piece=5))
    response, chunks = collect(chat, ask())
    assert [(c.kind, c.text) for c in chunks] == [
        ("reasoning", "Multi"),
        ("reasoning", "ply 6"),
        ("reasoning", " by 7"),
        ("reasoning", "."),
        ("content", "The a"),
        ("content", "nswer"),
        ("content", " is 4"),
        ("content", "2."),
    ]
    assert (response.reasoning, response.content) == ("Multiply 6 by 7.", "The answer is 42.")


def test_streaming_asks_for_usage_and_reports_it(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Answer(content="ok", prompt_tokens=50, completion_tokens=2, cached_tokens=10))
    response, _ = collect(chat, ask())
    assert server.last.body["stream"] is True
    assert server.last.body["stream_options"] == {"include_usage": True}
    assert response.usage == Usage(input_tokens=50, cached_input_tokens=10, output_tokens=2)


def test_streamed_tool_call_deltas_are_assembled_by_index(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(tool_calls=CALLS, piece=3))
    response, chunks = collect(chat, ask(tools=(WEATHER,)))
    assert chunks == []
    assert response.tool_calls == tuple(
        ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in CALLS
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS


def test_a_streamed_response_equals_the_plain_one(server: OpenAIServer, chat: OpenAIChat) -> None:
    answer = Answer(
        content="Checking both.",
        reasoning="Two cities, two calls.",
        tool_calls=CALLS[:2],
        cached_tokens=4,
        reasoning_tokens=9,
    )
    server.script(answer, answer)
    plain = chat.complete(ask(tools=(WEATHER,)))
    streamed, _ = collect(chat, ask(tools=(WEATHER,)))
    assert streamed == plain


def test_a_stream_that_ends_without_done_or_finish_reason_is_interrupted(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="This will be cut off.", cut_after=3))
    chunks: list[StreamChunk] = []
    with pytest.raises(StreamInterruptedError) as caught:
        chat.stream(ask(), chunks.append)
    assert caught.value.retryable
    assert chunks  # some text arrived before the cut


def test_a_stream_whose_connection_drops_is_interrupted(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Answer(content="This connection will drop.", drop_after=3))
    with pytest.raises(StreamInterruptedError, match="dropped mid-stream"):
        chat.stream(ask(), lambda chunk: None)


def test_a_streamed_http_error_is_mapped_like_a_plain_one(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Raw(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as caught:
        chat.stream(ask(), lambda chunk: None)
    assert caught.value.retry_after == 2


def test_an_error_event_mid_stream_is_an_interruption(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    events = b'data: {"choices": [{"index": 0, "delta": {"content": "Hal"}}]}\n\n'
    events += b'data: {"error": {"message": "upstream model crashed"}}\n\n'
    server.script(Raw(200, events, headers={"content-type": "text/event-stream"}))
    with pytest.raises(StreamInterruptedError, match="upstream model crashed"):
        chat.stream(ask(), lambda chunk: None)


def test_a_stream_event_over_one_mebibyte_is_refused_naming_the_limit(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    big = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"a" * (1 << 20) + b'"}}]}'
    server.script(Raw(200, big + b"\n\n", headers={"content-type": "text/event-stream"}))
    with pytest.raises(MalformedResponseError, match="limit of 1 MiB for one event"):
        chat.stream(ask(), lambda chunk: None)


def test_an_unterminated_endless_event_line_is_refused_before_it_is_all_read(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    endless = b"data: " + b"a" * (3 << 20)  # no newline: a line reader would buffer it all
    server.script(Raw(200, endless, headers={"content-type": "text/event-stream"}))
    with pytest.raises(MalformedResponseError, match="limit of 1 MiB for one event"):
        chat.stream(ask(), lambda chunk: None)


def test_a_streamed_answer_over_the_whole_answer_limit_is_refused_and_never_cached(
    server: OpenAIServer, chat: OpenAIChat, store: Store
) -> None:
    chat.max_stream_bytes = 2_000
    answer = Answer(content="many words " * 200, piece=4)
    server.script(answer, answer)
    for _ in range(2):
        with (
            pytest.raises(MalformedResponseError, match="limit of 2000 bytes for one answer"),
            record("stream cap", store=store, redactor=Redactor(env={})) as run,
        ):
            Client(chat, run=run, profiles=Profiles()).stream(messages=[Message.user("talk")])
    assert len(server.received) == 2  # the failed answer was not served from the cache


def test_a_stream_of_another_content_type_is_malformed(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    body = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    server.script(Raw(200, body, headers={"content-type": "text/plain"}))
    with pytest.raises(MalformedResponseError, match="text/event-stream"):
        chat.stream(ask(), lambda chunk: None)


def test_a_server_that_ignores_stream_still_gives_the_answer_and_its_chunks(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    answer = Answer(content="whole", reasoning="at once")
    server.script(answer, Raw(200, chat_completion(answer)))
    plain = chat.complete(ask())
    streamed, chunks = collect(chat, ask())
    assert streamed == plain
    assert [(c.kind, c.text) for c in chunks] == [("reasoning", "at once"), ("content", "whole")]


# --- broken answers and errors ----------------------------------------------------------------


def _completion_with(**choice: object) -> dict[str, object]:
    message = {"role": "assistant", "content": "ok"}
    return {"id": "x", "model": "m", "choices": [{"index": 0, "message": message, **choice}]}


def test_a_body_that_is_not_json_is_a_malformed_response(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Raw(200, b"<html>gateway says hi</html>"))
    with pytest.raises(MalformedResponseError, match="not JSON"):
        chat.complete(ask())


def test_an_answer_without_choices_is_malformed_and_says_so(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Raw(200, {"id": "x", "object": "chat.completion", "model": "m"}))
    with pytest.raises(MalformedResponseError, match="no `choices`"):
        chat.complete(ask())


def test_a_choice_without_message_is_malformed_and_says_so(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Raw(200, {"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]}))
    with pytest.raises(MalformedResponseError, match="no `message`"):
        chat.complete(ask())


def _error(message: str, kind: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def test_http_400_is_a_bad_request_with_the_servers_message(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(Raw(400, _error("'temperature' must be <= 2", "invalid_request_error")))
    with pytest.raises(BadRequestError, match="'temperature' must be <= 2") as caught:
        chat.complete(ask())
    assert caught.value.status == 400
    assert not caught.value.retryable


def test_http_401_names_the_key_variable_and_never_the_key(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Raw(401, _error("Incorrect API key provided.", "invalid_request_error")))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with (
        OpenAIChat(base_url=server.base_url) as provider,
        pytest.raises(AuthenticationError) as caught,
    ):
        provider.complete(ask())
    message = str(caught.value)
    assert "Incorrect API key provided." in message
    assert "OPENAI_API_KEY" in message
    assert KEY not in message
    assert KEY not in repr(caught.value.details)


def test_http_404_is_model_not_found(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Raw(404, _error("The model `nope` does not exist", "invalid_request_error")))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        chat.complete(ask())


def test_http_429_is_rate_limited_with_retry_after(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Raw(429, _error("Rate limit reached", "requests"), headers={"Retry-After": "3"}))
    with pytest.raises(RateLimitError) as caught:
        chat.complete(ask())
    assert caught.value.retry_after == 3
    assert caught.value.retryable


def test_http_503_is_unavailable_and_retryable(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Raw(503, _error("The engine is currently overloaded", "server_error")))
    with pytest.raises(ProviderUnavailableError, match="overloaded") as caught:
        chat.complete(ask())
    assert caught.value.retryable


def test_retry_after_ms_is_read_in_milliseconds_and_wins_over_retry_after(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    headers = {"retry-after-ms": "1500", "Retry-After": "9"}
    server.script(Raw(429, _error("Rate limit reached", "requests"), headers=headers))
    with pytest.raises(RateLimitError) as caught:
        chat.complete(ask())
    assert caught.value.retry_after == 1.5


@pytest.mark.parametrize(
    ("retry_after", "milliseconds", "seconds"),
    [
        ("3", None, 3.0),
        ("2.5", "abc", 2.5),  # an unreadable retry-after-ms falls back to Retry-After
        (None, "750", 0.75),
        ("1e400", None, math.inf),  # a server asking for forever: no cap allows it
        ("Wed, 21 Oct 2015 07:28:00 GMT", None, 0.0),  # a date in the past: now
        ("soon", None, None),
        (None, None, None),
    ],
)
def test_retry_after_headers_are_read_as_the_sdks_read_them(
    retry_after: str | None, milliseconds: str | None, seconds: float | None
) -> None:
    assert parse_retry_after(retry_after, milliseconds=milliseconds) == seconds


def test_x_should_retry_false_stops_retries_of_a_retryable_status(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    headers = {"x-should-retry": "false"}
    server.script(Raw(503, _error("overloaded", "server_error"), headers=headers))
    slept: list[float] = []
    client = Client(chat, profiles=Profiles(), sleep=slept.append)
    with pytest.raises(ProviderUnavailableError) as caught:
        client.complete(messages=[Message.user("hi")])
    assert not caught.value.retryable
    assert len(server.received) == 1 and slept == []


def test_x_should_retry_true_retries_a_status_that_is_not_retried_otherwise(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    headers = {"x-should-retry": "true", "retry-after-ms": "250"}
    server.script(Raw(400, _error("try again", "invalid_request_error"), headers=headers))
    server.script(Answer(content="second time lucky"))
    slept: list[float] = []
    client = Client(chat, profiles=Profiles(), sleep=slept.append)
    assert client.complete(messages=[Message.user("hi")]).content == "second time lucky"
    assert len(server.received) == 2 and slept == [0.25]


@pytest.mark.parametrize(
    "headers", [{"Retry-After": "120"}, {"retry-after-ms": "120000", "Retry-After": "1"}]
)
def test_a_retry_after_beyond_the_cap_gives_up_at_once_and_says_why(
    server: OpenAIServer, chat: OpenAIChat, headers: dict[str, str]
) -> None:
    server.script(Raw(429, _error("Rate limit reached", "requests"), headers=headers))
    slept: list[float] = []
    client = Client(chat, profiles=Profiles(), sleep=slept.append, retry=RetryPolicy(max_delay=30))
    with pytest.raises(RateLimitError) as caught:
        client.complete(messages=[Message.user("hi")])
    message = str(caught.value)
    assert "asked to wait 120 s, longer than the retry cap of 30 s" in message
    assert "RetryPolicy(max_delay=120)" in message
    assert len(server.received) == 1 and slept == []


def test_a_refused_connection_is_unavailable_and_retryable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        OpenAIChat(base_url=f"http://127.0.0.1:{port}/v1") as provider,
        pytest.raises(ProviderUnavailableError) as caught,
    ):
        provider.complete(ask())
    assert caught.value.retryable


# --- keys and configuration -------------------------------------------------------------------


def test_a_missing_key_for_a_remote_url_is_raised_before_any_http() -> None:
    sent: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    with httpx2.Client(transport=httpx2.MockTransport(record)) as client:
        provider = OpenAIChat(base_url="https://api.openai.invalid/v1", http_client=client)
        with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY") as caught:
            provider.complete(ask())
    assert caught.value.variables == ["OPENAI_API_KEY"]
    assert sent == []


def test_require_key_insists_on_a_key_even_for_a_local_server(server: OpenAIServer) -> None:
    provider = OpenAIChat(base_url=server.base_url, require_key=True)
    with pytest.raises(MissingAPIKeyError):
        provider.complete(ask())
    assert server.received == []


def test_the_base_url_and_key_environment_variables_are_honoured(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.script(Answer(content="ok"))
    with OpenAIChat() as provider:
        assert provider.base_url == server.base_url
        assert provider.key_reference == "env:OPENAI_API_KEY"
        assert provider.complete(ask()).content == "ok"
    assert server.last.headers["authorization"] == "Bearer sk-from-env"


def test_the_default_base_url_is_openai() -> None:
    assert OpenAIChat().base_url == "https://api.openai.com/v1"


def test_the_key_never_appears_in_the_repr(server: OpenAIServer) -> None:
    assert KEY not in repr(OpenAIChat(base_url=server.base_url, api_key=KEY))


def test_a_base_url_without_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http"):
        OpenAIChat(base_url="localhost:8000/v1")


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://8.8.8.8/v1", False),
    ],
)
def test_loopback_and_private_addresses_count_as_local(url: str, local: bool) -> None:
    assert is_local_url(url) is local


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("o1", True),
        ("o1-preview", True),
        ("o3-mini-2025-01-31", True),
        ("o4-mini", True),
        ("gpt-5", True),
        ("gpt-5-nano", True),
        ("gpt-5.1-codex", True),
        ("openai/gpt-5-mini", True),
        ("ft:o4-mini-2025-04-16:acme::abc123", True),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("gpt-50", False),
        ("ollama", False),
        ("omni-moderation-latest", False),
        ("llama3", False),
    ],
)
def test_reasoning_models_are_recognised_by_name(model: str, reasoning: bool) -> None:
    assert is_reasoning_model(model) is reasoning


# --- async ------------------------------------------------------------------------------------


def test_acomplete_gives_the_same_response_as_complete(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    answer = Answer(content="async ok", tool_calls=CALLS[:1], reasoning="r", cached_tokens=1)
    server.script(answer, answer)
    plain = chat.complete(ask())
    assert asyncio.run(chat.acomplete(ask())) == plain
    assert server.received[0].body == server.received[1].body


def test_async_calls_in_one_event_loop_share_one_pooled_client(
    server: OpenAIServer, chat: OpenAIChat
) -> None:
    server.script(*[Answer(content=f"a{n}") for n in range(6)])

    async def many() -> tuple[list[str | None], int, int]:
        answers = await asyncio.gather(*(chat.acomplete(ask(f"q{n}")) for n in range(6)))
        pooled = len(chat._loop_clients)
        await chat.aclose()
        return [a.content for a in answers], pooled, len(chat._loop_clients)

    contents, pooled, after = asyncio.run(many())
    assert sorted(c or "" for c in contents) == [f"a{n}" for n in range(6)]
    assert (pooled, after) == (1, 0)  # one client for the loop (not one per call), then closed
    # a new event loop gets a client of its own, and the provider stays usable
    server.script(Answer(content="again"))
    assert asyncio.run(chat.acomplete(ask())).content == "again"


def test_acomplete_maps_http_errors(server: OpenAIServer, chat: OpenAIChat) -> None:
    server.script(Raw(404, _error("no such model", "invalid_request_error")))
    with pytest.raises(ModelNotFoundError):
        asyncio.run(chat.acomplete(ask()))


# --- text completion --------------------------------------------------------------------------

CONVERSATION = (Message.system("You are terse."), Message.user("Hi!"))


def test_text_completion_renders_chatml(server: OpenAIServer) -> None:
    server.script(Answer(text="Hello."))
    with text_provider(server, "chatml") as provider:
        response = provider.complete(Request(model="base", messages=CONVERSATION))
    assert server.last.path == "/v1/completions"
    assert server.last.body == {
        "model": "base",
        "prompt": (
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "stop": ["<|im_end|>"],
    }
    assert (response.content, response.provider) == ("Hello.", "openai-text")


def test_text_completion_renders_llama3(server: OpenAIServer) -> None:
    server.script(Answer(text="Hello."))
    with text_provider(server, "llama3") as provider:
        provider.complete(Request(model="base", messages=CONVERSATION, stop=("\n\n",)))
    assert server.last.body["prompt"] == (
        "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert server.last.body["stop"] == ["<|eot_id|>", "\n\n"]


def test_text_completion_with_no_template_concatenates_the_contents(server: OpenAIServer) -> None:
    server.script(Answer(text=" fox jumps", finish_reason="length", prompt_tokens=5))
    messages = (Message.user("The quick brown"), Message.user(" red"))
    with text_provider(server, "none") as provider:
        response = provider.complete(Request(model="base", messages=messages, max_tokens=2))
    assert server.last.body == {"model": "base", "prompt": "The quick brown red", "max_tokens": 2}
    assert response.content == " fox jumps"
    assert response.finish_reason == FinishReason.LENGTH
    assert response.usage == Usage(input_tokens=5, output_tokens=7)


def test_text_completion_streams_and_equals_the_plain_answer(server: OpenAIServer) -> None:
    answer = Answer(text="Once upon a time", piece=5)
    server.script(answer, answer)
    with text_provider(server, "none") as provider:
        plain = provider.complete(ask("Tell me a story."))
        streamed, chunks = collect(provider, ask("Tell me a story."))
    assert [c.text for c in chunks] == ["Once ", "upon ", "a tim", "e"]
    assert streamed == plain


def test_text_completion_refuses_tools_before_any_http(server: OpenAIServer) -> None:
    with (
        text_provider(server, "chatml") as provider,
        pytest.raises(ConfigError, match="OpenAIChat"),
    ):
        provider.complete(ask(tools=(WEATHER,)))
    assert server.received == []


def test_an_unknown_template_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="chatml, llama3, none"):
        get_template("alpaca")


# --- the server speaks the real protocol ------------------------------------------------------


def test_the_official_sdk_reads_the_test_servers_answers(server: OpenAIServer) -> None:
    server.script(Answer(tool_calls=CALLS[:2], reasoning="r"), Answer(content="streamed", piece=3))
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    completion = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    calls = completion.choices[0].message.tool_calls or []
    names = [(c.id, c.function.name) for c in calls if c.type == "function"]
    assert names == [("call_a", "weather"), ("call_b", "weather")]
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed"
    client.close()


# --- live, opt-in -----------------------------------------------------------------------------


@pytest.mark.skipif(not LIVE, reason="set OPENAI_API_KEY and RAR_LIVE_TESTS=1 to call OpenAI")
def test_live_openai_answers() -> None:
    model = os.environ.get("RAR_LIVE_OPENAI_MODEL", "gpt-4o-mini")
    with OpenAIChat(api_key=LIVE_KEY, base_url="https://api.openai.com/v1") as provider:
        response = provider.complete(
            Request(model=model, messages=(Message.user("Say OK."),), max_tokens=5)
        )
    assert response.content
    assert response.usage.input_tokens > 0
