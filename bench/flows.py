"""Flow splits against a loopback model server with 50 ms latency: wall time vs the ideal.

One agent (``COMPLETION``, template ``"Item: [[item]]"``, ``TextHandler``) over 100 items makes
100 splits; ``Flow(..., concurrency=limit)`` runs at most ``limit`` model calls at a time, so a
server answering every request after ``--latency`` (50 ms) allows an ideal wall time of
50 ms × ⌈100 / limit⌉. Every RAR walk is recorded with ``rar.replay.engine.execute`` (the
module-level entrypoint :func:`flow_entry`, a fresh store per walk, ``durable=False`` unless
``--durable``) with the client's cache off, so every call reaches the server. Modes, interleaved
(rotated) in every repetition:

* ``raw asyncio`` — the machine's floor: the same requests written by hand over asyncio streams
  (kept-alive connections, no HTTP library), a semaphore of ``limit``;
* ``bare httpx2`` — the HTTP client's floor: asyncio + one pooled ``httpx2.AsyncClient``,
  a semaphore of ``limit``, the very bodies ``OpenAIChat`` sends;
* ``RAR flow`` — the flow as a user writes it: ``Flow(model=Client(Profile(provider="openai",
  base_url=...), run=run, cache=False))``, so the provider is the one ``connect()`` builds;
* ``RAR flow, pooled`` — the same flow, the provider given one pooled ``httpx2.AsyncClient``
  (``OpenAIChat(..., async_http_client=...)``): engine and record without the provider's
  per-call HTTP client.

Per limit and mode: the ideal, the median wall time (the walk alone: ``Flow.awalk`` timed inside
the entrypoint, i.e. what ``Flow.walk`` runs), its ratio to the ideal, the added time per split
(wall − ideal) / 100 and (wall − bare httpx2) / 100, the whole recorded run (``execute``:
record, walk, finish), the server's peak of requests in flight, and the event loop's longest
stall (a 5 ms heartbeat task beside the walk: how long the loop was kept from running).
Then the same flow with an instant in-process provider (no network): µs per split of the engine
without a run and with one — the engine's and the record's own cost. Then the strict replay of
the recorded flows (``rar.replay.engine.replay(run_id, mode="strict")``, verification included):
median time, time of its walk, effects served per second.

The server (plain asyncio streams by default, ``--server uvicorn`` for starlette + uvicorn) runs
in its own process, so its work never competes with the measured client for the GIL or the
event loop; ``--in-thread`` runs it in a thread of this process instead.

``--quick``: limits 10, 25, 50, 100, 3 repetitions, the replay of the limit-100 flows only, and
a ``RAR flow`` walk that takes over 3 s (the provider's per-call client: 100 × its cost whatever
the limit) measured once, at limit 100 (the largest limit is measured first). Full: limits 1,
10, 25, 50, 100, 5 repetitions, every replay.

    python bench/flows.py [--quick] [--profile] [--durable] [--server asyncio|uvicorn]
                          [--in-thread] [--latency S] [--limits 10,100]

Goal: wall time <= 1.20 × 50 ms × ⌈100 / limit⌉.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import math
import os
import pstats
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import _common
import httpx2
import orjson
from _common import median, table, temp_dir

from rar.flow import Agent, AgentType, Flow, TextHandler
from rar.llm.client import Client
from rar.llm.profiles import Profile, Profiles
from rar.llm.providers.openai import OpenAIChat
from rar.llm.types import Message, Request, Response, Usage
from rar.redaction import Redactor
from rar.replay.engine import execute, replay
from rar.runtime.start import record
from rar.store.store import Store

T = TypeVar("T")

GOAL_RATIO = 1.20
SPLITS = 100
MODEL = "bench"
TEMPLATE = "Item: [[item]]"
FULL_LIMITS = (1, 10, 25, 50, 100)
QUICK_LIMITS = (10, 25, 50, 100)
SLOW_WALK_S = 3.0  # --quick: a RAR flow walk over this is measured at the largest limit only
HEARTBEAT_S = 0.005
RAW, BARE, RAR, POOLED = "raw asyncio", "bare httpx2", "RAR flow", "RAR flow, pooled"
MODES = (RAW, BARE, RAR, POOLED)

# what the last walk of flow_entry measured (the entrypoint's return value stays a plain summary)
LAST_WALK: dict[str, float] = {}


def items(n: int = SPLITS) -> list[str]:
    return [f"item-{i:03d}" for i in range(n)]


_SSL: Any = None


def pooled_client(limit: int) -> httpx2.AsyncClient:
    """One pooled AsyncClient for ``limit`` connections (the TLS context built once a process:
    building it costs tens of ms, all of it CPU)."""
    global _SSL
    if _SSL is None:
        import ssl

        _SSL = ssl.create_default_context()
    limits = httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
    return httpx2.AsyncClient(timeout=60, limits=limits, verify=_SSL)


async def watched(work: Awaitable[T]) -> tuple[T, float, float]:
    """Await ``work`` beside a heartbeat task; (its result, seconds, the loop's longest stall)."""
    stall = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal stall
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(HEARTBEAT_S)
            stall = max(stall, time.perf_counter() - before - HEARTBEAT_S)

    beat = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(0)  # the heartbeat is running before the work starts
    began = time.perf_counter()
    try:
        result = await work
    finally:
        elapsed = time.perf_counter() - began
        done = True
        await beat
    return result, elapsed, stall


# --- the loopback server ---------------------------------------------------------------------


class Model:
    """What the server answers: after ``latency``, a chat.completion echoing the last prompt.

    It keeps how many requests it got and the most it held at once (``peak``)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.counter = itertools.count()
        self.in_flight = self.peak = self.requests = 0

    async def answer(self, body: bytes) -> bytes:
        request = orjson.loads(body)
        self.in_flight += 1
        self.requests += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        prompt = request["messages"][-1]["content"]
        return orjson.dumps({
            "id": f"chatcmpl-bench-{next(self.counter)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model", MODEL),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": f"Noted: {prompt}", "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14},
        })

    def stats(self, reset: bool) -> bytes:
        out = orjson.dumps({"requests": self.requests, "peak": self.peak})
        if reset:
            self.peak = self.requests = 0
        return out


def build_app(model: Model) -> Any:
    """The starlette front end (``--server uvicorn``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HTTPRequest
    from starlette.responses import Response
    from starlette.routing import Route

    async def chat(request: HTTPRequest) -> Response:
        return Response(await model.answer(await request.body()), media_type="application/json")

    async def stats(request: HTTPRequest) -> Response:
        out = model.stats(bool(request.query_params.get("reset")))
        return Response(out, media_type="application/json")

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/stats", stats, methods=["GET"]),
    ])


