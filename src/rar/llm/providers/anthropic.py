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
prompt tokens (input_tokens + cache_read_input_tokens + cache_creation_input_tokens: Anthropic's
own input_tokens leaves the cache out), ``cached_input_tokens`` = cache_read_input_tokens,
``cache_write_input_tokens`` = cache_creation_input_tokens, ``output_tokens`` = output_tokens
(thinking included), ``reasoning_tokens`` = output_tokens_details.thinking_tokens when given;
``model`` = the served ``model``. A stream without ``message_stop`` raises
:class:`~rar.errors.StreamInterruptedError`; an ``error`` event raises the matching
:class:`~rar.errors.ProviderError`.
"""

from __future__ import annotations

import httpx2
import orjson

from rar.llm.provider import ChunkCallback
from rar.llm.providers import _anthropic_wire as wire
from rar.llm.providers._http import KeyedHTTPProvider, json_body, raise_for_status
from rar.llm.types import Request, Response

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = wire.DEFAULT_MAX_TOKENS


class Anthropic(KeyedHTTPProvider):
    """The Anthropic provider: ``complete``, ``acomplete`` and ``stream`` over the Messages API."""

    name = "anthropic"
    base_url_variable = "ANTHROPIC_BASE_URL"
    default_base_url = DEFAULT_BASE_URL
    key_variables = (KEY_VARIABLE,)

    # --- plumbing ------------------------------------------------------------------------------

    def _prepare(
        self, request: Request, *, stream: bool
    ) -> tuple[Request, str, bytes, dict[str, str], str]:
        request = self._with_model(request)
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

    def _answer(self, response: httpx2.Response, request: Request, reference: str) -> Response:
        raise_for_status(response, provider=self.name, key_reference=reference)
        return wire.parse_message(json_body(response, provider=self.name), model=request.model)

    # --- the protocol --------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, stream=False)
        response = self._post(url, content=body, headers=headers)
        return self._answer(response, request, reference)

    async def acomplete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, stream=False)
        response = await self._apost(url, content=body, headers=headers)
        return self._answer(response, request, reference)

    def stream(self, request: Request, on_chunk: ChunkCallback) -> Response:
        """Stream content and reasoning pieces to ``on_chunk``; return the whole answer."""
        request, url, body, headers, reference = self._prepare(request, stream=True)
        assembler = wire.StreamAssembler(request.model)
        with self._post_stream(url, content=body, headers=headers) as response:
            if response.status_code >= 400:
                response.read()
                raise_for_status(response, provider=self.name, key_reference=reference)
            with self._reading():
                for event, data in self._events(response):
                    for chunk in assembler.feed(event, data):
                        on_chunk(chunk)
        return assembler.response()
