"""Which requests the viewer answers at all: the ``Host`` it serves, its access token, and —
for anything that changes state — the request's origin and the page's token.

* **Host.** Only the names the server was started for (loopback names by default) and, when the
  port is known, only that port: a web page that makes its own name resolve to 127.0.0.1 (DNS
  rebinding) sends its own name as ``Host`` and is refused (400 ``bad-host``).
* **Access token** (``rar view --token``; generated when ``--allow-runs`` listens beyond
  loopback): every request carries it — ``Authorization: Bearer TOKEN``, or the cookie the server
  sets (``HttpOnly``, ``SameSite=Strict``) when a page is opened with ``?token=TOKEN``, after
  which the address is redirected without it. Otherwise 401 ``token-required``.
* **State-changing requests** (any method but ``GET`` and ``HEAD``), when runs are allowed: an
  ``Origin`` header, when present, must be this server's own origin (``http://`` + the ``Host``
  asked for), ``Sec-Fetch-Site`` when present must be ``same-origin``, and the header
  ``X-RAR-Token`` must carry the per-server token embedded in the page (compared in constant
  time) — otherwise 403 ``cross-origin`` or ``bad-token``. A cross-site form cannot set that
  header, and a cross-origin script cannot either without a CORS preflight the viewer never
  grants. Without runs, such requests go on to the routes, which answer 404 or 405.
"""

from __future__ import annotations

import hmac
import html
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rar.viewer.http import error_response

TOKEN_HEADER = "x-rar-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
_COOKIE = "rar_view_token"


def same(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a token given with the expected one."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def split_host(value: str) -> tuple[str, int | None]:
    """``("name", port)`` of a ``Host`` header (``[::1]:8765`` → ``("::1", 8765)``); the port
    is None when absent, -1 when it is not a number."""
    value = value.strip()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port_text = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    if not port_text:
        return name.lower(), None
    return name.lower(), int(port_text) if port_text.isdigit() and len(port_text) <= 5 else -1


def cookie_name(port: int | None) -> str:
    """The access cookie's name: one per port, as cookies are shared by every port of a host."""
    return f"{_COOKIE}_{port or 80}"


@dataclass
class GuardSettings:
    """What :class:`RequestGuard` checks; read on every request, so ``port`` may be set once
    the socket is bound.

    ``hosts``: the host names answered (None: any); ``port``: the port ``Host`` must name
    (None: any); ``access_token``: required on every request when set; ``page_token``: required
    as ``X-RAR-Token`` on state-changing requests when set (runs allowed).
    """

    hosts: frozenset[str] | None
    port: int | None = None
    access_token: str | None = None
    page_token: str | None = None

    @classmethod
    def of(
        cls,
        hosts: Iterable[str] | None,
        *,
        port: int | None = None,
        access_token: str | None = None,
        page_token: str | None = None,
    ) -> GuardSettings:
        names = None if hosts is None else frozenset(h.strip("[]").lower() for h in hosts)
        return cls(names, port, access_token, page_token)


class RequestGuard:
    """ASGI middleware applying the checks above, as ``settings`` says."""

    def __init__(self, app: ASGIApp, *, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings

    @property
    def hosts(self) -> frozenset[str] | None:
        return self.settings.hosts

    @property
    def port(self) -> int | None:
        return self.settings.port

    @property
    def access_token(self) -> str | None:
        return self.settings.access_token

    @property
    def page_token(self) -> str | None:
        return self.settings.page_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._host(headers.get("host", ""))
        if refusal is None and self.access_token is not None:
            refusal = self._access(scope, headers)
        if refusal is None and scope["method"] not in SAFE_METHODS and self.page_token:
            refusal = self._state_change(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _host(self, host: str) -> Response | None:
        name, port = split_host(host)
        if self.hosts is not None and name not in self.hosts:
            return error_response(
                400,
                "bad-host",
                "this viewer answers only requests for "
                + ", ".join(sorted(self.hosts))
                + " (the Host header names another server)",
            )
        if self.port is not None and (port if port is not None else 80) != self.port:
            return error_response(
                400, "bad-host", f"this viewer answers only requests for port {self.port}"
            )
        return None

    def _access(self, scope: Scope, headers: Headers) -> Response | None:
        assert self.access_token is not None
        _, port = split_host(headers.get("host", ""))
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["method"] in SAFE_METHODS:
            if not same(query["token"], self.access_token):
                return _token_required(scope, "the token in the address is not this viewer's")
            # keep the token out of the address bar and history: a cookie carries it from now on
            rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
            target = scope.get("path", "/") + (f"?{rest}" if rest else "")
            answer = RedirectResponse(target, status_code=303)
            answer.set_cookie(
                cookie_name(port),
                self.access_token,
                httponly=True,
                samesite="strict",
                path="/",
            )
            return answer
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer ") and same(bearer[7:].strip(), self.access_token):
            return None
        try:
            jar = SimpleCookie(headers.get("cookie", ""))
        except CookieError:
            jar = SimpleCookie()
        morsel = jar.get(cookie_name(port))
        if morsel is not None and same(morsel.value, self.access_token):
            return None
        return _token_required(scope, "this viewer needs its access token")

    def _state_change(self, scope: Scope, headers: Headers) -> Response | None:
        assert self.page_token is not None
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()
        if origin is not None and origin.lower() != own:
            return error_response(
                403,
                "cross-origin",
                f"a request from another origin ({origin[:100]}) cannot change anything here",
            )
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return error_response(
                403, "cross-origin", f"a {fetch_site} request cannot change anything here"
            )
        if not same(headers.get(TOKEN_HEADER), self.page_token):
            return error_response(
                403,
                "bad-token",
                "this request lacks the page's token (X-RAR-Token): start runs from the "
                "viewer's own page",
            )
        return None


def _token_required(scope: Scope, why: str) -> Response:
    path = str(scope.get("path", "/"))
    if path.startswith("/api/") or path.startswith("/static/"):
        return error_response(
            401,
            "token-required",
            f"{why}: send Authorization: Bearer TOKEN, or open the address rar view printed "
            "(…/?token=TOKEN) once in this browser",
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Token required · RAR viewer</title></head>
<body><main id="app" data-error="token-required">
<h1>This viewer needs its access token</h1>
<p>{html.escape(why)}. Open the address <code>rar view</code> printed when it started (it ends
in <code>?token=…</code>); the browser then keeps the token for this server.</p>
</main></body></html>
"""
    return HTMLResponse(page, status_code=401)
