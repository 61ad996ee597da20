"""A real Gemini (Generative Language API) server for tests, answering from a script.

It serves ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
on 127.0.0.1 (starlette under uvicorn, in a background thread). Tests script answers built with
the official ``google-genai`` SDK's types (``GenerateContentResponse``, ``Candidate``,
``Content``, ``Part``, ``FunctionCall``, ``GenerateContentResponseUsageMetadata``), serialised
with ``model_dump(mode="json", by_alias=True, exclude_none=True)`` — the camelCase wire names.
A streamed answer is the same response split into chunks (``data: {...}`` events, text in
pieces, the finish reason and final usage on the last chunk), as the API streams it. Errors use
Google's ``{"error": {"code", "message", "status", "details"}}`` shape. Every request is
recorded in :attr:`GeminiServer.received` (path, query string, headers, JSON body)::

    server.script(response(part("hi")), Raw(429, error(429, "...", "RESOURCE_EXHAUSTED")))
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import orjson
import uvicorn
from google.genai.types import (
    BlockedReason,
    Candidate,
    Content,
    FinishReason,
    FunctionCall,
    GenerateContentResponse,
    GenerateContentResponsePromptFeedback,
    GenerateContentResponseUsageMetadata,
    Part,
)
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# --- answers built with the SDK's types ---------------------------------------------------------


def part(text: str, *, thought: bool = False) -> Part:
    return Part(text=text, thought=True) if thought else Part(text=text)


def call(name: str, **arguments: Any) -> Part:
    return Part(function_call=FunctionCall(name=name, args=arguments))


def usage(
    prompt: int = 11, candidates: int = 7, cached: int | None = None, thoughts: int | None = None
) -> GenerateContentResponseUsageMetadata:
    return GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        cached_content_token_count=cached,
        thoughts_token_count=thoughts,
        total_token_count=prompt + candidates + (thoughts or 0),
    )


def response(
    *parts: Part,
    finish: str = "STOP",
    meta: GenerateContentResponseUsageMetadata | None = None,
    model: str = "gemini-served-001",
) -> GenerateContentResponse:
    return GenerateContentResponse(
        candidates=[
            Candidate(
                content=Content(role="model", parts=list(parts)),
                finish_reason=FinishReason(finish),
                index=0,
            )
        ],
        usage_metadata=meta or usage(),
        model_version=model,
        response_id="resp-test",
    )


def blocked(reason: str = "SAFETY", detail: str | None = None) -> GenerateContentResponse:
    """A prompt refused before generation: no candidates, a block reason."""
    return GenerateContentResponse(
        prompt_feedback=GenerateContentResponsePromptFeedback(
            block_reason=BlockedReason(reason), block_reason_message=detail
        ),
        usage_metadata=GenerateContentResponseUsageMetadata(
            prompt_token_count=5, total_token_count=5
        ),
        model_version="gemini-served-001",
    )


def error(code: int, message: str, status: str, *details: dict[str, Any]) -> dict[str, Any]:
    """An error body as Google APIs send it."""
    body: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        body["details"] = list(details)
    return {"error": body}


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _pieces(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def stream_chunks(answer: GenerateContentResponse, piece: int = 4) -> list[GenerateContentResponse]:
    """``answer`` split into the chunks ``streamGenerateContent`` sends (a blocked prompt, with
    no candidates, is one chunk)."""
    if not answer.candidates:
        return [answer]
    candidate = answer.candidates[0]
    pieces: list[Part] = []
    for p in (candidate.content.parts if candidate.content else None) or []:
        if p.text is not None:
            pieces.extend(p.model_copy(update={"text": t}) for t in _pieces(p.text, piece))
        else:
            pieces.append(p)
    pieces = pieces or [Part(text="")]
    meta = answer.usage_metadata or usage()
    early = GenerateContentResponseUsageMetadata(prompt_token_count=meta.prompt_token_count)
    chunks = []
    for number, p in enumerate(pieces, 1):
        last = number == len(pieces)
        chunks.append(
            GenerateContentResponse(
                candidates=[
                    Candidate(
                        content=Content(role="model", parts=[p]),
                        finish_reason=candidate.finish_reason if last else None,
                        index=0,
                    )
                ],
                usage_metadata=meta if last else early,
                model_version=answer.model_version,
                response_id=answer.response_id,
            )
        )
    return chunks


@dataclass(frozen=True)
class Stream:
    """A streamed answer: SDK chunks (or raw dicts/bytes), cut cleanly or dropped midway."""

    chunks: Sequence[BaseModel | dict[str, Any] | bytes]
    cut_after: int | None = None  # end the body cleanly after this many chunks
    drop_after: int | None = None  # break the connection after this many chunks

    @classmethod
    def of(cls, answer: GenerateContentResponse, piece: int = 4, **options: Any) -> Stream:
        return cls(stream_chunks(answer, piece), **options)


@dataclass(frozen=True)
class Raw:
    """An answer sent exactly as given: error statuses, broken bodies."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> Response:
        body = self.body if isinstance(self.body, bytes | str) else orjson.dumps(self.body)
        return Response(
            body, status_code=self.status, headers=self.headers, media_type="application/json"
        )


@dataclass(frozen=True)
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]


class Dropped(Exception):
    """Raised inside a streamed body to break the connection mid-answer."""


# --- the server ----------------------------------------------------------------------------------


class GeminiServer:
    """The scripted server; start it with ``with GeminiServer() as server: ...``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._script: deque[GenerateContentResponse | Stream | Raw] = deque()
        self._lock = threading.Lock()
        self.port = 0
        self.app = Starlette(routes=[Route("/v1beta/{rest:path}", self._models, methods=["POST"])])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        """The server's root (what the SDK takes as ``base_url``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API root RAR's provider takes (with the version)."""
        return f"{self.url}/v1beta"

    def script(self, *answers: GenerateContentResponse | Stream | Raw) -> None:
        """Queue the answers to the next requests, in order. A ``GenerateContentResponse``
        answers a streaming request with its chunks."""
        with self._lock:
            self._script.extend(answers)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.received.clear()

    @property
    def last(self) -> Received:
        return self.received[-1]

    async def _models(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        path = request.url.path
        with self._lock:
            self.received.append(Received(path, request.url.query, dict(request.headers), body))
            answer = self._script.popleft() if self._script else None
        if answer is None:
            return Raw(500, error(500, "the test scripted no answer", "INTERNAL")).response()
        if isinstance(answer, Raw):
            return answer.response()
        if isinstance(answer, GenerateContentResponse):
            if not path.endswith(":streamGenerateContent"):
                return Raw(200, dump(answer)).response()
            answer = Stream.of(answer)
        return self._stream(answer)

    @staticmethod
    def _stream(stream: Stream) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for sent, chunk in enumerate(stream.chunks):
                if sent == stream.drop_after:
                    raise Dropped("the test breaks this connection")
                if sent == stream.cut_after:
                    return
                if isinstance(chunk, bytes):
                    data = chunk
                else:
                    data = orjson.dumps(chunk if isinstance(chunk, dict) else dump(chunk))
                yield b"data: " + data + b"\r\n\r\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    # --- lifecycle ---

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="critical",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._socket = sock
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="gemini-test-server",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the Gemini test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> GeminiServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
