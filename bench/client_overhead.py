"""Client overhead per model call against a loopback OpenAI-compatible server.

Per-call latency (µs) of

(i)   a bare ``httpx2.Client().post(...)`` with the very JSON body ``OpenAIChat`` would send;
(ii)  ``OpenAIChat.complete(request)`` alone;
(iii) ``Client.complete(...)`` with a run (durable=False), the cache on and missing (distinct
      prompts), so every call is recorded, looked up in the cache, sent, and indexed;
(iv)  the same with durable=True (one fsync per effect);

plus, for attribution, ``Client.complete`` without a run and without a cache. The server runs in
its own process (``client_loopback.py``) and answers ~1 KB; prompts are ~200 B plus a system
message. Modes are interleaved in rounds so that drift on a noisy machine hits them all alike;
the added cost of a mode is its p50 minus the bare call's p50. ``TCP connects/call`` counts the
connections opened during the timed calls (0 = the pooled connection was reused).

    python bench/client_overhead.py [--quick] [--profile]

Goal: <= 1 ms added at p50 for the full client (iii).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from collections.abc import Callable
from typing import Any

import _common
import httpx2
from _common import median, table, temp_dir, text
from client_loopback import ConnectionCounter, LoopbackServer

from rar.llm.cache import ResponseCache
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.llm.providers.openai import OpenAIChat
from rar.llm.types import Message, Request
from rar.redaction import Redactor
from rar.runtime.start import record

GOAL_US = 1000.0
MODEL = "bench-model"
SYSTEM = "You are a terse assistant. Answer in one paragraph."
POOL = 256


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Prompts:
    """Distinct ~200 B user prompts, never repeated across modes (so the cache always misses)."""

    def __init__(self) -> None:
        rng = random.Random(5)
        self.pool = [text(rng, 190) for _ in range(POOL)]
        self.system = Message.system(SYSTEM)
        self.n = 0

    def messages(self) -> list[Message]:
        self.n += 1
        return [self.system, Message.user(f"q{self.n} {self.pool[self.n % POOL]}")]


def make_modes(base_url: str, tmp, prompts: Prompts) -> tuple[dict[str, Callable[[], Any]], list]:
    """name -> a thunk doing one call (its inputs prepared outside the timed region)."""
    bare_http = httpx2.Client()
    wire = OpenAIChat(MODEL, base_url=base_url)  # only to build the exact body and headers
    provider = OpenAIChat(MODEL, base_url=base_url)
    runs = []

    def recorded_client(durable: bool) -> Client:
        run = record("client overhead", store=tmp / f"store-{durable}", seed=1,
                     durable=durable, redactor=Redactor(env={}))
        runs.append(run)
        client = Client(OpenAIChat(MODEL, base_url=base_url), run=run, profiles=Profiles())
        client.cache = ResponseCache(run.store, redactor=Redactor(env={}))
        return client

    plain_client = Client(OpenAIChat(MODEL, base_url=base_url), cache=False, profiles=Profiles())
    nondurable = recorded_client(False)
    durable = recorded_client(True)

    def bare() -> Callable[[], Any]:
        request = Request(model=MODEL, messages=tuple(prompts.messages()))
        url, headers, body = wire._prepare(request, stream=False)
        return lambda: bare_http.post(url, content=body, headers=headers).content

    def provider_only() -> Callable[[], Any]:
        request = Request(model=MODEL, messages=tuple(prompts.messages()))
        return lambda: provider.complete(request)

    def client_call(client: Client) -> Callable[[], Callable[[], Any]]:
        def factory() -> Callable[[], Any]:
            msgs = prompts.messages()
            return lambda: client.complete(messages=msgs)

        return factory

    modes = {
        "(i) bare httpx2 post": bare,
        "(ii) OpenAIChat.complete": provider_only,
        "Client.complete, no run, no cache": client_call(plain_client),
        "(iii) Client.complete, run durable=False, cache miss": client_call(nondurable),
        "(iv) Client.complete, run durable=True, cache miss": client_call(durable),
    }
    closers = [bare_http.close, wire.close, provider.close,
               *(c.targets[0].provider.close for c in (plain_client, nondurable, durable))]
    return modes, [*runs, *closers]


def run_rounds(modes: dict[str, Callable[[], Callable[[], Any]]], rounds: int, per_round: int,
               warmup: int, connections: ConnectionCounter) -> dict[str, list[float]]:
    for factory in modes.values():
        for _ in range(warmup):
            factory()()
    samples: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            thunks = [modes[name]() for _ in range(per_round)]
            out = samples[name]
            connections.set_label(name)
            for thunk in thunks:
                t0 = time.perf_counter_ns()
                thunk()
                out.append((time.perf_counter_ns() - t0) / 1e3)
    return samples


def profile(modes: dict[str, Callable[[], Callable[[], Any]]], name: str, calls: int) -> str:
    thunks = [modes[name]() for _ in range(calls)]
    prof = cProfile.Profile()
    prof.enable()
    for thunk in thunks:
        thunk()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(10)
    return f"cProfile, {calls} calls of {name} (client process; top 10 by own time):\n" \
           f"{out.getvalue()}"


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [("--profile", {"action": "store_true", "help": "also print cProfile of (iii)"})],
    )
    rounds, per_round, warmup = (3, 20, 10) if args.quick else (10, 40, 40)
    prompts = Prompts()
    profiles = []
    with temp_dir("client-overhead") as tmp, LoopbackServer() as server:
        modes, cleanup = make_modes(server.base_url, tmp, prompts)
        try:
            with ConnectionCounter() as connections:
                samples = run_rounds(modes, rounds, per_round, warmup, connections)
            if args.profile:
                profiles.append(profile(
                    modes, "(iii) Client.complete, run durable=False, cache miss", 300))
        finally:
            for item in cleanup:
                if callable(item):
                    item()
                else:
                    item.finish()
    bare = median(samples["(i) bare httpx2 post"])
    n = rounds * per_round
    rows = []
    for name, values in samples.items():
        p50 = median(values)
        is_bare = name.startswith("(i) ")
        goal = name.startswith("(iii)")
        rows.append([
            name, p50, percentile(values, 0.9),
            "-" if is_bare else p50 - bare,
            "-" if is_bare else f"{p50 / bare:.2f}x",
            connections.per_call(name, n),
            f"<= {GOAL_US:.0f} added" if goal else "-",
            _common.verdict(p50 - bare <= GOAL_US) if goal else "-",
        ])
    print(table(
        ["mode", "p50 µs", "p90 µs", "added µs (p50)", "ratio", "TCP connects/call", "goal µs",
         "met"],
        rows,
        title=f"client_overhead: {n} calls per mode ({rounds} interleaved rounds x {per_round}, "
              f"after {warmup} warm-up calls each); loopback server in its own process, "
              "~1 KB answers, distinct ~200 B prompts",
    ))
    for text_ in profiles:
        print()
        print(text_)


if __name__ == "__main__":
    main()
