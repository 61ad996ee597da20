"""Model profiles as lm-lib users expect them: custom categories, token encodings, the context
limit enforced before a request is sent (refused or trimmed), reasoning summaries, a model name
asked of a local server, interceptors that rewrite, and the harmony and Mistral templates.

Every server here is a real HTTP server on 127.0.0.1 (``tests/servers``), with ``GET /models``
added for the model detection.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types import Model
from pydantic import ValidationError
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from rar.errors import ConfigError, ContextLengthExceededError, ProfileError
from rar.llm import Message, Request, Response, ToolCall
from rar.llm.client import Client
from rar.llm.context import fit
from rar.llm.interceptors import CallContext, CostTracker, TokenBucketLimiter
from rar.llm.profiles import CATEGORIES, Cost, Profile, Profiles
from rar.llm.providers.templates import TEMPLATES, get_template
from rar.llm.tokens import count_request_tokens
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.start import record
from rar.science.planner_model import auto_profile
from rar.store.store import Store
from servers.openai_server import Answer, OpenAIServer

QUIET = Redactor(env={})
NO_PROFILES = Profiles()
LONG_A = "alpha " * 200  # about 200 tokens each in cl100k_base
LONG_B = "bravo " * 200
LONG_C = "charlie " * 200


class ModelsServer(OpenAIServer):
    """The scripted OpenAI server, also answering ``GET /v1/models`` as llama.cpp, vLLM and
    Ollama do (built with the SDK's ``Model`` type)."""

    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = ["qwen2.5-7b-instruct-q4_k_m", "second-model"]
        self.models_status = 200
        self.model_requests = 0
        self.app.router.routes.append(Route("/v1/models", self._models, methods=["GET"]))

    def reset(self) -> None:
        super().reset()
        self.models = ["qwen2.5-7b-instruct-q4_k_m", "second-model"]
        self.models_status = 200
        self.model_requests = 0

    async def _models(self, request: HTTPRequest) -> JSONResponse:
        self.model_requests += 1
        if self.models_status != 200:
            return JSONResponse({"error": {"message": "broken"}}, status_code=self.models_status)
        data = [
            Model(id=name, created=1_700_000_000, object="model", owned_by="local").to_dict()
            for name in self.models
        ]
        return JSONResponse({"object": "list", "data": data})


@pytest.fixture(scope="module")
def server() -> Iterator[ModelsServer]:
    with ModelsServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ModelsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _run(store: Store) -> Any:
    return record("lm-lib profiles", store=store, redactor=QUIET)


def _effects(store: Store, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "effect" and e["kind"] == kind]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return path


def _local(server: OpenAIServer, **fields: Any) -> Profile:
    values: dict[str, Any] = {
        "name": "local",
        "provider": "openai",
        "model": "m",
        "base_url": server.base_url,
    }
    return Profile(**{**values, **fields})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- 1. custom categories ------------------------------------------------------------------------


CATEGORY_PROFILES = """
[profiles.small]
provider = "scripted"
model = "echo"
category = "S"

[profiles.medium]
provider = "scripted"
model = "echo"
category = "m"

[profiles.custom]
provider = "scripted"
model = "echo"
category = "CUSTOM"

[profiles.production]
provider = "scripted"
model = "echo"
category = "prod"
"""


def test_custom_categories_are_found_without_regard_to_case(tmp_path: Path) -> None:
    profiles = Profiles.load(_write(tmp_path, CATEGORY_PROFILES), defaults=False)
    assert [p.name for p in profiles.category("custom")] == ["custom"]
    assert [p.name for p in profiles.category("CUSTOM")] == ["custom"]
    assert profiles.resolve("CUSTOM").name == "custom"
    assert profiles.resolve("Prod").name == "production"
    assert profiles.resolve("M").name == "medium"  # predefined ones match in either case too
    assert profiles.resolve("s").name == "small"
    assert profiles.get("custom").category == "CUSTOM"  # kept as written
    assert CATEGORIES == ("s", "m", "l", "xl", "hot", "cold")


def test_short_name_is_the_category_in_capitals(tmp_path: Path) -> None:
    profiles = Profiles.load(_write(tmp_path, CATEGORY_PROFILES), defaults=False)
    assert profiles.get("medium").short_name == "M"
    assert profiles.get("custom").short_name == "CUSTOM"
    assert profiles.get("production").short_name == "PROD"
    assert Profile(name="x", provider="scripted", model="echo").short_name is None


@pytest.mark.parametrize("bad", ["", "two words", "x" * 33, "prod!", "ümlaut"])
def test_a_category_must_be_a_short_name(tmp_path: Path, bad: str) -> None:
    text = f'[profiles.p]\nprovider = "scripted"\nmodel = "echo"\ncategory = "{bad}"\n'
    with pytest.raises(ProfileError, match="short name") as info:
        Profiles.load(_write(tmp_path, text), defaults=False)
    assert info.value.details["field"] == "category" and info.value.details["profile"] == "p"


def test_a_category_with_a_line_break_is_no_short_name() -> None:
    with pytest.raises(ValidationError, match="short name"):
        Profile(name="p", provider="scripted", model="echo", category="prod\n")


def test_the_science_runtime_still_picks_a_profile_by_category(tmp_path: Path) -> None:
    profiles = Profiles.load(_write(tmp_path, CATEGORY_PROFILES), defaults=False)
    assert auto_profile("owl_lite", profiles).name == "small"  # category "S" is category s
    with pytest.raises(ConfigError, match="category 'l'"):
        auto_profile("owl_dl", Profiles([profiles.get("custom")]))


# --- 2. token encodings ---------------------------------------------------------------------------


def test_a_profile_names_a_known_token_encoding(tmp_path: Path) -> None:
    for encoding in ("cl100k_base", "o200k_base", "none"):
        assert Profile(name="p", provider="openai", model="m", token_encoding=encoding)
    text = '[profiles.p]\nprovider = "openai"\nmodel = "m"\ntoken_encoding = "gpt2"\n'
    with pytest.raises(ProfileError, match="cl100k_base, o200k_base") as info:
        Profiles.load(_write(tmp_path, text), defaults=False)
    assert info.value.details["field"] == "token_encoding"


# --- 3. max_context_length ------------------------------------------------------------------------


def test_context_length_is_another_name_of_max_context_length(tmp_path: Path) -> None:
    old = Profile(name="p", provider="openai", model="m", context_length=8000)
    assert old.max_context_length == 8000 and old.context_length == 8000
    both = Profile(
        name="p", provider="openai", model="m", context_length=8000, max_context_length=8000
    )
    assert both.max_context_length == 8000
    assert old.recorded()["max_context_length"] == 8000
    with pytest.raises(ProfileError, match="disagree"):
        Profile(name="p", provider="openai", model="m", context_length=1, max_context_length=2)
    text = (
        '[profiles.p]\nprovider = "openai"\nmodel = "m"\ncontext_length = 4096\n'
        "max_context_length = 8192\n"
    )
    with pytest.raises(ProfileError, match="disagree") as info:
        Profiles.load(_write(tmp_path, text), defaults=False)
    assert info.value.details["path"] is not None
    assert info.value.details["field"] == "max_context_length"


def _long_conversation() -> list[Message]:
    return [
        Message.system("Be brief."),
        Message.user(LONG_A),
        Message.assistant(LONG_B),
        Message.user(LONG_C),
        Message.assistant("Noted."),
        Message.user("And the last question?"),
    ]


def test_a_request_over_the_limit_is_refused_before_it_is_sent(
    server: ModelsServer, store: Store
) -> None:
    profile = _local(
        server, name="small", max_context_length=600, token_encoding="cl100k_base", max_tokens=100
    )
    with _run(store) as run:
        client = Client(profile, run=run, profiles=NO_PROFILES)
        with pytest.raises(ContextLengthExceededError) as info:
            client.complete(messages=_long_conversation())
        run_id = run.id
    error = info.value
    assert server.received == []  # nothing was sent
    assert _effects(store, run_id, "llm") == []  # and nothing recorded
    assert error.details["limit"] == 600 and error.details["max_tokens"] == 100
    prompt = count_request_tokens(
        Request(model="m", messages=tuple(_long_conversation())), "cl100k_base"
    )
    assert error.details["prompt_tokens"] == prompt
    assert error.details["tokens"] == prompt + 100
    message = str(error)
    assert f"{prompt + 100} tokens" in message and "600" in message and "'small'" in message
    assert "cl100k_base" in message and 'context_overflow = "trim"' in message


def test_the_async_path_refuses_too(server: ModelsServer, store: Store) -> None:
    profile = _local(server, max_context_length=300, token_encoding="o200k_base")
    with _run(store) as run:
        client = Client(profile, run=run, profiles=NO_PROFILES)
        with pytest.raises(ContextLengthExceededError):
            asyncio.run(client.acomplete(messages=[Message.user(LONG_A + LONG_B)]))
        run_id = run.id
    assert server.received == [] and _effects(store, run_id, "llm") == []


def test_max_tokens_counts_against_the_limit(server: ModelsServer) -> None:
    request = Request(model="m", messages=(Message.user("tiktoken is great!"),))
    prompt = count_request_tokens(request, "cl100k_base")
    profile = _local(server, max_context_length=prompt + 50, token_encoding="cl100k_base")
    assert fit(request.model_copy(update={"max_tokens": 50}), profile).messages == request.messages
    with pytest.raises(ContextLengthExceededError, match="max_tokens 51"):
        fit(request.model_copy(update={"max_tokens": 51}), profile)


def test_without_an_encoding_the_limit_uses_the_estimate(server: ModelsServer) -> None:
    request = Request(model="m", messages=(Message.user("x" * 4000),))  # about 1000 tokens
    with pytest.raises(ContextLengthExceededError, match="estimated at 4 characters"):
        fit(request, _local(server, max_context_length=900))
    assert fit(request, _local(server, max_context_length=1100)) is request


def test_trimming_drops_the_oldest_turns_and_records_what_was_sent(
    server: ModelsServer, store: Store
) -> None:
    profile = _local(
        server,
        max_context_length=600,
        token_encoding="cl100k_base",
        max_tokens=100,
        context_overflow="trim",
    )

    def ask(run: Any) -> str | None:
        client = Client(profile, run=run, profiles=NO_PROFILES, cache=False)
        return client.complete(messages=_long_conversation()).content

    server.script(Answer(content="Short answer."))
    source = execute(ask, store=store, redactor=QUIET)
    sent = server.last.body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent] == [
        "Be brief.",
        LONG_C,
        "Noted.",
        "And the last question?",
    ]  # the oldest question and the answer to it went together
    (event,) = _effects(store, source.id, "llm")
    recorded = store.resolve_payload(event["request"])["request"]["messages"]
    assert [m["content"] for m in recorded] == [m["content"] for m in sent]
    report = replay(source.id, store=store, function=ask, redactor=QUIET)
    assert report.replay_status == "reproducible" and len(server.received) == 1


