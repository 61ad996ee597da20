"""Time to first chunk of a streamed model answer, bare httpx2 vs the recorded client.

The loopback server (``client_loopback.py``, its own process) sends the role chunk and the first
content chunk at once, the rest of the answer after ``--delay`` seconds, so the first chunk's
arrival is not mixed up with the rest of the stream. Timed from just before the call:

* bare: ``httpx2.Client().stream("POST", ...)`` with the body ``OpenAIChat`` would send, until
  the first ``data:`` line is read;
* ``OpenAIChat.stream(request, on_chunk)`` alone, until the first callback (for attribution);
* ``Client.stream(..., on_chunk=...)`` with a run (durable=False), cache on and missing
  (distinct prompts), until the first callback.

Every stream is read to its end (untimed beyond the first chunk). ``TCP connects/call`` counts
the connections opened during the timed calls (0 = the pooled connection was reused, 1 = a new
connection for every call). Modes are interleaved in rounds.

    python bench/client_streaming.py [--quick] [--delay 0.02] [--profile]

Goal: <= 1 ms added to time-to-first-chunk at p50 by the client.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from collections.abc import Callable

import _common
import httpx2
from _common import median, table, temp_dir, text
from client_loopback import ConnectionCounter, LoopbackServer

from rar.llm.cache import ResponseCache
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.llm.providers.openai import OpenAIChat
from rar.llm.types import Message, Request, StreamChunk
from rar.redaction import Redactor
from rar.runtime.start import record

GOAL_US = 1000.0
MODEL = "bench-model"
SYSTEM = "You are a terse assistant. Answer in one paragraph."
POOL = 256
BARE = "bare httpx2 stream, first data: line"
PROVIDER = "OpenAIChat.stream, first on_chunk"
CLIENT = "Client.stream, run durable=False, cache miss"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Prompts:
    def __init__(self) -> None:
        rng = random.Random(6)
        self.pool = [text(rng, 190) for _ in range(POOL)]
        self.system = Message.system(SYSTEM)
        self.n = 0

    def messages(self) -> list[Message]:
        self.n += 1
        return [self.system, Message.user(f"s{self.n} {self.pool[self.n % POOL]}")]


# A thunk does one call and returns (µs to first chunk, µs to the end).
Thunk = Callable[[], tuple[float, float]]


def make_modes(base_url: str, tmp, prompts: Prompts):
    http = httpx2.Client()
    wire = OpenAIChat(MODEL, base_url=base_url)
    provider = OpenAIChat(MODEL, base_url=base_url)
    run = record("client streaming", store=tmp / "store", seed=1, durable=False,
                 redactor=Redactor(env={}))
    client = Client(OpenAIChat(MODEL, base_url=base_url), run=run, profiles=Profiles())
    client.cache = ResponseCache(run.store, redactor=Redactor(env={}))

    def bare() -> Thunk:
        request = Request(model=MODEL, messages=tuple(prompts.messages()))
        url, headers, body = wire._prepare(request, stream=True)

        def call() -> tuple[float, float]:
            first = 0
            t0 = time.perf_counter_ns()
            with http.stream("POST", url, content=body, headers=headers) as answer:
                for line in answer.iter_lines():
                    if not first and line.startswith("data:"):
                        first = time.perf_counter_ns()
            return (first - t0) / 1e3, (time.perf_counter_ns() - t0) / 1e3

        return call

    def first_chunk_timer() -> tuple[list[int], Callable[[StreamChunk], None]]:
        seen: list[int] = []

        def on_chunk(chunk: StreamChunk) -> None:
            if not seen:
                seen.append(time.perf_counter_ns())

        return seen, on_chunk

    def provider_only() -> Thunk:
        request = Request(model=MODEL, messages=tuple(prompts.messages()))

        def call() -> tuple[float, float]:
            seen, on_chunk = first_chunk_timer()
            t0 = time.perf_counter_ns()
            provider.stream(request, on_chunk)
            return (seen[0] - t0) / 1e3, (time.perf_counter_ns() - t0) / 1e3

        return call

    def recorded() -> Thunk:
        msgs = prompts.messages()

        def call() -> tuple[float, float]:
            seen, on_chunk = first_chunk_timer()
            t0 = time.perf_counter_ns()
            client.stream(messages=msgs, on_chunk=on_chunk)
            return (seen[0] - t0) / 1e3, (time.perf_counter_ns() - t0) / 1e3

        return call

    def cleanup() -> None:
        run.finish()
        http.close()
        for p in (wire, provider, client.targets[0].provider):
            p.close()

    return {BARE: bare, PROVIDER: provider_only, CLIENT: recorded}, cleanup


def run_rounds(modes, rounds: int, per_round: int, warmup: int,
               connections: ConnectionCounter) -> dict[str, dict[str, list]]:
    for factory in modes.values():
        for _ in range(warmup):
            factory()()
    samples = {name: {"first": [], "total": []} for name in modes}
    names = list(modes)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            connections.set_label(name)
            for thunk in [modes[name]() for _ in range(per_round)]:
                first, total = thunk()
                samples[name]["first"].append(first)
                samples[name]["total"].append(total)
    return samples


def profile(modes, calls: int) -> str:
    """cProfile of whole Client.stream calls (client process only)."""
    prof = cProfile.Profile()
    for thunk_factory in [modes[CLIENT]] * calls:
        thunk = thunk_factory()
        prof.enable()
        thunk()
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(10)
    return f"cProfile, {calls} whole calls of {CLIENT} (top 10 by own time):\n{out.getvalue()}"


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--delay", {"type": float, "default": 0.02,
                         "help": "seconds between the first chunk and the rest (default 0.02)"}),
            ("--profile", {"action": "store_true", "help": "also print cProfile of the client"}),
        ],
    )
    rounds, per_round, warmup = (2, 15, 10) if args.quick else (10, 30, 30)
    prompts = Prompts()
    profiles = []
    with temp_dir("client-streaming") as tmp, LoopbackServer(stream_delay=args.delay) as server:
        modes, cleanup = make_modes(server.base_url, tmp, prompts)
        try:
            with ConnectionCounter() as connections:
                samples = run_rounds(modes, rounds, per_round, warmup, connections)
            if args.profile:
                profiles.append(profile(modes, 200))
        finally:
            cleanup()
    bare = median(samples[BARE]["first"])
    n = rounds * per_round
    rows = []
    for name, s in samples.items():
        p50 = median(s["first"])
        is_bare, goal = name == BARE, name == CLIENT
        rows.append([
            name, p50, percentile(s["first"], 0.9),
            "-" if is_bare else p50 - bare,
            median(s["total"]) / 1e3,
            connections.per_call(name, n),
            f"<= {GOAL_US:.0f} added" if goal else "-",
            _common.verdict(p50 - bare <= GOAL_US) if goal else "-",
        ])
    print(table(
        ["mode", "TTFC p50 µs", "TTFC p90 µs", "added µs (p50)", "whole call p50 ms",
         "TCP connects/call", "goal µs", "met"],
        rows,
        title=f"client_streaming: {n} streams per mode ({rounds} interleaved rounds x "
              f"{per_round}, after {warmup} warm-up each); first chunk sent at once, the rest "
              f"{args.delay * 1e3:.0f} ms later; loopback server in its own process",
    ))
    for text_ in profiles:
        print()
        print(text_)


if __name__ == "__main__":
    main()
