"""The model client: every call a recorded effect, with cache, retries, fallbacks and stats.

::

    client = Client("openai:gpt-4o-mini", run=run)          # or a profile name, or a provider
    answer = client.complete(messages=[Message.user("Hi")])
    reply = await client.acomplete(messages=[...])           # parallel branches
    client.stream(request, on_content=print)                 # content and reasoning separately
    plan = client.structured(request, Plan)                  # pydantic model, repaired up to N

One call is one ``llm`` effect: the request recorded is the provider-neutral request plus the
provider, base URL and (text completion) prompt template, whose digest is also the cache key.
Before the effect, a profile with ``max_context_length`` has the request counted and refused
(nothing recorded) or trimmed to fit (the trimmed request recorded), see :mod:`rar.llm.context`.
Inside the effect, the client serves a cached answer if the store has one, or calls the
provider, retrying transient failures with backoff (honouring ``Retry-After``, giving up when
it asks for more than the policy's cap) and then the fallback chain; the result records whether
it was cached and every failed attempt. Errors after all attempts are recorded as error values.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rar.errors import ConfigError, ProviderError, StructuredOutputError
from rar.llm.alignment import align
from rar.llm.cache import ResponseCache, cacheable
from rar.llm.connect import connect
from rar.llm.context import fit
from rar.llm.interceptors import CallContext, CallStats, Interceptor, UsageStats
from rar.llm.profiles import Profile, Profiles
from rar.llm.provider import (
    ChunkCallback,
    Provider,
    provider_base_url,
    provider_name,
    provider_template,
)
from rar.llm.types import (
    ConversationMemo,
    Message,
    Request,
    Response,
    ResponseFormat,
    StreamChunk,
)
from rar.runtime.run import Run
from rar.store.store import Store

M = TypeVar("M", bound=BaseModel)
ModelSpec = str | Profile | Provider


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for retryable errors; ``Retry-After`` wins when the provider sends it.

    ``max_delay`` caps every wait. A provider that asks for a longer one (``Retry-After`` or
    ``retry-after-ms``) is not retried: the call fails at once, naming both times, rather than
    retrying too early after the cap.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(float(retry_after), self.max_delay)
        return min(self.base_delay * 2.0 ** (attempt - 1), self.max_delay)


class _Target:
    """A profile and its provider (connected on first use)."""

    def __init__(self, spec: ModelSpec, profiles: Profiles) -> None:
        if isinstance(spec, str):
            self.profile = profiles.resolve(spec)
            self._provider: Provider | None = None
        elif isinstance(spec, Profile):
            self.profile, self._provider = spec, None
        else:
            name = provider_name(spec)
            model = str(getattr(spec, "model", None) or name)
            self.profile = Profile(name=f"{name}:{model}", provider=_known(name), model=model)
            self._provider = spec
        # a name or a profile is resolved against the environment: a replay aligns it
        self.aligned = isinstance(spec, str | Profile)
        self._lock = threading.Lock()
        self._conversation = ConversationMemo()  # the last request's messages, to extend

    def rebind(self, profile: Profile) -> None:
        """Use ``profile`` (the recorded configuration, in a replay) instead of the resolved one."""
        with self._lock:
            self.profile, self._provider = profile, None

    @property
    def connected(self) -> Provider | None:
        """The provider if it was connected already (None: never used)."""
        with self._lock:
            return self._provider

    @property
    def provider(self) -> Provider:
        with self._lock:
            if self._provider is None:
                self._provider = self._connect(check_key=False)
            return self._provider

    def check(self) -> None:
        """Connect now, refusing a missing key or a bad setting before anything is recorded."""
        with self._lock:
            if self._provider is None:
                self._provider = self._connect(check_key=True)

    def _connect(self, *, check_key: bool) -> Provider:
        provider = connect(self.profile, check_key=check_key)
        if self.profile.detects_model:  # the model the server named is this profile's from now
            detected = str(getattr(provider, "model", None) or "")
            self.profile = self.profile.model_copy(update={"model": detected})
        return provider

    def ensure_model(self) -> str:
        """The profile's model, asking the server first when the profile leaves it empty."""
        if self.profile.detects_model:
            _ = self.provider
        return self.profile.model

    def payload(self, request: Request) -> dict[str, Any]:
        """The recorded request, whose digest is the cache key: a text-completion provider's
        template is in it, since the same messages make another prompt with another one."""
        payload: dict[str, Any] = {
            "provider": provider_name(self.provider),
            "base_url": provider_base_url(self.provider),
        }
        template = provider_template(self.provider)
        if template is not None:
            payload["template"] = template
        payload["request"] = request.payload(self._conversation)
        return payload


