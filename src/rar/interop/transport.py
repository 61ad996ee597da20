"""httpx2 transports that make the official SDKs' HTTP calls recorded effects of a run.

::

    import openai, rar
    from rar.interop import http_client

    with rar.record("summarise") as run:
        client = openai.OpenAI(http_client=http_client(run))
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=[...])

Each request is one effect of the run, in the span the SDK was called from: a model call an
``llm`` effect, anything else an ``http`` effect (see :mod:`rar.interop._calls` for what is
recorded, :mod:`rar.interop._answers` for the result). In record mode the request goes to the
wrapped transport (by default a plain ``httpx2.HTTPTransport``) unless the store's response
cache holds the answer; in a replay (a run made by :func:`rar.replay.engine.replay`) the
recorded answer is served, byte for byte, and nothing is sent.

Streams pass through as they arrive (see :mod:`rar.interop._streams`). The cache serves only
answers that came whole with status 200; errors, HTTP 4xx/5xx, interrupted streams and answers
cut by their token limit are recorded and replayed, never cached.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import httpx2

from rar.interop import _answers
from rar.interop._calls import Call, describe
from rar.interop._streams import StreamRecorder, TooLarge
from rar.llm.cache import ResponseCache, cacheable
from rar.runtime.pending import PendingEffect, Staged
from rar.runtime.run import Run

__all__ = ["AsyncRecordingTransport", "RecordingTransport", "async_http_client", "http_client"]

#: The most a whole (not streamed) answer may hold.
MAX_BODY_BYTES = 64 * 1024 * 1024


class _Recording:
    """What the sync and async transports share: the run, the cache, the open streams."""

    def __init__(self, run: Run, *, cache: bool) -> None:
        self.run = run
        self.cache = ResponseCache(run.store, redactor=run.redactor) if cache else None
        self._open: weakref.WeakSet[StreamRecorder] = weakref.WeakSet()

    def _begin(self, request: httpx2.Request, body: bytes) -> tuple[Call, PendingEffect]:
        call = describe(request.method, str(request.url), request.headers, body)
        return call, self.run.begin_effect(call.kind, call.payload)

    def _from_record(self, call: Call, effect: PendingEffect) -> httpx2.Response | None:
        """A replay's recorded answer, or a cache hit; None to ask the upstream."""
        recorded = self._recorded_result(call, effect)
        return None if recorded is None else _answers.replayed(recorded)

    def _recorded_result(self, call: Call, effect: PendingEffect) -> dict[str, Any] | None:
        """The result a replay serves, or a cache hit (recorded as this effect's result);
        None to ask the upstream."""
        served = effect.served()  # a recorded error, or a divergence, is raised here
        if served is not None:
            return served  # type: ignore[no-any-return]
        if self.cache is None or call.kind != "llm":
            return None
        try:
            hit = self.cache.get(effect.digest)
        except BaseException as exc:
            effect.fail(exc)
            raise
        if not hit or "http" not in hit or "response" not in hit:
            return None  # a Client's answer has no bytes to serve an SDK with
        recorded: dict[str, Any] = effect.finish({**hit, "cached": True})
        self._count(recorded)
        return recorded

    def _headers(self, upstream: httpx2.Response) -> list[list[str]]:
        return self._kept(upstream.headers.multi_items())

    def _kept(self, headers: Iterable[tuple[str, str]]) -> list[list[str]]:
        """The response headers a record keeps (see :func:`_answers.kept_headers`), redacted."""
        redacted: list[list[str]] = self.run.redactor.redact(_answers.kept_pairs(headers))
        return redacted

    def _record_whole(
        self, call: Call, effect: PendingEffect, upstream: httpx2.Response, body: bytes
    ) -> httpx2.Response:
        recorded = self._record_whole_result(
            call, effect, upstream.status_code, self._headers(upstream), body
        )
        return _answers.replayed(recorded)

    def _record_whole_result(
        self,
        call: Call,
        effect: PendingEffect,
        status: int,
        headers: list[list[str]],
        body: bytes,
        *,
        read_back: bool = True,
        unseen: bool = False,
        later: Callable[..., Any] | None = None,
        staged: Staged | None = None,
    ) -> dict[str, Any]:
        """Record a whole answer (``headers`` as :meth:`_kept` gives them); return the result
        as recorded (``read_back=False``: see :meth:`PendingEffect.finish`). ``later``
        (``loop.call_soon``) runs the counting afterwards, once the answer is handed on."""
        result = _answers.result_of(call, status, headers, body, streamed=False)
        recorded: dict[str, Any] = effect.finish(
            result, read_back=read_back, unseen=unseen, staged=staged
        )
        if later is None:
            self._recorded(call, effect, recorded, None)
        else:
            later(self._recorded, call, effect, recorded, None)
        return recorded

    def _recorder(
        self, call: Call, effect: PendingEffect, upstream: httpx2.Response
    ) -> StreamRecorder:
        return self._recorder_for(call, effect, upstream.status_code, self._headers(upstream))

    def _recorder_for(
        self, call: Call, effect: PendingEffect, status: int, headers: list[list[str]]
    ) -> StreamRecorder:
        recorder = StreamRecorder(call, effect, status, headers, self.run.redactor, self._recorded)
        self._open.add(recorder)
        return recorder

    def _recorded(
        self, call: Call, effect: PendingEffect, recorded: dict[str, Any], passed: bytes | None
    ) -> None:
        """After an answer is recorded: count it, index it in the cache, and note when the
        record differs from the bytes a stream passed on (the redactor changed the whole)."""
        self._count(recorded)
        if passed is not None and _answers.body_bytes(recorded["http"]) != passed:
            self.run.log_event(
                "note",
                level="warning",
                text="a streamed answer was recorded with other bytes than were passed on "
                "(redaction of the whole answer changed it); a replay serves the recorded ones",
            )
        if self.cache is None or call.kind != "llm" or not cacheable(recorded):
            return
        if "response" not in recorded or "http" not in recorded:
            return
        event = effect.event()
        if event is not None:
            request = call.payload.get("request") or {}
            self.cache.add(
                event,
                run_id=self.run.id,
                provider=str(call.payload.get("provider", "")),
                model=str(request.get("model", "")),
            )

    def _count(self, recorded: dict[str, Any]) -> None:
        response = recorded.get("response")
        if "served_by" not in recorded:
            return
        usage = response.get("usage", {}) if isinstance(response, dict) else {}
        self.run.add_stats(
            "llm",
            {"calls": 1, "cached_calls": int(bool(recorded.get("cached"))), **usage},
        )

    def _close_streams(self) -> None:
        for recorder in list(self._open):
            recorder.closed_early()


