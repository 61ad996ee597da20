"""The recorded result of an HTTP exchange, and the response rebuilt from it.

A result is a JSON value::

    {"http": {"status": 200, "headers": [["content-type", "text/event-stream"], ...],
              "body": "data: {...}\\n\\ndata: [DONE]\\n\\n", "encoding": "utf-8",
              "stream": true},
     "response": {...},            # the neutral answer (rar.llm.Response), when there is one
     "served_by": {"provider": "openai", "model": "gpt-4o-mini"},
     "cached": false}

``body`` holds the bytes of the answer exactly as the SDK received them, after transfer and
content decoding (gzip is undone, so ``content-encoding`` and ``content-length`` are not kept),
as UTF-8 text — or, for bytes that are not UTF-8, as ``latin-1`` text (one character per byte).
A streamed answer cut short has ``"interrupted": "<why>"`` (and ``"error_type"``): a replay
serves the same bytes and then raises the same transport error. One the consumer closed early
has ``"closed": true``. ``response`` is there only for a complete answer with status 200 that
RAR's provider code reads (see :func:`neutral`): that is what makes a result cacheable, and
what a :class:`~rar.llm.client.Client` reads from a cache hit.

Kept response headers: all but the hop-by-hop ones, ``content-length``, ``content-encoding``,
``set-cookie`` and anything that names a credential; values pass the run's redactor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpx2
import orjson

from rar.llm.types import FinishReason, Response, ToolCall, Usage

if TYPE_CHECKING:
    from rar.interop._calls import Call

_DROPPED_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "set-cookie",
        "cookie",
        "authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
    }
)


def kept_headers(headers: httpx2.Headers) -> list[list[str]]:
    """The response headers a record keeps, in order, names lower-cased."""
    return kept_pairs(headers.multi_items())


def kept_pairs(headers: Iterable[tuple[str, str]]) -> list[list[str]]:
    """:func:`kept_headers` of (name, value) pairs."""
    kept = []
    for name, value in headers:
        lower = name.lower()
        if lower not in _DROPPED_HEADERS:
            kept.append([lower, value])
    return kept


def is_event_stream(headers: httpx2.Headers) -> bool:
    kind = headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind == "text/event-stream"


def encode_body(data: bytes) -> tuple[str, str]:
    """(text, encoding) of a body for the record."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def body_bytes(http: dict[str, Any]) -> bytes:
    text = str(http.get("body", ""))
    return text.encode("latin-1" if http.get("encoding") == "latin-1" else "utf-8")


def result_of(
    call: Call,
    status: int,
    headers: list[list[str]],
    body: bytes,
    *,
    streamed: bool,
    interrupted: tuple[str, str] | None = None,
    closed: bool = False,
) -> dict[str, Any]:
    """The result to record for an exchange."""
    text, encoding = encode_body(body)
    http: dict[str, Any] = {"status": status, "headers": headers, "body": text}
    if encoding != "utf-8":
        http["encoding"] = encoding
    if streamed:
        http["stream"] = True
    if interrupted is not None:
        http["error_type"], http["interrupted"] = interrupted
    if closed:
        http["closed"] = True
    result: dict[str, Any] = {"http": http}
    if call.kind == "llm":
        answer = None if interrupted or closed else neutral(call, status, body, streamed)
        if answer is not None:
            result["response"] = answer.plain()
        model = answer.model if answer is not None and answer.model else call.model
        result["served_by"] = {"provider": call.provider, "model": model}
        result["cached"] = False
    return result


# --- the response handed to the SDK ------------------------------------------------------------


def http_of(result: Any) -> dict[str, Any]:
    """The ``http`` part of a recorded result (RunError when it has none)."""
    http = result.get("http") if isinstance(result, dict) else None
    if not isinstance(http, dict):
        from rar.errors import RunError

        raise RunError(
            "the record holds this model call's answer without its HTTP bytes (it was recorded "
            "by rar.llm.Client, not through the recording transport), so it cannot be served "
            "to an SDK; record the run again through the transport"
        )
    return http


