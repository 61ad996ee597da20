"""Google Gemini through the Generative Language API (``models/{model}:generateContent``).

``Gemini()`` reads its key from ``GEMINI_API_KEY`` (then ``GOOGLE_API_KEY``) at the first call
and sends it in the ``x-goog-api-key`` header, never in the URL, so it does not end up in logs.
The base URL defaults to ``https://generativelanguage.googleapis.com/v1beta`` (or
``GEMINI_BASE_URL``).

How a :class:`~rar.llm.types.Request` maps to Gemini:

* system messages → ``systemInstruction`` (one text part each); user → ``user`` contents;
  assistant → ``model`` contents (text part, then one ``functionCall`` part per tool call);
  tool results → ``functionResponse`` parts, consecutive results merged into one ``user``
  content. A JSON-object result is sent as is, anything else as ``{"content": text}``, an error
  result as ``{"error": text}``. A call's id and its result's ``tool_call_id`` go back as
  ``functionCall.id`` and ``functionResponse.id`` when the model gave them (ids RAR made up,
  ``call_<name>_<index>``, are not sent). Assistant reasoning is not sent back (RAR keeps no thought
  signatures); on Gemini 3 and later (and model ids without a version, such as aliases) the
  first replayed ``functionCall`` of each assistant message carries Google's documented
  ``skip_thought_signature_validator`` stand-in instead, without which Gemini 3 answers 400.
* tools → ``tools[0].functionDeclarations`` with the JSON Schema reduced to what Gemini accepts
  (see :func:`~rar.llm.providers._google.sanitize_schema`); a tool without parameters sends none.
* ``tool_choice`` → ``toolConfig.functionCallingConfig``: auto → AUTO, none → NONE,
  required → ANY, a tool's name → ANY with ``allowedFunctionNames: [name]``.
* temperature, top_p, max_tokens, stop, seed → ``generationConfig`` (``temperature``, ``topP``,
  ``maxOutputTokens``, ``stopSequences``, ``seed``); a JSON response format →
  ``responseMimeType: application/json`` (+ ``responseSchema`` for ``json_schema``).
* ``reasoning_effort`` → ``generationConfig.thinkingConfig`` with ``includeThoughts: true``:
  Gemini 3 and later take ``thinkingLevel`` = the effort itself (a model rejects levels it
  lacks); earlier or unversioned model ids take ``thinkingBudget`` minimal 512, low 1024,
  medium 8192, high 24576 tokens. Without ``reasoning_effort`` the model's default applies.

And back: text parts joined → ``content``; ``thought: true`` parts → ``reasoning``;
``functionCall`` parts → tool calls with the model's ``functionCall.id`` when it gives one, else
``call_<name>_<index>`` (the position makes it deterministic, so a replay matches), and arguments
as JSON with sorted keys (streamed answers alike);
``finishReason`` STOP → stop (tool_calls when calls are present), MAX_TOKENS → length,
SAFETY/RECITATION/BLOCKLIST/PROHIBITED_CONTENT/SPII/... → content_filter, anything else → other;
``usageMetadata``: ``input_tokens`` = promptTokenCount (cached included),
``cached_input_tokens`` = cachedContentTokenCount, ``output_tokens`` = candidatesTokenCount +
thoughtsTokenCount, ``reasoning_tokens`` = thoughtsTokenCount; ``model`` = ``modelVersion``.
A blocked prompt (no candidates, ``promptFeedback.blockReason``) raises
:class:`~rar.errors.BadRequestError` naming the reason. A 400 ``API_KEY_INVALID`` is an
:class:`~rar.errors.AuthenticationError`; a ``RetryInfo.retryDelay`` fills ``retry_after``.
"""

from __future__ import annotations

from typing import Any

import httpx2
import orjson

from rar.errors import AuthenticationError, ProviderError
from rar.llm.provider import ChunkCallback
from rar.llm.providers import _google as wire
from rar.llm.providers._http import (
    KeyedHTTPProvider,
    error_message,
    json_body,
    raise_for_status,
)
from rar.llm.types import Request, Response

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


class Gemini(KeyedHTTPProvider):
    """The Gemini provider: ``complete``, ``acomplete`` and ``stream`` over the REST API."""

    name = "gemini"
    base_url_variable = "GEMINI_BASE_URL"
    default_base_url = DEFAULT_BASE_URL
    key_variables = KEY_VARIABLES

    # --- plumbing ------------------------------------------------------------------------------

    def _prepare(
        self, request: Request, method: str
    ) -> tuple[Request, str, bytes, dict[str, str], str]:
        request = self._with_model(request)
        key, reference = self._credentials()
        url = f"{self.base_url}/{wire.model_path(request.model)}:{method}"
        headers = {**self.extra_headers, "x-goog-api-key": key, "content-type": "application/json"}
        return request, url, orjson.dumps(wire.build_body(request)), headers, reference

    def _answer(self, response: httpx2.Response, request: Request, reference: str) -> Response:
        check_status(response, key_reference=reference)
        return wire.parse_response(json_body(response, provider=self.name), model=request.model)

    # --- the protocol --------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, "generateContent")
        response = self._post(url, content=body, headers=headers)
        return self._answer(response, request, reference)

    async def acomplete(self, request: Request) -> Response:
        request, url, body, headers, reference = self._prepare(request, "generateContent")
        response = await self._apost(url, content=body, headers=headers)
        return self._answer(response, request, reference)

    def stream(self, request: Request, on_chunk: ChunkCallback) -> Response:
        """Stream content and reasoning pieces to ``on_chunk``; return the whole answer."""
        request, url, body, headers, reference = self._prepare(request, "streamGenerateContent")
        assembler = wire.StreamAssembler(request.model)
        sse = {"alt": "sse"}
        with self._post_stream(url, params=sse, content=body, headers=headers) as response:
            if response.status_code >= 400:
                response.read()
                check_status(response, key_reference=reference)
            with self._reading():
                for _event, data in self._events(response):
                    for chunk in assembler.feed(data):
                        on_chunk(chunk)
        return assembler.response()


# --- errors ------------------------------------------------------------------------------------


def check_status(response: httpx2.Response, *, key_reference: str | None) -> None:
    """:func:`raise_for_status` plus Gemini's quirks: a bad key is a 400 with reason
    ``API_KEY_INVALID``, and the retry delay of a 429/503 is in a ``RetryInfo`` detail."""
    if response.status_code < 400:
        return
    details = _error_details(response.content)
    if response.status_code == 400 and any(d.get("reason") == "API_KEY_INVALID" for d in details):
        message = error_message(response.content)
        hint = f" (key from {key_reference})" if key_reference else ""
        raise AuthenticationError(
            f"the API key was refused{hint}: {message}", provider="gemini", status=400, body=message
        )
    try:
        raise_for_status(response, provider="gemini", key_reference=key_reference)
    except ProviderError as exc:
        delays = [_seconds(d.get("retryDelay")) for d in details if "retryDelay" in d]
        delay = next((d for d in delays if d is not None), None)
        if exc.details.get("retry_after") is None and delay is not None:
            exc.details["retry_after"] = delay
            setattr(exc, "retry_after", delay)  # noqa: B010 - attributes mirror details
        raise


def _error_details(body: bytes) -> list[dict[str, Any]]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def _seconds(value: Any) -> float | None:
    """Seconds from a protobuf Duration in JSON (``"37s"``, ``"1.5s"``)."""
    if isinstance(value, str) and value.endswith("s"):
        try:
            return max(0.0, float(value[:-1]))
        except ValueError:
            return None
    return None