class RecordingTransport(_Recording, httpx2.BaseTransport):
    """A sync httpx2 transport recording every exchange as an effect of ``run``.

    ``transport`` is where requests really go (default ``httpx2.HTTPTransport()``); ``cache``
    serves a request the store has a complete answer for without sending it.
    """

    def __init__(
        self, run: Run, transport: httpx2.BaseTransport | None = None, *, cache: bool = True
    ) -> None:
        super().__init__(run, cache=cache)
        self._inner = transport if transport is not None else httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call, effect = self._begin(request, request.read())
        answer = self._from_record(call, effect)
        if answer is not None:
            return answer
        try:
            upstream = self._inner.handle_request(request)
        except BaseException as exc:
            effect.fail(exc)
            raise
        if call.stream is not None and _answers.is_event_stream(upstream.headers):
            stream = _PassThrough(self._recorder(call, effect, upstream), upstream)
            headers = [(k, v) for k, v in self._headers(upstream)]
            return httpx2.Response(upstream.status_code, headers=headers, stream=stream)
        try:
            body = _read(upstream)
        except BaseException as exc:
            effect.fail(exc)
            raise
        finally:
            upstream.close()
        return self._record_whole(call, effect, upstream, body)

    def close(self) -> None:
        self._close_streams()
        self._inner.close()


