"""The Anthropic provider against a real local HTTP server speaking the Messages API.

Every answer the server sends is built with the official ``anthropic`` SDK types (``Message``,
content blocks, raw stream events, ``ErrorResponse``); the server records what RAR sent, so the
tests check both directions of the wire mapping.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import anthropic
import orjson
import pytest

from rar.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    MalformedResponseError,
    MissingAPIKeyError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    StreamInterruptedError,
)
from rar.llm.profiles import Cost
from rar.llm.providers._anthropic_wire import parse_message
from rar.llm.providers.anthropic import Anthropic
from rar.llm.types import (
    FinishReason,
    Message,
    Request,
    ResponseFormat,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
)
from servers.anthropic_server import (
    AnthropicServer,
    Raw,
    Stream,
    dump,
    error,
    message,
    stream_events,
    text,
    thinking,
    tool_use,
)

KEY = "sk-ant-api03-TestKeyValue0123456789abcdefghijklmnop"
MODEL = "claude-haiku-4-5"
ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSpec(name="clock")


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as running:
        yield running


@pytest.fixture
def claude(server: AnthropicServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Anthropic]:
    server.reset()
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with Anthropic(base_url=server.base_url) as provider:
        yield provider


def ask(content: str = "hi", **fields: Any) -> Request:
    return Request(model=MODEL, messages=(Message.user(content),), **fields)


def ignore(chunk: StreamChunk) -> None:
    pass


# --- plain answers, the request on the wire ---------------------------------------------------


def test_plain_answer(claude: Anthropic, server: AnthropicServer) -> None:
    server.script(message(text("Hello"), text(" there")))
    answer = claude.complete(ask("hi"))
    assert answer.content == "Hello there"
    assert answer.finish_reason is FinishReason.STOP
    assert answer.tool_calls == () and answer.reasoning is None
    assert (answer.model, answer.provider) == ("claude-served-1", "anthropic")
    sent = server.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "max_tokens": 1024,
    }


def test_default_max_tokens_only_when_none_is_given(
    claude: Anthropic, server: AnthropicServer
) -> None:
    server.script(message(text("a")), message(text("b")))
    claude.complete(ask())
    assert server.last.body["max_tokens"] == 1024
    claude.complete(ask(max_tokens=77))
    assert server.last.body["max_tokens"] == 77


def test_system_prompt_is_top_level(claude: Anthropic, server: AnthropicServer) -> None:
    server.script(message(text("ok")))
    claude.complete(
        Request(
            model=MODEL,
            messages=(Message.system("Be brief."), Message.user("hi"), Message.system("Be kind.")),
        )
    )
    body = server.last.body
    assert body["system"] == "Be brief.\n\nBe kind."
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_sampling_options(claude: Anthropic, server: AnthropicServer) -> None:
    server.script(message(text("ok")))
    claude.complete(ask(temperature=0.3, top_p=0.8, stop=("END", "STOP"), seed=5))
    body = server.last.body
    assert (body["temperature"], body["top_p"]) == (0.3, 0.8)
    assert body["stop_sequences"] == ["END", "STOP"]
    assert "seed" not in body  # Anthropic has none


def test_json_response_format_is_refused_before_http(
    claude: Anthropic, server: AnthropicServer
) -> None:
    with pytest.raises(ConfigError, match="no JSON response mode"):
        claude.complete(ask(response_format=ResponseFormat(type="json_object")))
    assert server.received == []


# --- tools -----------------------------------------------------------------------------------


def test_tools_and_tool_choice(claude: Anthropic, server: AnthropicServer) -> None:
    choices = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
    choices["clock"] = {"type": "tool", "name": "clock"}
    server.script(*(message(text("ok")) for _ in choices))
    for choice, wire in choices.items():
        claude.complete(ask(tools=(WEATHER, CLOCK), tool_choice=choice))
        assert server.last.body["tool_choice"] == wire
    assert server.last.body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": WEATHER.parameters,
        },
        {"name": "clock", "input_schema": {"type": "object", "properties": {}}},
    ]
    with pytest.raises(ConfigError, match="nope"):
        claude.complete(ask(tools=(CLOCK,), tool_choice="nope"))


def test_tool_calls_keep_anthropic_ids(claude: Anthropic, server: AnthropicServer) -> None:
    server.script(
        message(
            text("Checking."),
            tool_use("toolu_01A", "get_weather", unit="c", city="Paris"),
            tool_use("toolu_01B", "clock"),
        )
    )
    answer = claude.complete(ask(tools=(WEATHER, CLOCK)))
    assert answer.finish_reason is FinishReason.TOOL_CALLS
    assert answer.content == "Checking."
    assert answer.tool_calls == (
        ToolCall(id="toolu_01A", name="get_weather", arguments='{"city":"Paris","unit":"c"}'),
        ToolCall(id="toolu_01B", name="clock", arguments="{}"),
    )


def test_tool_results_are_sent_back_as_tool_result_blocks(
    claude: Anthropic, server: AnthropicServer
) -> None:
    paris = ToolCall(id="toolu_01A", name="get_weather", arguments='{"city": "Paris"}')
    clock = ToolCall(id="toolu_01B", name="clock", arguments="")
    server.script(message(text("Done.")))
    claude.complete(
        Request(
            model=MODEL,
            messages=(
                Message.system("sys"),
                Message.user("weather?"),
                Message.assistant("Checking.", [paris, clock]),
                Message.tool(paris, '{"temp": 21}'),
                Message.tool(clock, "clock is broken", is_error=True),
                Message.user("and tomorrow?"),
            ),
            tools=(WEATHER, CLOCK),
        )
    )
    assert server.last.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_01B", "name": "clock", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": '{"temp": 21}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": "clock is broken",
                    "is_error": True,
                },
                {"type": "text", "text": "and tomorrow?"},
            ],
        },
    ]


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
def test_invalid_tool_arguments_are_refused_before_http(
    claude: Anthropic, server: AnthropicServer, arguments: str
) -> None:
    broken = ToolCall(id="toolu_x", name="clock", arguments=arguments)
    with pytest.raises(BadRequestError, match="invalid tool arguments"):
        claude.complete(
            Request(model=MODEL, messages=(Message.user("x"), Message.assistant(None, [broken])))
        )
    assert server.received == []


# --- thinking, usage, finish reasons -----------------------------------------------------------


def test_thinking_is_reasoning(claude: Anthropic, server: AnthropicServer) -> None:
    server.script(message(thinking("Two and two"), thinking(" make four."), text("4")))
    answer = claude.complete(ask("2+2?"))
    assert answer.reasoning == "Two and two make four."
    assert answer.content == "4"


@pytest.mark.parametrize(
    ("effort", "max_tokens", "budget", "sent_max"),
    [
        ("minimal", None, 1024, 2048),
        ("medium", None, 8192, 9216),
        ("high", 16000, 14976, 16000),
        ("high", 1500, 1024, 1500),
    ],
)
def test_reasoning_effort_enables_thinking(
    claude: Anthropic,
    server: AnthropicServer,
    effort: str,
    max_tokens: int | None,
    budget: int,
    sent_max: int,
) -> None:
    server.script(message(text("ok")))
    claude.complete(ask(reasoning_effort=effort, max_tokens=max_tokens))
    assert server.last.body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert server.last.body["max_tokens"] == sent_max


def test_thinking_needs_room(claude: Anthropic, server: AnthropicServer) -> None:
    with pytest.raises(ConfigError, match="max_tokens above 1024"):
        claude.complete(ask(reasoning_effort="low", max_tokens=1024))
    assert server.received == []


def test_thinking_is_off_inside_a_tool_loop(claude: Anthropic, server: AnthropicServer) -> None:
    call = ToolCall(id="toolu_1", name="clock", arguments="{}")
    server.script(message(text("noon")))
    claude.complete(
        Request(
            model=MODEL,
            messages=(
                Message.user("time?"),
                Message.assistant(None, [call]),
                Message.tool(call, "12"),
            ),
            reasoning_effort="high",
        )
    )
    assert "thinking" not in server.last.body
    assert server.last.body["max_tokens"] == 1024


def test_usage_counts_the_whole_prompt_with_cache_reads_and_writes_apart(
    claude: Anthropic, server: AnthropicServer
) -> None:
    # Anthropic's input_tokens leaves out cache reads and writes; RAR's input_tokens is the whole
    # prompt, as OpenAI's prompt_tokens is, with the cached and written parts counted apart
    server.script(
        message(text("ok"), input_tokens=20, output_tokens=9, cache_read=1000, cache_creation=50)
    )
    assert claude.complete(ask()).usage == Usage(
        input_tokens=1070, cached_input_tokens=1000, cache_write_input_tokens=50, output_tokens=9
    )


def test_a_streamed_answer_reports_its_cache_writes(
    claude: Anthropic, server: AnthropicServer
) -> None:
    server.script(message(text("ok"), input_tokens=5, cache_read=100, cache_creation=400))
    usage = claude.stream(ask(), lambda chunk: None).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_input_tokens) == (
        505,
        100,
        400,
    )


def test_cache_writes_are_billed_at_the_write_price_and_not_again_as_input(
    claude: Anthropic, server: AnthropicServer
) -> None:
    server.script(
        message(text("ok"), input_tokens=1_000, output_tokens=0, cache_creation=1_000_000)
    )
    usage = claude.complete(ask()).usage
    # Claude Sonnet 4.5 prices: $3 input, $3.75 per million 5-minute cache writes
    assert Cost(input=3.0).of(usage) == pytest.approx(0.003 + 3.75)
    assert Cost(input=3.0, cache_write_input=6.0).of(usage) == pytest.approx(0.003 + 6.0)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL_CALLS),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
    ],
)
def test_finish_reason_mapping(
    claude: Anthropic, server: AnthropicServer, reason: str, expected: FinishReason
) -> None:
    server.script(message(text("partial"), stop_reason=reason))
    answer = claude.complete(ask())
    assert answer.finish_reason is expected
    assert answer.truncated is (expected is FinishReason.LENGTH)


@pytest.mark.parametrize(
    "body", [b"{not json", b"[]", orjson.dumps({"id": "msg", "content": "text"})]
)
def test_malformed_answer(claude: Anthropic, server: AnthropicServer, body: bytes) -> None:
    server.script(Raw(200, body))
    with pytest.raises(MalformedResponseError):
        claude.complete(ask())


# --- streaming -------------------------------------------------------------------------------


def test_stream_delivers_chunks_and_the_same_response(
    claude: Anthropic, server: AnthropicServer
) -> None:
    answer = message(
        thinking("Hmm, think."),
        text("Hello world"),
        tool_use("toolu_9", "get_weather", city="Paris", unit="c"),
        cache_read=30,
    )
    server.script(answer, answer)
    chunks: list[StreamChunk] = []
    streamed = claude.stream(ask(tools=(WEATHER,)), chunks.append)
    assert server.last.body["stream"] is True
    assert [(c.kind, c.text) for c in chunks] == [
        ("reasoning", "Hmm,"),
        ("reasoning", " thi"),
        ("reasoning", "nk."),
        ("content", "Hell"),
        ("content", "o wo"),
        ("content", "rld"),
    ]
    assert streamed == claude.complete(ask(tools=(WEATHER,)))
    assert streamed.tool_calls[0].arguments == '{"city":"Paris","unit":"c"}'
    assert streamed.usage.cached_input_tokens == 30


@pytest.mark.parametrize("how", ["cut_after", "drop_after"])
def test_stream_without_message_stop(claude: Anthropic, server: AnthropicServer, how: str) -> None:
    events = stream_events(message(text("Hello world")))
    server.script(Stream(events, **{how: len(events) - 1}))  # everything but message_stop
    chunks: list[StreamChunk] = []
    with pytest.raises(StreamInterruptedError) as caught:
        claude.stream(ask(), chunks.append)
    assert caught.value.retryable
    assert "".join(c.text for c in chunks) == "Hello world"


def test_stream_error_event(claude: Anthropic, server: AnthropicServer) -> None:
    events = stream_events(message(text("Hello world")))[:3]
    server.script(Stream([*events, error("overloaded_error", "Overloaded")]))
    with pytest.raises(ProviderUnavailableError, match="Overloaded") as caught:
        claude.stream(ask(), ignore)
    assert caught.value.status == 529


def test_stream_malformed_event(claude: Anthropic, server: AnthropicServer) -> None:
    start = dump(stream_events(message(text("x")))[0])
    bad_tool = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{oops"},
    }
    opening = {
        "type": "content_block_start",
        "index": 0,
        "content_block": dump(tool_use("toolu_1", "clock")),
    }
    server.script(Stream([start, opening, bad_tool, {"type": "content_block_stop", "index": 0}]))
    with pytest.raises(MalformedResponseError, match="not JSON"):
        claude.stream(ask(), ignore)


# --- errors ------------------------------------------------------------------------------------


def case(
    status: int,
    kind_name: str,
    kind: type[ProviderError],
    headers: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> Any:
    body = error(kind_name, f"answer {status} {kind_name}")
    return pytest.param(status, body, headers or {}, kind, retry_after, id=f"{status}-{kind_name}")


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "retry_after"),
    [
        case(400, "invalid_request_error", BadRequestError),
        case(401, "authentication_error", AuthenticationError),
        case(403, "permission_error", AuthenticationError),
        case(404, "not_found_error", ModelNotFoundError),
        case(429, "rate_limit_error", RateLimitError, {"retry-after": "12"}, 12),
        case(500, "api_error", ProviderUnavailableError),
        case(529, "overloaded_error", ProviderUnavailableError),
    ],
)
def test_http_errors(
    claude: Anthropic,
    server: AnthropicServer,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str],
    kind: type[ProviderError],
    retry_after: float | None,
) -> None:
    server.script(Raw(status, body, headers), Raw(status, body, headers))
    for attempt in (lambda: claude.complete(ask()), lambda: claude.stream(ask(), ignore)):
        with pytest.raises(kind) as caught:
            attempt()
        assert type(caught.value) is kind
        assert caught.value.status == status
        assert caught.value.retry_after == retry_after
        assert body["error"]["message"] in str(caught.value)


@pytest.mark.parametrize(
    ("status", "kind", "should_retry"),
    [(529, "overloaded_error", "false"), (400, "invalid_request_error", "true")],
)
def test_x_should_retry_decides_whether_an_error_is_retryable(
    claude: Anthropic, server: AnthropicServer, status: int, kind: str, should_retry: str
) -> None:
    headers = {"x-should-retry": should_retry, "retry-after-ms": "2500"}
    server.script(Raw(status, error(kind, "says the server"), headers))
    with pytest.raises(ProviderError) as caught:
        claude.complete(ask())
    assert caught.value.retryable is (should_retry == "true")
    assert caught.value.retry_after == 2.5


REFUSED = Raw(401, error("authentication_error", "invalid x-api-key"))


def test_refused_key_names_the_variable_never_the_value(
    claude: Anthropic, server: AnthropicServer
) -> None:
    server.script(REFUSED)
    with pytest.raises(AuthenticationError) as caught:
        claude.complete(ask())
    assert "env:ANTHROPIC_API_KEY" in str(caught.value)
    assert KEY not in str(caught.value) and KEY not in repr(caught.value.details)
    # a key handed over by value (as profiles do) is still named after its variable
    for key, named in ((KEY, "env:ANTHROPIC_API_KEY"), ("other-key", "the api_key argument")):
        server.script(REFUSED)
        with (
            Anthropic(base_url=server.base_url, api_key=key) as provider,
            pytest.raises(AuthenticationError, match=named),
        ):
            provider.complete(ask())


def test_missing_key_is_reported_before_any_http(
    claude: Anthropic, server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    for attempt in (
        lambda: claude.complete(ask()),
        lambda: claude.stream(ask(), ignore),
        lambda: asyncio.run(claude.acomplete(ask())),
    ):
        with pytest.raises(MissingAPIKeyError) as caught:
            attempt()
        assert caught.value.variables == ["ANTHROPIC_API_KEY"]
        assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert server.received == []


def test_environment_is_honoured(server: AnthropicServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url + "/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    server.script(message(text("ok")), message(text("ok")))
    with Anthropic() as provider:
        assert provider.base_url == server.base_url
        assert provider.complete(ask()).content == "ok"
        assert server.last.headers["x-api-key"] == "env-key"
    with Anthropic("claude-haiku-4-5", api_key="explicit", base_url=server.base_url) as provider:
        provider.complete(Request(model="", messages=(Message.user("x"),)))
    assert server.last.headers["x-api-key"] == "explicit"
    assert server.last.body["model"] == "claude-haiku-4-5"


def test_acomplete(claude: Anthropic, server: AnthropicServer) -> None:
    answer = message(text("async hello"), tool_use("toolu_7", "clock"))
    server.script(answer, answer)

    async def both() -> list[Any]:
        return list(await asyncio.gather(claude.acomplete(ask()), claude.acomplete(ask())))

    first, second = asyncio.run(both())
    assert first == second == parse_message(dump(answer), model=MODEL)
    assert first.tool_calls[0].id == "toolu_7"


# --- wire compatibility with the official SDK ------------------------------------------------


def test_official_sdk_reads_the_server_and_calls_like_rar(
    claude: Anthropic, server: AnthropicServer
) -> None:
    sdk = anthropic.Anthropic(base_url=server.base_url, api_key="sdk-key", max_retries=0)
    answer = message(thinking("hmm"), text("Hello"), tool_use("toolu_5", "clock", zone="UTC"))
    server.script(answer, answer, answer, answer)
    parsed = sdk.messages.create(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
    )
    assert parsed == answer
    by_sdk = server.last
    claude.complete(ask("hi"))
    ours = server.last
    assert ours.path == by_sdk.path == "/v1/messages"
    assert ours.headers["content-type"] == by_sdk.headers["content-type"]
    # SDK 2.x sends the key as a bearer token with a newer version date; RAR sends the
    # documented x-api-key header and the stable 2023-06-01 version, which the API still takes
    assert by_sdk.headers["authorization"] == "Bearer sdk-key"
    assert by_sdk.headers["anthropic-version"]
    assert (ours.headers["x-api-key"], ours.headers["anthropic-version"]) == (KEY, "2023-06-01")
    with sdk.messages.stream(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        final = events.get_final_message()
    assert final.stop_reason == "tool_use" and final.usage == answer.usage
    # the SDK assembles the same message from the events as RAR does
    assembled = parse_message(final.to_dict(mode="json"), model=MODEL)
    assert assembled == parse_message(dump(answer), model=MODEL)
    assert claude.stream(ask("hi"), ignore) == assembled


# --- live (opt-in) -------------------------------------------------------------------------------

LIVE = os.environ.get("RAR_LIVE_TESTS") == "1" and bool(os.environ.get("ANTHROPIC_API_KEY"))


@pytest.mark.skipif(not LIVE, reason="set RAR_LIVE_TESTS=1 and ANTHROPIC_API_KEY to call Claude")
def test_live_anthropic() -> None:  # pragma: no cover - needs the network and a key
    model = os.environ.get("RAR_ANTHROPIC_MODEL", "claude-haiku-4-5")
    with Anthropic(model) as provider:
        answer = provider.complete(
            Request(model=model, messages=(Message.user("Say the word 'pong'."),), max_tokens=50)
        )
        assert answer.content and "pong" in answer.content.lower()
        assert answer.usage.input_tokens > 0
        chunks: list[StreamChunk] = []
        streamed = provider.stream(
            Request(model=model, messages=(Message.user("Count 1 to 5."),), max_tokens=50),
            chunks.append,
        )
        assert streamed.content and chunks
