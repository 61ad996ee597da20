"""``rar proxy``: an OpenAI-compatible server on loopback that records or replays model calls.

Point any process that honours ``OPENAI_BASE_URL`` at it (``http://127.0.0.1:PORT/v1``); it
serves ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``,
``/v1/responses`` and ``GET /v1/models[/ID]`` (with or without the ``/v1`` prefix), forwarding
each to ``--upstream`` and recording it as the SDK transport does — the same effects, store,
cache and redactor (:mod:`rar.interop._relay`; the upstream client is
:mod:`rar.interop._upstream`).

Modes:

* ``record`` — one run per proxy session; every request goes upstream and is recorded.
* ``cached`` — the same, but a request the store's response cache answers is served from it.
* ``replay`` — serves the answers of a recorded session (``--run``) with no upstream at all.
  A request is matched by its recorded request digest; identical requests get their recorded
  answers in the order they were recorded; a request never recorded — or asked more often than
  recorded — gets HTTP 404 with ``"type": "rar_replay_miss"``. The replay is itself a run (its
  parent the recorded session) that ends with a ``replay`` report: ``reproducible`` when every
  request was served and every recorded answer asked for.

The upstream key is read from the proxy's own environment (``--api-key-env``) and sent
upstream as a bearer token; a client's ``Authorization`` (or ``x-api-key``) header is dropped,
never forwarded or recorded, so clients may use any dummy key.

Hardening (see :mod:`rar.interop._server`, which enforces this session's ``max_body`` and
``body_timeout``): request bodies over ``max_body`` get 413; a request whose headers do not
arrive within ``header_timeout``, or whose body does not within ``body_timeout``, gets 408;
``Content-Length`` together with ``Transfer-Encoding`` gets 400; malformed HTTP gets 400 (llhttp),
headers over 64 KiB 431. Each of these closes the connection; the proxy keeps serving.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import orjson

from rar.errors import ConfigError, RarError, UserError
from rar.interop._relay import Answer, Relay
from rar.interop._server import Reply, Request, error_reply
from rar.interop._upstream import Upstream
from rar.redaction import Redactor
from rar.replay.source import NondeterminismError, RecordedEffects, ReplayMissError, Served
from rar.runtime.run import Run
from rar.store.manifest import RunStatus
from rar.store.store import Store

MODES = ("record", "replay", "cached")
MAX_BODY_BYTES = 32 * 1024 * 1024
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 60.0

_POST = ("/chat/completions", "/completions", "/embeddings", "/responses")
#: Request headers never forwarded (hop-by-hop, credentials, the upstream client's own).
_DROPPED_REQUEST = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "accept-encoding",
    }
)
_DROPPED_REQUEST_BYTES = frozenset(name.encode() for name in _DROPPED_REQUEST)
#: Sent when the client did not send them.
_DEFAULT_REQUEST = ((b"accept", b"*/*"), (b"user-agent", b"rar-proxy"))


def route(method: str, path: str) -> str | None:
    """The upstream path (relative to ``--upstream``) a request goes to, or None."""
    tail = path[3:] if path == "/v1" or path.startswith("/v1/") else path
    if method == "POST" and tail in _POST:
        return tail
    if method == "GET" and (tail == "/models" or (tail.startswith("/models/") and tail[8:])):
        return tail
    return None


class ExactOrder(RecordedEffects):
    """A recorded session served by request digest, identical requests in recorded order;
    asking for an answer more often than it was recorded is a miss (never a repeat)."""

    def serve(self, span: str, ordinal: int, kind: str, request_digest: str) -> Served | None:
        candidates = self.by_digest.get(request_digest) or []
        for event in candidates:
            key = (event["span"], int(event["ordinal"]))
            if key not in self.consumed and event["kind"] == kind:
                self.consumed.add(key)
                self.served += 1
                return Served(event)
        self.misses.append(
            {"span": span, "ordinal": ordinal, "kind": kind, "request": request_digest}
        )
        if candidates:
            why = (
                f"was recorded {len(candidates)} time(s) and every recorded answer to it has "
                "been served"
            )
        else:
            why = "was never recorded"
        raise ReplayMissError(
            f"replay of proxy session {self.run_id}: this {kind} request ({request_digest}) "
            f"{why}. Record it again: rar proxy --mode record (or --mode cached)",
            span=span,
            ordinal=ordinal,
            kind=kind,
            request=request_digest,
        )


@dataclass
class ProxySummary:
    """What a stopped session did: its run, the requests it served, a replay's report."""

    run_id: str
    mode: str
    requests: int
    report: dict[str, Any] | None = None


