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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
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
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from servers._local import Dropped as Dropped
from servers._local import LocalServer, Raw, event_stream

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


class OpenAIServer(LocalServer[Answer | Raw, Received]):
    """The scripted server; start it with ``with OpenAIServer() as server: ...``."""

    _label = "OpenAI"
    _prefix = "/v1"

    def __init__(self) -> None:
        super().__init__(
            [
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._text, methods=["POST"]),
            ]
        )

    async def _next(self, request: Request) -> tuple[dict[str, Any], Answer | Raw]:
        body = orjson.loads(await request.body())
        answer = self._take(Received(request.url.path, dict(request.headers), body))
        if answer is None:
            return body, Raw(500, {"error": {"message": "the test scripted no answer"}})
        return body, answer

    async def _chat(self, request: Request) -> Response:
        return await self._answer(request, chat_completion, chat_chunks)

    async def _text(self, request: Request) -> Response:
        return await self._answer(request, text_completion, text_chunks)

    async def _answer(
        self,
        request: Request,
        plain: Callable[[Answer], dict[str, Any]],
        streamed: Callable[[Answer, bool], list[bytes]],
    ) -> Response:
        body, answer = await self._next(request)
        if isinstance(answer, Raw):
            return answer.response()
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(answer, streamed(answer, include_usage))
        return Raw(200, plain(answer)).response()

    @staticmethod
    def _stream(answer: Answer, events: list[bytes]) -> StreamingResponse:
        return event_stream(
            events,
            lambda event: b"data: " + event + b"\n\n",
            cut_after=answer.cut_after,
            drop_after=answer.drop_after,
        )
