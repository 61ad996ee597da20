"""The viewer's server: a starlette app answering JSON about a run store, read-only unless it
was made with ``runs`` (``rar view --allow-runs``; the routes that start runs are those of
:mod:`rar.viewer.control`, and :mod:`rar.viewer.guard` decides which requests are answered).

Routes (all ``GET``; every answer carries the security headers of :data:`SECURITY_HEADERS`):

* ``/api/runs`` — runs, newest first; ``?status=`` (display status), ``?q=`` (substring of the id
  or goal, case-insensitive), ``?mode=``, ``?model=``, ``?since=`` / ``?until=`` (ISO dates or
  times, inclusive, compared with ``created_at`` in UTC),
  ``?sort=created_at|-created_at|status|goal`` (``-`` reverses).
* ``/api/runs/{id}`` — manifest, summary (event count and types, stats) and verification; a
  damaged run still answers 200, with ``verify.ok`` false and its problems.
* ``/api/runs/{id}/events?offset=&limit=`` — events as stored (payload references left as
  references), ``limit`` at most 1000; a damaged log is read up to its first bad line.
  ``?type=`` (``effect``, ``effect:llm``, ``message``, …), ``?agent=`` and ``?span=`` (a span
  and everything under it) filter them; ``total`` counts the events that match, ``all`` every
  event.
* ``/api/runs/{id}/flow`` — the run's agentic flows (``flow.step``, ``flow.merge`` and
  ``flow.end`` events) grouped by flow walk, each node with the seq range of its span's events,
  the walk's statistics read from its payload, and the flow events that could not be read
  (:func:`rar.viewer.flows.flow_document`); ``{"flows": [], "skipped": []}`` for other runs.
* ``/api/runs/{id}/replays`` — the runs replayed or branched from this one, newest first, each
  with its replay report (status, served / live / mismatched) when it has one.
* ``/api/blobs/{digest}`` — a JSON blob, re-hashed when read; only ``sha256:<64 hex>``.
* ``/api/payload?run=&seq=&field=`` — the plain value of one payload reference of an event.
* ``/api/runs/{id}/artifacts/{path}`` — a file under the run's ``artifacts/`` (regular files only;
  no ``..``, absolute paths or symbolic links anywhere on the way).
* ``/api/diff?a=&b=`` — :func:`rar.replay.diff.diff_runs` as a dict.
* ``/api/studies``, ``/api/studies/{id}`` — the store's studies, and one study's report as
  ``rar study report`` wrote it (:mod:`rar.viewer.studies`; never computed here);
  ``/api/studies/{id}/figures/{name}`` its figures (SVG and PNG).
* ``/``, ``/runs/{id}``, ``/diff?a=&b=``, ``/studies`` and ``/studies/{id}`` — the static
  page shell ``static/index.html`` (no data is ever put into HTML by the server; an unknown run
  gets a 404 page linking back to the list); ``/static/{name}`` — the viewer's own files (flat,
  no sub-folders).

Errors are JSON ``{"error": ..., "message": ..., "home": "/"}``. Only the derived index
(``index.sqlite``) may be written, when it is brought up to date; run files never are — by the
server: a run started from the page is recorded by a worker process (:mod:`rar.viewer.jobs`).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rar.errors import (
    AmbiguousRunIdError,
    BlobMissingError,
    CorruptionError,
    RarError,
    RunNotFoundError,
)
from rar.hashing import MAX_SAFE_INTEGER, is_digest
from rar.store.payloads import is_payload_ref
from rar.store.store import Store
from rar.viewer.artifacts import artifact_response, recorded_artifacts
from rar.viewer.flows import flow_document
from rar.viewer.guard import GuardSettings, RequestGuard
from rar.viewer.http import ApiError, date_param, int_param
from rar.viewer.http import error_response as _error
from rar.viewer.http import json_response as _json
from rar.viewer.net import LOOPBACK_HOSTS
from rar.viewer.reading import StoreReader, build_run_detail, event_matcher, replay_report
from rar.viewer.studies import figure_response, studies_document, study_document

__all__ = [
    "RUN_SCRIPTS",
    "RUN_STYLES",
    "SCRIPTS",
    "SECURITY_HEADERS",
    "STATIC_DIR",
    "STYLES",
    "RunSettings",
    "Viewer",
    "create_app",
]

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
MAX_EVENTS_PAGE = 1000
DEFAULT_EVENTS_PAGE = 200
_RUN_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SORTS = {"created_at", "-created_at", "status", "-status", "goal", "-goal"}

STATIC_DIR = Path(__file__).parent / "static"
SCRIPTS: tuple[str, ...] = (
    "core.js",
    "runs.js",
    "run.js",
    "panels.js",
    "flow.js",
    "diff.js",
    "studies.js",
    "live.js",
    "main.js",
)
"""The viewer's scripts, in load order: classic scripts sharing one global scope (core first,
main last). ``static/index.html`` loads exactly these; ``rar export`` inlines them."""
STYLES: tuple[str, ...] = ("app.css", "panels.css", "flow.css", "diff.css", "studies.css")
"""The viewer's style sheets, in order."""
RUN_SCRIPTS: tuple[str, ...] = ("actions.js",)
"""Loaded only by a viewer that starts runs (``--allow-runs``), before ``main.js``; never in an
exported page."""
RUN_STYLES: tuple[str, ...] = ("actions.css",)
_STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

