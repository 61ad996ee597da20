"""Helper for the client benchmarks (not a benchmark itself): a loopback OpenAI-compatible server.

It runs in a **separate process** (so its Python work never competes with the measured client
for the GIL) and answers ``POST /v1/chat/completions`` with a fixed answer built once with the
``openai`` SDK's own types (``ChatCompletion(...).to_dict()``), the content prefixed with a
per-request counter so that every recorded result is distinct. ``"stream": true`` gets an SSE
stream of ``ChatCompletionChunk`` events: the role and the first content piece are sent at once,
the remaining pieces, the finish chunk, the usage chunk and ``[DONE]`` after ``--stream-delay``
seconds, so time-to-first-chunk is measured cleanly.

    with LoopbackServer(stream_delay=0.02) as server:
        server.base_url          # http://127.0.0.1:<port>/v1

Run directly (``python bench/client_loopback.py --port 8123``) to poke at it by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

import _common
import httpx2
import orjson

ANSWER_BYTES = 1000  # the assistant's answer, ~1 KB of prose
MODEL = "served-model-1"
_PIECES = 8  # the streamed answer comes in this many content chunks


def _answer_text() -> str:
    import random

    return _common.text(random.Random(99), ANSWER_BYTES)


def _templates() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(plain answer, first streamed events, later streamed events) as SDK-built dicts."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
    from openai.types.chat.chat_completion import Choice
    from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
    from openai.types.chat.chat_completion_chunk import ChoiceDelta
    from openai.types.completion_usage import CompletionUsage

    content = _answer_text()
    usage = CompletionUsage(prompt_tokens=60, completion_tokens=250, total_tokens=310)
    plain = ChatCompletion(
        id="chatcmpl-bench",
        object="chat.completion",
        created=1_700_000_000,
        model=MODEL,
        choices=[
            Choice(
                index=0,
                message=ChatCompletionMessage(role="assistant", content=content, refusal=None),
                finish_reason="stop",
                logprobs=None,
            )
        ],
        usage=usage,
    ).to_dict()

    def chunk(delta: ChoiceDelta | None, finish: str | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [ChunkChoice(index=0, delta=delta, finish_reason=finish)]
        return ChatCompletionChunk(
            id="chatcmpl-bench",
            object="chat.completion.chunk",
            created=1_700_000_000,
            model=MODEL,
            choices=choices,
            **({"usage": usage} if delta is None else {}),
        ).to_dict()

    size = -(-len(content) // _PIECES)
    pieces = [content[i : i + size] for i in range(0, len(content), size)]
    first = [
        chunk(ChoiceDelta(role="assistant", content="")),
        chunk(ChoiceDelta(content=pieces[0])),
    ]
    rest = [chunk(ChoiceDelta(content=p)) for p in pieces[1:]]
    rest += [chunk(ChoiceDelta(), "stop"), chunk(None)]
    return plain, first, rest


def build_app(stream_delay: float) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    plain, first, rest = _templates()
    counter = itertools.count()
    rest_bytes = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in rest) + b"data: [DONE]\n\n"

    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        n = next(counter)
        if not body.get("stream"):
            answer = copy.deepcopy(plain)
            message = answer["choices"][0]["message"]
            message["content"] = f"#{n} {message['content']}"
            return Response(orjson.dumps(answer), media_type="application/json")
        events = copy.deepcopy(first)
        events[1]["choices"][0]["delta"]["content"] = f"#{n} " + events[1]["choices"][0]["delta"][
            "content"
        ]
        head = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)

        async def stream() -> AsyncIterator[bytes]:
            yield head  # role + first content piece, in one write, at once
            await asyncio.sleep(stream_delay)
            yield rest_bytes

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


def serve(port: int, stream_delay: float) -> None:
    import uvicorn

    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listening socket says so; without it every answer waits ~40 ms (Nagle + delayed ACK)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        build_app(stream_delay), log_level="warning", access_log=False, lifespan="off"
    )
    uvicorn.Server(config).run(sockets=[sock])


class ConnectionCounter:
    """Counts TCP connections this process opens (``socket.create_connection``, which httpx2's
    transport uses) while active, per label set with :meth:`set_label`. Restored on exit."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._label = ""
        self._original: Any = None

    def __enter__(self) -> ConnectionCounter:
        self._original = original = socket.create_connection

        def counting(*args: Any, **kwargs: Any) -> socket.socket:
            self.counts[self._label] = self.counts.get(self._label, 0) + 1
            return original(*args, **kwargs)

        socket.create_connection = counting
        return self

    def __exit__(self, *exc: object) -> None:
        socket.create_connection = self._original

    def set_label(self, name: str) -> None:
        self._label = name

    def per_call(self, name: str, calls: int) -> float:
        return self.counts.get(name, 0) / calls if calls else 0.0


class LoopbackServer:
    """The server in a child process; ``base_url`` once started."""

    def __init__(self, *, stream_delay: float = 0.02) -> None:
        self.stream_delay = stream_delay
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--port", "0",
             "--stream-delay", str(self.stream_delay)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"loopback server did not start: {line!r}")
        self.port = int(line.split()[1])
        deadline = time.monotonic() + 20
        with httpx2.Client() as client:
            while True:
                try:
                    if client.get(f"http://127.0.0.1:{self.port}/health").status_code == 200:
                        return
                except httpx2.TransportError:
                    pass
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("loopback server did not answer /health")
                time.sleep(0.05)

    def stop(self) -> None:
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

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="loopback OpenAI-compatible server for benches")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stream-delay", type=float, default=0.02)
    args = parser.parse_args()
    serve(args.port, args.stream_delay)


if __name__ == "__main__":
    main()
