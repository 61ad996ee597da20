"""The Gemini provider against a real local HTTP server speaking the Generative Language API.

Every answer the server sends is built with the official ``google-genai`` SDK types; the server
records what RAR sent, so the tests check both directions of the wire mapping.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from google import genai
from google.genai import types as gtypes

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
from rar.llm.providers._google import parse_response
from rar.llm.providers.gemini import Gemini
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
from servers.gemini_server import (
    GeminiServer,
    Raw,
    Stream,
    blocked,
    call,
    call_with_id,
    dump,
    error,
    part,
    response,
    usage,
)

KEY = "AIzaTestKey-0123456789-abcdefghijklmno"
MODEL = "gemini-2.5-flash"
ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL")


@pytest.fixture(scope="module")
def server() -> Iterator[GeminiServer]:
    with GeminiServer() as running:
        yield running


@pytest.fixture
def gemini(server: GeminiServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gemini]:
    server.reset()
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with Gemini(base_url=server.base_url) as provider:
        yield provider


def ignore(chunk: StreamChunk) -> None:
    pass


def ask(text: str = "hi", model: str = MODEL, **fields: Any) -> Request:
    return Request(model=model, messages=(Message.user(text),), **fields)


WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Args",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "title": "City", "format": "hostname"},
            "unit": {"$ref": "#/$defs/Unit"},
            "days": {"type": ["integer", "null"], "minimum": 1},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
        },
        "required": ["city", "ghost"],
        "$defs": {"Unit": {"type": "string", "enum": ["c", "f"], "title": "Unit"}},
    },
)
CLOCK = ToolSpec(name="clock", description="The time")


# --- plain answers, the request on the wire ---------------------------------------------------


def test_plain_answer(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(part("Hello"), part(" there")))
    answer = gemini.complete(ask("hi"))
    assert answer.content == "Hello there"
    assert answer.finish_reason is FinishReason.STOP
    assert answer.tool_calls == () and answer.reasoning is None
    assert (answer.model, answer.provider) == ("gemini-served-001", "gemini")
    sent = server.last
    assert sent.path == f"/v1beta/models/{MODEL}:generateContent"
    assert sent.body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_key_travels_in_header_never_in_url(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(part("ok")), response(part("ok")))
    gemini.complete(ask())
    gemini.stream(ask(), lambda chunk: None)
    for sent in server.received:
        assert sent.headers["x-goog-api-key"] == KEY
        assert KEY not in sent.path and KEY not in sent.query
        assert "key=" not in sent.query
    assert KEY not in repr(gemini)


def test_system_prompt_goes_to_system_instruction(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(part("ok")))
    gemini.complete(
        Request(
            model=MODEL,
            messages=(Message.system("Be brief."), Message.system("Be kind."), Message.user("hi")),
        )
    )
    body = server.last.body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Be kind."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_generation_config(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(part('{"a": 1}')))
    schema = {"title": "Out", "type": "object", "properties": {"a": {"type": "integer"}}}
    gemini.complete(
        ask(
            temperature=0.2,
            top_p=0.9,
            max_tokens=50,
            stop=("END",),
            seed=7,
            response_format=ResponseFormat(type="json_schema", name="Out", json_schema=schema),
        )
    )
    assert server.last.body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 50,
        "seed": 7,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
    }


@pytest.mark.parametrize(
    ("model", "effort", "config"),
    [
        (MODEL, "low", {"thinkingBudget": 1024, "includeThoughts": True}),
        (MODEL, "high", {"thinkingBudget": 24576, "includeThoughts": True}),
        ("gemini-3-pro-preview", "high", {"thinkingLevel": "high", "includeThoughts": True}),
    ],
)
def test_reasoning_effort_maps_to_thinking_config(
    gemini: Gemini, server: GeminiServer, model: str, effort: str, config: dict[str, Any]
) -> None:
    server.script(response(part("ok")))
    gemini.complete(ask(model=model, reasoning_effort=effort))
    assert server.last.body["generationConfig"]["thinkingConfig"] == config


# --- tools ---------------------------------------------------------------------------------------


def test_tools_are_declared_with_a_schema_gemini_accepts(
    gemini: Gemini, server: GeminiServer
) -> None:
    server.script(response(part("ok")))
    gemini.complete(ask(tools=(WEATHER, CLOCK), tool_choice="auto"))
    body = server.last.body
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "unit": {"type": "string", "enum": ["c", "f"]},
                            "days": {"type": "integer", "nullable": True, "minimum": 1},
                            "when": {"type": "string", "format": "date-time", "nullable": True},
                        },
                        "required": ["city"],
                    },
                },
                {"name": "clock", "description": "The time"},
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("clock", {"mode": "ANY", "allowedFunctionNames": ["clock"]}),
    ],
)
def test_tool_choice(
    gemini: Gemini, server: GeminiServer, choice: str, config: dict[str, Any]
) -> None:
    server.script(response(part("ok")))
    gemini.complete(ask(tools=(WEATHER, CLOCK), tool_choice=choice))
    assert server.last.body["toolConfig"] == {"functionCallingConfig": config}


def test_tool_choice_naming_an_unknown_tool_is_refused(
    gemini: Gemini, server: GeminiServer
) -> None:
    with pytest.raises(ConfigError, match="nope"):
        gemini.complete(ask(tools=(CLOCK,), tool_choice="nope"))
    assert server.received == []


def test_parallel_tool_calls_get_deterministic_ids_in_order(
    gemini: Gemini, server: GeminiServer
) -> None:
    answer = response(
        part("Checking."),
        call("get_weather", unit="c", city="Paris"),
        call("get_weather", city="Oslo"),
        call("clock"),
    )
    server.script(answer, answer)
    first = gemini.complete(ask(tools=(WEATHER, CLOCK)))
    assert first.finish_reason is FinishReason.TOOL_CALLS
    assert first.content == "Checking."
    assert first.tool_calls == (
        ToolCall(
            id="call_get_weather_0", name="get_weather", arguments='{"city":"Paris","unit":"c"}'
        ),
        ToolCall(id="call_get_weather_1", name="get_weather", arguments='{"city":"Oslo"}'),
        ToolCall(id="call_clock_2", name="clock", arguments="{}"),
    )
    assert gemini.complete(ask(tools=(WEATHER, CLOCK))) == first  # a replay matches


def test_tool_results_are_sent_back_as_function_responses(
    gemini: Gemini, server: GeminiServer
) -> None:
    paris = ToolCall(id="call_get_weather_0", name="get_weather", arguments='{"city": "Paris"}')
    oslo = ToolCall(id="call_get_weather_1", name="get_weather", arguments='{"city": "Oslo"}')
    clock = ToolCall(id="call_clock_2", name="clock", arguments="{}")
    server.script(response(part("Done.")))
    gemini.complete(
        Request(
            model=MODEL,
            messages=(
                Message.user("weather?"),
                Message.assistant("Checking.", [paris, oslo, clock]),
                Message.tool(paris, '{"temp": 21}'),
                Message.tool(oslo, "cold"),
                # a result that names no tool: the name comes from the call it answers
                Message(role="tool", content="timeout", tool_call_id=clock.id, is_error=True),
                Message.user("and tomorrow?"),
            ),
            tools=(WEATHER, CLOCK),
        )
    )
    assert server.last.body["contents"] == [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                {"functionCall": {"name": "clock", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"temp": 21}}},
                {"functionResponse": {"name": "get_weather", "response": {"content": "cold"}}},
                {"functionResponse": {"name": "clock", "response": {"error": "timeout"}}},
            ],
        },
        {"role": "user", "parts": [{"text": "and tomorrow?"}]},
    ]


def test_the_models_own_call_ids_are_kept_and_missing_ones_made_up(
    gemini: Gemini, server: GeminiServer
) -> None:
    server.script(response(call_with_id("fc-7f3a", "get_weather", city="Paris"), call("clock")))
    answer = gemini.complete(ask(tools=(WEATHER, CLOCK)))
    assert [c.id for c in answer.tool_calls] == ["fc-7f3a", "call_clock_1"]


def test_streamed_calls_keep_the_models_ids(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(call_with_id("fc-1", "clock"), call_with_id("fc-2", "clock")))
    streamed = gemini.stream(ask(tools=(CLOCK,)), lambda chunk: None)
    assert [c.id for c in streamed.tool_calls] == ["fc-1", "fc-2"]


def test_the_models_call_ids_go_back_with_the_calls_and_their_results(
    gemini: Gemini, server: GeminiServer
) -> None:
    given = ToolCall(id="fc-7f3a", name="get_weather", arguments='{"city": "Paris"}')
    made_up = ToolCall(id="call_clock_1", name="clock", arguments="{}")
    server.script(response(part("Done.")))
    gemini.complete(
        Request(
            model=MODEL,
            messages=(
                Message.user("weather?"),
                Message.assistant(None, [given, made_up]),
                Message.tool(given, '{"temp": 21}'),
                Message.tool(made_up, "noon"),
            ),
            tools=(WEATHER, CLOCK),
        )
    )
    model_turn, results = server.last.body["contents"][1:]
    assert model_turn["parts"] == [
        {"functionCall": {"id": "fc-7f3a", "name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "clock", "args": {}}},
    ]
    assert results["parts"] == [
        {"functionResponse": {"id": "fc-7f3a", "name": "get_weather", "response": {"temp": 21}}},
        {"functionResponse": {"name": "clock", "response": {"content": "noon"}}},
    ]


def test_gemini_3_replays_calls_with_the_signature_stand_in(
    gemini: Gemini, server: GeminiServer
) -> None:
    first = ToolCall(id="call_clock_0", name="clock", arguments="{}")
    second = ToolCall(id="call_clock_1", name="clock", arguments="{}")
    server.script(response(part("ok")))
    gemini.complete(
        Request(
            model="gemini-3-flash-preview",
            messages=(
                Message.user("time?"),
                Message.assistant(None, [first, second]),
                Message.tool(first, "noon"),
                Message.tool(second, "noon"),
            ),
        )
    )
    parts = server.last.body["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in parts[1]


def test_invalid_tool_arguments_are_refused_before_http(
    gemini: Gemini, server: GeminiServer
) -> None:
    broken = ToolCall(id="c1", name="clock", arguments="{not json")
    with pytest.raises(BadRequestError, match="invalid tool arguments"):
        gemini.complete(
            Request(model=MODEL, messages=(Message.user("x"), Message.assistant(None, [broken])))
        )
    assert server.received == []


# --- answers: reasoning, usage, finish reasons -------------------------------------------------


def test_thoughts_are_reasoning(gemini: Gemini, server: GeminiServer) -> None:
    server.script(
        response(
            part("Let me think. ", thought=True),
            part("Two and two.", thought=True),
            part("4"),
            meta=usage(prompt=9, candidates=1, thoughts=30),
        )
    )
    answer = gemini.complete(ask("2+2?", reasoning_effort="low"))
    assert answer.reasoning == "Let me think. Two and two."
    assert answer.content == "4"
    assert answer.usage == Usage(input_tokens=9, output_tokens=31, reasoning_tokens=30)


def test_usage_with_cached_tokens(gemini: Gemini, server: GeminiServer) -> None:
    server.script(response(part("ok"), meta=usage(prompt=1200, candidates=15, cached=1024)))
    assert gemini.complete(ask()).usage == Usage(
        input_tokens=1200, cached_input_tokens=1024, output_tokens=15
    )


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("STOP", FinishReason.STOP),
        ("MAX_TOKENS", FinishReason.LENGTH),
        ("SAFETY", FinishReason.CONTENT_FILTER),
        ("RECITATION", FinishReason.CONTENT_FILTER),
        ("BLOCKLIST", FinishReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", FinishReason.CONTENT_FILTER),
        ("MALFORMED_FUNCTION_CALL", FinishReason.OTHER),
    ],
)
def test_finish_reason_mapping(
    gemini: Gemini, server: GeminiServer, finish: str, expected: FinishReason
) -> None:
    server.script(response(part("partial"), finish=finish))
    answer = gemini.complete(ask())
    assert answer.finish_reason is expected
    assert answer.truncated is (expected is FinishReason.LENGTH)


def test_blocked_prompt_is_a_clear_error(gemini: Gemini, server: GeminiServer) -> None:
    server.script(blocked("PROHIBITED_CONTENT", "policy"), blocked("SAFETY"))
    with pytest.raises(BadRequestError, match=r"prompt was blocked \(PROHIBITED_CONTENT\): policy"):
        gemini.complete(ask())
    with pytest.raises(BadRequestError, match=r"blocked \(SAFETY\)"):
        gemini.stream(ask(), lambda chunk: None)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", orjson.dumps({"candidates": []}), orjson.dumps({"candidates": [7]})],
)
def test_malformed_answer(gemini: Gemini, server: GeminiServer, body: bytes) -> None:
    server.script(Raw(200, body))
    with pytest.raises(MalformedResponseError):
        gemini.complete(ask())


# --- streaming -----------------------------------------------------------------------------------


def test_stream_delivers_chunks_and_the_same_response(gemini: Gemini, server: GeminiServer) -> None:
    answer = response(
        part("Hmm, think.", thought=True),
        part("Hello world"),
        meta=usage(prompt=20, candidates=3, cached=8, thoughts=5),
    )
    server.script(answer, answer)
    chunks: list[StreamChunk] = []
    streamed = gemini.stream(ask(reasoning_effort="low"), chunks.append)
    assert server.last.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert server.last.query == "alt=sse"
    assert [(c.kind, c.text) for c in chunks] == [
        ("reasoning", "Hmm,"),
        ("reasoning", " thi"),
        ("reasoning", "nk."),
        ("content", "Hell"),
        ("content", "o wo"),
        ("content", "rld"),
    ]
    assert streamed == gemini.complete(ask(reasoning_effort="low"))
    assert streamed.usage.cached_input_tokens == 8


def test_streamed_tool_calls_match_the_plain_answer(gemini: Gemini, server: GeminiServer) -> None:
    answer = response(call("get_weather", city="Paris"), call("clock"))
    server.script(answer, answer)
    streamed = gemini.stream(ask(tools=(WEATHER, CLOCK)), lambda chunk: None)
    assert streamed == gemini.complete(ask(tools=(WEATHER, CLOCK)))
    assert [c.id for c in streamed.tool_calls] == ["call_get_weather_0", "call_clock_1"]


def test_a_stream_over_the_answer_limit_is_refused_naming_it(
    gemini: Gemini, server: GeminiServer
) -> None:
    gemini.max_stream_bytes = 1_000
    server.script(Stream.of(response(part("word " * 400)), piece=20))
    with pytest.raises(MalformedResponseError, match="limit of 1000 bytes for one answer"):
        gemini.stream(ask(), lambda chunk: None)


@pytest.mark.parametrize("how", ["cut_after", "drop_after"])
def test_stream_cut_short(gemini: Gemini, server: GeminiServer, how: str) -> None:
    server.script(Stream.of(response(part("Hello world, longer text")), **{how: 2}))
    chunks: list[StreamChunk] = []
    with pytest.raises(StreamInterruptedError) as caught:
        gemini.stream(ask(), chunks.append)
    assert caught.value.retryable
    assert "".join(c.text for c in chunks) == "Hello wo"


def test_stream_error_chunk(gemini: Gemini, server: GeminiServer) -> None:
    chunks = [dump(c) for c in Stream.of(response(part("Hello world"))).chunks][:1]
    server.script(Stream([*chunks, error(503, "The model is overloaded.", "UNAVAILABLE")]))
    with pytest.raises(ProviderUnavailableError, match="overloaded"):
        gemini.stream(ask(), lambda chunk: None)


def test_stream_malformed_chunk(gemini: Gemini, server: GeminiServer) -> None:
    server.script(Stream([b"{broken"]))
    with pytest.raises(MalformedResponseError):
        gemini.stream(ask(), lambda chunk: None)


# --- errors --------------------------------------------------------------------------------------

SLOW_DOWN = {"Retry-After": "7"}
RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
BAD_KEY = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}


def case(
    status: int,
    grpc: str,
    kind: type[ProviderError],
    *details: dict[str, Any],
    headers: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> Any:
    body = error(status, f"answer {status} {grpc}", grpc, *details)
    return pytest.param(status, body, headers or {}, kind, retry_after, id=f"{status}-{grpc}")


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "retry_after"),
    [
        case(400, "INVALID_ARGUMENT", BadRequestError),
        case(400, "INVALID_ARGUMENT", AuthenticationError, BAD_KEY),  # Gemini's bad-key answer
        case(401, "UNAUTHENTICATED", AuthenticationError),
        case(403, "PERMISSION_DENIED", AuthenticationError),
        case(404, "NOT_FOUND", ModelNotFoundError),
        case(
            429, "RESOURCE_EXHAUSTED", RateLimitError, headers={"Retry-After": "7"}, retry_after=7
        ),
        case(429, "RESOURCE_EXHAUSTED", RateLimitError, RETRY_INFO, retry_after=37),
        case(503, "UNAVAILABLE", ProviderUnavailableError),
        case(500, "INTERNAL", ProviderUnavailableError),
    ],
)
def test_http_errors(
    gemini: Gemini,
    server: GeminiServer,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str],
    kind: type[ProviderError],
    retry_after: float | None,
) -> None:
    server.script(Raw(status, body, headers), Raw(status, body, headers))
    for attempt in (lambda: gemini.complete(ask()), lambda: gemini.stream(ask(), ignore)):
        with pytest.raises(kind) as caught:
            attempt()
        assert type(caught.value) is kind
        assert caught.value.status == status
        assert caught.value.retry_after == retry_after
        assert body["error"]["message"] in str(caught.value)


REFUSED = Raw(401, error(401, "Request had invalid credentials.", "UNAUTHENTICATED"))


def test_refused_key_names_the_variable_never_the_value(
    gemini: Gemini, server: GeminiServer
) -> None:
    server.script(REFUSED)
    with pytest.raises(AuthenticationError) as caught:
        gemini.complete(ask())
    assert "env:GEMINI_API_KEY" in str(caught.value)
    assert KEY not in str(caught.value) and KEY not in repr(caught.value.details)
    # a key handed over by value (as profiles do) is still named after its variable
    for key, named in ((KEY, "env:GEMINI_API_KEY"), ("other-key", "the api_key argument")):
        server.script(REFUSED)
        with (
            Gemini(base_url=server.base_url, api_key=key) as provider,
            pytest.raises(AuthenticationError, match=named),
        ):
            provider.complete(ask())


def test_missing_key_is_reported_before_any_http(
    gemini: Gemini, server: GeminiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(MissingAPIKeyError) as caught:
        gemini.complete(ask())
    assert caught.value.variables == ["GEMINI_API_KEY", "GOOGLE_API_KEY"]
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in str(caught.value)
    with pytest.raises(MissingAPIKeyError):
        gemini.stream(ask(), lambda chunk: None)
    with pytest.raises(MissingAPIKeyError):
        asyncio.run(gemini.acomplete(ask()))
    assert server.received == []


def test_environment_is_honoured(server: GeminiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    monkeypatch.setenv("GEMINI_BASE_URL", server.base_url + "/")
    server.script(response(part("ok")), Raw(401, error(401, "bad", "UNAUTHENTICATED")))
    with Gemini() as provider:
        assert provider.base_url == server.base_url
        assert provider.complete(ask()).content == "ok"
        assert server.last.headers["x-goog-api-key"] == "google-key"
        monkeypatch.setenv("GEMINI_API_KEY", KEY)  # read at each call, and preferred
        with pytest.raises(AuthenticationError, match="env:GEMINI_API_KEY"):
            provider.complete(ask())
        assert server.last.headers["x-goog-api-key"] == KEY


def test_model_from_the_provider_and_explicit_key(server: GeminiServer) -> None:
    server.reset()
    server.script(response(part("ok")))
    with Gemini("gemini-2.0-flash", base_url=server.base_url, api_key="explicit") as provider:
        assert provider.complete(ask(model="")).content == "ok"
    assert server.last.path == "/v1beta/models/gemini-2.0-flash:generateContent"
    assert server.last.headers["x-goog-api-key"] == "explicit"


def test_acomplete(gemini: Gemini, server: GeminiServer) -> None:
    answer = response(part("async hello"), call("clock"))
    server.script(answer, answer)

    async def both() -> list[Any]:
        return list(await asyncio.gather(gemini.acomplete(ask()), gemini.acomplete(ask())))

    first, second = asyncio.run(both())
    assert first == second == gemini_parse(answer)
    assert first.tool_calls[0].id == "call_clock_0"


def gemini_parse(answer: gtypes.GenerateContentResponse) -> Any:
    return parse_response(dump(answer), model=MODEL)


# --- wire compatibility with the official SDK ------------------------------------------------


def test_sdk_types_serialise_to_camel_case_wire_names() -> None:
    data = dump(response(part("a", thought=True), call("clock"), meta=usage(cached=1, thoughts=2)))
    candidate = data["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"]["parts"][1] == {"functionCall": {"args": {}, "name": "clock"}}
    assert set(data["usageMetadata"]) >= {
        "promptTokenCount",
        "candidatesTokenCount",
        "cachedContentTokenCount",
        "thoughtsTokenCount",
    }
    assert data["modelVersion"] == "gemini-served-001"


def test_official_sdk_reads_the_server_and_calls_like_rar(
    gemini: Gemini, server: GeminiServer
) -> None:
    sdk = genai.Client(
        api_key="sdk-key",
        http_options=gtypes.HttpOptions(base_url=server.url, api_version="v1beta"),
    )
    answer = response(part("thought", thought=True), part("Hello"), call("clock"))
    server.script(answer, answer, Stream.of(answer))
    parsed = sdk.models.generate_content(model=MODEL, contents="hi")
    assert parsed.text == "Hello" and parsed.function_calls[0].name == "clock"  # type: ignore[index]
    by_sdk = server.last
    gemini.complete(ask("hi"))
    ours = server.last
    assert ours.path == by_sdk.path
    assert by_sdk.headers["x-goog-api-key"] == "sdk-key" and "key=" not in by_sdk.query
    assert ours.body["contents"] == by_sdk.body["contents"]
    chunks = list(sdk.models.generate_content_stream(model=MODEL, contents="hi"))
    assert (server.last.path, server.last.query) == (
        f"/v1beta/models/{MODEL}:streamGenerateContent",
        "alt=sse",
    )
    assert "".join(c.text or "" for c in chunks) == "Hello"


# --- live (opt-in) -------------------------------------------------------------------------------

LIVE = bool(os.environ.get("RAR_LIVE_TESTS") == "1") and bool(
    os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
)


@pytest.mark.skipif(not LIVE, reason="set RAR_LIVE_TESTS=1 and GEMINI_API_KEY to call Gemini")
def test_live_gemini() -> None:  # pragma: no cover - needs the network and a key
    model = os.environ.get("RAR_GEMINI_MODEL", MODEL)
    with Gemini(model) as provider:
        answer = provider.complete(
            Request(model=model, messages=(Message.user("Say the word 'pong'."),), max_tokens=200)
        )
        assert answer.content and "pong" in answer.content.lower()
        assert answer.usage.input_tokens > 0
        chunks: list[StreamChunk] = []
        streamed = provider.stream(
            Request(model=model, messages=(Message.user("Count 1 to 5."),), max_tokens=200),
            chunks.append,
        )
        assert streamed.content and chunks
