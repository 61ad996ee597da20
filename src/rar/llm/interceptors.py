"""Interceptors around each model call, usage statistics, and the two shipped interceptors.

An interceptor has ``before(call)`` and ``after(call, response)``; both run around every live
attempt (never for cache hits, never in a replay). ``before`` may wait (rate limiting) or raise
(a budget is spent). An interceptor may also have ``failed(call, error)``: when an attempt fails
(a provider error, any other exception, a cancellation) after its ``before`` returned, the
client calls it instead of ``after``, so whatever ``before`` reserved can be given back.

Both may also rewrite, not only observe:

* ``before`` may return a new :class:`~rar.llm.types.Request`: that attempt sends it, and the
  interceptors after it in the list see it as ``call.request``. It is not recorded: the
  recorded request, and so the cache key, stay the request the client made.
* ``after`` may return a new :class:`~rar.llm.types.Response`: the interceptors after it get
  that one, and the last one is what the caller gets *and* what is recorded (the rewriting
  happens inside the effect), so a replay or a cache hit serves the rewritten answer without
  running any interceptor again.

Returning None keeps the request or response as it was. Interceptors run in list order, for
``before`` and for ``after`` alike. Shipped: :class:`TokenBucketLimiter` (requests and tokens
per minute) and :class:`CostTracker` (cost per model, optional budget).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rar.errors import RunError
from rar.llm.profiles import Profile
from rar.llm.types import Request, Response, Usage


@dataclass(eq=False, slots=True)
class CallContext:
    """What an interceptor knows about the call being made: one object per attempt, the same
    in ``before``, ``after`` and ``failed``. ``request`` is what the attempt sends: the client's
    request for this target, or what an earlier interceptor's ``before`` returned."""

    request: Request
    profile: Profile
    attempt: int


class Interceptor(Protocol):
    """``before`` and ``after`` around each live attempt; an optional
    ``failed(call, error)`` (found by duck typing) runs instead of ``after`` when the attempt
    fails. ``before`` may return the request to send instead, ``after`` the response to give
    back (and record) instead; None keeps what there was."""

    def before(self, call: CallContext) -> Request | None: ...

    def after(self, call: CallContext, response: Response) -> Response | None: ...


@dataclass(frozen=True, slots=True)
class CallStats:
    """One call as the client saw it."""

    provider: str
    model: str
    usage: Usage
    cost: float
    latency_s: float
    cached: bool
    attempts: int

    @property
    def tokens_per_second(self) -> float:
        return self.usage.output_tokens / self.latency_s if self.latency_s > 0 else 0.0


@dataclass(slots=True)
class UsageStats:
    """Totals over many calls (a client's, or a run's)."""

    calls: int = 0
    cached_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    latency_s: float = 0.0
    output_tokens_live: int = 0
    latency_live_s: float = 0.0
    last: CallStats | None = None

    def add(self, call: CallStats) -> None:
        self.calls += 1
        self.cached_calls += call.cached
        self.usage = self.usage + call.usage
        self.cost += call.cost
        self.latency_s += call.latency_s
        if not call.cached:
            self.output_tokens_live += call.usage.output_tokens
            self.latency_live_s += call.latency_s
        self.last = call

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second over live (not cached) calls."""
        return self.output_tokens_live / self.latency_live_s if self.latency_live_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            **self.usage.model_dump(),
            "cost": round(self.cost, 8),
            "latency_s": round(self.latency_s, 6),
            "tokens_per_second": round(self.tokens_per_second, 3),
        }


def estimate_request_tokens(request: Request) -> int:
    """A rough prompt size (four characters a token) plus the completion budget."""
    chars = sum(
        len(m.content or "") + sum(len(c.arguments) for c in m.tool_calls) for m in request.messages
    )
    return chars // 4 + (request.max_tokens or 256)


class TokenBucketLimiter:
    """Waits before a call until it fits within requests and tokens per minute.

    Token use is estimated and reserved before the call, and corrected with the real usage
    after it; a failed call gives its reserved tokens back (``failed``). Its request still
    counts against requests per minute: the provider saw it. ``clock`` and ``sleep`` are
    injectable for tests.
    """

    def __init__(
        self,
        *,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not requests_per_minute and not tokens_per_minute:
            raise ValueError("give requests_per_minute, tokens_per_minute or both")
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._clock = clock
        self._sleep = sleep
        self._requests = float(requests_per_minute or 0)
        self._tokens = float(tokens_per_minute or 0)
        self._stamp = clock()
        self._lock = threading.Lock()
        self._estimates: dict[int, int] = {}
        self.waited_s = 0.0

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._stamp
        self._stamp = now
        if self.rpm:
            self._requests = min(self.rpm, self._requests + elapsed * self.rpm / 60)
        if self.tpm:
            self._tokens = min(self.tpm, self._tokens + elapsed * self.tpm / 60)

    def before(self, call: CallContext) -> None:
        need = min(estimate_request_tokens(call.request), int(self.tpm or 0) or 1)
        while True:
            with self._lock:
                self._refill()
                wait = 0.0
                if self.rpm and self._requests < 1:
                    wait = max(wait, (1 - self._requests) * 60 / self.rpm)
                if self.tpm and self._tokens < need:
                    wait = max(wait, (need - self._tokens) * 60 / self.tpm)
                if wait <= 0:
                    if self.rpm:
                        self._requests -= 1
                    if self.tpm:
                        self._tokens -= need
                    self._estimates[id(call)] = need
                    return
            self.waited_s += wait
            self._sleep(wait)

    def after(self, call: CallContext, response: Response) -> None:
        with self._lock:
            estimate = self._estimates.pop(id(call), 0)
            if self.tpm:
                self._tokens += estimate - response.usage.total_tokens

    def failed(self, call: CallContext, error: BaseException) -> None:
        """Give back the tokens reserved for a call that failed (nothing was generated)."""
        with self._lock:
            estimate = self._estimates.pop(id(call), 0)
            if self.tpm:
                self._tokens = min(self.tpm, self._tokens + estimate)

    @property
    def reserved_tokens(self) -> int:
        """Tokens reserved by calls under way (estimated in ``before``, not yet settled)."""
        with self._lock:
            return sum(self._estimates.values())

    @property
    def available_tokens(self) -> float:
        """Tokens that may be spent now (refilled to the current time)."""
        with self._lock:
            self._refill()
            return self._tokens


class BudgetExceededError(RunError):
    def __init__(self, spent: float, budget: float) -> None:
        super().__init__(
            f"the model budget of {budget:g} is spent ({spent:.6g}); raise the budget or stop",
            spent=spent,
            budget=budget,
        )


class CostTracker:
    """Adds up the cost of every live call by model; refuses calls once a budget is spent."""

    def __init__(self, budget: float | None = None) -> None:
        self.budget = budget
        self.by_model: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        return sum(self.by_model.values())

    def before(self, call: CallContext) -> None:
        if self.budget is not None and self.spent >= self.budget:
            raise BudgetExceededError(self.spent, self.budget)

    def after(self, call: CallContext, response: Response) -> None:
        cost = call.profile.cost.of(response.usage)
        with self._lock:
            key = f"{call.profile.provider}:{call.profile.model}"
            self.by_model[key] = self.by_model.get(key, 0.0) + cost
