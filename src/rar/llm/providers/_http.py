"""HTTP plumbing shared by the HTTP providers: clients, error mapping, Retry-After, SSE."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import orjson

from rar.errors import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)

DEFAULT_TIMEOUT = httpx2.Timeout(60.0, connect=10.0)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())  # nondeterminism-ok: transport timing


def error_message(body: bytes | str) -> str:
    """The provider's own error message from an error body, whatever its shape."""
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
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    kwargs: dict[str, Any] = {"provider": provider, "status": status, "body": message}
    if status in (401, 403):
        hint = f" (key from {key_reference})" if key_reference else ""
        raise AuthenticationError(f"the API key was refused{hint}: {message}", **kwargs)
    if status == 404:
        raise ModelNotFoundError(f"not found: {message}", **kwargs)
    if status == 429:
        raise RateLimitError(f"rate limited: {message}", retry_after=retry_after, **kwargs)
    if status in (400, 413, 422):
        raise BadRequestError(f"request rejected: {message}", **kwargs)
    if status in (408, 409) or status >= 500:
        raise ProviderUnavailableError(message, retry_after=retry_after, **kwargs)
    raise ProviderError(message, **kwargs)


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


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, str]]:
    """(event name, data) pairs from Server-Sent Events lines; multi-line data is joined."""
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)
