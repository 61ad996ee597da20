"""Latency ``rar proxy`` adds over a direct call, and the requests/s it sustains on loopback.

Processes: the loopback OpenAI-compatible upstream (``client_loopback.py``: a ~1 KB answer; a
stream whose first chunk comes at once and the rest ``--delay`` later); ``rar proxy`` started as
a user starts it (``python -m rar proxy --upstream ... --port 0``, a fresh store, fsync on), in
``record`` mode and, on the same store, in ``cached`` mode; two **floor** proxies
(``_proxy_servers.py --floor-server``: the proxy's own server, ``rar.interop._server``, passing
requests and streams through, recording nothing) — one sending upstream with a pooled
``httpx2.AsyncClient``, one with the proxy's own client (``rar.interop._upstream``: the
plumbing ``rar proxy`` itself has, so "over floor" is what recording costs); and this client (a
pooled ``httpx2.Client`` sending the body an SDK would). Every prompt is distinct, so nothing is
a cache hit, except on the cached proxy, which is asked each timed prompt once beforehand
(untimed: a miss, recorded and cached) so that every timed call is a hit. Paths are interleaved
in rounds. Measured:

* plain chat completion, p50 and p95, and what each adds over the direct call: direct, the two
  floors, ``rar proxy`` in ``record`` mode, ``cached`` (hits: no upstream), and the recorded
  requests again through ``--mode replay`` (no upstream);
* streamed chat completion, time to the first ``data:`` line, the same paths;
* the CPU time each proxy process spends per call (from ``/proc``: unlike wall time, hardly
  moved by other load on the machine);
* requests/s with ``--concurrency`` clients for ``--seconds`` (the load comes from
  ``rar.interop._upstream``'s client, ~0.25 ms of CPU per call, so that the servers, not the
  load generator, are what is measured): direct, the floors, record.

``--profile`` runs the record proxy and the rar-client floor under cProfile (CPU time, the timed
rounds only) and prints where their time goes; their latencies are then not representative.

    python bench/proxy.py [--quick] [--profile] [--alone] [--delay 0.02] [--concurrency 16]
                          [--seconds 4]

``--alone`` measures only the direct call and ``rar proxy`` in record mode, interleaved with
nothing else (the default run's four proxies take turns, which leaves each one's caches colder
when its round begins).

Goal: <= 1 ms added at p50 (record mode, plain calls).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import time
from pathlib import Path

import _common
import httpx2
import orjson
from _common import median, table, temp_dir, text
from _proxy_servers import HEADERS, Child, floor_proxy, rar_proxy

GOAL_US = 1000.0
MODEL = "bench-model"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the client ----------------------------------------------------------------------------------


class Prompts:
    """Distinct request bodies; every one made is kept (the replay asks them again)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.pool = [text(rng, 190) for _ in range(256)]
        self.n = 0
        self.made: list[bytes] = []

    def body(self, stream: bool) -> bytes:
        self.n += 1
        messages = [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": f"p{self.n} {self.pool[self.n % 256]}"},
        ]
        body: dict[str, object] = {"model": MODEL, "messages": messages}
        if stream:
            body["stream"] = True
        data = orjson.dumps(body)
        self.made.append(data)
        return data


def plain(http: httpx2.Client, base: str, body: bytes) -> float:
    t0 = time.perf_counter_ns()
    answer = http.post(f"{base}/chat/completions", content=body, headers=HEADERS)
    assert answer.status_code == 200, answer.text[:300]
    return (time.perf_counter_ns() - t0) / 1e3


def first_chunk(http: httpx2.Client, base: str, body: bytes) -> float:
    first = 0
    t0 = time.perf_counter_ns()
    with http.stream("POST", f"{base}/chat/completions", content=body, headers=HEADERS) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not first and line.startswith("data:"):
                first = time.perf_counter_ns()
    return (first - t0) / 1e3


Bodies = Prompts | list[bytes]


