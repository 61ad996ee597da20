"""``http_get``: fetch a public web page for a model, without opening a door into the network.

Every hop (the URL asked for and each redirect) is checked before anything is sent: the scheme
must be http or https, and every address the host resolves to must be public (see
:mod:`rar.tools.builtins._netguard`). The connection then goes to the address that was checked,
not to the host name, so a DNS answer that changes between the check and the connection (DNS
rebinding) cannot redirect it: the URL's host is replaced by the checked address, the ``Host``
header and the TLS server name (SNI, and the certificate check) keep the original name.
Redirects are followed by hand (at most 5 by default), each one checked again. The body is
streamed and reading stops after ``max_bytes``; ``timeout`` bounds the whole fetch. Proxies
from the environment are ignored (they would connect somewhere else).
"""

from __future__ import annotations

import codecs
import functools
import ssl
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import httpx2
from pydantic import Field

from rar.tools.builtins._netguard import Destination, NetworkPolicy, Resolver
from rar.tools.core import Tool
from rar.tools.errors import FetchError, URLRefusedError

MAX_BYTES_LIMIT = 20_000_000
MAX_TIMEOUT = 120.0
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
KEPT_HEADERS = (
    "content-type",
    "content-length",
    "content-language",
    "content-disposition",
    "last-modified",
    "etag",
    "location",
    "retry-after",
)
USER_AGENT = "rar-http-get/1"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx2.create_ssl_context()


@dataclass(frozen=True)
class _Hop:
    url: httpx2.URL
    destination: Destination


def check_url(url: httpx2.URL, policy: NetworkPolicy) -> _Hop:
    """Refuse a URL whose scheme or host is not allowed; otherwise the checked destination."""
    if url.scheme not in ("http", "https"):
        shown = url.scheme or "(none)"
        raise URLRefusedError(
            f"only http and https URLs can be fetched, not {shown}: {str(url)[:200]}"
        )
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    return _Hop(url, policy.check(host, port))


def fetch(
    url: str,
    *,
    policy: NetworkPolicy,
    max_bytes: int = 1_000_000,
    timeout: float = 10.0,
    max_redirects: int = 5,
) -> dict[str, Any]:
    """GET ``url`` under ``policy``; see the module documentation."""
    deadline = time.monotonic() + timeout
    try:
        current = httpx2.URL(url.strip())
    except (httpx2.InvalidURL, TypeError, ValueError) as exc:
        raise URLRefusedError(f"not a valid URL: {exc}") from None
    followed: list[str] = []
    while True:
        hop = check_url(current, policy)
        response = _get(hop, deadline, timeout, max_bytes)
        if isinstance(response, httpx2.URL):  # a redirect
            if len(followed) >= max_redirects:
                raise FetchError(
                    f"too many redirects (more than {max_redirects}) starting at {url}",
                    redirects=followed,
                )
            followed.append(str(response))
            current = response
            continue
        response["redirects"] = followed
        return response


def _get(hop: _Hop, deadline: float, timeout: float, max_bytes: int) -> dict[str, Any] | httpx2.URL:
    """One request, to each checked address in turn until one connects."""
    last: Exception | None = None
    for address in hop.destination.addresses:
        try:
            return _get_from(hop, address, deadline, timeout, max_bytes)
        except httpx2.ConnectError as exc:
            last = exc
    raise FetchError(
        f"could not connect to {hop.destination.host} "
        f"({', '.join(hop.destination.addresses)}): {last}"
    )