_SHELL = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>RAR viewer</title></head>
<body>
<h1>RAR viewer</h1>
<p>The viewer's page files are missing from this installation (reinstall rar). The JSON API
still answers:</p>
<ul>
<li><a href="/api/runs">/api/runs</a> (runs, newest first)</li>
<li>/api/runs/RUN, /api/runs/RUN/events, /api/diff?a=RUN&amp;b=RUN</li>
</ul>
</body>
</html>
"""


def _not_found_page(ref: str) -> str:
    """The page for an unknown run: says so and links back to the run list."""
    import html

    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>No such run · RAR viewer</title>
<link rel="stylesheet" href="/static/app.css">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml"></head>
<body>
<header class="top"><a href="/" class="brand">RAR viewer</a></header>
<main id="app" data-error="run-not-found">
<h1>No run matches {html.escape(ref[:200])!s}</h1>
<p>This store has no run with that id or id prefix. It may live in another store
(<code>rar view --store DIR</code>).</p>
<p><a href="/" id="back-to-runs">← all runs</a></p>
</main>
</body>
</html>
"""


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every answer; an unexpected error becomes a JSON 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                own = message.get("headers", [])
                # an answer may carry a stricter Content-Security-Policy of its own (artifacts)
                keep_csp = any(k.lower() == b"content-security-policy" for k, _ in own)
                headers = [
                    (k, v)
                    for k, v in own
                    if k.decode("latin-1").lower() not in _LOWER_SECURITY
                    or (keep_csp and k.lower() == b"content-security-policy")
                ]
                headers += [
                    (k.lower().encode(), v.encode())
                    for k, v in SECURITY_HEADERS.items()
                    if not (keep_csp and k == "Content-Security-Policy")
                ]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if started:
                raise
            response = _error(500, "internal", "the viewer failed to answer this request")
            await response(scope, receive, send_with_headers)


_LOWER_SECURITY = {name.lower() for name in SECURITY_HEADERS}


class Viewer(StoreReader):
    """What the routes share: the reader over the store, and turning store errors into
    answers."""

    def with_store(self, action: Callable[[Store], Response]) -> Response:
        store = self.open()
        try:
            return action(store)
        except ApiError as exc:
            return exc.response()
        except RunNotFoundError as exc:
            return _error(404, "run-not-found", exc.message)
        except AmbiguousRunIdError as exc:
            return _error(400, "ambiguous-run", exc.message)
        except BlobMissingError as exc:
            return _error(404, "blob-not-found", exc.message)
        except CorruptionError as exc:
            return _error(422, "corrupt", exc.message)
        except RarError as exc:
            return _error(500, "store", exc.message)
        finally:
            store.close()

    # --- runs ---

    def resolve(self, store: Store, ref: str) -> str:
        if not _RUN_REF.fullmatch(ref) or ".." in ref:
            raise ApiError(404, "run-not-found", f"no run matches {ref!r} in this store")
        if not store.exists:
            raise RunNotFoundError(ref, store.root)
        run_id = store.resolve(ref)
        run_dir = store.run_dir(run_id)
        try:
            if not stat.S_ISDIR(os.lstat(run_dir).st_mode):
                raise RunNotFoundError(ref, store.root)
        except OSError:
            raise RunNotFoundError(ref, store.root) from None
        return run_id