def replayed(result: dict[str, Any]) -> httpx2.Response:
    """The HTTP response a recorded result stands for."""
    http = http_of(result)
    headers = [(str(k), str(v)) for k, v in http.get("headers", ())]
    body = body_bytes(http)
    if http.get("stream") or http.get("interrupted"):
        return httpx2.Response(int(http["status"]), headers=headers, stream=_Recorded(body, http))
    return httpx2.Response(int(http["status"]), headers=headers, content=body)


def transport_error(error_type: str, message: str) -> httpx2.TransportError:
    """The httpx2 transport error named ``error_type`` (a RemoteProtocolError otherwise)."""
    cls = getattr(httpx2, error_type, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx2.TransportError)):
        cls = httpx2.RemoteProtocolError
    return cls(message)


class _Recorded(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """Recorded stream bytes served again; an interrupted one ends with its recorded error."""

    def __init__(self, body: bytes, http: dict[str, Any]) -> None:
        self._body = body
        self._http = http

    def _end(self) -> None:
        if self._http.get("interrupted"):
            raise transport_error(
                str(self._http.get("error_type", "")), str(self._http["interrupted"])
            )

    def __iter__(self) -> Iterator[bytes]:
        if self._body:
            yield self._body
        self._end()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body
        self._end()


# --- the neutral answer ------------------------------------------------------------------------


def neutral(call: Call, status: int, body: bytes, streamed: bool) -> Response | None:
    """The answer as a :class:`~rar.llm.types.Response` read by RAR's provider code, or None
    when it is not a complete, successful model answer RAR can read."""
    if call.kind != "llm" or status != 200:
        return None
    try:
        if streamed:
            return _streamed(call, body)
        data = orjson.loads(body)
        return _plain(call, data) if isinstance(data, dict) else None
    except Exception:  # an answer RAR cannot read is recorded all the same, just not cached
        return None


def _plain(call: Call, data: dict[str, Any]) -> Response | None:
    if call.provider == "anthropic":
        from rar.llm.providers import _anthropic_wire

        return _anthropic_wire.parse_message(data, model=call.model)
    if call.provider == "gemini":
        from rar.llm.providers import _google

        if call.endpoint == "embed":
            return Response(model=call.model, provider="gemini")
        return _google.parse_response(data, model=call.model)
    if call.endpoint == "embeddings":
        return _openai_usage_only(call, data)
    if call.endpoint == "responses":
        return _openai_responses(call, data)
    return _openai_choices(call, data)


def _openai_choices(call: Call, data: dict[str, Any]) -> Response:
    from rar.llm.providers import _openai_wire as wire

    choice = wire.first_choice(data, "openai")
    calls: tuple[ToolCall, ...] = ()
    reasoning = None
    if call.endpoint == "text":
        content = choice.get("text") if isinstance(choice.get("text"), str) else None
    else:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ValueError("no message")

        def text(key: str) -> str | None:
            value = message.get(key)
            if value is None or type(value) is str:  # the common case, as wire.text reads it
                return value or None
            return wire.text(value, f"choices[0].message.{key}", "openai")

        content = text("content") or text("refusal")
        reasoning = text("reasoning_content") or text("reasoning")
        calls = wire.tool_calls(message, "openai")
    return Response(
        content=content or None,
        tool_calls=calls,
        reasoning=reasoning,
        finish_reason=wire.finish_reason(choice.get("finish_reason"), calls, "openai"),
        usage=wire.usage(data.get("usage")),
        model=str(data.get("model") or call.model),
        provider="openai",
    )


def _openai_usage_only(call: Call, data: dict[str, Any]) -> Response:
    from rar.llm.providers import _openai_wire as wire

    return Response(
        usage=wire.usage(data.get("usage")),
        model=str(data.get("model") or call.model),
        provider="openai",
    )


def _count(data: Any, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _openai_responses(call: Call, data: dict[str, Any]) -> Response | None:
    """A Responses API ``response`` object: output text, function calls, reasoning summary."""
    if data.get("status") not in (None, "completed", "incomplete"):
        return None
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for item in data.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            texts.extend(
                str(part.get("text") or "")
                for part in item.get("content") or ()
                if part.get("type") == "output_text"
            )
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    id=str(item.get("call_id") or item.get("id")),
                    name=str(item["name"]),
                    arguments=str(item.get("arguments") or "{}"),
                )
            )
        elif kind == "reasoning":
            thoughts.extend(str(s.get("text") or "") for s in item.get("summary") or ())
    usage = data.get("usage") or {}
    finish = FinishReason.TOOL_CALLS if calls else FinishReason.STOP
    if data.get("status") == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        finish = FinishReason.LENGTH if reason == "max_output_tokens" else FinishReason.OTHER
    return Response(
        content="".join(texts) or None,
        tool_calls=tuple(calls),
        reasoning="".join(thoughts) or None,
        finish_reason=finish,
        usage=Usage(
            input_tokens=_count(usage, "input_tokens"),
            cached_input_tokens=_count(usage.get("input_tokens_details"), "cached_tokens"),
            output_tokens=_count(usage, "output_tokens"),
            reasoning_tokens=_count(usage.get("output_tokens_details"), "reasoning_tokens"),
        ),
        model=str(data.get("model") or call.model),
        provider="openai",
    )


