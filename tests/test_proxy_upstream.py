"""The proxy's own upstream client (:mod:`rar.interop._upstream`) against scripted raw HTTP
servers, and the proxy's record path under concurrent requests (:mod:`rar.interop._relay`)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from proxy_helpers import ProxyThread
from rar.interop._upstream import Upstream
from rar.store.store import Store
from servers.openai_server import Answer, OpenAIServer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """An asyncio server on 127.0.0.1 answering each request with the next scripted bytes
    (or calling the next scripted handler); counts connections and keeps the requests."""

    def __init__(self, *answers: bytes | Handler) -> None:
        self.answers = list(answers)
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if callable(answer):
                    await answer(reader, writer)
                    return
                writer.write(answer)
                await writer.drain()
                lower = answer.lower()
                framed = b"content-length" in lower or b"transfer-encoding" in lower
                if b"connection: close" in lower or not (framed or b" 204 " in answer):
                    break  # an answer read to the end of its connection
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def ok(body: bytes, *headers: bytes) -> bytes:
    extra = b"".join(h + b"\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def fetch(client: Upstream, body: bytes = b"{}") -> tuple[int, list[tuple[str, str]], bytes]:
    reply = await client.request("POST", b"/v1/chat/completions", [], body)
    try:
        return reply.status, reply.headers, await reply.read(1 << 20, lambda: OverflowError())
    finally:
        await reply.aclose()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_a_kept_alive_connection_carries_the_next_request() -> None:
    async def go() -> None:
        async with RawServer(ok(b"one"), ok(b"two")) as server:
            client = Upstream(server.url)
            assert (await fetch(client))[2] == b"one"
            assert (await fetch(client, b'{"a":1}'))[2] == b"two"
            assert server.connections == 1
            await client.aclose()
        first = server.requests[0]
        assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"\r\naccept-encoding: gzip, deflate\r\n" in first
        assert server.requests[1].endswith(b'content-length: 7\r\n\r\n{"a":1}')

    run(go())


def test_on_a_kept_alive_connection_a_request_is_on_the_wire_before_its_answer_is_awaited() -> None:
    async def go() -> None:
        async with RawServer(ok(b"one"), ok(b"two"), ok(b"gone"), ok(b"four")) as server:
            client = Upstream(server.url)
            await fetch(client)
            exchange = client.send("POST", b"/v1/chat/completions", [], b"{}")
            await asyncio.sleep(0.05)  # nothing awaits the answer yet
            assert len(server.requests) == 2
            reply = await exchange.reply()
            assert await reply.read(100, OverflowError) == b"two"
            await reply.aclose()
            given_up = client.send("POST", b"/v1/chat/completions", [], b"{}")
            given_up.abandon()  # its connection is closed, never reused
            assert (await fetch(client))[2] == b"four"
            assert server.connections == 2
            await client.aclose()

    run(go())


def test_chunked_answers_with_extensions_and_trailers_are_read_whole() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nx-trailer: 1\r\n\r\n"
    )

    async def go() -> None:
        async with RawServer(chunked, ok(b"again")) as server:
            client = Upstream(server.url)
            assert (await fetch(client))[2] == b"hello world"
            assert (await fetch(client))[2] == b"again"
            assert server.connections == 1  # the chunked answer was read to its end
            await client.aclose()

    run(go())


def test_an_answer_without_a_length_is_read_to_the_end_of_its_connection() -> None:
    async def go() -> None:
        async with RawServer(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", ok(b"new")) as server:
            client = Upstream(server.url)
            assert (await fetch(client))[2] == b"until the end"
            assert (await fetch(client))[2] == b"new"
            assert server.connections == 2
            await client.aclose()

    run(go())


def test_gzip_and_deflate_are_undone_and_an_unknown_coding_is_passed_on() -> None:
    text = b'{"answer": "' + b"compressible " * 200 + b'"}'
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    bare = raw_deflate.compress(text) + raw_deflate.flush()
    answers = [
        ok(gzip.compress(text), b"content-encoding: gzip"),
        ok(zlib.compress(text), b"content-encoding: deflate"),
        ok(bare, b"content-encoding: deflate"),
        ok(b"as it came", b"content-encoding: snappy"),
    ]

    async def go() -> None:
        async with RawServer(*answers) as server:
            client = Upstream(server.url)
            for expected in (text, text, text, b"as it came"):
                assert (await fetch(client))[2] == expected
            await client.aclose()

    run(go())


def test_informational_answers_are_skipped_and_204_has_no_body() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + ok(b"final")

    async def go() -> None:
        async with RawServer(early, b"HTTP/1.1 204 No Content\r\n\r\n", ok(b"x")) as server:
            client = Upstream(server.url)
            assert await fetch(client) == (200, [("content-length", "5")], b"final")
            assert (await fetch(client))[::2] == (204, b"")
            assert (await fetch(client))[2] == b"x"
            assert server.connections == 1
            await client.aclose()

    run(go())


def test_header_names_are_lower_case_and_repeated_ones_kept_in_order() -> None:
    answer = ok(b"{}", b"X-Request-ID: abc", b"Set-Cookie: a=1", b"set-cookie: b=2")

    async def go() -> None:
        async with RawServer(answer) as server:
            client = Upstream(server.url)
            reply = await client.request("GET", b"/v1/models", [(b"accept", b"*/*")], b"")
            assert reply.get("set-cookie") == "a=1, b=2"
            assert ("x-request-id", "abc") in reply.headers
            await reply.aclose()
            await client.aclose()
        assert b"content-length" not in server.requests[0]  # a GET without a body

    run(go())


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd", "conflicting"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", "bad Content-Length"),
        (b"HTTP/2 200 OK\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nconnection: close\r\n\r\nshort", "middle"),
        (b"", "Server disconnected without sending a response"),
    ],
)
def test_a_broken_answer_is_a_remote_protocol_error(answer: bytes, message: str) -> None:
    async def close_now(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async def go() -> None:
        async with RawServer(answer or close_now) as server:
            client = Upstream(server.url)
            with pytest.raises(httpx2.RemoteProtocolError, match=message):
                await fetch(client)
            await client.aclose()

    run(go())


def test_chunked_wins_over_a_content_length_and_the_connection_is_not_reused() -> None:
    both = (
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    )

    async def go() -> None:
        async with RawServer(both, ok(b"next")) as server:
            client = Upstream(server.url)
            assert (await fetch(client))[2] == b"ok"
            assert (await fetch(client))[2] == b"next"
            assert server.connections == 2
            await client.aclose()

    run(go())


def test_an_idle_connection_the_server_closed_is_not_used_again() -> None:
    async def go() -> None:
        async with RawServer(ok(b"first", b"connection: close"), ok(b"second")) as server:
            client = Upstream(server.url)
            assert (await fetch(client))[2] == b"first"
            await asyncio.sleep(0.05)
            assert (await fetch(client))[2] == b"second"
            assert server.connections == 2
            await client.aclose()

    run(go())


def test_an_expired_idle_connection_is_replaced() -> None:
    async def go() -> None:
        async with RawServer(ok(b"a"), ok(b"b")) as server:
            client = Upstream(server.url, keepalive_expiry=0.01)
            await fetch(client)
            await asyncio.sleep(0.05)
            await fetch(client)
            assert server.connections == 2
            await client.aclose()

    run(go())


def test_no_server_is_a_connect_error_and_a_silent_one_a_read_timeout() -> None:
    async def never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def go() -> None:
        async with RawServer() as server:
            url = server.url
        with pytest.raises(httpx2.ConnectError):
            await fetch(Upstream(url))
        async with RawServer(never) as server:
            client = Upstream(server.url, read_timeout=0.2)
            with pytest.raises(httpx2.ReadTimeout):
                await fetch(client)
            await client.aclose()

    run(go())


def test_a_stream_is_handed_on_as_it_arrives() -> None:
    gate = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n")
        await writer.drain()
        await gate.wait()
        writer.write(b"3\r\nx\n\n\r\n0\r\n\r\n")
        await writer.drain()

    async def go() -> None:
        async with RawServer(slow) as server:
            client = Upstream(server.url)
            reply = await client.request("POST", b"/v1/chat/completions", [], b"{}")
            pieces = aiter(reply)
            assert await anext(pieces) == b"data: "  # before the rest was even sent
            gate.set()
            assert [p async for p in pieces] == [b"x\n\n"]
            await reply.aclose()
            await client.aclose()

    run(go())


def test_an_https_upstream_is_reached_over_tls(tmp_path: Any) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def go() -> None:
        server = RawServer(ok(b"secure"), ok(b"again"))
        server.server = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=served)
        port = server.server.sockets[0].getsockname()[1]
        client = Upstream(f"https://localhost:{port}/v1", ssl_context=trusting)
        assert (await fetch(client))[2] == b"secure"
        assert (await fetch(client))[2] == b"again"
        assert server.connections == 1
        await client.aclose()
        server.server.close()
        assert server.requests[0].split(b"\r\n")[1] == b"host: localhost:%d" % port

    run(go())


def _self_signed(tmp_path: Any) -> tuple[Any, Any]:
    pytest.importorskip("cryptography")
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# --- the record path ---------------------------------------------------------------------------


def test_concurrent_requests_are_all_recorded_and_replay(store: Store) -> None:
    count = 24
    with OpenAIServer() as upstream:
        upstream.script(*[Answer(content=f"answer {n}") for n in range(count)])
        with ProxyThread(store, upstream=upstream.base_url) as recording:

            async def ask_all(url: str) -> list[str]:
                limits = httpx2.Limits(max_connections=count)
                async with httpx2.AsyncClient(limits=limits, timeout=30) as http:

                    async def ask(n: int) -> str:
                        body = {"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}
                        answer = await http.post(f"{url}/chat/completions", json=body)
                        assert answer.status_code == 200, answer.text
                        return str(answer.json()["choices"][0]["message"]["content"])

                    return await asyncio.gather(*(ask(n) for n in range(count)))

            got = run(ask_all(recording.url))
    assert sorted(got) == sorted(f"answer {n}" for n in range(count))
    effects = [e for e in store.events(recording.run_id) if e["type"] == "effect"]
    assert sorted(e["ordinal"] for e in effects) == list(range(count))
    assert all("result" in e for e in effects)
    with ProxyThread(store, mode="replay", source=recording.run_id) as replaying:
        again = run(ask_all(replaying.url))
    assert sorted(again) == sorted(got)
    report = replaying.summary.report if replaying.summary else {}
    assert report["replay_status"] == "reproducible" and report["served"] == count


def test_an_upstream_that_is_down_is_a_502_recorded_and_replayed(store: Store) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    body = {"model": "m", "messages": [{"role": "user", "content": "anyone?"}]}
    with ProxyThread(store, upstream=f"http://127.0.0.1:{port}/v1") as recording:
        first = httpx2.post(f"{recording.url}/chat/completions", json=body)
    assert first.status_code == 502 and first.json()["error"]["type"] == "rar_upstream"
    (effect,) = [e for e in store.events(recording.run_id) if e["type"] == "effect"]
    assert effect["error"]["type"] == "ConnectError"
    with ProxyThread(store, mode="replay", source=recording.run_id) as replaying:
        again = httpx2.post(f"{replaying.url}/chat/completions", json=body)
    assert again.status_code == 502 and again.json() == first.json()


def test_a_stream_whose_connection_breaks_is_recorded_cut_and_replayed_cut(store: Store) -> None:
    ask = {"model": "m", "messages": [{"role": "user", "content": "drop"}], "stream": True}
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="this will break", drop_after=2))
        with ProxyThread(store, upstream=upstream.base_url) as recording:
            first = httpx2.post(f"{recording.url}/chat/completions", json=ask).content
    assert b'"type":"rar_stream_interrupted"' in first
    with ProxyThread(store, mode="replay", source=recording.run_id) as replaying:
        again = httpx2.post(f"{replaying.url}/chat/completions", json=ask).content
    assert again == first