class AsyncRecordingTransport(_Recording, httpx2.AsyncBaseTransport):
    """The asyncio form of :class:`RecordingTransport`."""

    def __init__(
        self,
        run: Run,
        transport: httpx2.AsyncBaseTransport | None = None,
        *,
        cache: bool = True,
    ) -> None:
        super().__init__(run, cache=cache)
        self._inner = transport if transport is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        call, effect = self._begin(request, await request.aread())
        answer = self._from_record(call, effect)
        if answer is not None:
            return answer
        try:
            upstream = await self._inner.handle_async_request(request)
        except BaseException as exc:
            effect.fail(exc)
            raise
        if call.stream is not None and _answers.is_event_stream(upstream.headers):
            stream = _AsyncPassThrough(self._recorder(call, effect, upstream), upstream)
            headers = [(k, v) for k, v in self._headers(upstream)]
            return httpx2.Response(upstream.status_code, headers=headers, stream=stream)
        try:
            body = await _aread(upstream)
        except BaseException as exc:
            effect.fail(exc)
            raise
        finally:
            await upstream.aclose()
        return self._record_whole(call, effect, upstream, body)

    async def aclose(self) -> None:
        self._close_streams()
        await self._inner.aclose()


def _too_large() -> httpx2.RemoteProtocolError:
    return httpx2.RemoteProtocolError(
        f"the answer passed {MAX_BODY_BYTES // (1024 * 1024)} MiB; RAR stopped reading it"
    )


def _read(upstream: httpx2.Response) -> bytes:
    pieces, size = [], 0
    for chunk in upstream.iter_bytes():  # content decoding (gzip) undone here
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        pieces.append(chunk)
    return b"".join(pieces)


async def _aread(upstream: httpx2.Response) -> bytes:
    pieces, size = [], 0
    async for chunk in upstream.aiter_bytes():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        pieces.append(chunk)
    return b"".join(pieces)


class _PassThrough(httpx2.SyncByteStream):
    def __init__(self, recorder: StreamRecorder, upstream: httpx2.Response) -> None:
        self._recorder = recorder
        self._upstream = upstream

    def __iter__(self) -> Iterator[bytes]:
        recorder = self._recorder
        try:
            for chunk in self._upstream.iter_bytes():
                yield from recorder.feed(chunk)
        except (httpx2.TransportError, httpx2.DecodingError, TooLarge) as exc:
            held, error = recorder.broken(exc)
            self._upstream.close()
            yield from held
            raise error from exc
        held, end_error = recorder.end()
        self._upstream.close()
        yield from held
        if end_error is not None:
            raise end_error

    def close(self) -> None:
        self._recorder.closed_early()
        self._upstream.close()


class _AsyncPassThrough(httpx2.AsyncByteStream):
    def __init__(self, recorder: StreamRecorder, upstream: httpx2.Response) -> None:
        self._recorder = recorder
        self._upstream = upstream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        recorder = self._recorder
        try:
            async for chunk in self._upstream.aiter_bytes():
                for piece in recorder.feed(chunk):
                    yield piece
        except (httpx2.TransportError, httpx2.DecodingError, TooLarge) as exc:
            held, error = recorder.broken(exc)
            await self._upstream.aclose()
            for piece in held:
                yield piece
            raise error from exc
        held, end_error = recorder.end()
        await self._upstream.aclose()
        for piece in held:
            yield piece
        if end_error is not None:
            raise end_error

    async def aclose(self) -> None:
        self._recorder.closed_early()
        await self._upstream.aclose()


def http_client(
    run: Run,
    *,
    transport: httpx2.BaseTransport | None = None,
    cache: bool = True,
    **options: Any,
) -> httpx2.Client:
    """An ``httpx2.Client`` whose every request is recorded in ``run`` (for ``http_client=``
    of ``openai.OpenAI`` and ``anthropic.Anthropic``, ``httpx_client`` of google-genai's
    ``HttpOptions``); ``options`` go to ``httpx2.Client`` (e.g. ``timeout``)."""
    options.setdefault("timeout", httpx2.Timeout(600.0, connect=10.0))
    return httpx2.Client(transport=RecordingTransport(run, transport, cache=cache), **options)


def async_http_client(
    run: Run,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    cache: bool = True,
    **options: Any,
) -> httpx2.AsyncClient:
    """The ``httpx2.AsyncClient`` form of :func:`http_client` (``openai.AsyncOpenAI``,
    ``anthropic.AsyncAnthropic``, ``httpx_async_client`` of google-genai)."""
    options.setdefault("timeout", httpx2.Timeout(600.0, connect=10.0))
    transport_ = AsyncRecordingTransport(run, transport, cache=cache)
    return httpx2.AsyncClient(transport=transport_, **options)