async def _http_connection(model: Model, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
    """The asyncio front end (``--server asyncio``): HTTP/1.1 keep-alive, one request at a time
    per connection, Content-Length bodies (what httpx2 sends)."""
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.split(b"\r\n")
            method, target, _ = lines[0].split(b" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            if method == b"POST" and target.endswith(b"/chat/completions"):
                out = await model.answer(body)
            elif target.startswith(b"/stats"):
                out = model.stats(b"reset" in target)
            else:
                out = b'{"error": {"message": "not found"}}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(out), out))
            await writer.drain()
    finally:
        writer.close()


def _listening_socket() -> socket.socket:
    # IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only when the listening socket
    # says so; without it an answer written in two parts waits ~40 ms for a delayed ACK
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def run_server(sock: socket.socket, latency: float, kind: str,
               stop: threading.Event | None = None) -> None:
    """Serve on ``sock`` until ``stop`` is set (or forever)."""
    model = Model(latency)
    if kind == "uvicorn":
        import uvicorn

        config = uvicorn.Config(build_app(model), log_level="warning", access_log=False,
                                lifespan="off", backlog=1024, timeout_graceful_shutdown=2)
        server = uvicorn.Server(config)
        if stop is not None:
            threading.Thread(target=lambda: (stop.wait(), setattr(server, "should_exit", True)),
                             daemon=True).start()
        server.run(sockets=[sock])
        return

    async def main() -> None:
        sock.listen(1024)
        server = await asyncio.start_server(lambda r, w: _http_connection(model, r, w),
                                            sock=sock, backlog=1024)
        async with server:
            while stop is None or not stop.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(main())


def serve(latency: float, kind: str) -> None:
    """The child process: print the port, then serve until terminated."""
    sock = _listening_socket()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    run_server(sock, latency, kind)


class LatencyServer:
    """The server in a child process (default) or a thread of this one; ``base_url`` once
    started; :meth:`stats` reads (and resets) its request count and peak in flight."""

    def __init__(self, latency: float, kind: str = "asyncio", in_thread: bool = False) -> None:
        self.latency = latency
        self.kind = kind
        self.in_thread = in_thread
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, reset: bool = False) -> dict[str, int]:
        url = f"http://127.0.0.1:{self.port}/stats" + ("?reset=1" if reset else "")
        return orjson.loads(httpx2.get(url, timeout=10).content)

    def start(self) -> None:
        if self.in_thread:
            sock = _listening_socket()
            self.port = sock.getsockname()[1]
            self._thread = threading.Thread(
                target=run_server, args=(sock, self.latency, self.kind, self._stop),
                name="bench-flows-server", daemon=True)
            self._thread.start()
        else:
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--serve", self.kind,
                 "--latency", str(self.latency)],
                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline()
            if not line.startswith("PORT "):
                self.stop()
                raise RuntimeError(f"loopback server did not start: {line!r}")
            self.port = int(line.split()[1])
        deadline = time.monotonic() + 20
        while True:
            try:
                self.stats(reset=True)
                return
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("loopback server did not answer /stats") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()  # this child only, by its pid
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> LatencyServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# --- the flow (the recorded, replayable entrypoint) ------------------------------------------


