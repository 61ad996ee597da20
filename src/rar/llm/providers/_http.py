"""HTTP plumbing shared by the HTTP providers: clients, error mapping, Retry-After, SSE."""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

import httpx2
import orjson

from rar.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    MalformedResponseError,
    MissingAPIKeyError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    StreamInterruptedError,
)
from rar.llm.types import Request
from rar.redaction import redact_output

DEFAULT_TIMEOUT = httpx2.Timeout(60.0, connect=10.0)
#: The most one Server-Sent Event may hold: 1 MiB, httpx2's own limit.
MAX_EVENT_BYTES = 1024 * 1024
#: The most event data one streamed answer may hold: 64 MiB, room for several hundred thousand
#: tokens of OpenAI-style deltas (about 150-250 bytes each), far past any model's output limit.
MAX_STREAM_BYTES = 64 * 1024 * 1024


def parse_retry_after(value: str | None, *, milliseconds: str | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (``milliseconds``, which wins) or ``Retry-After``
    (delta-seconds or an HTTP date), as the official OpenAI and Anthropic SDKs read them.

    An infinite or overflowing delay is ``inf`` (a wait no cap allows); garbage is None.
    """
    for text, divisor in ((milliseconds, 1000.0), (value, 1.0)):
        if not text or not text.strip():
            continue
        try:
            delay = float(text.strip())
        except ValueError:
            continue
        if math.isnan(delay):
            continue
        return max(0.0, delay / divisor)
    if not value or not value.strip():
        return None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when.timestamp() - time.time())  # nondeterminism-ok: transport timing


def should_retry(headers: Mapping[str, str]) -> bool | None:
    """The ``x-should-retry`` header (``true`` or ``false``) by which OpenAI and Anthropic say
    whether a failed request is worth repeating; None when absent or anything else."""
    value = (headers.get("x-should-retry") or "").strip().lower()
    return {"true": True, "false": False}.get(value)


def error_message(body: bytes | str) -> str:
    """The provider's own error message from an error body, whatever its shape, redacted
    (:func:`rar.redaction.redact_output`): providers echo keys and request text in errors."""
    return redact_output(_error_message(body))


def _error_message(body: bytes | str) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text.strip()[:500] or "(empty body)"
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or error.get("status")
            if message:
                return str(message)
        elif isinstance(error, str):
            return error
        if "message" in data:
            return str(data["message"])
    return text.strip()[:500]


def raise_for_status(
    response: httpx2.Response, *, provider: str, key_reference: str | None = None
) -> None:
    """Turn an HTTP error answer into the matching :class:`ProviderError`."""
    status = response.status_code
    if status < 400:
        return
    body = response.read() if not response.is_closed else response.content
    message = error_message(body)
    headers = response.headers
    retry_after = parse_retry_after(
        headers.get("retry-after"), milliseconds=headers.get("retry-after-ms")
    )
    error = _status_error(status, message, provider, retry_after, key_reference)
    forced = should_retry(headers)
    if forced is not None:  # the server's word beats the status code, as in the SDKs
        error.retryable = forced
        error.details["should_retry"] = forced
    raise error


def _status_error(
    status: int, message: str, provider: str, retry_after: float | None, key_reference: str | None
) -> ProviderError:
    kwargs: dict[str, Any] = {
        "provider": provider,
        "status": status,
        "body": message,
        "retry_after": retry_after,
    }
    if status in (401, 403):
        hint = f" (key from {key_reference})" if key_reference else ""
        return AuthenticationError(f"the API key was refused{hint}: {message}", **kwargs)
    if status == 404:
        return ModelNotFoundError(f"not found: {message}", **kwargs)
    if status == 429:
        return RateLimitError(f"rate limited: {message}", **kwargs)
    if status in (400, 413, 422):
        return BadRequestError(f"request rejected: {message}", **kwargs)
    if status in (408, 409) or status >= 500:
        return ProviderUnavailableError(message, **kwargs)
    return ProviderError(message, **kwargs)


def transport_error(exc: Exception, *, provider: str) -> ProviderError:
    """A connection problem or timeout as a retryable provider error."""
    return ProviderUnavailableError(f"{type(exc).__name__}: {exc}", provider=provider)


def json_body(response: httpx2.Response, *, provider: str) -> dict[str, Any]:
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise MalformedResponseError(
            f"the answer is not JSON ({exc}): {response.text[:200]!r}", provider=provider
        ) from exc
    if not isinstance(data, dict):
        raise MalformedResponseError("the answer is not a JSON object", provider=provider)
    return data


def sse_events(
    response: httpx2.Response,
    *,
    provider: str,
    max_event_bytes: int = MAX_EVENT_BYTES,
    max_stream_bytes: int = MAX_STREAM_BYTES,
) -> Iterator[tuple[str, str]]:
    """(event name, data) pairs of a ``text/event-stream`` answer, read by httpx2's
    :class:`~httpx2.EventSource` (multi-line data joined; events without data skipped).

    One event may hold at most ``max_event_bytes`` (also while its line is still unterminated)
    and the whole answer at most ``max_stream_bytes`` of event data; past either the answer is
    a :class:`~rar.errors.MalformedResponseError` naming the limit (never cached, like every
    error). An answer of another content type is refused the same way.
    """
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "text/event-stream":
        raise MalformedResponseError(
            f"a streamed answer must be text/event-stream, got {kind or 'no content type'!r}",
            provider=provider,
        )
    events = iter(httpx2.EventSource(response, max_event_size=max_event_bytes))
    total = 0
    while True:
        try:
            event = next(events)
        except StopIteration:
            return
        except httpx2.SSEError as exc:  # the content type is checked above: this is the size
            raise MalformedResponseError(
                f"a stream event passed the limit of {_size(max_event_bytes)} for one event; "
                "the partial answer was discarded",
                provider=provider,
            ) from exc
        if not event.data:
            continue
        total += len(event.data.encode("utf-8"))
        if total > max_stream_bytes:
            raise MalformedResponseError(
                f"the streamed answer passed the limit of {_size(max_stream_bytes)} for one "
                "answer; the partial answer was discarded (ask for fewer tokens, or raise the "
                "provider's max_stream_bytes)",
                provider=provider,
            )
        yield event.event, event.data


def _size(count: int) -> str:
    mib = 1024 * 1024
    return f"{count // mib} MiB" if count % mib == 0 else f"{count} bytes"


# --- the providers' common part ----------------------------------------------------------------


def resolve_base_url(base_url: str | None, variable: str, default: str) -> str:
    """``base_url``, else the environment variable ``variable``, else ``default``; checked to be
    an http(s) URL and without a trailing slash."""
    url = base_url or os.environ.get(variable) or default
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"base_url must start with http:// or https://, got {url!r}")
    return url.rstrip("/")


def find_key(
    provider: str, variables: tuple[str, ...], api_key: str | None, key_reference: str | None
) -> tuple[str, str]:
    """The API key and where it came from (``key_reference``, else ``env:VARIABLE``, else "the
    api_key argument"): ``api_key`` if given, else the first variable set; never logged."""
    found = [(os.environ.get(v), f"env:{v}") for v in variables]
    if api_key:  # named after the variable it came from, when it did
        origin = next((ref for value, ref in found if value == api_key), None)
        return api_key, key_reference or origin or "the api_key argument"
    for value, reference in found:
        if value:
            return value, key_reference or reference
    raise MissingAPIKeyError(provider, list(variables))


class HTTPProvider:
    """What every HTTP provider shares: the base URL (argument, environment variable, default),
    a pooled client made on first use (or the one passed in, which it never closes), an
    optional async client, ``close()``, use as a context manager, and a repr without the key.

    Subclasses set ``name``, ``base_url_variable`` and ``default_base_url``. A streamed answer
    may hold at most ``max_event_bytes`` in one event and ``max_stream_bytes`` in all (set
    them on an instance to change them).
    """

    name: ClassVar[str]
    base_url_variable: ClassVar[str]
    default_base_url: ClassVar[str]
    max_event_bytes: int = MAX_EVENT_BYTES
    max_stream_bytes: int = MAX_STREAM_BYTES

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        timeout: httpx2.Timeout | float | None = DEFAULT_TIMEOUT,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = resolve_base_url(base_url, self.base_url_variable, self.default_base_url)
        self.model = model
        self.timeout = timeout
        self.extra_headers = dict(extra_headers or {})
        self._client = http_client
        self._owns_client = http_client is None
        self._async_client = async_http_client
        # one pooled async client per event loop (an AsyncClient is bound to the loop it first
        # ran in): a new client per call would build a TLS context each time, tens of ms of CPU
        self._loop_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx2.AsyncClient
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        fields = f"model={self.model!r}, base_url={self.base_url!r}{self._repr_extra()}"
        return f"{type(self).__name__}({fields})"

    def _repr_extra(self) -> str:
        """More ``, name=value`` fields for the repr (never the key)."""
        return ""

    def _model(self, request: Request) -> str:
        """The model to ask: the request's, else the provider's."""
        model = request.model or self.model
        if not model:
            raise ConfigError(f"{self.name}: no model named, in the request or the provider")
        return model

    def _http(self) -> httpx2.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx2.Client(timeout=self.timeout)
            return self._client

    def close(self) -> None:
        """Close the pooled HTTP connections this provider opened (it stays usable); a client
        passed in stays open."""
        with self._lock:
            client = self._client if self._owns_client else None
            if client is not None:
                self._client = None
        if client is not None:
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _post(self, url: str, *, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        try:
            return self._http().post(url, content=content, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc

    def _async_http(self) -> httpx2.AsyncClient:
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._loop_clients.get(loop)
            if client is None:
                client = httpx2.AsyncClient(timeout=self.timeout)
                self._loop_clients[loop] = client
            return client

    async def aclose(self) -> None:
        """Close the pooled async connections this provider opened in the running event loop
        (it stays usable); a client passed in stays open."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._loop_clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    async def _apost(self, url: str, *, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        try:
            return await self._async_http().post(url, content=content, headers=headers)
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc

    def _events(self, response: httpx2.Response) -> Iterator[tuple[str, str]]:
        """The (event name, data) pairs of a streamed answer, within this provider's limits."""
        return sse_events(
            response,
            provider=self.name,
            max_event_bytes=self.max_event_bytes,
            max_stream_bytes=self.max_stream_bytes,
        )

    @contextmanager
    def _post_stream(
        self,
        url: str,
        *,
        content: bytes,
        headers: dict[str, str],
        params: dict[str, str] | None = None,
    ) -> Iterator[httpx2.Response]:
        """A streamed POST; a connection problem, also while reading, is a retryable error."""
        try:
            with self._http().stream(
                "POST", url, params=params, content=content, headers=headers
            ) as response:
                yield response
        except httpx2.TransportError as exc:
            raise transport_error(exc, provider=self.name) from exc


class KeyedHTTPProvider(HTTPProvider):
    """An :class:`HTTPProvider` that always needs a key: ``api_key``, else the first of the
    environment variables ``key_variables`` that is set, looked up at each call."""

    key_variables: ClassVar[tuple[str, ...]]

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
        super().__init__(
            model,
            base_url=base_url,
            timeout=timeout,
            http_client=http_client,
            async_http_client=async_http_client,
            extra_headers=extra_headers,
        )
        self._api_key = api_key
        self._key_reference = key_reference

    def _credentials(self) -> tuple[str, str]:
        """The key and where it came from (``env:VARIABLE``, ...); never logged."""
        return find_key(self.name, self.key_variables, self._api_key, self._key_reference)

    def _with_model(self, request: Request) -> Request:
        """``request`` naming the model it will be sent to."""
        model = self._model(request)
        return request if model == request.model else request.model_copy(update={"model": model})

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Around the reading of a stream: a connection lost midway is a
        :class:`~rar.errors.StreamInterruptedError`."""
        try:
            yield
        except httpx2.TransportError as exc:
            raise StreamInterruptedError(
                f"the stream was cut ({type(exc).__name__}: {exc})", provider=self.name
            ) from exc


# --- the shape of an answer -------------------------------------------------------------

_JSON_TYPES: dict[type, str] = {
    dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
    float: "a number", type(None): "null",
}  # fmt: skip


def expect(value: Any, kind: type | tuple[type, ...], what: str, provider: str) -> Any:
    """``value`` when it is null or a ``kind``; otherwise the answer is malformed, and the
    :class:`MalformedResponseError` names ``what`` (a path into the answer) and both types."""
    if value is None or isinstance(value, kind):
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    wanted = " or ".join(_JSON_TYPES.get(k, k.__name__) for k in kinds)
    found = _JSON_TYPES.get(type(value), type(value).__name__)
    raise MalformedResponseError(f"`{what}` is {found}, not {wanted}", provider=provider)