def _int_param(request: Request, name: str, default: int | None, *, minimum: int = 0) -> int:
    """A whole-number query parameter (see :func:`rar.viewer.http.int_param`); required when
    ``default`` is None."""
    value = int_param(request.query_params, name, default, minimum=minimum)
    if value is None:
        raise ApiError(
            400,
            "bad-parameter",
            f"{name} is required: a whole number from {minimum} to {MAX_SAFE_INTEGER}",
        )
    return value


def _sorted_runs(runs: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    reverse = sort.startswith("-")
    key = sort.lstrip("-")
    if key == "created_at":
        return sorted(runs, key=lambda r: (r["created_at"], r["id"]), reverse=reverse)
    # status / goal: ascending by the field, newest first among equals
    by_time = sorted(runs, key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return sorted(by_time, key=lambda r: (r[key] or "").lower(), reverse=reverse)


def _event_filter(request: Request) -> Callable[[dict[str, Any]], bool] | None:
    """The events' ``?type=``, ``?agent=`` and ``?span=`` filters (see :func:`event_matcher`)."""
    query = request.query_params
    return event_matcher(query.get("type") or "", query.get("agent") or "", query.get("span") or "")


# --- routes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSettings:
    """A viewer that starts runs (``rar view --allow-runs``): the directory whose
    subdirectories a page may name as corpora (None: the demo corpus only), how many runs go at
    once, and how many jobs may wait."""

    corpus_root: Path | None = None
    parallel: int = 1
    max_queued: int = 32


def page_shell(page_token: str | None = None) -> str:
    """The page shell ``static/index.html``; with a ``page_token`` (runs allowed), it also
    carries the token (``<meta name="rar-token">``, sent back as ``X-RAR-Token``), loads
    :data:`RUN_STYLES` and :data:`RUN_SCRIPTS`, and links the *New run* page."""
    try:
        text = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    except OSError:
        return _SHELL
    if page_token is None:
        return text
    meta = f'<meta name="rar-runs" content="on">\n<meta name="rar-token" content="{page_token}">\n'
    styles = "".join(f'<link rel="stylesheet" href="/static/{name}">\n' for name in RUN_STYLES)
    scripts = "".join(f'<script defer src="/static/{name}"></script>\n' for name in RUN_SCRIPTS)
    for marker, added in (
        ('<meta charset="utf-8">\n', meta),
        ('<link rel="icon"', styles),
        ('<script defer src="/static/main.js">', scripts),
    ):
        at = text.index(marker) + (len(marker) if marker.endswith("\n") else 0)
        text = text[:at] + added + text[at:]
    return text.replace(
        '<span class="muted">read-only view of a run store</span>',
        '<a href="/new" id="new-run-link" class="top-action">New run</a> '
        '<a href="/new#jobs" id="jobs-link" class="top-action">Queue</a> '
        '<span class="muted">runs can be started from this page</span>',
    )


def create_app(
    store_root: Path | str,
    *,
    allowed_hosts: Iterable[str] | None = None,
    runs: RunSettings | None = None,
    access_token: str | None = None,
    port: int | None = None,
) -> Starlette:
    """The viewer app serving the store at ``store_root``: read-only, unless ``runs`` is given.

    ``allowed_hosts`` are the ``Host`` names answered (default: loopback names only, which
    keeps other web sites from reading the store through DNS rebinding); ``["*"]`` allows any.
    ``port``: the port ``Host`` must name (``app.state.guard.port`` may be set later, once the
    socket is bound). ``access_token``: required on every request (:mod:`rar.viewer.guard`).

    ``runs`` adds the routes of :mod:`rar.viewer.control` — asking, replaying, branching and
    resuming from the page, each a job in ``app.state.jobs`` (:class:`~rar.viewer.jobs.JobQueue`;
    call its ``shutdown()`` when the server stops) — and a per-server page token that every
    state-changing request must carry. Without ``runs`` no route changes anything and the
    page shows no control that would.
    """
    viewer = Viewer(Path(store_root))
    page_token = secrets.token_urlsafe(32) if runs is not None else None

    def shell(request: Request) -> Response:
        # a page carrying the token is never cached: a restarted server draws another one
        headers = {"Cache-Control": "no-store"} if page_token else None
        return HTMLResponse(page_shell(page_token), headers=headers)

    def run_shell(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            viewer.resolve(store, ref)
            return shell(request)

        answer = viewer.with_store(action)
        if answer.status_code == 404:
            return HTMLResponse(_not_found_page(ref), status_code=404)
        if answer.status_code == 400:  # an ambiguous prefix: the page lists the candidates
            return shell(request)
        return answer

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC_TYPES.get(Path(name).suffix)
        if not _STATIC_NAME.fullmatch(name) or ".." in name or kind is None:
            return _error(404, "not-found", f"nothing at {request.url.path}")
        path = STATIC_DIR / name
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise OSError(name)
            data = path.read_bytes()
        except OSError:
            return _error(404, "not-found", f"nothing at {request.url.path}")
        return Response(data, media_type=kind, headers={"Cache-Control": "no-cache"})

    def run_list(request: Request) -> Response:
        status = request.query_params.get("status") or None
        query = (request.query_params.get("q") or "").strip().lower()
        mode = request.query_params.get("mode") or None
        model = request.query_params.get("model") or None
        try:
            since, until = (
                date_param(request.query_params, "since"),
                date_param(request.query_params, "until"),
            )
        except ApiError as exc:
            return exc.response()
        sort = request.query_params.get("sort") or "-created_at"
        if sort not in _SORTS:
            return _error(400, "bad-parameter", f"sort must be one of {', '.join(sorted(_SORTS))}")

        def action(store: Store) -> Response:
            rows = store.list_runs() if store.exists else []
            found = []
            for row in rows:
                item = viewer.run_row(store, row)
                if status is not None and item["status"] != status:
                    continue
                if mode is not None and item["mode"] != mode:
                    continue
                if model is not None and item["model"] != model:
                    continue
                created = str(item["created_at"] or "")
                if since and created < since:
                    continue
                if until and created[: len(until)] > until:
                    continue
                if (
                    query
                    and query not in item["id"].lower()
                    and query not in (item["goal"] or "").lower()
                ):
                    continue
                found.append(item)
            return _json({"runs": _sorted_runs(found, sort), "total": len(found)})

        return viewer.with_store(action)

    def run_detail(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            run_id = viewer.resolve(store, ref)
            detail, _log = build_run_detail(viewer, store, run_id)
            return _json(detail)

        return viewer.with_store(action)

    def run_flow(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            run_id = viewer.resolve(store, ref)
            return _json({"id": run_id, **flow_document(store, viewer.log(store, run_id).events)})

        return viewer.with_store(action)

    def run_replays(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            run_id = viewer.resolve(store, ref)
            found = []
            for row in store.list_runs():
                if row.parent != run_id:
                    continue
                report = replay_report(store, viewer.log(store, row.run_id).events)
                found.append(
                    {
                        "id": row.run_id,
                        "created_at": row.created_at,
                        "status": store.display_status(row),
                        "replay": report,  # None: a branch, or a replay still running
                    }
                )
            found.sort(key=lambda item: (item["created_at"], item["id"]), reverse=True)
            return _json({"id": run_id, "children": found})

        return viewer.with_store(action)

    def run_events(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            offset = _int_param(request, "offset", 0)
            limit = min(_int_param(request, "limit", DEFAULT_EVENTS_PAGE, minimum=1), 1000)
            run_id = viewer.resolve(store, ref)
            log = viewer.log(store, run_id)
            wanted = _event_filter(request)
            events = log.events if wanted is None else [e for e in log.events if wanted(e)]
            page = events[offset : offset + limit]
            end = offset + len(page)
            return _json(
                {
                    "id": run_id,
                    "offset": offset,
                    "limit": limit,
                    "total": len(events),
                    "all": len(log.events),
                    "complete": log.complete,
                    "problems": log.problems,
                    "next_offset": end if end < len(events) else None,
                    "events": page,
                }
            )

        return viewer.with_store(action)

    def blob(request: Request) -> Response:
        digest = request.path_params["digest"]
        if not is_digest(digest):
            return _error(400, "bad-digest", "a digest is sha256: followed by 64 lowercase hex")

        def action(store: Store) -> Response:
            if not store.exists:
                raise ApiError(404, "blob-not-found", f"no blob {digest} in this store")
            raw = store.get_blob(digest)  # re-hashed by the pack reader
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise ApiError(
                    415, "not-json", f"blob {digest} is not JSON ({len(raw)} bytes)"
                ) from None
            return _json({"digest": digest, "size": len(raw), "value": value})

        return viewer.with_store(action)

    def payload(request: Request) -> Response:
        ref = request.query_params.get("run") or ""
        name = request.query_params.get("field") or ""

        def action(store: Store) -> Response:
            seq = _int_param(request, "seq", None, minimum=1)
            if not name:
                raise ApiError(400, "bad-parameter", "field is required")
            run_id = viewer.resolve(store, ref)
            log = viewer.log(store, run_id)
            event = next((e for e in log.events if e.get("seq") == seq), None)
            if event is None:
                raise ApiError(404, "event-not-found", f"run {run_id} has no event {seq}")
            value = event.get(name)
            if not is_payload_ref(value):
                raise ApiError(404, "not-a-payload", f"event {seq} has no payload {name!r}")
            return _json(
                {
                    "id": run_id,
                    "seq": seq,
                    "field": name,
                    "digest": value["digest"],
                    "value": store.resolve_payload(value),
                }
            )

        return viewer.with_store(action)

    def artifact(request: Request) -> Response:
        ref = request.path_params["run_id"]
        rel = request.path_params["path"]

        def action(store: Store) -> Response:
            run_id = viewer.resolve(store, ref)
            recorded = recorded_artifacts(viewer.log(store, run_id).events)
            return artifact_response(store.run_dir(run_id), rel, recorded.get(rel))

        return viewer.with_store(action)

    def diff(request: Request) -> Response:
        a = request.query_params.get("a") or ""
        b = request.query_params.get("b") or ""

        def action(store: Store) -> Response:
            from rar.replay.diff import diff_runs

            a_id, b_id = viewer.resolve(store, a), viewer.resolve(store, b)
            if a_id == b_id:
                raise ApiError(
                    400,
                    "same-run",
                    f"{a!r} and {b!r} name the same run {a_id}; a diff needs two different runs",
                )
            return _json(diff_runs(store, a_id, b_id).as_dict())

        return viewer.with_store(action)

    def study_list(request: Request) -> Response:
        return viewer.with_store(lambda store: _json(studies_document(store)))

    def study_detail(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store) -> Response:
            return _json(study_document(store, viewer.resolve(store, ref)))

        return viewer.with_store(action)

    def study_figure(request: Request) -> Response:
        ref, name = request.path_params["run_id"], request.path_params["name"]
        return viewer.with_store(
            lambda store: figure_response(store, viewer.resolve(store, ref), name)
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, "not-found", f"nothing at {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        if runs is not None:
            return _error(405, "method-not-allowed", f"{request.method} is not answered here")
        return _error(405, "method-not-allowed", "the viewer is read-only: GET only")

    routes = [
        Route("/", shell, methods=["GET"]),
        Route("/runs/{run_id}", run_shell, methods=["GET"]),
        Route("/diff", shell, methods=["GET"]),
        Route("/studies", shell, methods=["GET"]),
        Route("/studies/{run_id}", run_shell, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/api/runs", run_list, methods=["GET"]),
        Route("/api/runs/{run_id}", run_detail, methods=["GET"]),
        Route("/api/runs/{run_id}/events", run_events, methods=["GET"]),
        Route("/api/runs/{run_id}/flow", run_flow, methods=["GET"]),
        Route("/api/runs/{run_id}/replays", run_replays, methods=["GET"]),
        Route("/api/runs/{run_id}/artifacts/{path:path}", artifact, methods=["GET"]),
        Route("/api/blobs/{digest}", blob, methods=["GET"]),
        Route("/api/payload", payload, methods=["GET"]),
        Route("/api/diff", diff, methods=["GET"]),
        Route("/api/studies", study_list, methods=["GET"]),
        Route("/api/studies/{run_id}", study_detail, methods=["GET"]),
        Route("/api/studies/{run_id}/figures/{name}", study_figure, methods=["GET"]),
    ]
    jobs = None
    if runs is not None:
        from rar.viewer.control import control_routes
        from rar.viewer.corpora import CorpusRoot
        from rar.viewer.jobs import JobQueue

        jobs = JobQueue(viewer.root, parallel=runs.parallel, max_queued=runs.max_queued)
        routes = control_routes(viewer, jobs, CorpusRoot.at(runs.corpus_root), shell) + routes
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS)
    guard = GuardSettings.of(
        None if "*" in hosts else hosts,
        port=port,
        access_token=access_token,
        page_token=page_token,
    )
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(RequestGuard, settings=guard),
        ],
        exception_handlers={404: not_found, 405: not_allowed},
    )
    app.state.viewer = viewer
    app.state.guard = guard
    app.state.jobs = jobs
    app.state.page_token = page_token
    return app