def test_trimming_that_cannot_fit_refuses(server: ModelsServer) -> None:
    profile = _local(
        server, max_context_length=150, token_encoding="cl100k_base", context_overflow="trim"
    )
    request = Request(
        model="m",
        messages=(Message.system(LONG_A), Message.user("old"), Message.user("Now?")),
    )
    with pytest.raises(ContextLengthExceededError, match="even trimmed") as info:
        fit(request, profile)
    kept = Request(model="m", messages=(Message.system(LONG_A), Message.user("Now?")))
    assert info.value.details["prompt_tokens"] == count_request_tokens(kept, "cl100k_base")
    assert info.value.details["trimmed"] is True


def _agent_conversation() -> list[Message]:
    first = [ToolCall(id="c1", name="lookup", arguments='{"q": "' + "x " * 60 + '"}')]
    pair = [
        ToolCall(id="c2", name="lookup", arguments='{"q": "a"}'),
        ToolCall(id="c3", name="lookup", arguments='{"q": "b"}'),
    ]
    last = [ToolCall(id="c4", name="lookup", arguments='{"q": "z"}')]
    return [
        Message.system("You use tools."),
        Message.user(LONG_A),
        Message.assistant(None, first),
        Message.tool(first[0], LONG_B),
        Message.assistant("Found it."),
        Message.user("Two more: a and b?"),
        Message.assistant("Looking both up.", pair),
        Message.tool(pair[0], "A " * 80),
        Message.tool(pair[1], "B " * 80),
        Message.assistant("Both found."),
        Message.user("And z?"),
        Message.assistant(None, last),
        Message.tool(last[0], "Z"),
    ]