class Proxy:
    """The ASGI application of one proxy session and the run it records into."""

    def __init__(
        self,
        store: Store,
        *,
        mode: str = "record",
        upstream: str | None = None,
        source: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        upstream_client: Upstream | None = None,
        max_body: int = MAX_BODY_BYTES,
        body_timeout: float = BODY_TIMEOUT,
        durable: bool = True,
        redactor: Redactor | None = None,
    ) -> None:
        from rar.runtime.start import record

        if mode not in MODES:
            raise ConfigError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.store = store
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.requests = 0
        self._auth = _bearer(api_key) if api_key and mode != "replay" else None
        self._source: ExactOrder | None = None
        self._source_events: list[dict[str, Any]] = []
        if mode == "replay":
            if not source:
                raise ConfigError("rar proxy --mode replay needs --run RUN (a recorded session)")
            self.source_id = store.resolve(source)
            _check_replayable(store, self.source_id)
            manifest = store.manifest(self.source_id)
            recorded = str(manifest.config.get("upstream") or "")
            if manifest.tags.get("surface") != "proxy" or not recorded:
                raise UserError(
                    f"run {self.source_id} is not a recorded rar proxy session; replay it with "
                    "rar replay, or record a session with rar proxy --mode record"
                )
            if upstream and upstream.rstrip("/") != recorded:
                raise ConfigError(
                    f"run {self.source_id} was recorded against {recorded}, not {upstream}; "
                    "leave out --upstream to replay it"
                )
            self.upstream = recorded
            self._source_events = store.events(self.source_id)
            loaded = ExactOrder.load(store, self.source_id, "cached", events=self._source_events)
            assert isinstance(loaded, ExactOrder)
            self._source = loaded
            last = int(self._source_events[-1]["seq"]) if self._source_events else 0
            self.run: Run = record(
                f"rar proxy: replay of {self.source_id}",
                store=store,
                config={"mode": "replay", "upstream": self.upstream},
                parent=(self.source_id, last),
                tags={"surface": "proxy", "replay_of": self.source_id, "replay_mode": "proxy"},
                durable=durable,
                redactor=redactor,
            )
            self.run.serve_from(loaded)
            client: Upstream | None = None
        else:
            if not upstream:
                raise ConfigError(f"rar proxy --mode {mode} needs --upstream URL")
            if source:
                raise ConfigError("--run is for --mode replay")
            self.upstream = _checked_upstream(upstream)
            self.run = record(
                f"rar proxy → {self.upstream}",
                store=store,
                config={"mode": mode, "upstream": self.upstream, "api_key": f"env:{api_key_env}"},
                secrets=[f"env:{api_key_env}"],
                tags={"surface": "proxy"},
                durable=durable,
                redactor=redactor,
            )
            client = upstream_client or Upstream(self.upstream)
        self.relay = Relay(self.run, self.upstream, client, cache=mode == "cached")

    # --- answering (called by rar.interop._server) ---------------------------------------------

    def answer(self, request: Request) -> Awaitable[Reply]:
        """The answer to one request (an OpenAI-shaped error for one it cannot serve). In
        record mode the request is on its way upstream when this returns; await the result."""
        target = route(request.method, request.path)
        if target is None:
            known = "POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses"
            return _ready(
                error_reply(404, f"rar proxy serves {known} and GET /v1/models", "not_found")
            )
        self.requests += 1
        relay = self.relay
        url, raw_target = relay.target(target, request.query)
        forwarded = [(k, v) for k, v in request.headers if k not in _DROPPED_REQUEST_BYTES]
        names = {k for k, _ in forwarded}  # what the httpx2 client used to add, if not sent
        forwarded.extend(pair for pair in _DEFAULT_REQUEST if pair[0] not in names)
        if self._auth is not None:
            forwarded.append((b"authorization", self._auth))
        staged: list[tuple[Answer, Reply]] = []
        stage = request.stage

        def staging(answer: Answer) -> Callable[[], None] | None:
            # an upstream's whole answer, before its record is durable: all but its last byte
            # goes out now, the last once the record is durable (rar.interop._server.Request)
            if stage is None or answer.streamed:
                return None
            staged.append((answer, Reply(answer.status, answer.headers, answer.body)))
            return stage(staged[0][1])

        try:
            started = relay.exchange(
                request.method, url, raw_target, forwarded, request.body, staging
            )
        except Exception as exc:
            return _ready(self._failure(exc))
        return self._reply(started, staged)

    async def _reply(self, started: Awaitable[Answer], staged: list[tuple[Answer, Reply]]) -> Reply:
        try:
            answer = await started
        except Exception as exc:
            return self._failure(exc)  # a staged answer is then withdrawn by the server
        if staged and staged[0][0] is answer:
            return staged[0][1]
        if not answer.streamed:
            return Reply(answer.status, answer.headers, answer.body)
        return Reply(
            answer.status, answer.headers, answer.body, pieces=_pieces(answer), aclose=answer.aclose
        )

    def _failure(self, exc: Exception) -> Reply:
        """The error answer for what an exchange raised (anything else is raised again)."""
        if isinstance(exc, ReplayMissError | NondeterminismError):
            return error_reply(404, exc.message, "rar_replay_miss")
        if isinstance(exc, httpx2.RequestError):  # transport and decoding errors
            return error_reply(
                502, f"the upstream {self.upstream} failed: {type(exc).__name__}", "rar_upstream"
            )
        if isinstance(exc, RarError):
            return error_reply(500, exc.message, "rar_error")
        raise exc

    # --- the end of the session ----------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the upstream connections (a stream still open is recorded as closed early)."""
        await self.relay.aclose()

    def close(self) -> ProxySummary:
        """Finish the session's run (``completed``); a replay first logs its report. Call it
        after the server stopped (and :meth:`aclose` ran, as the ASGI lifespan does)."""
        if self.run.finished:
            return ProxySummary(self.run.id, self.mode, self.requests)
        report = self._report() if self._source is not None else None
        if report is not None:
            self.run.log_event("replay", report=report)
        self.run.finish(RunStatus.COMPLETED)
        return ProxySummary(self.run.id, self.mode, self.requests, report)

    def _report(self) -> dict[str, Any]:
        from rar.replay.engine import ReplayReport

        source = self._source
        assert source is not None
        unconsumed = [
            {"span": e["span"], "ordinal": e["ordinal"], "kind": e["kind"], "seq": e["seq"]}
            for e in source.unconsumed()
        ]
        divergence: dict[str, Any] | None = None
        if source.misses:
            first = source.misses[0]
            divergence = {"reason": "a request the record does not answer", **first}
        elif unconsumed:
            divergence = {"reason": "recorded requests were never asked", **unconsumed[0]}
        report = ReplayReport(
            source_run=self.source_id,
            replay_run=self.run.id,
            mode="proxy",
            replay_status="non-reproducible" if divergence else "reproducible",
            served=source.served,
            live=0,
            mismatched=len(source.misses),
            first_divergence=divergence,
            unconsumed=unconsumed,
        )
        return report.as_dict()


