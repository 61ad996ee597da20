"""The model client: recorded calls, cache, retries, fallbacks, interceptors, streaming."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rar.errors import (
    BadRequestError,
    ConfigError,
    ProviderUnavailableError,
    RateLimitError,
    StructuredOutputError,
)
from rar.llm import Message, Request, Response, ScriptedModel, StreamChunk, Usage
from rar.llm.cache import ResponseCache
from rar.llm.client import Client, RetryPolicy
from rar.llm.interceptors import BudgetExceededError, CostTracker, TokenBucketLimiter
from rar.llm.profiles import Cost, Profile, Profiles
from rar.llm.providers.openai import OpenAIText
from rar.llm.providers.templates import PromptTemplate
from rar.llm.types import FinishReason
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.start import record
from rar.store.store import Store
from servers.openai_server import Answer, OpenAIServer


class Counting:
    """A scripted provider that counts the calls that reached it."""

    name = "scripted"
    base_url = None

    def __init__(self, answer: Any = "42", model: str = "counting") -> None:
        self.model = model
        self.calls = 0
        self._inner = ScriptedModel(lambda request: answer, model=model)

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self._inner.complete(request)


class Failing:
    name = "scripted"
    base_url = None

    def __init__(self, errors: list[Exception], answer: str = "ok", model: str = "flaky") -> None:
        self.errors = list(errors)
        self.model = model
        self.calls = 0

    def complete(self, request: Request) -> Response:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return Response(
            content="ok", model=self.model, usage=Usage(input_tokens=10, output_tokens=2)
        )


def _run(store: Store, **kwargs: Any):  # type: ignore[no-untyped-def]
    return record("client test", store=store, redactor=Redactor(env={}), **kwargs)


def _llm_events(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "effect" and e["kind"] == "llm"]


NO_PROFILES = Profiles()


def test_a_call_is_one_recorded_llm_effect(store: Store) -> None:
    provider = Counting("hello")
    with _run(store) as run:
        client = Client(provider, run=run, profiles=NO_PROFILES)
        answer = client.complete(messages=[Message.user("hi")], temperature=0.3)
    assert answer.content == "hello" and provider.calls == 1
    (event,) = _llm_events(store, run.id)
    request = store.resolve_payload(event["request"])
    assert request["provider"] == "scripted" and request["base_url"] is None
    assert request["request"]["model"] == "counting"
    assert request["request"]["temperature"] == 0.3
    assert request["request"]["messages"] == [{"role": "user", "content": "hi"}]
    result = store.resolve_payload(event["result"])
    assert result["cached"] is False and result["response"]["content"] == "hello"


def test_a_second_identical_call_is_served_from_the_cache_without_the_provider(
    store: Store,
) -> None:
    provider = Counting("cached answer")
    for _ in range(2):
        with _run(store) as run:
            client = Client(provider, run=run, profiles=NO_PROFILES)
            answer = client.complete(messages=[Message.user("same question")])
    assert provider.calls == 1
    assert answer.content == "cached answer"
    assert client.stats.cached_calls == 1
    (event,) = _llm_events(store, run.id)
    assert store.resolve_payload(event["result"])["cached"] is True


def test_changing_a_sampling_parameter_misses_the_cache_and_explain_names_it(
    store: Store,
) -> None:
    provider = Counting()
    with _run(store) as run:
        client = Client(provider, run=run, profiles=NO_PROFILES)
        client.complete(messages=[Message.user("q"), Message.user("more")], temperature=0.2)
        request = client.request(
            messages=[Message.user("q"), Message.user("else")], temperature=0.7
        )
        client.complete(request)
        explanation = ResponseCache(store).explain(
            client.targets[0].payload(request.model_copy(update={"seed": 3}))
        )
    assert provider.calls == 2
    assert not explanation.hit
    fields = {d.field for d in explanation.differences}
    assert fields == {"seed"}
    fresh = client.request(messages=[Message.user("q"), Message.user("other")], temperature=0.2)
    fields = {
        d.field for d in ResponseCache(store).explain(client.targets[0].payload(fresh)).differences
    }
    assert fields == {"messages[1]"}


def test_truncated_answers_and_errors_are_never_cached(store: Store) -> None:
    truncated = Response(content="cut", finish_reason=FinishReason.LENGTH)
    provider = Counting(truncated)
    for _ in range(2):
        with _run(store) as run:
            Client(provider, run=run, profiles=NO_PROFILES).complete(
                messages=[Message.user("long")]
            )
    assert provider.calls == 2
    failing = Failing([BadRequestError("bad", provider="scripted", status=400)] * 2)
    for _ in range(2):
        with pytest.raises(BadRequestError), _run(store) as run:
            Client(failing, run=run, profiles=NO_PROFILES).complete(messages=[Message.user("x")])
    assert failing.calls == 2


def test_transient_errors_are_retried_with_backoff_and_recorded(store: Store) -> None:
    slept: list[float] = []
    provider = Failing(
        [
            ProviderUnavailableError("busy", provider="scripted", status=503),
            RateLimitError("slow down", provider="scripted", status=429, retry_after=3),
        ]
    )
    with _run(store) as run:
        client = Client(
            provider,
            run=run,
            profiles=NO_PROFILES,
            sleep=slept.append,
            retry=RetryPolicy(max_attempts=4, base_delay=0.5),
        )
        assert client.complete(messages=[Message.user("x")]).content == "ok"
    assert slept == [0.5, 3.0]
    result = store.resolve_payload(_llm_events(store, run.id)[0]["result"])
    assert [f["type"] for f in result["failures"]] == ["ProviderUnavailableError", "RateLimitError"]


def test_a_non_retryable_error_is_recorded_as_an_error_value(store: Store) -> None:
    provider = Failing([BadRequestError("no such parameter", provider="scripted", status=400)])
    with pytest.raises(BadRequestError, match="no such parameter"), _run(store) as run:
        Client(provider, run=run, profiles=NO_PROFILES, sleep=lambda s: None).complete(
            messages=[Message.user("x")]
        )
    assert provider.calls == 1
    (event,) = _llm_events(store, run.id)
    assert event["error"]["type"] == "BadRequestError" and "result" not in event


def test_the_fallback_chain_serves_when_the_primary_keeps_failing(store: Store) -> None:
    down = Failing(
        [ProviderUnavailableError("down", provider="scripted", status=503)] * 9, model="large"
    )
    backup = Counting("from the small model", model="small")
    with _run(store) as run:
        client = Client(
            down,
            fallbacks=[backup],
            run=run,
            profiles=NO_PROFILES,
            retry=RetryPolicy(max_attempts=2),
            sleep=lambda s: None,
        )
        answer = client.complete(messages=[Message.user("x")])
    assert answer.content == "from the small model"
    assert down.calls == 2 and backup.calls == 1
    result = store.resolve_payload(_llm_events(store, run.id)[0]["result"])
    assert result["served_by"]["model"] == "small"
    assert len(result["failures"]) == 2


def test_interceptors_run_around_live_calls_only(store: Store) -> None:
    seen: list[str] = []

    class Spy:
        def before(self, call: Any) -> None:
            seen.append(f"before {call.attempt}")

        def after(self, call: Any, response: Response) -> None:
            seen.append(f"after {response.content}")

    provider = Counting("x")
    for _ in range(2):
        with _run(store) as run:
            Client(provider, run=run, profiles=NO_PROFILES, interceptors=[Spy()]).complete(
                messages=[Message.user("same")]
            )
    assert seen == ["before 1", "after x"]


def test_the_token_bucket_waits_when_requests_per_minute_are_spent() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    limiter = TokenBucketLimiter(requests_per_minute=2, clock=lambda: now[0], sleep=sleep)
    client = Client(Counting(), profiles=NO_PROFILES, interceptors=[limiter])
    for i in range(3):
        client.complete(messages=[Message.user(f"q{i}")])
    assert len(waits) == 1 and waits[0] == pytest.approx(30.0)


def test_the_cost_tracker_adds_up_and_enforces_a_budget() -> None:
    profile = Profile(
        name="priced",
        provider="scripted",
        model="echo",
        cost=Cost(input=1_000_000, output=2_000_000),
    )
    tracker = CostTracker(budget=50)
    client = Client(profile, profiles=NO_PROFILES, interceptors=[tracker])
    client.complete(messages=[Message.user("a question of some length")])
    assert tracker.spent == pytest.approx(client.stats.cost) and tracker.spent > 0
    with pytest.raises(BudgetExceededError):
        for _ in range(100):
            client.complete(messages=[Message.user("again " * 20)])


def test_usage_and_cost_land_in_the_run_statistics(store: Store) -> None:
    profile = Profile(
        name="priced", provider="scripted", model="echo", cost=Cost(input=3.0, output=15.0)
    )
    with _run(store) as run:
        client = Client(profile, run=run, profiles=NO_PROFILES)
        client.complete(messages=[Message.user("one")])
        client.complete(messages=[Message.user("two")])
    stats = store.manifest(run.id).stats["llm"]
    assert stats["calls"] == 2
    assert stats["input_tokens"] == client.stats.usage.input_tokens
    assert stats["cost"] == pytest.approx(client.stats.cost)


class Streaming:
    name = "scripted"
    base_url = None
    model = "streamer"

    def complete(self, request: Request) -> Response:
        return Response(content="Hello world", reasoning="think")

    def stream(self, request: Request, on_chunk: Any) -> Response:
        for kind, text in [
            ("reasoning", "thi"),
            ("reasoning", "nk"),
            ("content", "Hello"),
            ("content", " world"),
        ]:
            on_chunk(StreamChunk(kind=kind, text=text))
        return self.complete(request)


def test_streaming_delivers_content_and_reasoning_separately(store: Store) -> None:
    content: list[str] = []
    reasoning: list[str] = []
    with _run(store) as run:
        answer = Client(Streaming(), run=run, profiles=NO_PROFILES).stream(
            messages=[Message.user("hi")], on_content=content.append, on_reasoning=reasoning.append
        )
    assert content == ["Hello", " world"] and reasoning == ["thi", "nk"]
    assert answer.content == "Hello world"


class Plan(BaseModel):
    steps: list[str]
    confidence: float


def test_structured_output_repairs_a_bad_answer_and_records_every_attempt(store: Store) -> None:
    answers = iter(['{"steps": "not a list"}', '{"steps": ["a", "b"], "confidence": 0.8}'])
    provider = ScriptedModel(lambda request: next(answers))
    with _run(store) as run:
        plan = Client(provider, run=run, profiles=NO_PROFILES).structured(
            messages=[Message.user("plan it")], schema=Plan
        )
    assert plan == Plan(steps=["a", "b"], confidence=0.8)
    events = _llm_events(store, run.id)
    assert len(events) == 2
    second = store.resolve_payload(events[1]["request"])["request"]
    assert "did not match the Plan schema" in second["messages"][-1]["content"]
    assert second["response_format"]["type"] == "json_schema"


def test_structured_output_gives_up_after_n_attempts(store: Store) -> None:
    provider = ScriptedModel(lambda request: "not json")
    with pytest.raises(StructuredOutputError, match="after 2 attempt"), _run(store) as run:
        Client(provider, run=run, profiles=NO_PROFILES).structured(
            messages=[Message.user("x")], schema=Plan, attempts=2
        )
    assert len(_llm_events(store, run.id)) == 2


def test_async_calls_run_concurrently_in_their_own_spans(store: Store) -> None:
    provider = ScriptedModel(lambda request: f"answer to {request.messages[-1].content}")

    async def main(run: Any) -> list[str]:
        client = Client(provider, run=run, profiles=NO_PROFILES)

        async def branch(name: str) -> str:
            with run.span(name):
                return (await client.acomplete(messages=[Message.user(name)])).content or ""

        return list(await asyncio.gather(branch("a"), branch("b")))

    with _run(store) as run:
        answers = asyncio.run(main(run))
    assert answers == ["answer to a", "answer to b"]
    assert sorted(e["span"] for e in _llm_events(store, run.id)) == ["run/a", "run/b"]


def test_the_cache_survives_a_rebuilt_index(store: Store, tmp_path: Path) -> None:
    provider = Counting("kept")
    with _run(store) as run:
        Client(provider, run=run, profiles=NO_PROFILES).complete(messages=[Message.user("q")])
    store.close()
    for path in store.root.glob("index.sqlite*"):
        path.unlink()
    fresh = Store(store.root)
    with record("again", store=fresh, redactor=Redactor(env={})) as run:
        answer = Client(provider, run=run, profiles=NO_PROFILES).complete(
            messages=[Message.user("q")]
        )
    assert answer.content == "kept" and provider.calls == 1


def test_credentials_are_not_part_of_the_cache_key() -> None:
    class Keyed(Counting):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.api_key = key

    a = Client(Keyed("sk-one"), profiles=NO_PROFILES)
    b = Client(Keyed("sk-two"), profiles=NO_PROFILES)
    request = a.request(messages=[Message.user("q")])
    assert a.targets[0].payload(request) == b.targets[0].payload(request)


# --- retries against the policy's cap --------------------------------------------------------


def test_a_retry_after_longer_than_the_cap_is_not_retried_and_the_record_says_why(
    store: Store,
) -> None:
    slept: list[float] = []
    provider = Failing(
        [RateLimitError("slow down", provider="scripted", status=429, retry_after=90)]
    )
    with pytest.raises(RateLimitError) as caught, _run(store) as run:
        Client(
            provider, run=run, profiles=NO_PROFILES, sleep=slept.append, retry=RetryPolicy()
        ).complete(messages=[Message.user("x")])
    assert provider.calls == 1 and slept == []
    assert "asked to wait 90 s, longer than the retry cap of 30 s" in str(caught.value)
    assert "RetryPolicy(max_delay=90)" in str(caught.value)
    (event,) = _llm_events(store, run.id)
    assert "longer than the retry cap" in event["error"]["message"]


def test_an_async_call_gives_up_at_once_on_a_retry_after_beyond_the_cap() -> None:
    provider = Failing(
        [RateLimitError("slow down", provider="scripted", status=429, retry_after=5)]
    )
    client = Client(provider, profiles=NO_PROFILES, retry=RetryPolicy(max_delay=1))
    with pytest.raises(RateLimitError, match="longer than the retry cap of 1 s"):
        asyncio.run(client.acomplete(messages=[Message.user("x")]))
    assert provider.calls == 1


def test_a_retry_after_beyond_the_cap_moves_on_to_the_fallback() -> None:
    limited = Failing(
        [RateLimitError("slow down", provider="scripted", status=429, retry_after=600)],
        model="large",
    )
    backup = Counting("from the backup", model="small")
    client = Client(limited, fallbacks=[backup], profiles=NO_PROFILES, sleep=lambda s: None)
    assert client.complete(messages=[Message.user("x")]).content == "from the backup"
    assert limited.calls == 1


# --- the rate limiter and failed calls --------------------------------------------------------


def _limiter() -> TokenBucketLimiter:
    return TokenBucketLimiter(tokens_per_minute=10_000, clock=lambda: 0.0, sleep=lambda s: None)


def test_failed_attempts_give_their_reserved_tokens_back_to_the_limiter() -> None:
    limiter = _limiter()
    start = limiter.available_tokens
    busy = [ProviderUnavailableError("busy", provider="scripted", status=503)] * 3
    client = Client(
        Failing(busy),
        profiles=NO_PROFILES,
        interceptors=[limiter],
        retry=RetryPolicy(max_attempts=3),
        sleep=lambda s: None,
    )
    with pytest.raises(ProviderUnavailableError):
        client.complete(messages=[Message.user("a long question " * 50)], max_tokens=1000)
    assert limiter.reserved_tokens == 0
    assert limiter.available_tokens == start


def test_a_failed_async_attempt_gives_its_reserved_tokens_back() -> None:
    limiter = _limiter()
    start = limiter.available_tokens
    busy = [ProviderUnavailableError("busy", provider="scripted", status=503)] * 2
    client = Client(
        Failing(busy),
        profiles=NO_PROFILES,
        interceptors=[limiter],
        retry=RetryPolicy(max_attempts=2),
    )
    with pytest.raises(ProviderUnavailableError):
        asyncio.run(client.acomplete(messages=[Message.user("q " * 100)]))
    assert (limiter.reserved_tokens, limiter.available_tokens) == (0, start)


def test_an_exception_that_is_no_provider_error_gives_the_reservation_back_too() -> None:
    class Broken:
        name = "scripted"
        base_url = None
        model = "broken"

        def complete(self, request: Request) -> Response:
            raise RuntimeError("a bug in the provider")

    limiter = _limiter()
    start = limiter.available_tokens
    client = Client(Broken(), profiles=NO_PROFILES, interceptors=[limiter])
    with pytest.raises(RuntimeError):
        client.complete(messages=[Message.user("q")])
    assert (limiter.reserved_tokens, limiter.available_tokens) == (0, start)


def test_a_later_interceptor_refusing_the_call_releases_the_limiters_reservation() -> None:
    limiter = _limiter()
    start = limiter.available_tokens
    spent = CostTracker(budget=0)
    client = Client(Counting(), profiles=NO_PROFILES, interceptors=[limiter, spent])
    with pytest.raises(BudgetExceededError):
        client.complete(messages=[Message.user("q")])
    assert (limiter.reserved_tokens, limiter.available_tokens) == (0, start)


def test_a_successful_call_settles_the_reservation_with_the_real_usage() -> None:
    limiter = _limiter()
    start = limiter.available_tokens
    client = Client(Failing([]), profiles=NO_PROFILES, interceptors=[limiter])
    client.complete(messages=[Message.user("q " * 100)])
    assert limiter.reserved_tokens == 0
    assert limiter.available_tokens == start - 12  # the answer's 10 input + 2 output tokens


# --- the prompt template is part of the cache key ---------------------------------------------


def test_text_completions_with_another_template_never_share_a_cache_entry(store: Store) -> None:
    with OpenAIServer() as server:
        server.script(Answer(text="chatml answer"), Answer(text="llama3 answer"))
        answers = []
        for template in ("chatml", "llama3", "chatml"):
            provider = OpenAIText("base", base_url=server.base_url, template=template)
            with _run(store) as run:
                client = Client(provider, run=run, profiles=NO_PROFILES)
                answers.append(client.complete(messages=[Message.user("Hi")]).content)
        prompts = [received.body["prompt"] for received in server.received]
    assert answers == ["chatml answer", "llama3 answer", "chatml answer"]
    assert len(prompts) == 2 and prompts[0] != prompts[1]  # the third came from the cache
    recorded = store.resolve_payload(_llm_events(store, run.id)[0]["request"])
    assert recorded["template"] == "chatml"


def test_cache_explain_names_the_template_when_only_it_differs(store: Store) -> None:
    with OpenAIServer() as server:
        server.script(Answer(text="ok"))
        chatml = OpenAIText("base", base_url=server.base_url, template="chatml")
        with _run(store) as run:
            Client(chatml, run=run, profiles=NO_PROFILES).complete(messages=[Message.user("Hi")])
    llama = Client(
        OpenAIText("base", base_url=server.base_url, template="llama3"), profiles=NO_PROFILES
    )
    payload = llama.targets[0].payload(llama.request(messages=[Message.user("Hi")]))
    explanation = ResponseCache(store).explain(payload)
    assert not explanation.hit
    assert [(d.field, d.cached, d.requested) for d in explanation.differences] == [
        ("template", "chatml", "llama3")
    ]


def test_a_strict_replay_with_another_template_is_a_mismatch(store: Store) -> None:
    def agent(template: str) -> Any:
        def entry(run: Any) -> str | None:
            provider = OpenAIText("base", base_url=server.base_url, template=template)
            client = Client(provider, run=run, profiles=NO_PROFILES, cache=False)
            return client.complete(messages=[Message.user("Hi")]).content

        return entry

    with OpenAIServer() as server:
        server.script(Answer(text="ok"))
        source = execute(agent("chatml"), store=store, redactor=Redactor(env={}))
        same = replay(source.id, store=store, function=agent("chatml"), redactor=Redactor(env={}))
        other = replay(source.id, store=store, function=agent("none"), redactor=Redactor(env={}))
        assert len(server.received) == 1  # replays never reach the server
    assert same.replay_status == "reproducible"
    assert other.replay_status == "non-reproducible" and other.mismatched == 1
    fields = {d["field"] for d in other.first_divergence["differences"]}
    assert "template" in fields


def test_a_custom_template_may_not_take_a_built_in_name() -> None:
    fake = PromptTemplate("chatml", lambda message: message.content or "")
    with pytest.raises(ConfigError, match="name of a built-in"):
        OpenAIText("base", base_url="http://127.0.0.1:1/v1", template=fake)
