"""OpenAI-compatible providers: chat completions and text completions over HTTP.

:class:`OpenAIChat` speaks ``POST {base_url}/chat/completions`` — OpenAI itself, and the
servers that copy its protocol (vLLM, llama.cpp's server, Ollama, LM Studio, ...).
:class:`OpenAIText` speaks ``POST {base_url}/completions`` for base models: it renders the
conversation into one prompt with a template from :mod:`rar.llm.providers.templates`.

Both share one request pipeline: build the JSON body, send it (sync, async or streamed), and
parse the answer. A streamed answer is assembled into the same JSON shape as a plain one and
parsed by the same code, so streaming never changes the :class:`Response` a request gets.

The key comes from ``api_key`` or the environment variable ``api_key_env``; it is sent as a
bearer token and never appears in an error, a repr or a record. Servers on loopback or private
addresses get no Authorization header when no key is set (local servers rarely want one).
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx2
import orjson

from rar._version import __version__
from rar.errors import (
    ConfigError,
    MalformedResponseError,
    MissingAPIKeyError,
    StreamInterruptedError,
)
from rar.llm.provider import ChunkCallback
from rar.llm.providers._http import (
    DEFAULT_TIMEOUT,
    json_body,
    raise_for_status,
    sse_events,
    transport_error,
)
from rar.llm.providers.templates import PromptTemplate, get_template
from rar.llm.types import (
    FinishReason,
    Message,
    Request,
    Response,
    ResponseFormat,
    StreamChunk,
    ToolCall,
    Usage,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAIChat", "OpenAIText", "is_local_url"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH = {reason.value: reason for reason in FinishReason if reason != FinishReason.OTHER}
_FINISH["function_call"] = FinishReason.TOOL_CALLS  # the pre-tools name of tool_calls


def is_local_url(url: str) -> bool:
    """Whether ``url`` points at this machine or a private network (no key needed there)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


# --- wire format: requests ------------------------------------------------------------------


def _wire_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        wire["content"] = message.content
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    else:
        wire["content"] = message.content or ""
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id
    return wire


def _wire_tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _wire_response_format(fmt: ResponseFormat) -> dict[str, Any]:
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.json_schema or {}}
    if fmt.strict is not None:
        schema["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": schema}


def _sampling(request: Request, stop: tuple[str, ...]) -> dict[str, Any]:
    values = {
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
        "stop": list(stop) or None,
    }
    return {key: value for key, value in values.items() if value is not None}


# --- wire format: answers -------------------------------------------------------------------


