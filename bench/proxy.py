"""Latency ``rar proxy`` adds over a direct call, and the requests/s it sustains on loopback.

Four processes: the loopback OpenAI-compatible upstream (``client_loopback.py``: a ~1 KB
answer; a stream whose first chunk comes at once and the rest ``--delay`` later), ``rar proxy``
(started as a user starts it, ``python -m rar proxy --upstream ... --port 0``, a fresh store,
fsync on), a **floor** proxy (this script with ``--floor-server``: the same uvicorn server and
a pooled ``httpx2.AsyncClient`` passing requests and streams through, recording nothing — what
any Python proxy on this stack costs), and this client (a pooled ``httpx2.Client`` sending the
body an SDK would). Every prompt is distinct, so nothing is a cache hit; paths are interleaved
in rounds. Measured:

* plain chat completion, p50 and p95: direct, through the floor, through ``rar proxy`` in
  ``record`` mode, and the same recorded requests through ``--mode replay`` (no upstream);
* streamed chat completion, time to the first ``data:`` line, the same four paths;
* requests/s with ``--concurrency`` clients for ``--seconds``: direct, floor, record.

    python bench/proxy.py [--quick] [--delay 0.02] [--concurrency 16] [--seconds 4]

Goal: <= 1 ms added at p50 (record mode, plain calls).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common
import httpx2
import orjson
from _common import median, table, temp_dir, text

GOAL_US = 1000.0
MODEL = "bench-model"
HEADERS = {"content-type": "application/json", "authorization": "Bearer dummy"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the floor: a pass-through proxy recording nothing -------------------------------------------


def floor_app(upstream: str) -> Any:
    client: httpx2.AsyncClient | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal client
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if client is None:
            client = httpx2.AsyncClient(timeout=60)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        path = scope["path"].removeprefix("/v1")
        request = client.build_request(
            scope["method"], upstream + path, content=b"".join(chunks), headers=HEADERS
        )
        answer = await client.send(request, stream=True)
        headers = [
            (k.encode(), v.encode())
            for k, v in answer.headers.items()
            if k not in ("content-length", "transfer-encoding", "connection")
        ]
        start = {"type": "http.response.start", "status": answer.status_code, "headers": headers}
        await send(start)
        async for chunk in answer.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await answer.aclose()
        await send({"type": "http.response.body", "body": b""})

    return app


def serve_floor(upstream: str) -> None:
    from rar.interop._server import bind, make_server

    sock = bind("127.0.0.1", 0)
    server = make_server(floor_app(upstream))
    print(f"floor at http://127.0.0.1:{sock.getsockname()[1]}/v1 ", flush=True)
    server.run(sockets=[sock])


# --- the processes -------------------------------------------------------------------------------


class Child:
    """A server in its own process, its URL read from its first line (this child only is ever
    signalled, by its pid)."""

    def __init__(self, command: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": "bench-upstream-key"}
        env["PYTHONPATH"] = os.pathsep.join([str(_common.SRC), env.get("PYTHONPATH", "")])
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        match = re.search(r" at (http://\S+/v1) ", self.line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"did not start: {self.line!r} {self.process.stderr.read()}")
        self.url = match[1]

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=60)
        if self.process.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"failed: {err}")
        return out


def rar_proxy(store: Path, *args: str) -> Child:
    command = [sys.executable, "-m", "rar", "--store", str(store), "proxy", "--port", "0"]
    child = Child([*command, *args])
    child.run_id = re.search(r"run (\S+) ", child.line)[1]  # type: ignore[attr-defined, index]
    return child


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


def rounds(
    http: httpx2.Client,
    paths: dict[str, tuple[str, Prompts | list[bytes]]],
    stream: bool,
    count: int,
    per_round: int,
) -> dict[str, list[float]]:
    """``count`` calls per path, ``per_round`` at a time, the order of the paths rotating."""
    measure = first_chunk if stream else plain
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for r in range(count // per_round):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            base, bodies = paths[name]
            for _ in range(per_round):
                body = bodies.body(stream) if isinstance(bodies, Prompts) else bodies.pop(0)
                samples[name].append(measure(http, base, body))
    return samples


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
    done = 0
    deadline = time.monotonic() + seconds
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(limits=limits, timeout=60) as http:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                body = prompts.body(False)
                answer = await http.post(f"{base}/chat/completions", content=body, headers=HEADERS)
                assert answer.status_code == 200
                done += 1

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.monotonic() - started)


def measure(args: argparse.Namespace) -> None:
    from client_loopback import LoopbackServer

    count, per_round, warmup = (60, 20, 20) if args.quick else (600, 30, 60)
    seconds = 1.5 if args.quick else args.seconds
    with temp_dir("proxy") as tmp, LoopbackServer(stream_delay=args.delay) as upstream:
        direct = upstream.base_url
        floor = Child([sys.executable, __file__, "--floor-server", direct])
        proxy = rar_proxy(tmp / "store", "--upstream", direct)
        http = httpx2.Client(timeout=60)
        asked = {"plain": Prompts(2), "stream": Prompts(3)}  # what the replay asks again
        live: dict[str, dict[str, list[float]]] = {}
        fsyncs = [fsync_floor(tmp)]
        try:
            for stream, kind in ((False, "plain"), (True, "stream")):
                call = first_chunk if stream else plain
                warm = Prompts(9)
                for _ in range(warmup):
                    call(http, direct, warm.body(stream))
                    call(http, floor.url, warm.body(stream))
                    call(http, proxy.url, asked[kind].body(stream))
                paths = {
                    "direct": (direct, Prompts(10)),
                    "floor proxy": (floor.url, Prompts(11)),
                    "rar proxy record": (proxy.url, asked[kind]),
                }
                live[kind] = rounds(http, paths, stream, count, per_round)
                fsyncs.append(fsync_floor(tmp))
            targets = {"direct": direct, "floor proxy": floor.url, "rar proxy record": proxy.url}
            rps = {
                name: asyncio.run(throughput(base, Prompts(20 + n), args.concurrency, seconds))
                for n, (name, base) in enumerate(targets.items())
            }
        finally:
            proxy.stop()
            floor.stop()
        # the recorded requests again, in recorded order, with no upstream behind the proxy
        replaying = rar_proxy(tmp / "store", "--mode", "replay", "--run", proxy.run_id)  # type: ignore[attr-defined]
        replayed: dict[str, list[float]] = {}
        try:
            for stream, kind in ((False, "plain"), (True, "stream")):
                bodies = asked[kind].made
                call = first_chunk if stream else plain
                for body in [bodies.pop(0) for _ in range(warmup)]:
                    call(http, replaying.url, body)  # the warm-up, untimed, as recorded
                paths = {
                    "direct": (direct, Prompts(30)),
                    "rar proxy replay": (replaying.url, bodies),
                }
                replayed[kind] = rounds(http, paths, stream, count, per_round)["rar proxy replay"]
        finally:
            replaying.stop()
            http.close()
    report(live, replayed, rps, count, per_round, args.concurrency, seconds)
    print(
        f"\nwrite+fsync of 300 B on this disk during the run: {median(fsyncs):,.0f} µs (median of "
        f"{len(fsyncs)} probes of 200); a recorded answer costs two (its blob, then its event)"
    )


def report(
    live: dict[str, dict[str, list[float]]],
    replayed: dict[str, list[float]],
    rps: dict[str, float],
    count: int,
    per_round: int,
    concurrency: int,
    seconds: float,
) -> None:
    rows = []
    for kind, label in (("plain", "plain call"), ("stream", "stream, first chunk")):
        base, floor = median(live[kind]["direct"]), median(live[kind]["floor proxy"])
        paths = {**live[kind], "rar proxy replay": replayed[kind]}
        for name, values in paths.items():
            p50 = median(values)
            rows.append(
                [
                    label,
                    name,
                    p50,
                    percentile(values, 0.95),
                    "-" if name == "direct" else p50 - base,
                    "-" if name in ("direct", "floor proxy") else p50 - floor,
                    f"<= {GOAL_US:.0f} added"
                    if (kind, name) == ("plain", "rar proxy record")
                    else "-",
                ]
            )
    print(
        table(
            ["call", "path", "p50 µs", "p95 µs", "added p50 µs", "over floor µs", "goal"],
            rows,
            title=f"rar proxy vs direct, {count} calls per path, interleaved in rounds of "
            f"{per_round} (loopback; rar proxy with fsync on)",
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


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--floor-server":
        serve_floor(sys.argv[2])
        return
    measure(
        _common.parse_args(
            __doc__.splitlines()[0],
            [
                ("--delay", {"type": float, "default": 0.02, "help": "stream: s after chunk 1"}),
                ("--concurrency", {"type": int, "default": 16, "help": "clients for requests/s"}),
                ("--seconds", {"type": float, "default": 4.0, "help": "s per requests/s run"}),
            ],
        )
    )


if __name__ == "__main__":
    main()
