"""The proxy's recording path: the recording transport's effects, without httpx2's models.

:class:`Relay` records exactly what :class:`~rar.interop.transport.AsyncRecordingTransport`
records (it is the same :class:`~rar.interop.transport._Recording`: the same request
description, effects, cache, stream recorder and results), but takes the proxy's request as
bytes, sends it with the proxy's own upstream client (:mod:`rar.interop._upstream`) and hands
back an :class:`Answer` of bytes, where the transport builds an ``httpx2.Request``, an
``httpx2.Response`` for the upstream answer and another one rebuilt from the record (~0.3 ms
per call together).

**Where the record is written.** On the event loop, in the order the requests get there, and an
answer goes to its client only after its effect was appended (so after its fsyncs). Writing on
one worker thread instead, so that the loop could serve other requests during the fsyncs, was
tried under ``bench/proxy.py``'s 16-client load and is slower: ~0.7 ms more CPU per call (the GIL
handed back and forth between the two threads around every fsync) and 15–30% fewer requests/s.

**In record mode the request goes out first**: nothing but the upstream can answer it, so it
is sent before it is described (the neutral form, its digest, the effect's ordinal), and that
work is done while the upstream works on the answer. The effect's duration still starts when
the request was sent.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2

from rar.interop import _answers
from rar.interop._calls import Call, describe
from rar.interop._streams import TooLarge
from rar.interop._upstream import Exchange, Reply, Upstream
from rar.interop.transport import MAX_BODY_BYTES, _Recording, _too_large
from rar.runtime.pending import PendingEffect
from rar.runtime.run import Run

_DROPPED_RESPONSE = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
_SIMPLE_PATH = re.compile(r"[A-Za-z0-9._~/-]*")


@dataclass
class Answer:
    """What the proxy sends back: status, headers (hop-by-hop ones left out), and the body —
    whole (``body``, sent with its length) or streamed (``body`` first, then ``pieces``, then
    the error event for ``error`` when the stream was cut)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    streamed: bool = False
    pieces: AsyncIterator[bytes] | None = None
    error: str | None = None
    _finish: Callable[[], Any] | None = None

    async def aclose(self) -> None:
        """Release the upstream answer (a stream the client left early is recorded so)."""
        pieces, self.pieces = self.pieces, None
        if pieces is not None and hasattr(pieces, "aclose"):
            await pieces.aclose()
        finish, self._finish = self._finish, None
        if finish is not None:
            await finish()


Stage = Callable[[Answer], Callable[[], None] | None]
"""Stages an upstream's whole answer before its record is durable; returns what completes it."""


def _encoded(headers: list[list[str]] | list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    out = []
    for name, value in headers:
        if name in _DROPPED_RESPONSE:
            continue
        try:
            out.append((name.encode("latin-1"), value.encode("latin-1")))
        except UnicodeEncodeError:
            out.append((name.encode("utf-8"), value.encode("utf-8")))
    return out


def served(result: dict[str, Any]) -> Answer:
    """The answer a recorded result stands for (a replay, a cache hit, a just-recorded one)."""
    http = _answers.http_of(result)
    headers = _encoded(http.get("headers") or [])
    body = _answers.body_bytes(http)
    interrupted = http.get("interrupted")
    kind = next((v for k, v in headers if k == b"content-type"), b"")
    streamed = bool(http.get("stream") or interrupted) or kind.startswith(b"text/event-stream")
    return Answer(
        int(http["status"]),
        headers,
        body,
        streamed=streamed,
        error=str(interrupted) if interrupted else None,
    )


class _HeaderView:
    """The forwarded request headers as :func:`describe` reads them: ``get(name)``, names
    lower-case, repeated headers joined with ``", "`` (as ``httpx2.Headers.get`` does)."""

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self._values: dict[str, str] = {}
        for name, value in headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            known = self._values.get(key)
            self._values[key] = text if known is None else f"{known}, {text}"

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)