def _known(name: str) -> str:
    from rar.llm.profiles import PROVIDERS

    return name if name in PROVIDERS else "scripted"


class Client:
    def __init__(
        self,
        model: ModelSpec,
        *,
        run: Run | None = None,
        store: Store | None = None,
        cache: bool = True,
        retry: RetryPolicy | None = None,
        fallbacks: Sequence[ModelSpec] = (),
        interceptors: Sequence[Interceptor] = (),
        profiles: Profiles | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        profiles = profiles or Profiles.load()
        self.targets = [_Target(spec, profiles) for spec in (model, *fallbacks)]
        self.run = run
        if run is not None:
            for target in self.targets:
                if target.aligned:
                    align(run, target)
        store = store or (run.store if run is not None else None)
        redactor = run.redactor if run is not None else None
        self.cache = (
            ResponseCache(store, redactor=redactor) if cache and store is not None else None
        )
        self.retry = retry or RetryPolicy()
        self.interceptors = list(interceptors)
        self.stats = UsageStats()
        self._sleep = sleep

    @property
    def profile(self) -> Profile:
        return self.targets[0].profile

    async def aclose(self) -> None:
        """Close the async connections the providers pooled in the running event loop (call it
        before the loop ends, e.g. at the end of ``asyncio.run``); the client stays usable."""
        for target in self.targets:
            provider = target.connected
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    def connect(self) -> Client:
        """Connect every provider now, so that a missing key or bad setting shows up early."""
        for target in self.targets:
            target.check()
        return self

    # --- building requests -------------------------------------------------------------------

    def request(self, request: Request | None = None, /, **fields: Any) -> Request:
        """A request for this client's model: the profile's defaults fill what is unset."""
        if request is None:
            messages = fields.pop("messages", None)
            if not messages:
                raise ConfigError("a model call needs a request or messages=[...]")
            request = Request(model=self.profile.model, messages=tuple(messages), **fields)
        elif fields:
            request = request.model_copy(update=fields)
        model = self.targets[0].ensure_model()
        if request.model != model:
            request = request.model_copy(update={"model": model})
        return self.profile.apply(request)

    # --- calls -------------------------------------------------------------------------------

    def complete(self, request: Request | None = None, /, **fields: Any) -> Response:
        return self._call(self.request(request, **fields), None)

    def stream(
        self,
        request: Request | None = None,
        /,
        *,
        on_chunk: ChunkCallback | None = None,
        on_content: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
        **fields: Any,
    ) -> Response:
        """Stream the answer; content and reasoning chunks reach their callbacks as they come."""

        def deliver(chunk: StreamChunk) -> None:
            if on_chunk is not None:
                on_chunk(chunk)
            callback = on_content if chunk.kind == "content" else on_reasoning
            if callback is not None:
                callback(chunk.text)

        return self._call(self.request(request, **fields), deliver)

    async def acomplete(self, request: Request | None = None, /, **fields: Any) -> Response:
        return await self._acall(self.request(request, **fields))

    def structured(
        self,
        request: Request | None = None,
        /,
        schema: type[M] | None = None,
        *,
        attempts: int = 3,
        **fields: Any,
    ) -> M:
        """Ask for JSON matching ``schema``; on a bad answer, send a repair prompt and retry."""
        if schema is None:
            raise ConfigError("structured() needs schema=<a pydantic model class>")
        request = self.request(request, **fields).model_copy(
            update={
                "response_format": ResponseFormat(
                    type="json_schema", name=schema.__name__, json_schema=schema.model_json_schema()
                )
            }
        )
        problem = ""
        for _attempt in range(attempts):
            response = self._call(request, None)
            try:
                return schema.model_validate_json(response.content or "")
            except ValidationError as exc:
                problem = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()
                )[:2000]
            request = request.extend(
                response.message,
                Message.user(
                    f"That answer did not match the {schema.__name__} schema ({problem}). "
                    "Answer again with only a JSON object that matches the schema."
                ),
            )
        raise StructuredOutputError(schema.__name__, attempts, problem)

    # --- the effect --------------------------------------------------------------------------

    def _fit(self, request: Request) -> Request:
        """The request within the profile's ``max_context_length``: as it is, trimmed, or
        refused with a ContextLengthExceededError (before the effect: nothing is recorded)."""
        return fit(request, self.profile)

    def _call(self, request: Request, deliver: ChunkCallback | None) -> Response:
        request = self._fit(request)
        payload = self.targets[0].payload(request)

        def perform() -> dict[str, Any]:
            hit = self._cached(payload)
            if hit is not None:
                if deliver is not None and hit["response"].get("content"):
                    deliver(StreamChunk(kind="content", text=hit["response"]["content"]))
                return hit
            return self._live(request, deliver)

        began = time.perf_counter()
        result = self.run.effect("llm", payload, perform) if self.run else perform()
        return self._finish(request, result, time.perf_counter() - began)

    async def _acall(self, request: Request) -> Response:
        request = self._fit(request)
        payload = self.targets[0].payload(request)

        async def perform() -> dict[str, Any]:
            hit = self._cached(payload)
            return hit if hit is not None else await self._alive(request)

        began = time.perf_counter()
        result = await self.run.aeffect("llm", payload, perform) if self.run else await perform()
        return self._finish(request, result, time.perf_counter() - began)

    def _cached(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        if self.cache is None:
            return None
        result = self.cache.get(self.cache.key(payload))
        if result is None or "response" not in result:
            return None
        return {**result, "cached": True}

    def _live(self, request: Request, deliver: ChunkCallback | None) -> dict[str, Any]:
        failures: list[tuple[dict[str, Any], ProviderError]] = []
        for target in self.targets:
            call_request = request.model_copy(update={"model": target.ensure_model()})
            for attempt in range(1, self.retry.max_attempts + 1):
                around = _Around(
                    self.interceptors, CallContext(call_request, target.profile, attempt)
                )
                try:
                    sent = around.before()
                    provider = target.provider
                    stream = getattr(provider, "stream", None)
                    if deliver is not None and stream is not None:
                        # chunks reach the callbacks as they come, before `after` can rewrite
                        response = around.after(stream(sent, deliver))
                    else:
                        response = around.after(provider.complete(sent))
                        if deliver is not None and response.content:
                            deliver(StreamChunk(kind="content", text=response.content))
                    return _result(response, target, failures)
                except BaseException as exc:
                    around.failed(exc)
                    if not isinstance(exc, ProviderError):
                        raise
                    delay = None if deliver is not None else self._retry_delay(attempt, exc)
                    failures.append((_failure(target, exc), exc))
                    if delay is None:
                        break
                    self._sleep(delay)
        raise _last_error(failures)

    async def _alive(self, request: Request) -> dict[str, Any]:
        failures: list[tuple[dict[str, Any], ProviderError]] = []
        for target in self.targets:
            call_request = request.model_copy(update={"model": target.ensure_model()})
            for attempt in range(1, self.retry.max_attempts + 1):
                around = _Around(
                    self.interceptors, CallContext(call_request, target.profile, attempt)
                )
                try:
                    sent = await around.abefore()
                    provider = target.provider
                    acomplete = getattr(provider, "acomplete", None)
                    if acomplete is not None:
                        response = await acomplete(sent)
                    else:
                        response = await asyncio.to_thread(provider.complete, sent)
                    response = around.after(response)
                    return _result(response, target, failures)
                except BaseException as exc:  # cancelled calls give back what they reserved too
                    around.failed(exc)
                    if not isinstance(exc, ProviderError):
                        raise
                    delay = self._retry_delay(attempt, exc)
                    failures.append((_failure(target, exc), exc))
                    if delay is None:
                        break
                    await asyncio.sleep(delay)
        raise _last_error(failures)

    def _retry_delay(self, attempt: int, exc: ProviderError) -> float | None:
        """Seconds to wait before trying this target again, or None to stop trying it.

        A provider asking for a longer wait than the policy's cap is not retried at all: the
        error then says how long it asked for and how to raise the cap.
        """
        if not exc.retryable or attempt >= self.retry.max_attempts:
            return None
        retry_after = exc.details.get("retry_after")
        if retry_after is not None and float(retry_after) > self.retry.max_delay:
            _asked_too_long(exc, float(retry_after), self.retry.max_delay)
            return None
        return self.retry.delay(attempt, retry_after)

    def _finish(self, request: Request, result: dict[str, Any], latency: float) -> Response:
        response = Response.model_validate(result["response"])
        served = result.get("served_by") or {}
        profile = next(
            (t.profile for t in self.targets if t.profile.model == served.get("model")),
            self.profile,
        )
        cached = bool(result.get("cached"))
        cost = 0.0 if cached else profile.cost.of(response.usage)
        call = CallStats(
            provider=str(served.get("provider", self.profile.provider)),
            model=response.model or profile.model,
            usage=response.usage,
            cost=cost,
            latency_s=latency,
            cached=cached,
            attempts=len(result.get("failures", [])) + 1,
        )
        self.stats.add(call)
        if self.run is not None:
            self.run.add_stats(
                "llm",
                {
                    "calls": 1,
                    "cached_calls": int(cached),
                    "cost": cost,
                    **response.usage.model_dump(),
                },
            )
            event = self.run.last_effect()
            fresh = not cached and not self.run.last_effect_served()  # replays add nothing new
            if self.cache is not None and event is not None and fresh and cacheable(result):
                self.cache.add(
                    event, run_id=self.run.id, provider=self.profile.provider, model=request.model
                )
        return response


def _result(
    response: Response, target: _Target, failures: list[tuple[dict[str, Any], ProviderError]]
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "response": response.plain(),
        "cached": False,
        "served_by": {"provider": target.profile.provider, "model": target.profile.model},
    }
    if failures:
        result["failures"] = [failure for failure, _ in failures]
    return result


def _failure(target: _Target, exc: ProviderError) -> dict[str, Any]:
    return {
        "provider": target.profile.provider,
        "model": target.profile.model,
        "type": type(exc).__name__,
        "message": exc.message,
        "status": exc.details.get("status"),
    }


class _Around:
    """The interceptors around one attempt: each one whose ``before`` returned gets ``after``
    with the answer, or its optional ``failed(call, error)`` when the attempt fails, so what it
    reserved in ``before`` (a rate limiter's tokens) is given back on every failure path.

    A ``before`` that returns a Request replaces ``call.request`` (what this attempt sends, and
    what the interceptors after it see); an ``after`` that returns a Response replaces the
    answer the next ones get, and that the client returns and records."""

    def __init__(self, interceptors: Sequence[Interceptor], call: CallContext) -> None:
        self.interceptors = interceptors
        self.call = call
        self.entered: list[Interceptor] = []

    def before(self) -> Request:
        for interceptor in self.interceptors:
            replaced = interceptor.before(self.call)
            self.entered.append(interceptor)
            self._rewrite_request(interceptor, replaced)
        return self.call.request

    async def abefore(self) -> Request:
        for interceptor in self.interceptors:  # before may wait (rate limits): not on the loop
            replaced = await asyncio.to_thread(interceptor.before, self.call)
            self.entered.append(interceptor)
            self._rewrite_request(interceptor, replaced)
        return self.call.request

    def _rewrite_request(self, interceptor: Interceptor, replaced: object) -> None:
        if replaced is None:
            return
        if not isinstance(replaced, Request):
            raise ConfigError(
                f"{type(interceptor).__name__}.before returned {type(replaced).__name__}; an "
                "interceptor's before returns a rar.llm.Request to send instead, or None"
            )
        self.call.request = replaced

    def after(self, response: Response) -> Response:
        while self.entered:
            interceptor = self.entered[0]
            replaced = interceptor.after(self.call, response)
            self.entered.pop(0)
            if replaced is None:
                continue
            if not isinstance(replaced, Response):
                raise ConfigError(
                    f"{type(interceptor).__name__}.after returned {type(replaced).__name__}; "
                    "an interceptor's after returns a rar.llm.Response to give back instead, "
                    "or None"
                )
            response = replaced
        return response

    def failed(self, error: BaseException) -> None:
        entered, self.entered = self.entered, []
        for interceptor in entered:
            hook = getattr(interceptor, "failed", None)
            if hook is not None:
                hook(self.call, error)


def _asked_too_long(exc: ProviderError, wait: float, cap: float) -> None:
    """Extend ``exc``'s message: the provider asked for a wait longer than the retry cap."""
    how = (
        f"to wait that long, raise the cap: Client(..., retry=RetryPolicy(max_delay="
        f"{math.ceil(wait)}))"
        if math.isfinite(wait)
        else "it gave no finite time, so waiting cannot help; try again later"
    )
    exc.message = (
        f"{exc.message}; the provider asked to wait {wait:g} s, longer than the retry cap of "
        f"{cap:g} s (RetryPolicy.max_delay), so RAR gave up instead of retrying; {how}"
    )
    exc.args = (exc.message,)
    exc.details["retry_cap"] = cap


def _last_error(failures: list[tuple[dict[str, Any], ProviderError]]) -> ProviderError:
    """The last failure, its message extended with every attempt (which the record keeps)."""
    exc = failures[-1][1]
    if len(failures) > 1:
        summary = "; ".join(f"{f['provider']}:{f['model']} {f['type']}" for f, _ in failures)
        exc.message = f"{exc.message} (after {len(failures)} failed attempts: {summary})"
        exc.args = (exc.message,)
    return exc
