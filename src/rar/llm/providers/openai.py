"""OpenAI-compatible providers: chat completions and text completions over HTTP.

:class:`OpenAIChat` speaks ``POST {base_url}/chat/completions`` — OpenAI itself, and the
servers that copy its protocol (vLLM, llama.cpp's server, Ollama, LM Studio, ...).
:class:`OpenAIText` speaks ``POST {base_url}/completions`` for base models: it renders the
conversation into one prompt with a template from :mod:`rar.llm.providers.templates`.

Both share one request pipeline: build the JSON body, send it (sync, async or streamed), and
parse the answer. A streamed answer is assembled into the same JSON shape as a plain one and
parsed by the same code, so streaming never changes the :class:`Response` a request gets.

A provider made without a model can ask its server for one: :meth:`detect_model` reads
``GET {base_url}/models`` (what a profile with an empty ``model`` does when it connects).

The key comes from ``api_key`` or the environment variable ``api_key_env``; it is sent as a
bearer token and never appears in an error, a repr or a record. Servers on loopback or private
addresses get no Authorization header when no key is set (local servers rarely want one).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any
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
from rar.llm.providers import _openai_wire as wire
from rar.llm.providers._http import (
    DEFAULT_TIMEOUT,
    HTTPProvider,
    expect,
    json_body,
    raise_for_status,
)
from rar.llm.providers.templates import PromptTemplate, get_template
from rar.llm.types import Request, Response, StreamChunk, ToolCall

__all__ = ["DEFAULT_BASE_URL", "OpenAIChat", "OpenAIText", "is_local_url"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


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


def _first_model(data: Any) -> str | None:
    """The first model id of a ``/models`` answer: OpenAI's ``{"data": [{"id"}]}``, or the
    ``{"models": [{"model" | "name"}]}`` that llama.cpp's server also sends."""
    if not isinstance(data, dict):
        return None
    for entry in data.get("data") or ():
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            return str(entry["id"])
    for entry in data.get("models") or ():
        if isinstance(entry, dict):
            for key in ("model", "name", "id"):
                if isinstance(entry.get(key), str) and entry[key]:
                    return str(entry[key])
    return None


# --- the providers --------------------------------------------------------------------------