def test_trimming_never_separates_a_tool_call_from_its_results(server: ModelsServer) -> None:
    messages = _agent_conversation()
    request = Request(model="m", messages=tuple(messages))
    full = count_request_tokens(request, "cl100k_base")
    outcomes = set()
    for limit in range(10, full + 10, 7):
        profile = _local(
            server, max_context_length=limit, token_encoding="cl100k_base", context_overflow="trim"
        )
        try:
            kept = list(fit(request, profile).messages)
        except ContextLengthExceededError:
            outcomes.add("refused")
            continue
        outcomes.add(len(kept))
        assert (
            count_request_tokens(
                request.model_copy(update={"messages": tuple(kept)}), "cl100k_base"
            )
            <= limit
        )
        assert kept[0] == messages[0]  # the system message stays
        assert kept[-3:] == messages[-3:]  # the last user turn and the call being answered stay
        assert kept[1].role == "user"  # what is left opens with a user turn
        calls = {c.id for m in kept for c in m.tool_calls}
        answered = {m.tool_call_id for m in kept if m.role == "tool"}
        assert answered <= calls and calls <= answered  # no call without results, nor results
        assert [m for m in messages if m in kept] == kept  # order kept, nothing made up
    assert "refused" in outcomes and len(messages) in outcomes and len(outcomes) >= 4