def rounds(
    http: httpx2.Client,
    paths: dict[str, tuple[str, Bodies]],
    stream: bool,
    count: int,
    per_round: int,
    children: dict[str, Child] | None = None,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """``count`` calls per path, ``per_round`` at a time, the order of the paths rotating;
    (samples per path, CPU µs per call of the path's process, for those in ``children``)."""
    measure = first_chunk if stream else plain
    samples: dict[str, list[float]] = {name: [] for name in paths}
    cpu = dict.fromkeys(children or {}, 0.0)
    names = list(paths)
    for r in range(count // per_round):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            base, bodies = paths[name]
            child = (children or {}).get(name)
            before = child.cpu() if child else 0.0
            for _ in range(per_round):
                body = bodies.body(stream) if isinstance(bodies, Prompts) else bodies.pop(0)
                samples[name].append(measure(http, base, body))
            if child:
                cpu[name] += child.cpu() - before
    per_call = {name: seconds * 1e6 / count for name, seconds in cpu.items()}
    return samples, per_call


def fsync_floor(directory: Path, count: int = 200) -> float:
    """µs of one small write + fsync in ``directory`` (median), measured now, on this disk."""
    times = []
    with open(directory / "fsync-probe", "ab") as probe:
        for _ in range(count):
            t0 = time.perf_counter_ns()
            probe.write(b"x" * 300)
            probe.flush()
            os.fsync(probe.fileno())
            times.append((time.perf_counter_ns() - t0) / 1e3)
    return median(times)


async def throughput(base: str, prompts: Prompts, concurrency: int, seconds: float) -> float:
    """Requests/s of ``concurrency`` clients on kept-alive connections (the load generator is
    the proxy's lean upstream client, so that it is not what limits the count)."""
    from rar.interop._upstream import Upstream

    done = 0
    deadline = time.monotonic() + seconds
    client = Upstream(base, max_connections=concurrency, max_idle=concurrency)
    target = httpx2.URL(base).raw_path + b"/chat/completions"
    headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            reply = await client.request("POST", target, headers, prompts.body(False))
            await reply.read(1 << 24, lambda: OverflowError())
            await reply.aclose()
            assert reply.status == 200
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await client.aclose()
    return done / elapsed


def measure(args: argparse.Namespace) -> None:
    from client_loopback import LoopbackServer

    count, per_round, warmup = (60, 20, 20) if args.quick else (600, 30, 60)
    seconds = 1.5 if args.quick else args.seconds
    with temp_dir("proxy") as tmp, LoopbackServer(stream_delay=args.delay) as upstream:
        direct = upstream.base_url
        profiles = {
            "rar proxy record": str(tmp / "record.prof"),
            "floor, rar client": str(tmp / "floor.prof"),
        }
        wanted = profiles if args.profile else {}
        children = {
            "floor, httpx2": floor_proxy(direct, "httpx2"),
            "floor, rar client": floor_proxy(direct, "rar", wanted.get("floor, rar client")),
            "rar proxy record": rar_proxy(
                tmp / "store", "--upstream", direct, profile=wanted.get("rar proxy record")
            ),
            "rar proxy cached": rar_proxy(
                tmp / "cached-store", "--upstream", direct, "--mode", "cached"
            ),
        }
        record = children["rar proxy record"]
        http = httpx2.Client(timeout=60)
        asked = {"plain": Prompts(2), "stream": Prompts(3)}  # what the replay asks again
        live: dict[str, dict[str, list[float]]] = {}
        cpu: dict[str, dict[str, float]] = {}
        fsyncs = [fsync_floor(tmp)]
        try:
            for stream, kind in ((False, "plain"), (True, "stream")):
                call = first_chunk if stream else plain
                warm = Prompts(9)
                for _ in range(warmup):
                    call(http, direct, warm.body(stream))
                    for name, child in children.items():
                        bodies = asked[kind] if name == "rar proxy record" else warm
                        call(http, child.url, bodies.body(stream))
                hits = Prompts(40 + stream)  # asked once now (misses), timed below (hits)
                for _ in range(count):
                    call(http, children["rar proxy cached"].url, hits.body(stream))
                paths: dict[str, tuple[str, Bodies]] = {
                    "direct": (direct, Prompts(10)),
                    "floor, httpx2": (children["floor, httpx2"].url, Prompts(11)),
                    "floor, rar client": (children["floor, rar client"].url, Prompts(12)),
                    "rar proxy record": (record.url, asked[kind]),
                    "rar proxy cached": (children["rar proxy cached"].url, list(hits.made)),
                }
                for child in children.values():
                    child.signal(signal.SIGUSR1)
                live[kind], cpu[kind] = rounds(http, paths, stream, count, per_round, children)
                for child in children.values():
                    child.signal(signal.SIGUSR2)
                fsyncs.append(fsync_floor(tmp))
            targets = {"direct": direct, **{n: c.url for n, c in children.items()}}
            targets.pop("rar proxy cached")  # its prompts would all be misses here
            rps = {
                name: asyncio.run(throughput(base, Prompts(20 + n), args.concurrency, seconds))
                for n, (name, base) in enumerate(targets.items())
            }
        finally:
            for child in children.values():
                child.stop()
        # the recorded requests again, in recorded order, with no upstream behind the proxy
        replaying = rar_proxy(tmp / "store", "--mode", "replay", "--run", record.run_id)  # type: ignore[attr-defined]
        replayed: dict[str, list[float]] = {}
        try:
            for stream, kind in ((False, "plain"), (True, "stream")):
                bodies = asked[kind].made
                call = first_chunk if stream else plain
                for body in [bodies.pop(0) for _ in range(warmup)]:
                    call(http, replaying.url, body)  # the warm-up, untimed, as recorded
                replay_paths: dict[str, tuple[str, Bodies]] = {
                    "direct": (direct, Prompts(30)),
                    "rar proxy replay": (replaying.url, bodies),
                }
                timed, used = rounds(
                    http, replay_paths, stream, count, per_round, {"rar proxy replay": replaying}
                )
                replayed[kind] = timed["rar proxy replay"]
                cpu[kind].update(used)
        finally:
            replaying.stop()
            http.close()
        if args.profile:
            show_profiles(profiles)
    report(live, replayed, cpu, rps, count, per_round, args.concurrency, seconds)
    print(
        f"\nwrite+fsync of 300 B on this disk during the run: {median(fsyncs):,.0f} µs (median of "
        f"{len(fsyncs)} probes of 200); a recorded answer costs one (its event's line carries "
        "its blobs)"
    )
    if args.profile:
        print(
            "(profiled: the record proxy's and the rar-client floor's latencies include cProfile)"
        )


def measure_alone(args: argparse.Namespace) -> None:
    """``--alone``: the direct call and ``rar proxy`` in record mode, nothing else running
    between them (what one agent with the proxy to itself sees; the default run interleaves
    four proxies, whose work between rounds leaves the record proxy's caches colder)."""
    from client_loopback import LoopbackServer

    count, per_round, warmup = (100, 20, 20) if args.quick else (600, 30, 60)
    with temp_dir("proxy") as tmp, LoopbackServer(stream_delay=args.delay) as upstream:
        direct = upstream.base_url
        record = rar_proxy(tmp / "store", "--upstream", direct)
        http = httpx2.Client(timeout=60)
        rows = []
        try:
            for stream, label in ((False, "plain call"), (True, "stream, first chunk")):
                call = first_chunk if stream else plain
                warm = Prompts(9)
                for _ in range(warmup):
                    call(http, direct, warm.body(stream))
                    call(http, record.url, warm.body(stream))
                paths: dict[str, tuple[str, Bodies]] = {
                    "direct": (direct, Prompts(10)),
                    "rar proxy record": (record.url, Prompts(11)),
                }
                samples, cpu = rounds(
                    http, paths, stream, count, per_round, {"rar proxy record": record}
                )
                base = median(samples["direct"])
                for name, values in samples.items():
                    added = median(values) - base if name != "direct" else "-"
                    rows.append([label, name, median(values), added, cpu.get(name, "-")])
        finally:
            record.stop()
            http.close()
    print(
        table(
            ["call", "path", "p50 µs", "added p50", "proxy CPU µs/call"],
            rows,
            title=f"rar proxy record alone vs direct, {count} calls per path, rounds of "
            f"{per_round} (loopback, fsync on)",
        )
    )


def show_profiles(profiles: dict[str, str]) -> None:
    import pstats

    for name, path in profiles.items():
        if not Path(path).exists():
            continue
        print(f"\n--- profile: {name} (CPU time, timed rounds) ---")
        stats = pstats.Stats(path)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)


def report(
    live: dict[str, dict[str, list[float]]],
    replayed: dict[str, list[float]],
    cpu: dict[str, dict[str, float]],
    rps: dict[str, float],
    count: int,
    per_round: int,
    concurrency: int,
    seconds: float,
) -> None:
    rows = []
    for kind, label in (("plain", "plain call"), ("stream", "stream, first chunk")):
        samples = {**live[kind], "rar proxy replay": replayed[kind]}
        base = samples["direct"]
        base50, base95 = median(base), percentile(base, 0.95)
        floor50 = median(samples["floor, rar client"])
        for name, values in samples.items():
            p50, p95 = median(values), percentile(values, 0.95)
            proxied = name != "direct"
            rows.append(
                [
                    label,
                    name,
                    p50,
                    p95,
                    p50 - base50 if proxied else "-",
                    p95 - base95 if proxied else "-",
                    p50 - floor50 if name.startswith("rar proxy") else "-",
                    cpu[kind].get(name, "-") if proxied else "-",
                    f"<= {GOAL_US:.0f} added"
                    if (kind, name) == ("plain", "rar proxy record")
                    else "-",
                ]
            )
    print(
        table(
            [
                "call",
                "path",
                "p50 µs",
                "p95 µs",
                "added p50",
                "added p95",
                "over floor p50",
                "proxy CPU µs/call",
                "goal",
            ],
            rows,
            title=f"rar proxy vs direct, {count} calls per path, interleaved in rounds of "
            f"{per_round} (loopback; rar proxy with fsync on; the floor of 'over floor' is the "
            "one with rar's client)",
        )
    )
    print()
    print(
        table(
            ["path", "requests/s", "ratio"],
            [[name, value, value / rps["direct"]] for name, value in rps.items()],
            title=f"requests/s with {concurrency} concurrent clients for {seconds:g} s",
        )
    )
    record50 = median(live["plain"]["rar proxy record"]) - median(live["plain"]["direct"])
    _common.summary(
        "rar proxy: p50 added to a plain call (record mode)",
        f"{record50:,.0f} µs",
        f"{median(live['plain']['floor, rar client']) - median(live['plain']['direct']):,.0f} µs "
        "(pass-through floor)",
        f"<= {GOAL_US:,.0f} µs",
        record50 <= GOAL_US,
    )


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--delay", {"type": float, "default": 0.02, "help": "stream: s after chunk 1"}),
            ("--concurrency", {"type": int, "default": 16, "help": "clients for requests/s"}),
            ("--seconds", {"type": float, "default": 4.0, "help": "s per requests/s run"}),
            ("--profile", {"action": "store_true", "help": "cProfile the record proxy"}),
            ("--alone", {"action": "store_true", "help": "direct and record mode only"}),
        ],
    )
    if args.alone:
        measure_alone(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
