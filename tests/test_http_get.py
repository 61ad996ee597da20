"""http_get against a real server on 127.0.0.1, and its refusals (which never connect)."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

import rar.tools.builtins.web as web
from rar.llm.types import ToolCall
from rar.tools import Tool, ToolRegistry, ToolResult, http_get, make_http_get


class Server:
    """A threaded HTTP server on 127.0.0.1 that remembers every request it saw."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []  # (path, Host header)
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers.get("Host", "")))
                server.route(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        if parts.path == "/hello":
            self.send(h, 200, "hello, wörld".encode(), "text/plain; charset=utf-8")
        elif parts.path == "/big":
            self.send(h, 200, b"a" * 50_000, "text/plain")
        elif parts.path == "/gzip":
            body = gzip.compress(b"z" * 5_000)
            self.send(h, 200, body, "text/plain", {"Content-Encoding": "gzip"})
        elif parts.path == "/slow":
            self.release.wait(2)  # never answers in time; released at teardown
            self.send(h, 200, b"late", "text/plain")
        elif parts.path == "/redirect":
            self.send(h, 302, b"", "text/plain", {"Location": parse_qs(parts.query)["to"][0]})
        elif parts.path.startswith("/chain/"):
            left = int(parts.path.rsplit("/", 1)[1])
            if left:
                self.send(h, 301, b"", "text/plain", {"Location": f"/chain/{left - 1}"})
            else:
                self.send(h, 200, b"end of chain", "text/plain")
        else:
            self.send(h, 404, b"no such page", "text/plain")

    @staticmethod
    def send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        media_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", media_type)
            h.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(body)
        except OSError:  # the client stopped reading (size cap, timeout)
            pass

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def other_server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail loudly if http_get builds an HTTP client (it must refuse before connecting)."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        attempts.append("client")
        raise AssertionError("http_get tried to connect")

    monkeypatch.setattr(web.httpx2, "Client", refuse)
    return attempts


def _get(tool: Tool, url: str, **arguments: Any) -> ToolResult:
    call = ToolCall(id="h1", name=tool.name, arguments=orjson.dumps({"url": url, **arguments}))
    return ToolRegistry([tool]).execute(call)


LOCAL = make_http_get(allow_private=True)


def test_a_page_is_fetched_with_status_headers_and_text(server: Server) -> None:
    result = _get(LOCAL, server.url("/hello"))
    assert result.ok, result.content
    page = result.value
    assert page["status"] == 200 and page["text"] == "hello, wörld"
    assert page["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert page["truncated"] is False and page["redirects"] == []
    assert page["url"] == server.url("/hello")


def test_an_error_status_is_a_normal_answer_with_that_status(server: Server) -> None:
    page = _get(LOCAL, server.url("/missing")).value
    assert page["status"] == 404 and page["text"] == "no such page"


def test_the_body_is_cut_at_max_bytes_and_flagged_truncated(server: Server) -> None:
    page = _get(LOCAL, server.url("/big"), max_bytes=1000).value
    assert page["text"] == "a" * 1000 and page["bytes"] == 1000 and page["truncated"] is True


def test_a_body_of_exactly_max_bytes_is_not_truncated(server: Server) -> None:
    page = _get(LOCAL, server.url("/big"), max_bytes=50_000).value
    assert page["bytes"] == 50_000 and page["truncated"] is False


def test_a_gzip_body_is_inflated_and_capped_by_its_real_size(server: Server) -> None:
    page = _get(LOCAL, server.url("/gzip"), max_bytes=100).value
    assert page["text"] == "z" * 100 and page["truncated"] is True


def test_a_server_that_does_not_answer_in_time_is_a_timeout_error_value(server: Server) -> None:
    started = time.perf_counter()
    result = _get(LOCAL, server.url("/slow"), timeout=0.2)
    assert time.perf_counter() - started < 1.0
    assert result.error is not None and result.error["type"] == "TimeoutError"
    assert "within 0.2 s" in result.error["message"]
    assert result.content.startswith("Error: TimeoutError")


def test_redirects_are_followed_and_listed(server: Server) -> None:
    page = _get(LOCAL, server.url("/chain/3")).value
    assert page["text"] == "end of chain" and page["url"] == server.url("/chain/0")
    assert page["redirects"] == [server.url(f"/chain/{n}") for n in (2, 1, 0)]


def test_more_than_five_redirects_are_an_error_value(server: Server) -> None:
    result = _get(LOCAL, server.url("/chain/6"))
    assert result.error is not None and result.error["type"] == "FetchError"
    assert "too many redirects (more than 5)" in result.error["message"]
    assert len(server.requests) == 6


def test_an_allow_listed_host_is_fetched(server: Server) -> None:
    listed = make_http_get(allow_hosts=[f"127.0.0.1:{server.port}"])
    assert _get(listed, server.url("/hello")).value["text"] == "hello, wörld"


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{other}/hello",
        "http://localhost:{other}/hello",
        "http://[::1]:{other}/hello",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "file:///etc/passwd",
    ],
)
def test_a_redirect_from_an_allow_listed_host_is_checked_again_and_refused(
    server: Server, other_server: Server, target: str
) -> None:
    listed = make_http_get(allow_hosts=[f"127.0.0.1:{server.port}"])
    to = target.format(other=other_server.port)
    result = _get(listed, server.url(f"/redirect?to={to}"))
    assert result.error is not None and result.error["type"] == "URLRefusedError"
    assert len(server.requests) == 1 and other_server.requests == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://x/"])