# --- 4. reasoning summary -------------------------------------------------------------------------


def test_reasoning_summary_is_filled_from_the_profile_keyed_and_not_sent_to_chat(
    server: ModelsServer, store: Store
) -> None:
    profile = _local(server, reasoning_summary="detailed", reasoning_effort="low")
    server.script(Answer(content="ok"))
    with _run(store) as run:
        client = Client(profile, run=run, profiles=NO_PROFILES)
        request = client.request(messages=[Message.user("Why?")])
        assert request.reasoning_summary == "detailed"
        assert client.request(messages=[Message.user("Why?")], reasoning_summary="auto")
        client.complete(request)
        run_id = run.id
    body = server.last.body
    assert body["reasoning_effort"] == "low"
    assert "reasoning_summary" not in body and "reasoning" not in body  # chat has no such field
    (event,) = _effects(store, run_id, "llm")
    assert store.resolve_payload(event["request"])["request"]["reasoning_summary"] == "detailed"
    explicit = profile.apply(Request(model="m", messages=(), reasoning_summary="concise"))
    assert explicit.reasoning_summary == "concise"  # the request's own value wins


def test_a_request_without_reasoning_summary_keeps_its_digest() -> None:
    request = Request(model="m", messages=(Message.user("Hi"),), reasoning_effort="high")
    assert "reasoning_summary" not in request.payload()
    assert set(request.payload()) == {"model", "messages", "reasoning_effort"}
    with pytest.raises(ValidationError):
        Profile(name="p", provider="openai", model="m", reasoning_summary="verbose")  # type: ignore[arg-type]


# --- 5. a model name asked of the server ----------------------------------------------------------


