"""``rar proxy`` in-process: the official openai SDK as its client, a scripted upstream, and
raw sockets for what a well-behaved client never sends."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from proxy_helpers import ProxyThread
from rar.redaction import Redactor
from rar.store.manifest import RunStatus
from rar.store.store import Store
from redaction_corpus import _store_text
from servers.openai_server import Answer, OpenAIServer

UPSTREAM_KEY = "upstreamkey-4b7d1e9a2c5f8b3e6d0a1c4f7b2e5d8a"
CLIENT_KEY = "clientkey-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=CLIENT_KEY, max_retries=0)


def conversation(url: str) -> dict[str, Any]:
    """What a plain script does: a call, a stream, an async call."""
    client = sdk(url)
    plain = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "stream"}], stream=True
    )
    chunks = [chunk.model_dump(mode="json") for chunk in stream]

    async def later() -> Any:
        async_client = openai.AsyncOpenAI(base_url=url, api_key=CLIENT_KEY, max_retries=0)
        answer = await async_client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "async"}]
        )
        return answer.model_dump(mode="json")

    return {"plain": plain.model_dump(mode="json"), "chunks": chunks, "async": asyncio.run(later())}


def _answers() -> list[Answer]:
    return [Answer(content="hello"), Answer(content="streamed text"), Answer(content="async!")]


def _record(store: Store, **options: Any) -> tuple[str, dict[str, Any], OpenAIServer]:
    with OpenAIServer() as upstream:
        upstream.script(*_answers())
        with ProxyThread(store, upstream=upstream.base_url, api_key=UPSTREAM_KEY, **options) as p:
            recorded = conversation(p.url)
    return p.run_id, recorded, upstream


def test_an_sdk_session_records_and_replays_with_no_upstream(store: Store) -> None:
    run_id, recorded, upstream = _record(store)
    assert len(upstream.received) == 3
    assert store.manifest(run_id).status == RunStatus.COMPLETED
    with ProxyThread(store, mode="replay", source=run_id) as replaying:
        replayed = conversation(replaying.url)
    assert replayed == recorded
    report = replaying.summary.report if replaying.summary else None
    assert report is not None and report["replay_status"] == "reproducible"
    assert report["served"] == 3
    assert store.manifest(replaying.run_id).parent is not None


def test_replay_serves_streams_byte_for_byte_including_done(store: Store) -> None:
    import httpx2

    body = {"model": "m", "messages": [{"role": "user", "content": "s"}], "stream": True}
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="bytes!"))
        with ProxyThread(store, upstream=upstream.base_url) as recording:
            first = httpx2.post(f"{recording.url}/chat/completions", json=body).content
    with ProxyThread(store, mode="replay", source=recording.run_id) as replaying:
        again = httpx2.post(f"{replaying.url}/chat/completions", json=body).content
    assert again == first
    assert first.endswith(b"data: [DONE]\n\n")


def test_the_client_key_is_dropped_and_the_upstream_key_never_stored(
    store: Store, store_path: Path
) -> None:
    with OpenAIServer() as upstream:
        upstream.script(*_answers())
        quiet = Redactor(env={})  # no second line of defence: only the proxy keeps keys out
        with ProxyThread(
            store, upstream=upstream.base_url, api_key=UPSTREAM_KEY, redactor=quiet
        ) as p:
            conversation(p.url)
    auth = {r.headers.get("authorization") for r in upstream.received}
    assert auth == {f"Bearer {UPSTREAM_KEY}"}
    store.close()
    everything = _store_text(store_path)
    assert UPSTREAM_KEY not in everything and CLIENT_KEY not in everything


def test_cached_mode_serves_a_repeated_request_without_going_upstream(store: Store) -> None:
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="once"))
        with ProxyThread(store, mode="cached", upstream=upstream.base_url) as p:
            client = sdk(p.url)
            answers = [
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "same"}]
                )
                .choices[0]
                .message.content
                for _ in range(3)
            ]
        assert len(upstream.received) == 1
    assert answers == ["once"] * 3


def test_record_mode_always_goes_upstream(store: Store) -> None:
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="one"), Answer(content="two"))
        with ProxyThread(store, upstream=upstream.base_url) as p:
            client = sdk(p.url)
            for _ in range(2):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
        assert len(upstream.received) == 2


def test_identical_requests_replay_in_recorded_order_and_an_extra_one_is_a_miss(
    store: Store,
) -> None:
    ask = {"model": "m", "messages": [{"role": "user", "content": "again"}]}
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="first"), Answer(content="second"))
        with ProxyThread(store, upstream=upstream.base_url) as recording:
            client = sdk(recording.url)
            for _ in range(2):
                client.chat.completions.create(**ask)
    with ProxyThread(store, mode="replay", source=recording.run_id) as replaying:
        client = sdk(replaying.url)
        got = [client.chat.completions.create(**ask).choices[0].message.content for _ in range(2)]
        with pytest.raises(openai.NotFoundError, match="every recorded answer"):
            client.chat.completions.create(**ask)
        with pytest.raises(openai.NotFoundError, match="never recorded"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "new"}])
    assert got == ["first", "second"]
    report = replaying.summary.report if replaying.summary else {}
    assert report["replay_status"] == "non-reproducible" and report["mismatched"] == 2


def test_a_truncated_upstream_stream_gives_the_client_an_error_event_and_is_not_cached(
    store: Store,
) -> None:
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="cut short", cut_after=2), Answer(content="whole"))
        with ProxyThread(store, mode="cached", upstream=upstream.base_url) as p:
            client = sdk(p.url)
            ask = {"model": "m", "messages": [{"role": "user", "content": "cut"}], "stream": True}
            with pytest.raises(openai.APIError, match="end marker"):
                list(client.chat.completions.create(**ask))
            whole = "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(**ask)
                if c.choices
            )
        assert len(upstream.received) == 2  # the cut answer was not served from the cache
    assert whole == "whole"


def test_models_and_completions_paths_work_with_or_without_the_v1_prefix(store: Store) -> None:
    import httpx2

    with OpenAIServer() as upstream:
        upstream.script(Answer(text="completed"), Answer(content="chat"))
        with ProxyThread(store, upstream=upstream.base_url) as p:
            root = f"http://127.0.0.1:{p.port}"
            text = httpx2.post(f"{root}/v1/completions", json={"model": "m", "prompt": "x"})
            chat = httpx2.post(
                f"{root}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            )
            unknown = httpx2.post(f"{root}/v1/files", content=b"x")
    assert text.json()["choices"][0]["text"] == "completed"
    assert chat.json()["choices"][0]["message"]["content"] == "chat"
    assert unknown.status_code == 404
    assert [r.path for r in upstream.received] == ["/v1/completions", "/v1/chat/completions"]


# --- hardening -----------------------------------------------------------------------------------

CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


def _exchange(
    port: int, *parts: bytes, pause: float = 0.0, wait: float = 5.0
) -> tuple[bytes, bool]:
    """Send ``parts`` (``pause`` apart) on a raw connection; (everything read, closed by the
    server)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        for piece in parts:
            sock.sendall(piece)
            time.sleep(pause)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
    return received, True