class _OpenAICompatible(HTTPProvider):
    name = "openai"
    path = "/chat/completions"
    base_url_variable = "OPENAI_BASE_URL"
    default_base_url = DEFAULT_BASE_URL

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
        super().__init__(
            model,
            base_url=base_url,
            timeout=timeout,
            http_client=http_client,
            async_http_client=async_http_client,
            extra_headers=extra_headers,
        )
        self.api_key_env = api_key_env
        self._api_key = api_key or os.environ.get(api_key_env) or None
        self.key_reference = key_reference or (
            "the api_key argument" if api_key else f"env:{api_key_env}"
        )
        self.require_key = not is_local_url(self.base_url) if require_key is None else require_key

    def _repr_extra(self) -> str:
        return f", template={t.name!r}" if (t := getattr(self, "template", None)) else ""

    def detect_model(self) -> str:
        """The first model id the server lists at ``GET {base_url}/models`` (local servers such
        as llama.cpp, vLLM, Ollama and LM Studio list what they serve); a :class:`ConfigError`
        when it cannot be asked or lists none. Used for profiles that leave ``model`` empty."""
        url = f"{self.base_url}/models"
        fix = 'start the server, or name the model in the profile (model = "...")'
        if (urlsplit(self.base_url).hostname or "").lower() == wire.OFFICIAL_HOST:
            raise ConfigError(
                f"{self.name}: no model named, and {self.base_url} serves many; the model is "
                "detected only from a server of your own (give its base_url): name the model"
            )
        headers = {k: v for k, v in self._headers().items() if k != "Content-Type"}
        try:
            answer = self._http().get(url, headers=headers)
        except httpx2.TransportError as exc:
            raise ConfigError(
                f"{self.name}: no model named, and asking {url} which one it serves failed "
                f"({type(exc).__name__}: {exc}); {fix}"
            ) from exc
        if answer.status_code >= 400:
            raise ConfigError(
                f"{self.name}: no model named, and {url} answered HTTP {answer.status_code} "
                f"when asked which model it serves; {fix}"
            )
        try:
            data = orjson.loads(answer.content)
        except orjson.JSONDecodeError:
            data = None
        model = _first_model(data)
        if model is None:
            raise ConfigError(
                f"{self.name}: no model named, and {url} lists no model (expected "
                '{"data": [{"id": ...}, ...]}); load a model into the server, or name it in '
                "the profile"
            )
        return model

    # --- the calls ---

    def complete(self, request: Request) -> Response:
        url, headers, content = self._prepare(request, stream=False)
        return self._answer(self._post(url, content=content, headers=headers), request)

    async def acomplete(self, request: Request) -> Response:
        url, headers, content = self._prepare(request, stream=False)
        return self._answer(await self._apost(url, content=content, headers=headers), request)

    def stream(self, request: Request, on_chunk: ChunkCallback) -> Response:
        url, headers, content = self._prepare(request, stream=True)
        state = wire.StreamState(provider=self.name)
        with self._post_stream(url, content=content, headers=headers) as answer:
            raise_for_status(answer, provider=self.name, key_reference=self.key_reference)
            if answer.headers.get("content-type", "").startswith("application/json"):
                answer.read()  # the server ignored "stream": take the whole answer at once
                return self._replay(self._answer(answer, request), on_chunk)
            self._read_stream(answer, state, on_chunk)
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

    # --- shared plumbing ---

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
        body = {"model": self._model(request), **body}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return f"{self.base_url}{self.path}", self._headers(), orjson.dumps(body)

    def _answer(self, answer: httpx2.Response, request: Request) -> Response:
        raise_for_status(answer, provider=self.name, key_reference=self.key_reference)
        return self._parse(json_body(answer, provider=self.name), request)

    def _read_stream(
        self, answer: httpx2.Response, state: wire.StreamState, on_chunk: ChunkCallback
    ) -> None:
        try:
            for _event, data in self._events(answer):
                if state.done:
                    continue  # read to the end, so the connection goes back to the pool
                if data.strip() == "[DONE]":
                    state.done = True
                    continue
                chunk = wire.decode_chunk(data, self.name)
                state.model = str(chunk.get("model") or state.model)
                state.usage = chunk.get("usage") or state.usage
                for choice in expect(chunk.get("choices"), list, "choices", self.name) or ():
                    if isinstance(choice, dict) and choice.get("index", 0) == 0:
                        state.feed(self._delta(choice), on_chunk)
                        finish = choice.get("finish_reason")
                        finish = expect(finish, str, "choices[0].finish_reason", self.name)
                        state.finish_reason = finish or state.finish_reason
        except httpx2.TransportError as exc:
            raise StreamInterruptedError(
                f"the connection dropped mid-stream ({type(exc).__name__}: {exc}); "
                "the partial answer was discarded",
                provider=self.name,
            ) from exc

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
        return Response(
            content=content,
            tool_calls=tool_calls,
            reasoning=reasoning,
            finish_reason=wire.finish_reason(choice.get("finish_reason"), tool_calls, self.name),
            usage=wire.usage(data.get("usage")),
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

    def _streamed_choice(self, state: wire.StreamState) -> dict[str, Any]:
        raise NotImplementedError


class OpenAIChat(_OpenAICompatible):
    """An OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp, Ollama)."""

    name = "openai"
    path = "/chat/completions"

    def _body(self, request: Request) -> dict[str, Any]:
        token_limit = wire.max_tokens_field(self._model(request), self.base_url)
        return wire.chat_body(request, token_limit=token_limit)

    def _parse(self, data: dict[str, Any], request: Request) -> Response:
        choice = wire.first_choice(data, self.name)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedResponseError("`choices[0]` has no `message`", provider=self.name)

        def text(key: str) -> str | None:
            return wire.text(message.get(key), f"choices[0].message.{key}", self.name)

        return self._response(
            data,
            choice,
            request,
            content=text("content") or text("refusal"),
            reasoning=text("reasoning_content") or text("reasoning"),
            tool_calls=wire.tool_calls(message, self.name),
        )

    def _delta(self, choice: dict[str, Any]) -> dict[str, Any]:
        delta = choice.get("delta")
        return delta if isinstance(delta, dict) else {}

    def _streamed_choice(self, state: wire.StreamState) -> dict[str, Any]:
        return {"message": state.message()}


class OpenAIText(_OpenAICompatible):
    """An OpenAI-compatible ``/completions`` endpoint for base models, with a prompt template.

    ``template`` is a template name (``"chatml"``, ``"llama3"``, ``"harmony"`` or
    ``"gpt-oss"``, ``"mistral"``, ``"mistral-v3"``, ``"none"`` or ``"no"``) or a
    :class:`~rar.llm.providers.templates.PromptTemplate`; its stop strings are sent in front
    of the request's own, and a template that parses its answers (harmony) splits the text
    into content and reasoning. Tools and structured output need :class:`OpenAIChat`.
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
        prompt = self.template.render(request.messages, reasoning_effort=request.reasoning_effort)
        return {"prompt": prompt, **wire.sampling(request, stop)}

    def _parse(self, data: dict[str, Any], request: Request) -> Response:
        choice = wire.first_choice(data, self.name)
        text = choice.get("text")
        if not isinstance(text, str):
            raise MalformedResponseError("`choices[0]` has no `text`", provider=self.name)
        content, reasoning = self.template.split(text)  # harmony: final and analysis apart
        return self._response(data, choice, request, content=content, reasoning=reasoning)

    def _delta(self, choice: dict[str, Any]) -> dict[str, Any]:
        return {"content": expect(choice.get("text"), str, "choices[0].text", self.name)}

    def _streamed_choice(self, state: wire.StreamState) -> dict[str, Any]:
        return {"text": "".join(state.content)}
