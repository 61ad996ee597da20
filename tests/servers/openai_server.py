"""A real OpenAI-compatible HTTP server for tests, answering from a script.

It serves ``POST /v1/chat/completions`` and ``POST /v1/completions`` on 127.0.0.1 (starlette
under uvicorn, in a background thread) and builds every answer with the official ``openai``
SDK's own types, serialised with ``to_dict()`` as the SDK would read them, so the code under
test meets the real wire shapes: plain answers, streamed chunks (``data: ...`` / ``[DONE]``),
usage details, tool calls and vendor extras such as ``reasoning_content``.

Tests queue answers with :meth:`OpenAIServer.script` and read what was sent in
:attr:`OpenAIServer.received`::

    server.script(Answer(content="hi"), Raw(429, {"error": {...}}, headers={"Retry-After": "3"}))
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
from openai.types import Completion, CompletionChoice, CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
from openai.types.chat.chat_completion_chunk import (
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionTokensDetails, PromptTokensDetails
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

CREATED = 1_700_000_000


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """A scripted model answer, sent plain or streamed depending on the request."""

    content: str | None = None
    tool_calls: Sequence[Call] = ()
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"  # vLLM/DeepSeek; some servers say "reasoning"
    text: str | None = None  # the answer of /completions
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    model: str = "served-model-1"
    prompt_tokens: int = 12
    completion_tokens: int = 7
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    piece: int = 4  # streamed text comes in pieces of this many characters
    cut_after: int | None = None  # streaming: end the body cleanly after this many events
    drop_after: int | None = None  # streaming: break the connection after this many events

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def usage(self) -> CompletionUsage:
        return CompletionUsage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            total_tokens=self.prompt_tokens + self.completion_tokens,
            **(
                {"prompt_tokens_details": PromptTokensDetails(cached_tokens=self.cached_tokens)}
                if self.cached_tokens is not None
                else {}
            ),
            **(
                {
                    "completion_tokens_details": CompletionTokensDetails(
                        reasoning_tokens=self.reasoning_tokens
                    )
                }
                if self.reasoning_tokens is not None
                else {}
            ),
        )


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
    headers: dict[str, str]
    body: dict[str, Any]


def _pieces(text: str | None, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


# --- answers built with the SDK's types ---------------------------------------------------


def chat_completion(answer: Answer) -> dict[str, Any]:
    extras = {answer.reasoning_field: answer.reasoning} if answer.reasoning else {}
    calls = [
        ChatCompletionMessageFunctionToolCall(
            id=c.id, type="function", function=Function(name=c.name, arguments=c.arguments)
        )
        for c in answer.tool_calls
    ]
    message = ChatCompletionMessage(
        role="assistant",
        content=answer.content,
        refusal=None,
        **({"tool_calls": calls} if calls else {}),
        **extras,
    )
    completion = ChatCompletion(
        id="chatcmpl-test",
        object="chat.completion",
        created=CREATED,
        model=answer.model,
        choices=[Choice(index=0, message=message, finish_reason=answer.finish, logprobs=None)],
        usage=answer.usage(),
    )
    return completion.to_dict()


def _chunk(answer: Answer, delta: ChoiceDelta | None, finish: str | None = None) -> bytes:
    choices = [] if delta is None else [ChunkChoice(index=0, delta=delta, finish_reason=finish)]
    chunk = ChatCompletionChunk(
        id="chatcmpl-test",
        object="chat.completion.chunk",
        created=CREATED,
        model=answer.model,
        choices=choices,
        **({"usage": answer.usage()} if delta is None else {}),
    )
    return orjson.dumps(chunk.to_dict())


def chat_chunks(answer: Answer, include_usage: bool) -> list[bytes]:
    """The events OpenAI streams for ``answer``: role, reasoning, content, tool calls, finish."""
    events = [_chunk(answer, ChoiceDelta(role="assistant", content=""))]
    for piece in _pieces(answer.reasoning, answer.piece):
        events.append(_chunk(answer, ChoiceDelta(**{answer.reasoning_field: piece})))
    for piece in _pieces(answer.content, answer.piece):
        events.append(_chunk(answer, ChoiceDelta(content=piece)))
    for index, call in enumerate(answer.tool_calls):
        opening = ChoiceDeltaToolCall(
            index=index,
            id=call.id,
            type="function",
            function=ChoiceDeltaToolCallFunction(name=call.name, arguments=""),
        )
        events.append(_chunk(answer, ChoiceDelta(tool_calls=[opening])))
        for piece in _pieces(call.arguments, answer.piece):
            fragment = ChoiceDeltaToolCall(
                index=index, function=ChoiceDeltaToolCallFunction(arguments=piece)
            )
            events.append(_chunk(answer, ChoiceDelta(tool_calls=[fragment])))
    events.append(_chunk(answer, ChoiceDelta(), answer.finish))
    if include_usage:
        events.append(_chunk(answer, None))
    return [*events, b"[DONE]"]


def text_completion(answer: Answer) -> dict[str, Any]:
    choice = CompletionChoice(
        index=0, text=answer.text or "", finish_reason=answer.finish, logprobs=None
    )
    completion = Completion(
        id="cmpl-test",
        object="text_completion",
        created=CREATED,
        model=answer.model,
        choices=[choice],
        usage=answer.usage(),
    )
    return completion.to_dict()


def text_chunks(answer: Answer, include_usage: bool) -> list[bytes]:
    """Streamed text completion events (``Completion`` objects; unfinished choices have a null
    finish_reason, which the SDK type does not allow, hence ``construct``)."""

    def event(text: str, finish: str | None) -> bytes:
        choice = CompletionChoice.construct(index=0, text=text, finish_reason=finish, logprobs=None)
        completion = Completion.construct(
            id="cmpl-test",
            object="text_completion",
            created=CREATED,
            model=answer.model,
            choices=[choice],
        )
        return orjson.dumps(completion.to_dict())

    events = [event(piece, None) for piece in _pieces(answer.text, answer.piece)]
    events.append(event("", answer.finish))
    if include_usage:
        usage = Completion.construct(
            id="cmpl-test",
            object="text_completion",
            created=CREATED,
            model=answer.model,
            choices=[],
            usage=answer.usage(),
        )
        events.append(orjson.dumps(usage.to_dict()))
    return [*events, b"[DONE]"]


# --- the server ------------------------------------------------------------------------------


class Dropped(Exception):
    """Raised inside a streamed body to break the connection mid-answer."""


class OpenAIServer:
    """The scripted server; start it with ``with OpenAIServer() as server: ...``."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._script: deque[Answer | Raw] = deque()
        self._lock = threading.Lock()
        self.port = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._text, methods=["POST"]),
            ]
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *answers: Answer | Raw) -> None:
        """Queue the answers to the next requests, in order."""
        with self._lock:
            self._script.extend(answers)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.received.clear()

    @property
    def last(self) -> Received:
        return self.received[-1]

    async def _next(self, request: Request) -> tuple[dict[str, Any], Answer | Raw]:
        body = orjson.loads(await request.body())
        with self._lock:
            self.received.append(Received(request.url.path, dict(request.headers), body))
            if not self._script:
                return body, Raw(500, {"error": {"message": "the test scripted no answer"}})
            return body, self._script.popleft()

    async def _chat(self, request: Request) -> Response:
        body, answer = await self._next(request)
        if isinstance(answer, Raw):
            return answer.response()
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(answer, chat_chunks(answer, include_usage))
        return Raw(200, chat_completion(answer)).response()

    async def _text(self, request: Request) -> Response:
        body, answer = await self._next(request)
        if isinstance(answer, Raw):
            return answer.response()
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(answer, text_chunks(answer, include_usage))
        return Raw(200, text_completion(answer)).response()

    @staticmethod
    def _stream(answer: Answer, events: list[bytes]) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for sent, event in enumerate(events):
                if sent == answer.drop_after:
                    raise Dropped("the test breaks this connection")
                if sent == answer.cut_after:
                    return
                yield b"data: " + event + b"\n\n"

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
            name="openai-test-server",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the OpenAI test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> OpenAIServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
