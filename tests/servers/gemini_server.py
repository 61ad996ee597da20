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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
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
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from servers._local import Dropped as Dropped
from servers._local import LocalServer, Raw, event_stream

# --- answers built with the SDK's types ---------------------------------------------------------


def part(text: str, *, thought: bool = False) -> Part:
    return Part(text=text, thought=True) if thought else Part(text=text)


def call(name: str, **arguments: Any) -> Part:
    return Part(function_call=FunctionCall(name=name, args=arguments))


def call_with_id(call_id: str, name: str, **arguments: Any) -> Part:
    """A ``functionCall`` carrying the id the model gave it (as Gemini 3 does)."""
    return Part(function_call=FunctionCall(id=call_id, name=name, args=arguments))


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
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]


# --- the server ----------------------------------------------------------------------------------


class GeminiServer(LocalServer[GenerateContentResponse | Stream | Raw, Received]):
    """The scripted server; start it with ``with GeminiServer() as server: ...``.

    A ``GenerateContentResponse`` in the script answers a streaming request with its chunks."""

    _label = "Gemini"
    _prefix = "/v1beta"

    def __init__(self) -> None:
        super().__init__([Route("/v1beta/{rest:path}", self._models, methods=["POST"])])

    @property
    def url(self) -> str:
        """The server's root (what the SDK takes as ``base_url``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API root RAR's provider takes (with the version)."""
        return super().base_url

    async def _models(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        path = request.url.path
        answer = self._take(Received(path, request.url.query, dict(request.headers), body))
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
        def frame(chunk: BaseModel | dict[str, Any] | bytes) -> bytes:
            if isinstance(chunk, bytes):
                data = chunk
            else:
                data = orjson.dumps(chunk if isinstance(chunk, dict) else dump(chunk))
            return b"data: " + data + b"\r\n\r\n"

        return event_stream(
            stream.chunks, frame, cut_after=stream.cut_after, drop_after=stream.drop_after
        )
