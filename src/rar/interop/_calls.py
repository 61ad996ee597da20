"""What an SDK's HTTP request asks, as the request an effect records.

:func:`describe` sorts a request into one of two effect kinds:

* ``llm`` — a model call: OpenAI ``POST …/chat/completions``, ``…/completions``,
  ``…/embeddings``, ``…/responses``; Anthropic ``POST …/v1/messages``; Gemini
  ``POST …/models/{model}:generateContent``, ``:streamGenerateContent``, ``:embedContent``,
  ``:batchEmbedContents``. Its recorded request is provider-neutral where the body allows (see
  :mod:`rar.interop._lift`): ``{"provider", "base_url", "request"}``, exactly what a
  :class:`~rar.llm.client.Client` records, so the response cache serves both. Otherwise it is
  ``{"provider", "base_url", "endpoint", "model", "body"}``, the wire body as sent.
  Either form gets a ``"wire"`` part for what changes the bytes of the answer but not its
  meaning: the stream flags, query parameters, and the API-version and beta headers RAR's own
  providers do not send.
* ``http`` — anything else (``GET /models``, file uploads, batches): ``{"method", "url",
  "body"}`` where a JSON or text body is kept and any other body is named by its digest and size.

Headers are never part of a recorded request, so credentials (``Authorization``,
``x-api-key``, ``x-goog-api-key``) never reach it; neither do the ``key`` and token query
parameters, nor user-info in the URL.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import orjson

from rar.hashing import digest_bytes
from rar.interop import _lift

Query = tuple[tuple[str, str], ...]
StreamKind = Literal["openai", "openai-responses", "anthropic", "gemini"]

#: Query parameters that carry credentials: never recorded.
SECRET_PARAMS = frozenset({"key", "api_key", "api-key", "apikey", "access_token", "token", "sig"})
#: Request headers that change how an answer is written (not what it says), kept in ``wire``.
_WIRE_HEADERS = ("anthropic-beta", "openai-beta")
_ANTHROPIC_VERSION = "2023-06-01"  # what RAR's Anthropic provider sends
_OPENAI = {
    "/chat/completions": "chat",
    "/completions": "text",
    "/embeddings": "embeddings",
    "/responses": "responses",
}
_GEMINI = re.compile(
    r"^(?P<base>.*)/(?P<model>(?:models|tunedModels)/[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent|embedContent|batchEmbedContents)$"
)


@dataclass(frozen=True, slots=True)
class Call:
    """One request as an effect sees it."""

    kind: Literal["llm", "http"]
    payload: dict[str, Any]
    provider: str = ""
    endpoint: str = ""  # chat, text, embeddings, responses, messages, generate, embed
    model: str = ""
    stream: StreamKind | None = None  # how the answer streams, when it was asked to
    neutral: bool = False  # the payload is the Client's provider-neutral form
    extra: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=512)  # a client asks the same few URLs again and again
def _origin(url: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """(scheme://host[:port], path, query pairs without credentials) of ``url``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    origin = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    query = tuple(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in SECRET_PARAMS
    )
    return origin, parts.path, query


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def describe(method: str, url: str, headers: Any, body: bytes) -> Call:
    """The effect a request is recorded as (``headers``: a case-insensitive mapping)."""
    origin, path, query = _origin(url)
    data = _json(body) if body else None
    if method == "POST" and isinstance(data, dict):
        call = _model_call(origin, path, query, headers, data)
        if call is not None:
            return call
    return Call("http", _http_payload(method, origin, path, query, headers, body, data))


def _wire(query: Query, headers: Any, stream: dict[str, Any] | None = None) -> dict[str, Any]:
    wire: dict[str, Any] = dict(stream or {})
    if query:
        wire["query"] = [list(pair) for pair in query]
    version = headers.get("anthropic-version")
    if version and version != _ANTHROPIC_VERSION:
        wire["anthropic-version"] = version
    for name in _WIRE_HEADERS:
        if headers.get(name):
            wire[name] = headers.get(name)
    return wire


def _model_call(
    origin: str, path: str, query: Query, headers: Any, body: dict[str, Any]
) -> Call | None:
    for suffix, endpoint in _OPENAI.items():
        if path.endswith(suffix):
            return _openai(origin + path[: -len(suffix)], suffix, endpoint, query, headers, body)
    if path.endswith("/v1/messages"):
        return _anthropic(origin + path[: -len("/v1/messages")], query, headers, body)
    match = _GEMINI.match(path)
    if match is not None:
        return _gemini(origin + match["base"], match, query, headers, body)
    return None