class Relay(_Recording):
    """One proxy session's requests under ``base_url`` (the upstream API base, as recorded),
    recorded in ``run`` and sent with ``upstream`` (None: a replay, which never goes
    upstream)."""

    def __init__(self, run: Run, base_url: str, upstream: Upstream | None, *, cache: bool) -> None:
        super().__init__(run, cache=cache)
        self.upstream = upstream
        url = httpx2.URL(base_url)  # normalised as the transport's request URL was
        self._base = base_url
        self._base_url = str(url).rstrip("/")
        self._base_path = url.raw_path.rstrip(b"/")

    def target(self, path: str, query: bytes) -> tuple[str, bytes]:
        """(the request's URL as recorded, its request-line target) for ``path`` under the
        upstream base and the client's raw query string."""
        if not query and _SIMPLE_PATH.fullmatch(path):
            return self._base_url + path, self._base_path + path.encode("ascii")
        url = httpx2.URL(self._base + path + ("?" + query.decode("latin-1") if query else ""))
        return str(url), url.raw_path

    def exchange(
        self,
        method: str,
        url: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        stage: Stage | None = None,
    ) -> Awaitable[Answer]:
        """Start recording one exchange; await what it returns for the answer. Raises (here
        or when awaited) what the transport raises: a replay miss, a recorded error, an
        upstream failure as an ``httpx2`` error, a RarError.

        In record mode the request is written upstream before this returns (on a kept-alive
        connection), so the upstream works on it while the caller goes on. ``stage`` is
        handed an upstream's whole answer, as recorded, before its record is durable (see
        :meth:`PendingEffect.finish <rar.runtime.pending.PendingEffect.finish>`); the answer
        awaited is then that same object, once the record is durable."""
        upstream = self.upstream
        if upstream is None or self.cache is not None or self.run.mode != "record":
            return self._looked_up(method, url, target, headers, body, stage)
        # record mode: nothing but the upstream can answer, so the request goes out first and
        # is described and given its effect while the upstream works on it
        started = time.perf_counter_ns()
        exchange = upstream.send(method, target, headers, body)
        try:
            call = describe(method, url, _HeaderView(headers), body)
            effect = self._begin_sent(call, started)
        except BaseException:
            exchange.abandon()
            raise
        return self._answered(call, effect, exchange, stage)

    async def _looked_up(
        self,
        method: str,
        url: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        stage: Stage | None,
    ) -> Answer:
        """A replay's answer or a cache hit, else the upstream's (recorded)."""
        call = describe(method, url, _HeaderView(headers), body)
        effect, recorded = self._open_effect(call)
        if recorded is not None:
            return served(recorded)
        assert self.upstream is not None, "a replay serves every request from the record"
        exchange = self.upstream.send(method, target, headers, body)
        return await self._answered(call, effect, exchange, stage)

    async def _answered(
        self,
        call: Call,
        effect: PendingEffect,
        exchange: Exchange,
        stage: Stage | None,
    ) -> Answer:
        """The upstream's answer to a request sent, recorded as ``effect``."""
        try:
            reply = await exchange.reply()
        except BaseException as exc:
            effect.fail(exc)
            raise
        kind = (reply.get("content-type") or "").partition(";")[0].strip().lower()
        if call.stream is not None and kind == "text/event-stream":
            return await self._stream(call, effect, reply)
        try:
            data = await reply.read(MAX_BODY_BYTES, _too_large)
        except BaseException as exc:
            effect.fail(exc)
            raise
        finally:
            await reply.aclose()
        answers: list[Answer] = []

        def staged(recorded: dict[str, Any]) -> Callable[[], None] | None:
            answers.append(served(recorded))
            return None if stage is None else stage(answers[0])

        recorded = self._whole(call, effect, reply, data, staged)
        # the store's bookkeeping of the record comes after the answer is on its way
        asyncio.get_running_loop().call_soon(self.run.settle)
        return answers[0] if answers else served(recorded)

    def _begin_sent(self, call: Call, started: int) -> PendingEffect:
        """The effect of a request already sent (its duration covers the whole exchange)."""
        return self.run.begin_effect(call.kind, call.payload, started=started, waiting=True)

    def _open_effect(self, call: Call) -> tuple[PendingEffect, dict[str, Any] | None]:
        effect = self.run.begin_effect(call.kind, call.payload)
        return effect, self._recorded_result(call, effect)

    def _whole(
        self,
        call: Call,
        effect: PendingEffect,
        reply: Reply,
        data: bytes,
        staged: Callable[[dict[str, Any]], Callable[[], None] | None],
    ) -> dict[str, Any]:
        # served() reads status, headers and body only: strings and an integer, which
        # canonical JSON keeps as they are, so the result need not be read back; the headers
        # are redacted with the rest of the result
        headers = _answers.kept_pairs(reply.headers)
        # with no cache to index (whose row wants the effect still its span's latest), the
        # counting waits until the answer is on its way
        later = asyncio.get_running_loop().call_soon if self.cache is None else None
        return self._record_whole_result(
            call,
            effect,
            reply.status,
            headers,
            data,
            read_back=False,
            unseen=True,
            later=later,
            staged=staged,
        )

    async def _stream(self, call: Call, effect: PendingEffect, reply: Reply) -> Answer:
        recorder = self._recorder_for(call, effect, reply.status, self._kept(reply.headers))

        async def pieces() -> AsyncIterator[bytes]:
            try:
                async for chunk in reply:
                    for piece in recorder.feed(chunk):
                        yield piece
            except (httpx2.TransportError, httpx2.DecodingError, TooLarge) as exc:
                held, error = recorder.broken(exc)
                await reply.aclose()
                for piece in held:
                    yield piece
                raise error from exc
            held, end_error = recorder.end()
            await reply.aclose()
            for piece in held:
                yield piece
            if end_error is not None:
                raise end_error

        async def finish() -> None:
            if not recorder.settled:
                recorder.closed_early()
            await reply.aclose()

        answer = Answer(reply.status, _encoded(recorder.headers), streamed=True)
        answer.pieces = pieces()
        answer._finish = finish
        return answer

    async def aclose(self) -> None:
        """Close the upstream connections; a stream still open is recorded as closed early."""
        self._close_streams()
        if self.upstream is not None:
            await self.upstream.aclose()


__all__ = ["Answer", "Relay", "served"]