def test_schemes_other_than_http_are_refused(url: str, no_connections: list[str]) -> None:
    result = _get(LOCAL, url)
    assert result.error is not None and result.error["type"] == "URLRefusedError"
    assert "only http and https" in result.error["message"] and no_connections == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/hello",
        "http://localhost:{port}/hello",
        "http://169.254.169.254/",
        "http://[::1]:{port}/",
        "http://10.0.0.1/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://2130706433:{port}/",
        "http://metadata.google.internal/",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0:{port}/",
    ],
)
def test_the_default_http_get_refuses_local_addresses_without_connecting(
    server: Server, no_connections: list[str], url: str
) -> None:
    result = _get(http_get, url.format(port=server.port))
    assert result.error is not None and result.error["type"] == "URLRefusedError"
    assert result.content.startswith("Error: URLRefusedError")
    assert server.requests == [] and no_connections == []


@pytest.mark.parametrize("url", ["http://169.254.169.254/", "http://metadata.google.internal/"])
def test_metadata_endpoints_stay_refused_when_private_addresses_are_allowed(
    url: str, no_connections: list[str]
) -> None:
    result = _get(LOCAL, url)
    assert result.error is not None and "metadata" in result.error["message"]


def test_a_host_is_refused_if_any_of_its_addresses_is_private(no_connections: list[str]) -> None:
    calls: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return ["93.184.216.34", "10.1.2.3"]

    result = _get(make_http_get(resolver=resolver), "http://mixed.test/")
    assert (
        result.error is not None
        and "10.1.2.3, which is a private address" in (result.error["message"])
    )
    assert calls == [("mixed.test", 80)]


def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(server: Server) -> None:
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])  # a rebinding DNS: safe first, then private
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    pinned = make_http_get(allow_hosts=[f"rebind.test:{server.port}"], resolver=rebinding)
    page = _get(pinned, f"http://rebind.test:{server.port}/hello").value
    assert page["text"] == "hello, wörld"
    assert calls == ["rebind.test"]
    assert server.requests == [("/hello", f"rebind.test:{server.port}")]


def test_invalid_arguments_are_refused_before_fetching(no_connections: list[str]) -> None:
    result = _get(http_get, "http://example.com/", max_bytes=0)
    assert result.error is not None and result.error["type"] == "InvalidArgumentsError"
    assert "max_bytes" in result.error["message"]


def test_the_spec_describes_url_max_bytes_and_timeout() -> None:
    params = http_get.parameters
    assert params["required"] == ["url"]
    assert params["properties"]["max_bytes"]["default"] == 1_000_000
    assert params["properties"]["timeout"]["default"] == 10
    assert params["properties"]["url"]["description"].startswith("the http:// or https:// URL")