def test_an_empty_model_is_asked_of_the_server_once_and_recorded(
    server: ModelsServer, store: Store
) -> None:
    profile = Profile(name="local", provider="openai", base_url=server.base_url)  # no model
    assert profile.model == "" and profile.detects_model
    server.script(Answer(content="one"), Answer(content="two"))
    with _run(store) as run:
        client = Client(profile, run=run, profiles=NO_PROFILES, cache=False)
        assert client.profile.model == "qwen2.5-7b-instruct-q4_k_m"
        client.complete(messages=[Message.user("Hi")])
        client.complete(messages=[Message.user("Again")])
        run_id = run.id
    assert server.model_requests == 1  # asked once, at connect time
    assert [r.body["model"] for r in server.received] == ["qwen2.5-7b-instruct-q4_k_m"] * 2
    (config,) = _effects(store, run_id, "config")
    assert store.resolve_payload(config["result"])["model"] == "qwen2.5-7b-instruct-q4_k_m"
    for event in _effects(store, run_id, "llm"):
        recorded = store.resolve_payload(event["request"])["request"]
        assert recorded["model"] == "qwen2.5-7b-instruct-q4_k_m"


def test_a_replay_uses_the_recorded_model_and_needs_no_server(store: Store) -> None:
    with ModelsServer() as gone:
        profile = Profile(name="local", provider="openai", model="", base_url=gone.base_url)

        def ask(run: Any) -> str | None:
            client = Client(profile, run=run, profiles=NO_PROFILES, cache=False)
            return client.complete(messages=[Message.user("Hi")]).content

        gone.script(Answer(content="hello"))
        source = execute(ask, store=store, redactor=QUIET)
        assert gone.model_requests == 1
    # the server is gone: asking it now fails, and a replay does not ask
    with pytest.raises(ConfigError, match="failed"):
        Client(profile, profiles=NO_PROFILES).connect()
    report = replay(source.id, store=store, function=ask, redactor=QUIET)
    assert report.replay_status == "reproducible" and report.result_equal
    assert "configuration" not in report.boundary  # the model is not "different": it is unknown


def test_text_completion_profiles_detect_their_model_too(server: ModelsServer) -> None:
    server.models = ["llama-3-8b-base"]
    profile = Profile(
        name="base", provider="openai-text", template="chatml", base_url=server.base_url
    )
    server.script(Answer(text="continued"))
    client = Client(profile, profiles=NO_PROFILES)
    assert client.complete(messages=[Message.user("Once")]).content == "continued"
    assert server.last.path == "/v1/completions" and server.last.body["model"] == "llama-3-8b-base"
    assert client.profile.model == "llama-3-8b-base"


def test_a_server_that_lists_no_model_is_a_clear_error(server: ModelsServer, store: Store) -> None:
    server.models = []
    profile = Profile(name="local", provider="openai", base_url=server.base_url)
    with _run(store) as run:
        with pytest.raises(ConfigError, match="lists no model"):
            Client(profile, run=run, profiles=NO_PROFILES)
        run_id = run.id
    assert _effects(store, run_id, "config") == []  # refused before anything was recorded
    server.models_status = 500
    with pytest.raises(ConfigError, match="HTTP 500"):
        Client(profile, profiles=NO_PROFILES).connect()


def test_an_unreachable_server_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ConfigError, match=r"asking http://127\.0\.0\.1:\d+/v1/models") as info:
        Client(
            Profile(name="local", provider="openai", base_url=url), profiles=NO_PROFILES
        ).complete(messages=[Message.user("Hi")])
    assert "name the model in the profile" in str(info.value)


def test_only_a_server_of_your_own_is_asked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="serves many"):
        Client(Profile(name="o", provider="openai"), profiles=NO_PROFILES).connect()
    text = '[profiles.claude]\nprovider = "anthropic"\n'
    with pytest.raises(ProfileError, match="only openai and openai-text") as info:
        Profiles.load(_write(tmp_path, text), defaults=False)
    assert info.value.details["field"] == "model"


# --- 6. interceptors that rewrite -----------------------------------------------------------------


class AddSystem:
    """Rewrites the request: a system message in front."""

    def __init__(self) -> None:
        self.seen: list[Request] = []

    def before(self, call: CallContext) -> Request:
        self.seen.append(call.request)
        return call.request.model_copy(
            update={"messages": (Message.system("Answer in French."), *call.request.messages)}
        )

    def after(self, call: CallContext, response: Response) -> None:
        return None