def _assemble(
    provider: str,
    base_url: str,
    endpoint_path: str,
    model: str,
    body: dict[str, Any],
    lifted: _lift.Lifted,
    wire: dict[str, Any],
) -> dict[str, Any]:
    payload: dict[str, Any] = {"provider": provider, "base_url": base_url}
    if lifted is not None:
        payload["request"] = lifted.payload()
    else:
        payload.update(endpoint=endpoint_path, model=model, body=body)
    if wire:
        payload["wire"] = wire
    return payload


def _openai(
    base_url: str,
    suffix: str,
    endpoint: str,
    query: Query,
    headers: Any,
    body: dict[str, Any],
) -> Call:
    stream_keys: dict[str, Any] = {k: body[k] for k in ("stream", "stream_options") if k in body}
    rest = {k: v for k, v in body.items() if k not in stream_keys}
    streaming = body.get("stream") is True
    if not streaming:
        stream_keys.pop("stream", None)  # false is the default: the same request
    lifted = _lift.openai_chat(rest) if endpoint == "chat" else None
    model = str(body.get("model") or "")
    wire = _wire(query, headers, stream_keys)
    payload = _assemble("openai", base_url, suffix, model, rest, lifted, wire)
    kind: StreamKind = "openai-responses" if endpoint == "responses" else "openai"
    return Call(
        "llm",
        payload,
        provider="openai",
        endpoint=endpoint,
        model=model,
        stream=kind if streaming and endpoint != "embeddings" else None,
        neutral=lifted is not None,
    )


def _anthropic(base_url: str, query: Query, headers: Any, body: dict[str, Any]) -> Call:
    streaming = body.get("stream") is True
    rest = {k: v for k, v in body.items() if k != "stream"}
    lifted = _lift.anthropic_messages(rest)
    model = str(body.get("model") or "")
    wire = _wire(query, headers, {"stream": True} if streaming else None)
    payload = _assemble("anthropic", base_url, "/v1/messages", model, rest, lifted, wire)
    return Call(
        "llm",
        payload,
        provider="anthropic",
        endpoint="messages",
        model=model,
        stream="anthropic" if streaming else None,
        neutral=lifted is not None,
    )


def _gemini(
    base_url: str,
    match: re.Match[str],
    query: Query,
    headers: Any,
    body: dict[str, Any],
) -> Call:
    method = match["method"]
    model_path = match["model"]
    model = model_path.removeprefix("models/")
    generate = method in ("generateContent", "streamGenerateContent")
    streaming = method == "streamGenerateContent"
    sse = ["alt", "sse"] in [list(pair) for pair in query]
    lifted = _lift.gemini_generate(body, model) if generate else None
    wire = _wire(query, headers, {"stream": True} if streaming else None)
    endpoint_path = f"/{model_path}:{method}"
    payload = _assemble("gemini", base_url, endpoint_path, model, body, lifted, wire)
    return Call(
        "llm",
        payload,
        provider="gemini",
        endpoint="generate" if generate else "embed",
        model=model,
        stream="gemini" if streaming and sse else None,
        neutral=lifted is not None,
    )


def _http_payload(
    method: str,
    origin: str,
    path: str,
    query: Query,
    headers: Any,
    body: bytes,
    data: Any,
) -> dict[str, Any]:
    payload: dict[str, Any] = {"method": method, "url": origin + path}
    if query:
        payload["query"] = [list(pair) for pair in query]
    if body:
        kind = str(headers.get("content-type") or "")
        if data is not None:
            payload["body"] = data
        elif kind.startswith("text/") or kind.startswith("application/x-www-form-urlencoded"):
            try:
                payload["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                payload["body"] = {"digest": digest_bytes(body), "size": len(body)}
        else:  # uploads: named by their content, not stored
            payload["body"] = {"digest": digest_bytes(_unbounded(body, kind)), "size": len(body)}
        if kind:
            payload["content_type"] = kind.partition(";")[0].strip()
    return payload


_BOUNDARY = re.compile(r'boundary="?([^";]+)"?')


def _unbounded(body: bytes, content_type: str) -> bytes:
    """A multipart body with its boundary (random per request) written as ``BOUNDARY``, so the
    same upload has the same digest in a replay."""
    match = _BOUNDARY.search(content_type)
    if match is None or not content_type.startswith("multipart/"):
        return body
    return body.replace(match[1].encode(), b"BOUNDARY")