def _good_request(port: int) -> bytes:
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(CHAT)
    ) + CHAT
    answer, _ = _exchange(port, request)
    return answer


@pytest.fixture
def guarded(store: Store) -> Any:
    with OpenAIServer() as upstream:
        upstream.script(*[Answer(content="still serving")] * 20)
        with ProxyThread(
            store,
            upstream=upstream.base_url,
            max_body=4096,
            header_timeout=0.5,
            body_timeout=0.5,
        ) as proxy:
            yield proxy


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
ATTACKS = {
    "malformed request line": ([b"NOT HTTP AT ALL\r\n\r\n"], b"400"),
    "bad header": ([HEAD + b"Bad Header\r\n\r\n"], b"400"),
    "oversize headers": ([HEAD + b"X-Big: " + b"a" * 80_000], b"431"),
    "oversize headers, many of them": ([HEAD + b"X-Big: aaaaaaaaaa\r\n" * 8000], b"431"),
    "a bare LF": ([b"POST /v1/chat/completions HTTP/1.1\nHost: proxy\n\n"], b"400"),
    "an obsolete line fold": ([HEAD + b"X-A: 1\r\n 2\r\n\r\n"], b"400"),
    "two content-lengths": ([HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"], b"400"),
    "an unknown transfer-encoding": ([HEAD + b"Transfer-Encoding: gzip\r\n\r\n"], b"400"),
    "http/2 on the request line": ([b"GET /v1/models HTTP/2.0\r\nHost: proxy\r\n\r\n"], b"505"),
    "content-length and transfer-encoding": (
        [
            HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n"
        ],
        b"400",
    ),
    "transfer-encoding and content-length": (
        [
            HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
            b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n"
        ],
        b"400",
    ),
    "oversize content-length": ([HEAD + b"Content-Length: 999999\r\n\r\n"], b"413"),
    "oversize chunked body": (
        [
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
            b"2000\r\n" + b"x" * 8192 + b"\r\n0\r\n\r\n",
        ],
        b"413",
    ),
    "headers that never end": ([HEAD + b"X-Slow: 1"], b"408"),
    "a connection that sends nothing": ([b""], b"408"),
    "a body that never comes": ([HEAD + b"Content-Length: 100\r\n\r\n{"], b"408"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_bad_requests_get_4xx_and_a_closed_connection_and_the_proxy_keeps_serving(
    guarded: ProxyThread, attack: str
) -> None:
    parts, status = ATTACKS[attack]
    answer, closed = _exchange(guarded.port, *parts)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    assert closed, "the server must close the connection"
    assert b"still serving" in _good_request(guarded.port)


def test_a_trickle_of_header_bytes_does_not_keep_a_connection_open(guarded: ProxyThread) -> None:
    started = time.monotonic()
    answer, closed = _exchange(guarded.port, HEAD, b"X-A: 1\r\n", b"X-B: 2\r\n", pause=0.2)
    assert answer.startswith(b"HTTP/1.1 408") and closed
    assert time.monotonic() - started < 3


def test_replay_refuses_a_session_still_being_recorded_and_a_run_of_another_kind(
    store: Store,
) -> None:
    from helpers import record_small_run

    from rar.errors import UserError
    from rar.interop.proxy import Proxy

    with (
        OpenAIServer() as upstream,
        ProxyThread(store, upstream=upstream.base_url) as recording,
        pytest.raises(UserError, match="still being recorded"),
    ):
        Proxy(store, mode="replay", source=recording.run_id)
    other = record_small_run(store)
    with pytest.raises(UserError, match="not a recorded rar proxy session"):
        Proxy(store, mode="replay", source=other.id)


def test_an_answer_whose_record_fails_is_never_completed_for_the_client(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy sends an answer but its last byte while the record is made durable; when
    the fsync fails the answer is withdrawn (the connection closes), never completed."""
    import errno

    import rar.store._fs as fs

    failed: list[int] = []
    real_fsync = fs.os.fsync

    def failing_fsync(fd: int) -> None:
        if armed:
            failed.append(fd)
            raise OSError(errno.EIO, "injected: I/O error")
        real_fsync(fd)

    armed = False
    monkeypatch.setattr(fs.os, "fsync", failing_fsync)
    with OpenAIServer() as upstream:
        upstream.script(Answer(content="an answer long enough to be staged"))
        with ProxyThread(store, upstream=upstream.base_url, api_key=UPSTREAM_KEY) as proxy:
            armed = True
            with pytest.raises(openai.APIConnectionError):
                sdk(proxy.url).chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
                )
            armed = False
            assert failed, "the fault was injected"