def make_flow(model: Client, limit: int) -> Flow:
    agent = Agent("Item", AgentType.COMPLETION, template=TEMPLATE, handler=TextHandler("answer"))
    return Flow([agent], model=model, concurrency=limit, name="bench")


def flow_entry(run: Any, base_url: str, splits: int, limit: int,
               pooled: bool = False) -> dict[str, Any]:
    """Walk the ``splits``-split flow; ``pooled`` gives the provider one pooled async client.

    The items are made here from their count: a list input over ~1 KB is stored as a blob ref
    in the manifest, and a replay currently hands the function ``None`` for it (see the
    README's note)."""
    names = items(splits)

    async def walk() -> Any:
        if not pooled:
            profile = Profile(name="bench", provider="openai", model=MODEL, base_url=base_url)
            flow = make_flow(Client(profile, run=run, cache=False, profiles=Profiles()), limit)
            return await watched(flow.awalk("Item", {"item": names}, run=run))
        async with pooled_client(limit) as http:
            provider = OpenAIChat(MODEL, base_url=base_url, async_http_client=http)
            flow = make_flow(Client(provider, run=run, cache=False, profiles=Profiles()), limit)
            return await watched(flow.awalk("Item", {"item": names}, run=run))

    result, elapsed, stall = asyncio.run(walk())  # what Flow.walk does
    answered = sum(bool(c.get("answer")) for c in result.ok)
    LAST_WALK.update(s=elapsed, stall=stall, answered=answered)
    return {"requests": result.statistics.requests, "ok": len(result.ok),
            "failed": len(result.failed), "answered": answered}


# --- the floors ------------------------------------------------------------------------------


def bare_bodies(base_url: str, names: list[str]) -> tuple[str, dict[str, str], list[bytes]]:
    wire = OpenAIChat(MODEL, base_url=base_url)  # only to build the exact body and headers
    bodies, url, headers = [], "", {}
    for name in names:
        request = Request(model=MODEL, messages=(Message.user(f"Item: {name}"),))
        url, headers, body = wire._prepare(request, stream=False)
        bodies.append(body)
    return url, headers, bodies


def bare_walk(base_url: str, names: list[str], limit: int) -> tuple[float, float]:
    """The requests under a semaphore of ``limit`` on one pooled AsyncClient; (s, stall s)."""
    url, headers, bodies = bare_bodies(base_url, names)

    async def main() -> tuple[float, float]:
        async with pooled_client(limit) as http:
            gate = asyncio.Semaphore(limit)

            async def one(body: bytes) -> str:
                async with gate:
                    answer = await http.post(url, content=body, headers=headers)
                data = orjson.loads(answer.content)
                return str(data["choices"][0]["message"]["content"])

            async def all_of() -> list[str]:
                return await asyncio.gather(*(one(b) for b in bodies))

            answers, elapsed, stall = await watched(all_of())
            assert len(answers) == len(names) and all(answers)
            return elapsed, stall

    return asyncio.run(main())