def _get_from(
    hop: _Hop, address: str, deadline: float, timeout: float, max_bytes: int
) -> dict[str, Any] | httpx2.URL:
    url = hop.url
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _timeout(url, timeout)
    pinned = url.copy_with(host=address)
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": "*/*",
        "Accept-Encoding": "identity",  # no decompression bombs; max_bytes counts real bytes
    }
    extensions = {"sni_hostname": hop.destination.host} if url.scheme == "https" else {}
    try:
        with (
            httpx2.Client(
                trust_env=False,
                follow_redirects=False,
                timeout=httpx2.Timeout(remaining),
                verify=_ssl_context(),
            ) as client,
            client.stream("GET", pinned, headers=headers, extensions=extensions) as response,
        ):
            location = response.headers.get("location")
            if response.status_code in REDIRECT_STATUSES and location:
                try:
                    return url.join(location.strip())
                except (httpx2.InvalidURL, ValueError) as exc:
                    raise FetchError(f"{url} redirects to an invalid URL: {exc}") from None
            body, truncated = _read(response, max_bytes, deadline, url, timeout)
            return {
                "url": str(url),
                "status": response.status_code,
                "headers": {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers},
                "text": _decode(body, response.charset_encoding, final=not truncated),
                "truncated": truncated,
                "bytes": len(body),
            }
    except httpx2.TimeoutException:
        raise _timeout(url, timeout) from None
    except httpx2.ConnectError:
        raise
    except (httpx2.HTTPError, zlib.error) as exc:
        raise FetchError(f"GET {url} failed: {type(exc).__name__}: {exc}") from None


def _read(
    response: httpx2.Response, max_bytes: int, deadline: float, url: httpx2.URL, timeout: float
) -> tuple[bytes, bool]:
    body = bytearray()
    inflate = _decompressor(response.headers.get("content-encoding"))
    for raw in response.iter_raw():
        # a bounded inflate: a small compressed body cannot expand past max_bytes in memory
        chunk = inflate.decompress(raw, max_bytes + 1 - len(body)) if inflate else raw
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
        if time.monotonic() > deadline:
            raise _timeout(url, timeout)
    return bytes(body), False


def _decompressor(encoding: str | None) -> Any:
    """A zlib decompressor for a gzip/deflate body (asked for identity, but servers vary)."""
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj()
    raise FetchError(f"the server sent a body with an unsupported encoding {name!r}")


def _decode(body: bytes, charset: str | None, *, final: bool) -> str:
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(body, final=final)  # a cut multi-byte character is dropped


def _timeout(url: httpx2.URL, timeout: float) -> TimeoutError:
    return TimeoutError(f"GET {url} did not complete within {timeout:g} s")


def make_http_get(
    *,
    allow_private: bool = False,
    allow_hosts: Iterable[str] = (),
    resolver: Resolver | None = None,
    max_redirects: int = 5,
    name: str = "http_get",
) -> Tool:
    """An ``http_get`` tool with its own network policy.

    Args:
        allow_private: also allow loopback, private and link-local addresses (an intranet, a
            test server); cloud metadata endpoints stay refused.
        allow_hosts: exceptions for single destinations, ``"host"`` or ``"host:port"``,
            checked on every hop (a listed host redirecting elsewhere is checked anew).
        resolver: ``(host, port) -> [addresses]``; the system resolver by default.
        max_redirects: how many redirects to follow.
        name: the tool's name.
    """
    policy = NetworkPolicy.build(
        allow_private=allow_private, allow_hosts=allow_hosts, resolver=resolver
    )

    def http_get(
        url: Annotated[str, Field(min_length=1, max_length=8192)],
        max_bytes: Annotated[int, Field(ge=1, le=MAX_BYTES_LIMIT)] = 1_000_000,
        timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT)] = 10,
    ) -> dict[str, Any]:
        """Fetch a public web page or file with an HTTP GET request.

        Returns the final URL, the HTTP status, a few headers, the body as text (cut after
        max_bytes bytes, with truncated=true) and the redirects followed. Only http and https
        URLs of public hosts can be fetched.

        Args:
            url: the http:// or https:// URL to fetch.
            max_bytes: read at most this many bytes of the body.
            timeout: give up after this many seconds.
        """
        return fetch(
            url, policy=policy, max_bytes=max_bytes, timeout=timeout, max_redirects=max_redirects
        )

    return Tool(http_get, name=name, version="1")


http_get = make_http_get()