class Shout:
    """Rewrites the answer: upper case."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.responses: list[Response] = []

    def before(self, call: CallContext) -> None:
        self.requests.append(call.request)

    def after(self, call: CallContext, response: Response) -> Response:
        self.responses.append(response)
        return response.model_copy(update={"content": (response.content or "").upper()})


class Sign:
    def before(self, call: CallContext) -> None:
        return None

    def after(self, call: CallContext, response: Response) -> Response:
        return response.model_copy(update={"content": f"{response.content} -- signed"})


def test_before_rewrites_what_is_sent_but_not_what_is_recorded_or_keyed(
    server: ModelsServer, store: Store
) -> None:
    server.script(Answer(content="Bonjour"))
    answers = []
    for _ in range(2):
        with _run(store) as run:
            client = Client(
                _local(server), run=run, profiles=NO_PROFILES, interceptors=[AddSystem()]
            )
            answers.append(client.complete(messages=[Message.user("Hello")]).content)
            run_id = run.id
    assert answers == ["Bonjour", "Bonjour"]
    assert len(server.received) == 1  # the second came from the cache: keyed by the original
    assert [m["role"] for m in server.last.body["messages"]] == ["system", "user"]
    (event,) = _effects(store, run_id, "llm")
    recorded = store.resolve_payload(event["request"])["request"]["messages"]
    assert [m["role"] for m in recorded] == ["user"]  # the client's request, not the rewrite


def test_after_rewrites_what_the_caller_gets_and_what_is_recorded_and_replayed(
    server: ModelsServer, store: Store
) -> None:
    def ask(run: Any, interceptors: list[Any]) -> str | None:
        client = Client(
            _local(server), run=run, profiles=NO_PROFILES, cache=False, interceptors=interceptors
        )
        return client.complete(messages=[Message.user("Hi")]).content

    server.script(Answer(content="quiet words"))
    source = execute(lambda run: ask(run, [Shout()]), store=store, redactor=QUIET)
    (event,) = _effects(store, source.id, "llm")
    assert store.resolve_payload(event["result"])["response"]["content"] == "QUIET WORDS"
    # a replay serves the rewritten answer without running any interceptor
    report = replay(source.id, store=store, function=lambda run: ask(run, []), redactor=QUIET)
    assert report.replay_status == "reproducible" and report.result_equal
    assert len(server.received) == 1


def test_interceptors_see_each_others_rewrites_in_list_order(
    server: ModelsServer, store: Store
) -> None:
    adder, shout = AddSystem(), Shout()
    server.script(Answer(content="oui", prompt_tokens=20, completion_tokens=5))
    limiter = TokenBucketLimiter(tokens_per_minute=100_000)
    costs = CostTracker()
    profile = _local(server, cost=Cost(input=1.0, output=2.0))
    client = Client(
        profile,
        profiles=NO_PROFILES,
        cache=False,
        interceptors=[adder, shout, Sign(), limiter, costs],
    )
    answer = client.complete(messages=[Message.user("Hi")])
    assert answer.content == "OUI -- signed"  # Shout first, then Sign
    assert [m.role for m in shout.requests[0].messages] == ["system", "user"]  # AddSystem's
    assert adder.seen[0].messages == (Message.user("Hi"),)
    assert shout.responses[0].content == "oui"
    assert limiter.reserved_tokens == 0  # the old observers still settle their accounts
    assert costs.spent == pytest.approx((20 * 1.0 + 5 * 2.0) / 1_000_000)


def test_the_async_path_rewrites_too(server: ModelsServer) -> None:
    server.script(Answer(content="async answer"))
    client = Client(
        _local(server), profiles=NO_PROFILES, cache=False, interceptors=[AddSystem(), Shout()]
    )
    answer = asyncio.run(client.acomplete(messages=[Message.user("Hi")]))
    assert answer.content == "ASYNC ANSWER"
    assert [m["role"] for m in server.last.body["messages"]] == ["system", "user"]


def test_streaming_callbacks_see_the_stream_and_the_caller_the_rewrite(
    server: ModelsServer,
) -> None:
    server.script(Answer(content="streamed text"))
    pieces: list[str] = []
    client = Client(_local(server), profiles=NO_PROFILES, cache=False, interceptors=[Shout()])
    answer = client.stream(messages=[Message.user("Hi")], on_content=pieces.append)
    assert "".join(pieces) == "streamed text" and answer.content == "STREAMED TEXT"


def test_an_interceptor_returning_something_else_is_a_config_error(server: ModelsServer) -> None:
    class Broken:
        def before(self, call: CallContext) -> Any:
            return "not a request"

        def after(self, call: CallContext, response: Response) -> None:
            return None

    limiter = TokenBucketLimiter(tokens_per_minute=100_000)
    client = Client(_local(server), profiles=NO_PROFILES, interceptors=[limiter, Broken()])
    with pytest.raises(ConfigError, match=r"Broken\.before returned str"):
        client.complete(messages=[Message.user("Hi")])
    assert server.received == [] and limiter.reserved_tokens == 0  # given back


# --- 7. prompt templates --------------------------------------------------------------------------


HARMONY_SYSTEM = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n\nReasoning: {effort}\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>"
)


def test_harmony_writes_the_gpt_oss_format() -> None:
    template = get_template("harmony")
    assert get_template("gpt-oss") is template
    prompt = template.render([Message.system("Be brief."), Message.user("What is 2 + 2?")])
    assert prompt == (
        HARMONY_SYSTEM.format(effort="medium")
        + "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
        + "<|start|>user<|message|>What is 2 + 2?<|end|>"
        + "<|start|>assistant"
    )
    assert template.stop == ("<|return|>", "<|call|>")
    high = template.render([Message.user("Hi")], reasoning_effort="high")
    assert high.startswith(HARMONY_SYSTEM.format(effort="high"))
    assert "Reasoning: low" in template.render([Message.user("Hi")], reasoning_effort="minimal")


def test_harmony_writes_earlier_turns_and_tool_calls() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments='{"location":"San Francisco"}')
    calling = Message(
        role="assistant", tool_calls=(call,), reasoning="Need to use function get_weather."
    )
    prompt = get_template("gpt-oss").render(
        [
            Message.user("What is 2 + 2?"),
            Message(role="assistant", content="2 + 2 = 4.", reasoning="dropped"),
            Message.user("Weather in SF?"),
            calling,
            Message.tool(call, '{"sunny": true, "temperature": 20}'),
        ]
    )
    assert prompt.endswith(
        "<|start|>user<|message|>What is 2 + 2?<|end|>"
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|>"
        "<|start|>user<|message|>Weather in SF?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location":"San Francisco"}<|call|>'
        "<|start|>functions.get_weather to=assistant<|channel|>commentary"
        '<|message|>{"sunny": true, "temperature": 20}<|end|>'
        "<|start|>assistant"
    )
    assert "dropped" not in prompt  # an answered turn's chain of thought is not sent back


def test_a_harmony_answer_is_split_into_reasoning_and_content(server: ModelsServer) -> None:
    raw = (
        "<|channel|>analysis<|message|>User asks: simple arithmetic.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4."
    )
    server.script(Answer(text=raw), Answer(text="plain text, markers stripped by the server"))
    profile = Profile(
        name="oss", provider="openai-text", model="gpt-oss-20b", base_url=server.base_url,
        template="gpt-oss",
    )  # fmt: skip
    client = Client(profile, profiles=NO_PROFILES, cache=False)
    answer = client.complete(messages=[Message.user("What is 2 + 2?")], reasoning_effort="high")
    assert answer.content == "2 + 2 = 4." and answer.reasoning == "User asks: simple arithmetic."
    body = server.last.body
    assert body["prompt"].startswith(HARMONY_SYSTEM.format(effort="high"))
    assert body["prompt"].endswith(
        "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant"
    )
    assert body["stop"] == ["<|return|>", "<|call|>"]
    plain = client.complete(messages=[Message.user("Again")])
    assert plain.content == "plain text, markers stripped by the server" and plain.reasoning is None


def test_mistral_folds_the_system_prompt_into_the_last_user_turn() -> None:
    conversation = [
        Message.system("Be brief."),
        Message.user("Hello, how are you?"),
        Message.assistant("Fine, and you?"),
        Message.user("I'm doing great!"),
    ]
    assert get_template("mistral").render(conversation) == (
        "[INST]Hello, how are you?[/INST]Fine, and you?</s>"
        "[INST]Be brief.\n\nI'm doing great![/INST]"
    )
    assert get_template("mistral-v3").render(conversation) == (
        "[INST] Hello, how are you?[/INST] Fine, and you?</s>"
        "[INST] Be brief.\n\nI'm doing great![/INST]"
    )
    assert get_template("mistral").stop == ("</s>",)
    assert not get_template("mistral").render(conversation).startswith("<s>")  # servers add BOS


def test_mistral_writes_tool_calls_and_results() -> None:
    call = ToolCall(id="abc123def", name="get_weather", arguments='{"city": "Paris"}')
    prompt = get_template("mistral").render(
        [Message.user("Weather?"), Message.assistant(None, [call]), Message.tool(call, "22")]
    )
    assert prompt == (
        "[INST]Weather?[/INST]"
        '[TOOL_CALLS][{"name":"get_weather","arguments":{"city":"Paris"},"id":"abc123def"}]</s>'
        '[TOOL_RESULTS]{"content":"22","call_id":"abc123def"}[/TOOL_RESULTS]'
    )


def test_lmlibs_no_is_none_and_every_builtin_has_a_name_of_its_own() -> None:
    assert get_template("no") is TEMPLATES["none"]
    assert get_template("no").render([Message.user("a"), Message.user("b")]) == "ab"
    assert set(TEMPLATES) >= {"chatml", "llama3", "none", "harmony", "mistral", "mistral-v3"}
    assert all(template.name == name for name, template in TEMPLATES.items())


def test_a_profiles_template_chooses_the_prompt_and_keys_under_its_real_name(
    server: ModelsServer, store: Store, tmp_path: Path
) -> None:
    text = (
        f'[profiles.oss]\nprovider = "openai-text"\nmodel = "gpt-oss-20b"\n'
        f'base_url = "{server.base_url}"\ntemplate = "gpt-oss"\n\n'
        f'[profiles.raw]\nprovider = "openai-text"\nmodel = "base"\n'
        f'base_url = "{server.base_url}"\ntemplate = "no"\n\n'
        f'[profiles.chat]\nprovider = "openai"\nmodel = "m"\ntemplate = ""\n'
    )
    profiles = Profiles.load(_write(tmp_path, text), defaults=False)
    assert profiles.get("chat").template is None  # lm-lib's empty template for chat
    server.script(Answer(text="<|channel|>final<|message|>hi"), Answer(text="raw"))
    with _run(store) as run:
        Client("oss", run=run, profiles=profiles).complete(messages=[Message.user("Hi")])
        Client("raw", run=run, profiles=profiles).complete(messages=[Message.user("Hi")])
        run_id = run.id
    oss, raw = (r.body["prompt"] for r in server.received)
    assert oss.startswith("<|start|>system<|message|>") and raw == "Hi"
    templates = [
        store.resolve_payload(e["request"])["template"] for e in _effects(store, run_id, "llm")
    ]
    assert templates == ["harmony", "none"]  # an alias keys as the template it names
    bad = '[profiles.p]\nprovider = "openai-text"\nmodel = "m"\ntemplate = "alpaca"\n'
    with pytest.raises(ProfileError, match="unknown prompt template 'alpaca'") as info:
        Profiles.load(_write(tmp_path, bad), defaults=False)
    assert info.value.details["field"] == "template" and "gpt-oss (= harmony)" in str(info.value)


def test_the_documented_profiles_load(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)
    profiles = Profiles.load(_write(tmp_path, example), defaults=False)
    fast, local = profiles.get("fast"), profiles.get("local-oss")
    assert (fast.max_context_length, fast.token_encoding, fast.reasoning_summary) == (
        128000,
        "o200k_base",
        "auto",
    )
    assert local.detects_model and local.short_name == "CUSTOM"
    assert local.context_overflow == "trim" and get_template(local.template or "").name == "harmony"