def raw_walk(base_url: str, names: list[str], limit: int) -> tuple[float, float]:
    """The same requests written by hand over asyncio streams (kept-alive connections, no HTTP
    library): what the event loop, the kernel and the server cost; (s, stall s)."""
    url, headers, bodies = bare_bodies(base_url, names)
    parts = httpx2.URL(url)
    head = (f"POST {parts.raw_path.decode()} HTTP/1.1\r\nHost: {parts.netloc.decode()}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())).encode()

    async def main() -> tuple[float, float]:
        gate = asyncio.Semaphore(limit)
        idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        opened: list[asyncio.StreamWriter] = []

        async def one(body: bytes) -> str:
            async with gate:
                if idle:
                    reader, writer = idle.pop()
                else:
                    reader, writer = await asyncio.open_connection(parts.host, parts.port)
                    opened.append(writer)
                writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                answer_head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in answer_head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                data = orjson.loads(await reader.readexactly(length))
                idle.append((reader, writer))
            return str(data["choices"][0]["message"]["content"])

        async def all_of() -> list[str]:
            return await asyncio.gather(*(one(b) for b in bodies))

        answers, elapsed, stall = await watched(all_of())
        assert len(answers) == len(names) and all(answers)
        for writer in opened:
            writer.close()
        return elapsed, stall

    return asyncio.run(main())


# --- the engine alone: an instant provider ---------------------------------------------------


class InstantProvider:
    """An OpenAI-shaped provider answering at once, in process (no network, no wait)."""

    name = "openai"
    model = MODEL
    base_url = "http://127.0.0.1:9/v1"

    def complete(self, request: Request) -> Response:
        return Response(content=f"Noted: {request.messages[-1].content}", model=MODEL,
                        usage=Usage(input_tokens=8, output_tokens=6))

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)


def instant_walk(tmp: Path, recorded: bool, durable: bool, n: int) -> float:
    """Seconds of one 100-split walk (limit 100) on the instant provider."""
    run = record("bench flows, instant", store=tmp / f"instant-{n}", seed=1, durable=durable,
                 redactor=Redactor(env={})) if recorded else None
    flow = make_flow(Client(InstantProvider(), run=run, cache=False, profiles=Profiles()),
                     SPLITS)
    began = time.perf_counter()
    result = flow.walk("Item", {"item": items()}, run=run)
    elapsed = time.perf_counter() - began
    if run is not None:
        run.finish()
    assert len(result.ok) == SPLITS
    return elapsed


# --- measuring -------------------------------------------------------------------------------


class Recorder:
    """Records walks into fresh stores under ``tmp``; keeps the run ids for the replays."""

    def __init__(self, tmp: Path, base_url: str, durable: bool) -> None:
        self.tmp = tmp
        self.base_url = base_url
        self.durable = durable
        self.n = 0
        self.last: dict[tuple[str, int], tuple[Path, str]] = {}  # (mode, limit) -> store, run

    def walk(self, mode: str, limit: int) -> tuple[float, float, float]:
        """(seconds of the walk, seconds of the whole recorded run, longest loop stall)."""
        self.n += 1
        store = self.tmp / f"store-{self.n}"
        LAST_WALK.clear()
        began = time.perf_counter()
        run = execute(flow_entry, store=store, seed=1, durable=self.durable,
                      redactor=Redactor(env={}),
                      inputs={"base_url": self.base_url, "splits": SPLITS, "limit": limit,
                              "pooled": mode == POOLED},
                      goal=f"bench flows: {SPLITS} splits, limit {limit}")
        total = time.perf_counter() - began
        if LAST_WALK.get("answered") != SPLITS:
            raise RuntimeError(f"{mode}, limit {limit}: {LAST_WALK} (expected {SPLITS} answers)")
        self.last[(mode, limit)] = (store, run.id)
        return LAST_WALK["s"], total, LAST_WALK["stall"]


Samples = dict[tuple[str, int], dict[str, list[float]]]