_RECORDED: list[httpx2.Request] = []  # the one request every recorded stream is read under


def _events(body: bytes, provider: str) -> Iterator[tuple[str, str]]:
    from rar.llm.providers._http import sse_events

    if not _RECORDED:  # EventSource wants a request; one is parsed once, not per answer
        _RECORDED.append(httpx2.Request("GET", "http://recorded.invalid/"))
    response = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body, request=_RECORDED[0]
    )
    return sse_events(response, provider=provider)


def _streamed(call: Call, body: bytes) -> Response | None:
    if call.provider == "anthropic":
        from rar.llm.providers import _anthropic_wire

        assembler = _anthropic_wire.StreamAssembler(call.model)
        for event, data in _events(body, "anthropic"):
            assembler.feed(event, data)
        return assembler.response()
    if call.provider == "gemini":
        from rar.llm.providers import _google

        gemini = _google.StreamAssembler(call.model)
        for _, data in _events(body, "gemini"):
            gemini.feed(data)
        return gemini.response()
    if call.endpoint == "responses":
        final = None
        for _, data in _events(body, "openai"):
            event = orjson.loads(data)
            if event.get("type") in ("response.completed", "response.incomplete"):
                final = event.get("response")
        return _openai_responses(call, final) if isinstance(final, dict) else None
    return _openai_stream(call, body)


def _openai_stream(call: Call, body: bytes) -> Response | None:
    from rar.llm.providers import _openai_wire as wire

    state = wire.StreamState(provider="openai")
    for _, data in _events(body, "openai"):
        if data.strip() == "[DONE]":
            state.done = True
            continue
        chunk = wire.decode_chunk(data, "openai")
        state.model = str(chunk.get("model") or state.model)
        state.usage = chunk.get("usage") or state.usage
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                delta: dict[str, Any]
                if call.endpoint == "text":
                    delta = {"content": choice.get("text")}
                else:
                    given = choice.get("delta")
                    delta = given if isinstance(given, dict) else {}
                state.feed(delta, lambda _chunk: None)
                state.finish_reason = choice.get("finish_reason") or state.finish_reason
    if not state.done and state.finish_reason is None:
        return None
    if call.endpoint == "text":
        answer = state.answer({"text": "".join(state.content)})
    else:
        answer = state.answer({"message": state.message()})
    return _openai_choices(call, answer)
