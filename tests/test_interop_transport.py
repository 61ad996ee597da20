"""The recording transport with the real SDKs (openai, anthropic, google-genai) as clients.

Each SDK talks to a scripted loopback server speaking its provider's wire format (plain JSON and
SSE). A run records the calls; then the server is stopped and the run is replayed strictly:
every answer must come from the record (no network), the parsed responses and streamed chunks
must be identical, and the recorded bytes must be the bytes the server sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from rar.interop import async_http_client, http_client
from rar.llm.client import Client
from rar.llm.providers.openai import OpenAIChat
from rar.redaction import Redactor
from rar.replay.engine import ReplayReport, execute, replay
from rar.runtime.run import Run
from rar.store.store import Store
from redaction_corpus import _store_text
from servers.anthropic_server import AnthropicServer, message, text
from servers.anthropic_server import Stream as AnthropicStream
from servers.gemini_server import GeminiServer, part, response
from servers.openai_server import Answer, OpenAIServer, Raw

# a key in no shape the redactor knows: only the transport keeps it out of the store
KEY = "plainkey-7f3a9c1e5b2d4f60a8e1c3b5d7f9a2c4"
QUIET = Redactor(env={})


def _openai(run: Run, base_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url, api_key=KEY, http_client=http_client(run), max_retries=0
    )


def _llm_effects(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "effect"]


def _results(store: Store, run_id: str) -> list[Any]:
    return [
        store.resolve_payload(e["result"]) for e in _llm_effects(store, run_id) if "result" in e
    ]


def _replayed(store: Store, run: Run, function: Any) -> tuple[ReplayReport, Any]:
    report = replay(run.id, store=store, function=function)
    assert report.replay_run is not None
    finished = store.events(report.replay_run)[-1]
    return report, store.resolve_payload(finished.get("result"))


def _recorded_result(store: Store, run: Run) -> Any:
    return store.resolve_payload(store.events(run.id)[-1]["result"])


def _assert_reproducible(store: Store, run: Run, function: Any) -> Any:
    report, replayed = _replayed(store, run, function)
    assert report.replay_status == "reproducible", report.first_divergence
    assert report.served == len(_llm_effects(store, run.id))
    assert report.result_equal is True
    assert replayed == _recorded_result(store, run)
    return replayed


# --- OpenAI --------------------------------------------------------------------------------------


def openai_sync(run: Run, base_url: str) -> dict[str, Any]:
    client = _openai(run, base_url)
    plain = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], temperature=0
    )
    return {"plain": plain.model_dump(mode="json")}


def openai_stream(run: Run, base_url: str) -> dict[str, Any]:
    client = _openai(run, base_url)
    chunks = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "tell me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    return {"chunks": [chunk.model_dump(mode="json") for chunk in chunks]}


def openai_async(run: Run, base_url: str) -> dict[str, Any]:
    async def calls() -> list[Any]:
        client = openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, http_client=async_http_client(run), max_retries=0
        )
        plain = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "async"}]
        )
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "async stream"}], stream=True
        )
        chunks = [chunk.model_dump(mode="json") async for chunk in stream]
        return [plain.model_dump(mode="json"), chunks]

    return {"answers": asyncio.run(calls())}


def test_openai_sync_call_records_and_replays_strictly_with_the_upstream_stopped(
    store: Store,
) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="hello"))
        run = execute(openai_sync, inputs={"base_url": server.base_url}, store=store)
    replayed = _assert_reproducible(store, run, openai_sync)
    assert replayed["plain"]["choices"][0]["message"]["content"] == "hello"
    (effect,) = _llm_effects(store, run.id)
    request = store.resolve_payload(effect["request"])
    assert request == {  # the provider-neutral form a rar.llm.Client records
        "provider": "openai",
        "base_url": server.base_url,
        "request": {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0,
        },
    }


def test_openai_stream_replays_the_same_chunks_from_the_exact_recorded_bytes(
    store: Store,
) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="a streamed answer"))
        run = execute(openai_stream, inputs={"base_url": server.base_url}, store=store)
    replayed = _assert_reproducible(store, run, openai_stream)
    pieces = [c["choices"][0]["delta"]["content"] for c in replayed["chunks"] if c["choices"]]
    assert "".join(p or "" for p in pieces) == "a streamed answer"
    (result,) = _results(store, run.id)
    body = result["http"]["body"]
    assert result["http"]["stream"] is True
    assert body.endswith("data: [DONE]\n\n")
    assert body.count("data: ") == len(replayed["chunks"]) + 1  # every chunk, then [DONE]
    assert result["response"]["content"] == "a streamed answer"


def test_openai_async_calls_and_stream_record_and_replay(store: Store) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="async answer"), Answer(content="async stream"))
        run = execute(openai_async, inputs={"base_url": server.base_url}, store=store)
    replayed = _assert_reproducible(store, run, openai_async)
    assert replayed["answers"][0]["choices"][0]["message"]["content"] == "async answer"


def test_a_second_identical_request_is_served_from_the_cache_with_no_upstream_request(
    store: Store,
) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="once"))
        first = execute(openai_sync, inputs={"base_url": server.base_url}, store=store)
        second = execute(openai_sync, inputs={"base_url": server.base_url}, store=store)
        assert len(server.received) == 1
    assert _recorded_result(store, first) == _recorded_result(store, second)
    (hit,) = _results(store, second.id)
    assert hit["cached"] is True
    assert store.manifest(second.id).stats["llm"]["cached_calls"] == 1
    _assert_reproducible(store, second, openai_sync)


def test_an_sdk_answer_serves_a_client_call_of_the_same_request_from_the_cache(
    store: Store,
) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="shared"))
        execute(openai_sync, inputs={"base_url": server.base_url}, store=store)
        provider = OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key=KEY)

        def client_call(run: Run) -> str | None:
            client = Client(provider, run=run)
            return client.complete(
                messages=[{"role": "user", "content": "hi"}], temperature=0.0
            ).content

        run = execute(client_call, store=store)
        assert len(server.received) == 1  # the Client's call never left the cache
    assert _recorded_result(store, run) == "shared"


def test_a_recorded_http_error_replays_with_the_same_status_and_is_never_cached(
    store: Store,
) -> None:
    def failing(run: Run, base_url: str) -> str:
        try:
            openai_sync(run, base_url)
        except openai.RateLimitError as exc:
            return f"{exc.status_code}: {exc.message}"
        return "no error"

    limited = Raw(429, {"error": {"message": "slow down", "type": "rate_limit"}})
    with OpenAIServer() as server:
        server.script(limited, limited)
        run = execute(failing, inputs={"base_url": server.base_url}, store=store)
        execute(failing, inputs={"base_url": server.base_url}, store=store)
        assert len(server.received) == 2  # an error answer is not served from the cache
    assert _recorded_result(store, run).startswith("429")
    (result,) = _results(store, run.id)
    assert result["http"]["status"] == 429 and "response" not in result
    _assert_reproducible(store, run, failing)


def _interrupted(run: Run, base_url: str) -> dict[str, Any]:
    seen: list[Any] = []
    try:
        for chunk in _openai(run, base_url).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "cut"}], stream=True
        ):
            seen.append(chunk.choices[0].delta.content if chunk.choices else None)
    except openai.APIConnectionError as exc:
        return {"seen": seen, "error": type(exc).__name__}
    return {"seen": seen, "error": None}


@pytest.mark.parametrize("cut", ["cut_after", "drop_after"])
def test_a_truncated_upstream_stream_is_an_error_to_the_sdk_and_never_cached(
    store: Store, cut: str
) -> None:
    answer = Answer(content="never finished", **{cut: 3})
    with OpenAIServer() as server:
        server.script(answer, answer)
        run = execute(_interrupted, inputs={"base_url": server.base_url}, store=store)
        execute(_interrupted, inputs={"base_url": server.base_url}, store=store)
        assert len(server.received) == 2
    recorded = _recorded_result(store, run)
    assert recorded["error"] == "APIConnectionError"
    assert recorded["seen"] == ["", "neve", "r fi"][: len(recorded["seen"])]
    (result,) = _results(store, run.id)
    assert result["http"]["interrupted"] and "response" not in result
    _assert_reproducible(store, run, _interrupted)  # the same bytes, then the same error


def closes_early(run: Run, base_url: str) -> list[Any]:
    stream = _openai(run, base_url).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "long"}], stream=True
    )
    first = [next(iter(stream)).choices[0].delta.content]
    stream.close()
    return first


def test_a_stream_the_consumer_closes_early_records_what_it_was_given(store: Store) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="a long answer that nobody reads"))
        run = execute(closes_early, inputs={"base_url": server.base_url}, store=store)
    (result,) = _results(store, run.id)
    assert result["http"]["closed"] is True and "response" not in result
    _assert_reproducible(store, run, closes_early)


def lists_models(run: Run, base_url: str) -> list[str]:
    return [model.id for model in _openai(run, base_url).models.list()]


def test_a_non_model_endpoint_is_an_http_effect_replayed_from_the_record(store: Store) -> None:
    async def models(request: StarletteRequest) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "m-1", "object": "model"}]})

    with OpenAIServer() as server:
        server.app.router.routes.append(Route("/v1/models", models, methods=["GET"]))
        run = execute(lists_models, inputs={"base_url": server.base_url}, store=store)
    (effect,) = _llm_effects(store, run.id)
    assert effect["kind"] == "http"
    assert store.resolve_payload(effect["request"]) == {
        "method": "GET",
        "url": f"{server.base_url}/models",
    }
    assert _assert_reproducible(store, run, lists_models) == ["m-1"]


# --- Anthropic -----------------------------------------------------------------------------------


def _anthropic(run: Run, base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=base_url, api_key=KEY, http_client=http_client(run), max_retries=0
    )


def anthropic_sync(run: Run, base_url: str) -> dict[str, Any]:
    answer = _anthropic(run, base_url).messages.create(
        model="claude-test",
        max_tokens=64,
        system="be brief",
        messages=[{"role": "user", "content": "hi"}],
    )
    return answer.model_dump(mode="json")


def anthropic_stream(run: Run, base_url: str) -> dict[str, Any]:
    with _anthropic(run, base_url).messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "stream"}]
    ) as stream:
        events = [event.model_dump(mode="json") for event in stream]
        final = stream.get_final_message().model_dump(mode="json")
    return {"events": events, "final": final}


def test_anthropic_sync_call_records_and_replays_strictly(store: Store) -> None:
    with AnthropicServer() as server:
        server.script(message(text("claude says hi")))
        run = execute(anthropic_sync, inputs={"base_url": server.base_url}, store=store)
    replayed = _assert_reproducible(store, run, anthropic_sync)
    assert replayed["content"][0]["text"] == "claude says hi"
    (effect,) = _llm_effects(store, run.id)
    request = store.resolve_payload(effect["request"])
    assert request["provider"] == "anthropic" and request["base_url"] == server.base_url
    assert request["request"]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_anthropic_stream_records_and_replays_the_same_events(store: Store) -> None:
    with AnthropicServer() as server:
        server.script(AnthropicStream.of(message(text("streamed from claude"))))
        run = execute(anthropic_stream, inputs={"base_url": server.base_url}, store=store)
    replayed = _assert_reproducible(store, run, anthropic_stream)
    assert replayed["final"]["content"][0]["text"] == "streamed from claude"
    (result,) = _results(store, run.id)
    assert "event: message_stop" in result["http"]["body"]
    assert result["response"]["content"] == "streamed from claude"


# --- Gemini --------------------------------------------------------------------------------------


def _gemini(run: Run, base_url: str) -> genai.Client:
    options = genai_types.HttpOptions(
        base_url=base_url, api_version="v1beta", httpx_client=http_client(run)
    )
    return genai.Client(api_key=KEY, http_options=options)


def gemini_sync(run: Run, base_url: str) -> dict[str, Any]:
    answer = _gemini(run, base_url).models.generate_content(model="gemini-2.5-flash", contents="hi")
    return {
        "text": answer.text,
        "answer": answer.model_dump(mode="json", exclude={"sdk_http_response"}),
    }


def gemini_stream(run: Run, base_url: str) -> list[Any]:
    chunks = _gemini(run, base_url).models.generate_content_stream(
        model="gemini-2.5-flash", contents="stream"
    )
    return [chunk.model_dump(mode="json", exclude={"sdk_http_response"}) for chunk in chunks]


def test_gemini_sync_call_records_and_replays_strictly(store: Store) -> None:
    with GeminiServer() as server:
        server.script(response(part("gemini says hi")))
        run = execute(gemini_sync, inputs={"base_url": server.url}, store=store)
    replayed = _assert_reproducible(store, run, gemini_sync)
    assert replayed["text"] == "gemini says hi"
    (effect,) = _llm_effects(store, run.id)
    request = store.resolve_payload(effect["request"])
    assert request["base_url"] == server.base_url  # .../v1beta, as RAR's Gemini provider has it
    assert request["request"] == {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_gemini_stream_records_and_replays_the_same_chunks(store: Store) -> None:
    with GeminiServer() as server:
        server.script(response(part("streamed from gemini")))
        run = execute(gemini_stream, inputs={"base_url": server.url}, store=store)
    replayed = _assert_reproducible(store, run, gemini_stream)
    assert len(replayed) > 1
    (result,) = _results(store, run.id)
    assert result["response"]["content"] == "streamed from gemini"


# --- credentials ---------------------------------------------------------------------------------


def every_sdk(run: Run, openai_url: str, anthropic_url: str, gemini_url: str) -> None:
    openai_sync(run, openai_url)
    openai_stream(run, openai_url)
    anthropic_sync(run, anthropic_url)
    anthropic_stream(run, anthropic_url)
    gemini_sync(run, gemini_url)
    gemini_stream(run, gemini_url)


def test_the_api_key_never_reaches_any_file_of_the_store(store: Store, store_path: Path) -> None:
    with OpenAIServer() as oa, AnthropicServer() as an, GeminiServer() as ge:
        oa.script(Answer(content="a"), Answer(content="b"))
        an.script(message(text("c")), message(text("d")))
        ge.script(response(part("e")), response(part("f")))
        urls = {"openai_url": oa.base_url, "anthropic_url": an.base_url, "gemini_url": ge.url}
        run = execute(every_sdk, inputs=urls, store=store, redactor=QUIET)
        sent = [r.headers for r in (*oa.received, *an.received, *ge.received)]
    assert all(KEY in " ".join(h.values()) for h in sent)  # the SDKs did send it
    assert len(_llm_effects(store, run.id)) == 6
    store.close()
    everything = _store_text(store_path)
    assert KEY not in everything
    assert KEY[10:30] not in everything


# --- what a request is recorded as ---------------------------------------------------------------


def test_credentials_in_the_url_and_headers_are_never_part_of_the_recorded_request() -> None:
    from rar.interop._calls import describe

    headers = {"authorization": f"Bearer {KEY}", "x-goog-api-key": KEY, "x-api-key": KEY}
    call = describe(
        "GET", f"https://user:{KEY}@api.example.com/v1/files?key={KEY}&purpose=batch", headers, b""
    )
    assert call.kind == "http"
    assert call.payload == {
        "method": "GET",
        "url": "https://api.example.com/v1/files",
        "query": [["purpose", "batch"]],
    }
    body = b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}'
    gemini = describe(
        "POST",
        f"https://g.example/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key={KEY}",
        headers,
        body,
    )
    assert KEY not in repr(gemini.payload)
    assert gemini.payload["wire"] == {"stream": True, "query": [["alt", "sse"]]}


def test_a_body_the_neutral_form_cannot_say_is_recorded_as_sent() -> None:
    from rar.interop._calls import describe

    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "developer", "content": "be brief"}],
        "logprobs": True,
    }
    import orjson

    call = describe("POST", "https://api.example.com/v1/chat/completions", {}, orjson.dumps(body))
    assert call.kind == "llm" and not call.neutral
    assert call.payload == {
        "provider": "openai",
        "base_url": "https://api.example.com/v1",
        "endpoint": "/chat/completions",
        "model": "gpt-4o-mini",
        "body": body,
    }


def test_a_gzip_answer_is_recorded_decoded_and_served_without_content_encoding(
    store: Store,
) -> None:
    import gzip

    import orjson
    from starlette.responses import Response as StarletteResponse

    from servers.openai_server import chat_completion

    answer = orjson.dumps(chat_completion(Answer(content="compressed")))

    async def gzipped(request: StarletteRequest) -> StarletteResponse:
        headers = {"content-encoding": "gzip", "content-type": "application/json"}
        return StarletteResponse(gzip.compress(answer), headers=headers)

    with OpenAIServer() as server:
        server.app.router.routes.insert(
            0, Route("/gz/v1/chat/completions", gzipped, methods=["POST"])
        )
        base = f"http://127.0.0.1:{server.port}/gz/v1"
        run = execute(openai_sync, inputs={"base_url": base}, store=store)
    (result,) = _results(store, run.id)
    assert result["http"]["body"].encode() == answer
    assert "content-encoding" not in dict(result["http"]["headers"])
    replayed = _assert_reproducible(store, run, openai_sync)
    assert replayed["plain"]["choices"][0]["message"]["content"] == "compressed"


def openai_changed(run: Run, base_url: str) -> dict[str, Any]:
    client = _openai(run, base_url)
    plain = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}], temperature=0
    )
    return {"plain": plain.model_dump(mode="json")}


def test_a_replay_that_asks_something_else_names_the_field_that_differs(store: Store) -> None:
    with OpenAIServer() as server:
        server.script(Answer(content="hello"))
        run = execute(openai_sync, inputs={"base_url": server.base_url}, store=store)
    report = replay(run.id, store=store, function=openai_changed)
    assert report.replay_status == "non-reproducible"
    divergence = report.first_divergence or {}
    fields = [d["field"] for d in divergence.get("differences", [])]
    assert any("messages" in field for field in fields), divergence


def test_import_rar_loads_neither_the_transport_nor_httpx2() -> None:
    import subprocess
    import sys

    code = (
        "import sys, rar; rar.__version__; "
        "print(sorted(m for m in sys.modules if m.startswith(('rar.interop', 'httpx2'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    code = "import rar; print(rar.RecordingTransport.__module__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "rar.interop.transport"