def measure(server: LatencyServer, recorder: Recorder, limits: tuple[int, ...], reps: int,
            quick: bool) -> tuple[Samples, list[str]]:
    samples: Samples = {}
    notes: list[str] = []
    names = items()
    done: set[str] = set()  # --quick: a RAR flow this slow is measured once
    for rep in range(reps):
        for limit in sorted(limits, reverse=True):  # the largest first: see `done`
            shift = rep % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:  # rotated: drift hits every mode alike
                if mode in done:
                    continue
                server.stats(reset=True)
                if mode == RAW:
                    walk, stall = raw_walk(server.base_url, names, limit)
                    total = walk
                elif mode == BARE:
                    walk, stall = bare_walk(server.base_url, names, limit)
                    total = walk
                else:
                    walk, total, stall = recorder.walk(mode, limit)
                stats = server.stats(reset=True)
                if stats["requests"] != SPLITS:
                    raise RuntimeError(f"{mode}: the server saw {stats['requests']} requests")
                got = samples.setdefault((mode, limit),
                                         {"walk": [], "total": [], "peak": [], "stall": []})
                got["walk"].append(walk)
                got["total"].append(total)
                got["peak"].append(stats["peak"])
                got["stall"].append(stall)
                if quick and mode == RAR and walk > SLOW_WALK_S:
                    done.add(mode)
                    notes.append(f"--quick: a {mode} walk took {walk:.1f} s at limit {limit}, so "
                                 "it was measured once, at that limit only")
    return samples, notes


def measure_instant(tmp: Path, reps: int, durable: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"no run": [], "recorded": []}
    instant_walk(tmp, True, durable, -1)  # warm-up
    for rep in range(reps):
        for name in (("no run", "recorded") if rep % 2 == 0 else ("recorded", "no run")):
            out[name].append(instant_walk(tmp, name == "recorded", durable, rep))
    return out


def measure_replays(recorder: Recorder, keys: list[tuple[str, int]],
                    reps: int) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for _rep in range(reps):
        for key in keys:
            store, run_id = recorder.last[key]
            LAST_WALK.clear()
            began = time.perf_counter()
            report = replay(run_id, store=Store(store), mode="strict")
            elapsed = time.perf_counter() - began
            got = out.setdefault(key, {"s": [], "walk": [], "served": 0, "status": set()})
            got["s"].append(elapsed)
            got["walk"].append(LAST_WALK.get("s", float("nan")))
            got["served"] = report.served
            got["status"].add(report.replay_status)
    return out


