"""Anthropic's Claude models through the Messages API (``POST {base_url}/v1/messages``).

``Anthropic()`` reads its key from ``ANTHROPIC_API_KEY`` at the first call and sends it in the
``x-api-key`` header with ``anthropic-version: 2023-06-01``. The base URL defaults to
``https://api.anthropic.com`` (or ``ANTHROPIC_BASE_URL``).

How a :class:`~rar.llm.types.Request` maps to the Messages API:

* system messages → the top-level ``system`` string (several are joined by a blank line);
  user → ``user`` text blocks; assistant → ``assistant`` text block, then one ``tool_use``
  block per tool call (``input`` = the parsed arguments; arguments that are not a JSON object
  raise :class:`~rar.errors.BadRequestError` before any HTTP); tool results → ``tool_result``
  blocks (``is_error`` honoured) in a ``user`` message. Consecutive messages of one role are
  merged into one message, so parallel tool results travel together. Assistant reasoning is
  not sent back (RAR keeps no thinking signatures).
* ``max_tokens`` is required by Anthropic: **1024** when the request gives none.
* tools → ``{name, description, input_schema}``; ``tool_choice`` auto → ``auto``, none →
  ``none``, required → ``any``, a tool's name → ``{type: tool, name}``.
* temperature, top_p, stop → ``temperature``, ``top_p``, ``stop_sequences``; ``seed`` is
  ignored (Anthropic has none).
* ``reasoning_effort`` → ``thinking: {type: enabled, budget_tokens}`` with budgets minimal
  1024, low 2048, medium 8192, high 24576. Thinking counts against ``max_tokens``: without a
  ``max_tokens`` the request asks for budget + 1024; with one, the budget shrinks to leave 1024
  tokens for the answer (never below Anthropic's minimum of 1024; a ``max_tokens`` of 1024 or
  less with a reasoning effort is a :class:`~rar.errors.ConfigError`). While a tool loop is in
  progress (an assistant message after the last user message) thinking is left off, because
  Anthropic wants that assistant message replayed with its signed thinking block. Anthropic
  itself rejects a temperature other than 1, and forced tool use, together with thinking.
* a JSON ``response_format`` raises :class:`~rar.errors.ConfigError`: the Messages API has no
  JSON mode.

And back: text blocks → ``content``; ``thinking`` blocks → ``reasoning``; ``tool_use`` blocks →
tool calls (Anthropic's ids kept, ``input`` as JSON text with sorted keys); ``stop_reason``
end_turn/stop_sequence → stop, max_tokens/model_context_window_exceeded → length, tool_use →
tool_calls, refusal → content_filter, anything else → other; usage: ``input_tokens`` = all
prompt tokens (input_tokens + cache_read_input_tokens + cache_creation_input_tokens),
``cached_input_tokens`` = cache_read_input_tokens, ``output_tokens`` = output_tokens (thinking
included), ``reasoning_tokens`` = output_tokens_details.thinking_tokens when given; ``model`` =
the served ``model``. A stream without ``message_stop`` raises
:class:`~rar.errors.StreamInterruptedError`; an ``error`` event raises the matching
:class:`~rar.errors.ProviderError`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from types import TracebackType
from urllib.parse import urlsplit

import httpx2
import orjson

from rar.errors import ConfigError, MissingAPIKeyError, StreamInterruptedError
from rar.llm.provider import ChunkCallback
from rar.llm.providers import _anthropic_wire as wire
from rar.llm.providers._http import (
    DEFAULT_TIMEOUT,
    json_body,
    raise_for_status,
    sse_events,
    transport_error,
)
from rar.llm.types import Request, Response

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = wire.DEFAULT_MAX_TOKENS


class Anthropic:
    """The Anthropic provider: ``complete``, ``acomplete`` and ``stream`` over the Messages API."""

    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        key_reference: str | None = None,
        timeout: httpx2.Timeout | float = DEFAULT_TIMEOUT,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        if urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"base_url must start with http:// or https://, got {url!r}")
        self.model = model
        self.base_url = url.rstrip("/")
        self._api_key = api_key
        self._key_reference = key_reference
        self.timeout = timeout
        self.extra_headers = dict(extra_headers or {})
        self._client = http_client
        self._owns_client = http_client is None
        self._async_client = async_http_client
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Anthropic(model={self.model!r}, base_url={self.base_url!r})"

    # --- plumbing ------------------------------------------------------------------------------

    def _credentials(self) -> tuple[str, str]:
        """The key and where it came from (``env:ANTHROPIC_API_KEY``, ...); never logged."""
        from_env = os.environ.get(KEY_VARIABLE)
        if self._api_key:  # named after the variable it came from, when it did
            origin = f"env:{KEY_VARIABLE}" if self._api_key == from_env else None
            return self._api_key, self._key_reference or origin or "the api_key argument"
        if from_env:
            return from_env, self._key_reference or f"env:{KEY_VARIABLE}"
        raise MissingAPIKeyError(self.name, [KEY_VARIABLE])

    def _prepare(
        self, request: Request, *, stream: bool
    ) -> tuple[Request, str, bytes, dict[str, str], str]:
        model = request.model or self.model
        if not model:
            raise ConfigError(f"{self.name}: no model named, in the request or the provider")
        if model != request.model:
            request = request.model_copy(update={"model": model})
        key, reference = self._credentials()
        body = wire.build_body(request)
        if stream:
            body["stream"] = True
        headers = {
            **self.extra_headers,
            "x-api-key": key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        return request, f"{self.base_url}/v1/messages", orjson.dumps(body), headers, reference

    def _http(self) -> httpx2.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx2.Client(timeout=self.timeout)
            return self._client

    def close(self) -> None:
        """Close the pooled HTTP connections this provider opened (it stays usable)."""
        with self._lock:
            client = self._client if self._owns_client else None
            if client is not None:
                self._client = None
        if client is not None:
            client.close()

    def __enter__(self) -> Anthropic:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _answer(self, response: httpx2.Response, request: Request, reference: str) -> Response:
        raise_for_status(response, provider=self.name, key_reference=reference)
        return wire.parse_message(json_body(response, provider=self.name), model=request.model)

    # --- the protocol --------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, stream=False)
        try:
            response = self._http().post(url, content=body, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        return self._answer(response, request, reference)

    async def acomplete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, stream=False)
        try:
            if self._async_client is not None:
                response = await self._async_client.post(url, content=body, headers=headers)
            else:
                async with httpx2.AsyncClient(timeout=self.timeout) as client:
                    response = await client.post(url, content=body, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        return self._answer(response, request, reference)

    def stream(self, request: Request, on_chunk: ChunkCallback) -> Response:
        """Stream content and reasoning pieces to ``on_chunk``; return the whole answer."""
        request, url, body, headers, reference = self._prepare(request, stream=True)
        assembler = wire.StreamAssembler(request.model)
        try:
            with self._http().stream("POST", url, content=body, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise_for_status(response, provider=self.name, key_reference=reference)
                self._consume(response, assembler, on_chunk)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc
        return assembler.response()

    def _consume(
        self, response: httpx2.Response, assembler: wire.StreamAssembler, on_chunk: ChunkCallback
    ) -> None:
        try:
            for event, data in sse_events(response.iter_lines()):
                for chunk in assembler.feed(event, data):
                    on_chunk(chunk)
        except httpx2.TransportError as exc:
            raise StreamInterruptedError(
                f"the stream was cut ({type(exc).__name__}: {exc})", provider=self.name
            ) from exc