def _check_replayable(store: Store, run_id: str) -> None:
    """Refuse a session still being recorded, or one whose record does not verify."""
    from rar.store.verify import verify_store

    if store.is_writing(run_id):
        raise UserError(f"run {run_id} is still being recorded; stop that proxy first")
    check = verify_store(store, [run_id])  # blobs too: a damaged answer is never served
    if not check.ok:
        listed = "; ".join(f"{p.what}: {p.detail}" for p in check.problems[:5])
        raise UserError(
            f"run {run_id} fails verification, so its answers cannot be trusted ({listed}); "
            f"rar verify {run_id} lists every problem"
        )


def _checked_upstream(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--upstream must be an http(s) URL such as https://api.openai.com/v1, got {url!r}"
        )
    if parts.username or parts.password or parts.query:
        raise ConfigError(
            "--upstream takes no user-info and no query string (the key comes from --api-key-env)"
        )
    return url.rstrip("/")


def _bearer(key: str) -> bytes:
    """The ``Authorization`` value for the upstream key (refused if it cannot be a header)."""
    value = f"Bearer {key}"
    if any(c in value for c in "\r\n\0") or not value.isprintable():
        raise ConfigError("the upstream API key holds characters a header cannot carry")
    try:
        return value.encode("ascii")
    except UnicodeEncodeError:
        raise ConfigError("the upstream API key must be ASCII") from None


async def _ready(reply: Reply) -> Reply:
    return reply


async def _pieces(answer: Answer) -> AsyncIterator[bytes]:
    """A streamed answer's pieces after its first bytes, and an error event where it was cut
    (upstream now: recorded, never cached; or in the record, served again)."""
    try:
        if answer.pieces is not None:
            async for chunk in answer.pieces:
                yield chunk
        if answer.error is not None:  # a recorded stream that was cut: cut again
            yield _interrupted(answer.error)
    except httpx2.TransportError as exc:
        yield _interrupted(str(exc))


def _interrupted(message: str) -> bytes:
    event = {"error": {"message": message, "type": "rar_stream_interrupted"}}
    return b"data: " + orjson.dumps(event) + b"\n\n"