def profile_walk(recorder: Recorder, mode: str, limit: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    walk, _, _ = recorder.walk(mode, limit)
    prof.disable()
    return _profile_text(prof, f"one recorded walk, {mode}, limit {limit} "
                               f"({walk * 1e3:.0f} ms under the profiler)")


def profile_instant(tmp: Path, durable: bool) -> str:
    prof = cProfile.Profile()
    prof.enable()
    walk = instant_walk(tmp, True, durable, 999)
    prof.disable()
    return _profile_text(prof, f"one recorded walk on the instant provider, limit {SPLITS} "
                               f"({walk * 1e3:.0f} ms under the profiler)")


def _profile_text(prof: cProfile.Profile, what: str) -> str:
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    stats.sort_stats("cumulative").print_stats(r"rar/|httpx2|httpcore2|ssl", 22)
    return f"cProfile of {what}:\n{out.getvalue()}"


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    if "--serve" in sys.argv:  # the child process of LatencyServer
        parser = argparse.ArgumentParser()
        parser.add_argument("--serve", choices=("asyncio", "uvicorn"))
        parser.add_argument("--latency", type=float, default=0.05)
        child = parser.parse_args()
        serve(child.latency, child.serve)
        return
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [("--profile", {"action": "store_true", "help": "also print cProfile of walks"}),
         ("--durable", {"action": "store_true", "help": "record with fsync (durable=True)"}),
         ("--latency", {"type": float, "default": 0.05, "help": "server latency, s (0.05)"}),
         ("--server", {"choices": ("asyncio", "uvicorn"), "default": "asyncio",
                       "help": "the server: plain asyncio streams (default) or starlette + "
                               "uvicorn"}),
         ("--in-thread", {"action": "store_true",
                          "help": "run the server in a thread of this process, not its own"}),
         ("--limits", {"default": "", "help": "comma-separated limits (default: by mode)"})],
    )
    limits = tuple(int(x) for x in args.limits.split(",") if x) or (
        QUICK_LIMITS if args.quick else FULL_LIMITS)
    reps = 3 if args.quick else 5
    latency = args.latency
    began = time.perf_counter()
    profiles = []
    with temp_dir("flows") as tmp, LatencyServer(latency, args.server, args.in_thread) as server:
        recorder = Recorder(tmp, server.base_url, args.durable)
        # warm-up: imports, the TLS context, the first connections, a first replay
        bare_walk(server.base_url, items(), max(limits))
        recorder.walk(POOLED, max(limits))
        replay(recorder.last[(POOLED, max(limits))][1],
               store=Store(recorder.last[(POOLED, max(limits))][0]), mode="strict")
        server.stats(reset=True)
        samples, notes = measure(server, recorder, limits, reps, args.quick)
        instant = measure_instant(tmp, 3 * reps, args.durable)
        keys = [k for k in recorder.last if not args.quick or k[1] == max(limits)]
        replays = measure_replays(recorder, sorted(keys, key=lambda k: (k[1], MODES.index(k[0]))),
                                  reps)
        if args.profile:
            profiles = [profile_walk(recorder, mode, max(limits)) for mode in (RAR, POOLED)]
            profiles.append(profile_instant(tmp, args.durable))
    elapsed = time.perf_counter() - began

    rows = []
    for limit in limits:
        ideal = latency * math.ceil(SPLITS / limit)
        floor = median(samples[(BARE, limit)]["walk"])
        for mode in MODES:
            got = samples.get((mode, limit))
            if got is None:
                continue
            wall = median(got["walk"])
            ratio = wall / ideal
            recorded = mode in (RAR, POOLED)
            rows.append([
                limit, mode, ideal * 1e3, wall * 1e3, f"{ratio:.2f}",
                (wall - ideal) / SPLITS * 1e6,
                "-" if mode == BARE else (wall - floor) / SPLITS * 1e6,
                median(got["total"]) * 1e3 if recorded else "-",
                int(median(got["peak"])),
                median(got["stall"]) * 1e3,
                _common.verdict(ratio <= GOAL_RATIO),
            ])
    where = "a thread of this process" if args.in_thread else "its own process"
    print(table(
        ["limit", "mode", "ideal ms", "wall ms", "/ideal", "added µs/split vs ideal",
         "vs bare httpx2", "recorded run ms", "peak in flight", "loop stall ms",
         f"<= {GOAL_RATIO:.2f}x"],
        rows,
        title=f"flows: {SPLITS} splits, server latency {latency * 1e3:.0f} ms ({args.server} "
              f"server on loopback, in {where}); medians of {reps} interleaved repetitions; "
              f"recorded with durable={args.durable}, cache off",
    ))
    for note in notes:
        print(note)
    irows = [[name, median(values) * 1e3, median(values) / SPLITS * 1e6]
             for name, values in instant.items()]
    print()
    print(table(
        ["instant provider (no network), limit 100", "walk ms", "µs/split"], irows,
        title=f"the engine's own cost: {SPLITS} splits on an in-process provider that answers "
              f"at once; median of {3 * reps}",
    ))
    rrows = []
    for (mode, limit), got in replays.items():
        s = median(got["s"])
        rrows.append([limit, mode, s * 1e3, median(got["walk"]) * 1e3, got["served"],
                      got["served"] / s, ", ".join(sorted(got["status"]))])
    print()
    print(table(
        ["limit", "recorded by", "strict replay ms", "its walk ms", "effects served",
         "effects/s", "status"],
        rrows,
        title=f"strict replay of the recorded {SPLITS}-split flows (rar.replay.engine.replay, "
              f"verification included); median of {reps}",
    ))
    has_async = hasattr(OpenAIChat, "acomplete")
    print(f"\n(the openai provider {'has' if has_async else 'has no'} acomplete; "
          f"measured in {elapsed:.0f} s)")
    for text_ in profiles:
        print()
        print(text_)


if __name__ == "__main__":
    main()