def _text(value: Any) -> str | None:
    """Text of a content field: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(value, list):
        value = "".join(p.get("text") or "" for p in value if isinstance(p, dict))
    return value if isinstance(value, str) and value else None


def _count(data: Any, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) else 0


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        input_tokens=_count(data, "prompt_tokens"),
        cached_input_tokens=_count(data.get("prompt_tokens_details"), "cached_tokens"),
        output_tokens=_count(data, "completion_tokens"),
        reasoning_tokens=_count(data.get("completion_tokens_details"), "reasoning_tokens"),
    )


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value or "{}"
    return "{}" if value is None else orjson.dumps(value).decode()


def _first_choice(data: dict[str, Any], provider: str) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        problem = "no `choices`" if choices is None else "an empty or invalid `choices`"
        keys = ", ".join(sorted(data)) or "none"
        raise MalformedResponseError(f"the answer has {problem} (keys: {keys})", provider=provider)
    return choices[0]


@dataclass
class _CallSlot:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What a stream delivered so far, reassembled into the shape of a plain answer."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _CallSlot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    model: str = ""
    done: bool = False

    def feed(self, delta: dict[str, Any], on_chunk: ChunkCallback) -> None:
        reasoning = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        if reasoning:
            self.reasoning.append(reasoning)
            on_chunk(StreamChunk(kind="reasoning", text=reasoning))
        content = _text(delta.get("content")) or _text(delta.get("refusal"))
        if content:
            self.content.append(content)
            on_chunk(StreamChunk(kind="content", text=content))
        for position, part in enumerate(delta.get("tool_calls") or ()):
            if not isinstance(part, dict):
                continue
            index = part.get("index", position)
            slot = self.calls.setdefault(index if isinstance(index, int) else position, _CallSlot())
            function = part.get("function")
            function = function if isinstance(function, dict) else {}
            slot.id = slot.id or part.get("id")
            slot.name = slot.name or function.get("name")
            fragment = function.get("arguments")
            if fragment is not None:  # a string fragment, or (some servers) the whole object
                slot.arguments.append(
                    fragment if isinstance(fragment, str) else _arguments(fragment)
                )

    def answer(self, choice: dict[str, Any]) -> dict[str, Any]:
        """A plain (non-streamed) answer holding ``choice``, with what the stream said around it."""
        choice = {"index": 0, "finish_reason": self.finish_reason, **choice}
        return {"model": self.model, "choices": [choice], "usage": self.usage}

    def message(self) -> dict[str, Any]:
        calls = [
            {"id": s.id, "function": {"name": s.name, "arguments": "".join(s.arguments)}}
            for _, s in sorted(self.calls.items())
        ]
        content, reasoning = "".join(self.content), "".join(self.reasoning)
        return {"content": content, "reasoning_content": reasoning, "tool_calls": calls}


# --- the providers --------------------------------------------------------------------------


class _OpenAICompatible:
    name = "openai"
    path = "/chat/completions"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: httpx2.Timeout | float | None = DEFAULT_TIMEOUT,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
        require_key: bool | None = None,
        key_reference: str | None = None,
    ) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"base_url must start with http:// or https://, got {url!r}")
        self.model = model
        self.base_url = url.rstrip("/")
        self.api_key_env = api_key_env
        self._api_key = api_key or os.environ.get(api_key_env) or None
        self.key_reference = key_reference or (
            "the api_key argument" if api_key else f"env:{api_key_env}"
        )
        self.require_key = not is_local_url(self.base_url) if require_key is None else require_key
        self.timeout = timeout
        self.extra_headers = dict(extra_headers or {})
        self._http_client = http_client
        self._owns_client = http_client is None
        self._async_http_client = async_http_client
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        extra = f", template={t.name!r}" if (t := getattr(self, "template", None)) else ""
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}{extra})"

    # --- the calls ---

    def complete(self, request: Request) -> Response:
        url, headers, content = self._prepare(request, stream=False)
        try:
            answer = self._client().post(url, content=content, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        return self._answer(answer, request)

    async def acomplete(self, request: Request) -> Response:
        url, headers, content = self._prepare(request, stream=False)
        try:
            if self._async_http_client is not None:
                answer = await self._async_http_client.post(url, content=content, headers=headers)
            else:
                async with httpx2.AsyncClient(timeout=self.timeout) as client:
                    answer = await client.post(url, content=content, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        return self._answer(answer, request)

    def stream(self, request: Request, on_chunk: ChunkCallback) -> Response:
        url, headers, content = self._prepare(request, stream=True)
        state = _StreamState()
        try:
            with self._client().stream("POST", url, content=content, headers=headers) as answer:
                raise_for_status(answer, provider=self.name, key_reference=self.key_reference)
                if answer.headers.get("content-type", "").startswith("application/json"):
                    answer.read()  # the server ignored "stream": take the whole answer at once
                    return self._replay(self._answer(answer, request), on_chunk)
                self._read_stream(answer, state, on_chunk)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        if not state.done and state.finish_reason is None:
            raise StreamInterruptedError(
                "the stream ended before the answer was complete (no finish_reason and no "
                "[DONE]); the partial answer was discarded",
                provider=self.name,
            )
        return self._parse(state.answer(self._streamed_choice(state)), request)

    @staticmethod
    def _replay(response: Response, on_chunk: ChunkCallback) -> Response:
        if response.reasoning:
            on_chunk(StreamChunk(kind="reasoning", text=response.reasoning))
        if response.content:
            on_chunk(StreamChunk(kind="content", text=response.content))
        return response

    def close(self) -> None:
        """Close the HTTP client this provider created (one passed in stays open)."""
        if self._owns_client and self._http_client is not None:
            self._http_client.close()
            self._http_client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- shared plumbing ---

    def _client(self) -> httpx2.Client:
        with self._lock:
            if self._http_client is None:
                self._http_client = httpx2.Client(timeout=self.timeout)
            return self._http_client

    def _headers(self) -> dict[str, str]:
        if self._api_key is None and self.require_key:
            raise MissingAPIKeyError(self.name, [self.api_key_env])
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": f"rar/{__version__}",
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return {**headers, **self.extra_headers}

    def _prepare(self, request: Request, *, stream: bool) -> tuple[str, dict[str, str], bytes]:
        body = self._body(request)
        body = {"model": request.model or self.model, **body}
        if not body["model"]:
            raise ConfigError(f"{self.name}: no model named, in the request or the provider")
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return f"{self.base_url}{self.path}", self._headers(), orjson.dumps(body)

    def _answer(self, answer: httpx2.Response, request: Request) -> Response:
        raise_for_status(answer, provider=self.name, key_reference=self.key_reference)
        return self._parse(json_body(answer, provider=self.name), request)

    def _read_stream(
        self, answer: httpx2.Response, state: _StreamState, on_chunk: ChunkCallback
    ) -> None:
        try:
            for _event, data in sse_events(answer.iter_lines()):
                if data.strip() == "[DONE]":
                    state.done = True
                    return
                chunk = self._decode_chunk(data)
                state.model = str(chunk.get("model") or state.model)
                state.usage = chunk.get("usage") or state.usage
                for choice in chunk.get("choices") or ():
                    if isinstance(choice, dict) and choice.get("index", 0) == 0:
                        state.feed(self._delta(choice), on_chunk)
                        state.finish_reason = choice.get("finish_reason") or state.finish_reason
        except httpx2.TransportError as exc:
            raise StreamInterruptedError(
                f"the connection dropped mid-stream ({type(exc).__name__}: {exc}); "
                "the partial answer was discarded",
                provider=self.name,
            ) from exc

    def _decode_chunk(self, data: str) -> dict[str, Any]:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponseError(
                f"a stream event is not JSON ({exc}): {data[:200]!r}", provider=self.name
            ) from exc
        if not isinstance(chunk, dict):
            raise MalformedResponseError("a stream event is not a JSON object", provider=self.name)
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamInterruptedError(
                f"the server reported an error mid-stream: {message}", provider=self.name
            )
        return chunk

    def _response(
        self,
        data: dict[str, Any],
        choice: dict[str, Any],
        request: Request,
        *,
        content: str | None,
        reasoning: str | None = None,
        tool_calls: tuple[ToolCall, ...] = (),
    ) -> Response:
        raw = choice.get("finish_reason")
        finish = _FINISH.get(raw, FinishReason.OTHER) if raw else FinishReason.STOP
        if tool_calls and finish == FinishReason.STOP:  # Ollama and others say "stop" here
            finish = FinishReason.TOOL_CALLS
        return Response(
            content=content,
            tool_calls=tool_calls,
            reasoning=reasoning,
            finish_reason=finish,
            usage=_usage(data.get("usage")),
            model=str(data.get("model") or request.model or self.model or ""),
            provider=self.name,
        )

    # --- what differs between the endpoints ---

    def _body(self, request: Request) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any], request: Request) -> Response:
        raise NotImplementedError

    def _delta(self, choice: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _streamed_choice(self, state: _StreamState) -> dict[str, Any]:
        raise NotImplementedError


class OpenAIChat(_OpenAICompatible):
    """An OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp, Ollama)."""

    name = "openai"
    path = "/chat/completions"

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": [_wire_message(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [
                {"type": "function", "function": t.model_dump(mode="json")} for t in request.tools
            ]
        if request.tool_choice:
            body["tool_choice"] = _wire_tool_choice(request.tool_choice)
        body.update(_sampling(request, request.stop))
        if request.response_format is not None:
            body["response_format"] = _wire_response_format(request.response_format)
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        return body

    def _parse(self, data: dict[str, Any], request: Request) -> Response:
        choice = _first_choice(data, self.name)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedResponseError("`choices[0]` has no `message`", provider=self.name)
        calls = []
        for i, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not function.get("name"):
                raise MalformedResponseError(
                    f"`choices[0].message.tool_calls[{i}]` has no `function.name`",
                    provider=self.name,
                )
            call_id = str(call.get("id") or f"call_{i}")
            arguments = _arguments(function.get("arguments"))
            calls.append(ToolCall(id=call_id, name=str(function["name"]), arguments=arguments))
        return self._response(
            data,
            choice,
            request,
            content=_text(message.get("content")) or _text(message.get("refusal")),
            reasoning=_text(message.get("reasoning_content")) or _text(message.get("reasoning")),
            tool_calls=tuple(calls),
        )

    def _delta(self, choice: dict[str, Any]) -> dict[str, Any]:
        delta = choice.get("delta")
        return delta if isinstance(delta, dict) else {}

    def _streamed_choice(self, state: _StreamState) -> dict[str, Any]:
        return {"message": state.message()}


class OpenAIText(_OpenAICompatible):
    """An OpenAI-compatible ``/completions`` endpoint for base models, with a prompt template.

    ``template`` is a template name (``"chatml"``, ``"llama3"``, ``"none"``) or a
    :class:`~rar.llm.providers.templates.PromptTemplate`; its stop strings are sent in front
    of the request's own. Tools and structured output need :class:`OpenAIChat`.
    """

    name = "openai-text"
    path = "/completions"

    def __init__(
        self, model: str | None = None, *, template: str | PromptTemplate = "none", **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.template = get_template(template)

    def _body(self, request: Request) -> dict[str, Any]:
        if request.tools:
            raise ConfigError(
                f"{self.name}: text completion cannot offer tools to the model; "
                "use OpenAIChat (/chat/completions) for requests with tools"
            )
        if request.response_format is not None and request.response_format.type != "text":
            raise ConfigError(
                f"{self.name}: text completion has no structured output "
                f"({request.response_format.type}); use OpenAIChat for response_format"
            )
        stop = tuple(dict.fromkeys((*self.template.stop, *request.stop)))
        return {"prompt": self.template.render(request.messages), **_sampling(request, stop)}

    def _parse(self, data: dict[str, Any], request: Request) -> Response:
        choice = _first_choice(data, self.name)
        text = choice.get("text")
        if not isinstance(text, str):
            raise MalformedResponseError("`choices[0]` has no `text`", provider=self.name)
        return self._response(data, choice, request, content=text or None)

    def _delta(self, choice: dict[str, Any]) -> dict[str, Any]:
        return {"content": choice.get("text")}

    def _streamed_choice(self, state: _StreamState) -> dict[str, Any]:
        return {"text": "".join(state.content)}
