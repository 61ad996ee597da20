"""Starting runs from the browser (``rar view --allow-runs``): the routes, and the checks made
before a job is queued, so that a bad corpus, an unknown model or a missing key is said in the
page at once rather than found by a worker later.

Routes (every ``POST`` takes a JSON object and answers 202 with the job, or an error; the page's
token and the request's origin are checked before, by :mod:`rar.viewer.guard`):

* ``POST /api/runs`` — ask: ``{question, mode, corpus, model, seed}``;
* ``POST /api/runs/{id}/replay`` — a strict, offline replay of the run;
* ``POST /api/runs/{id}/branch`` — ``{at, set: {mode | seed | model: value}}``: replay up to
  event ``at``, then live with the change;
* ``POST /api/runs/{id}/resume`` — ``{now}``: continue a waiting or interrupted run (``now``:
  before its deadline);
* ``POST /api/jobs/{id}/cancel``;
* ``GET /api/jobs``, ``GET /api/jobs/{id}``, ``GET /api/control`` (the choices the form offers:
  corpora, modes, the default model, what a branch may change);
* ``GET /new`` and ``GET /jobs/{id}`` — the page shell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rar.errors import RarError
from rar.hashing import MAX_SAFE_INTEGER
from rar.store.store import Store
from rar.viewer.corpora import DEMO, CorpusRoot
from rar.viewer.http import ApiError, error_response, json_response
from rar.viewer.jobs import JobQueue, QueueFullError

if TYPE_CHECKING:
    from rar.viewer.app import Viewer

MAX_BODY = 64 * 1024
MAX_QUESTION = 4000
BRANCH_CHANGES = ("mode", "seed", "model")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
_FREE_MODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_JOB_ID = re.compile(r"job-[0-9]{1,12}")


def _modes() -> tuple[str, ...]:
    from rar.science.spec import MODES

    return MODES


def _default_model() -> str:
    from rar.science.spec import DEFAULT_MODEL

    return DEFAULT_MODEL


def _profile_names() -> list[str]:
    """The names of the user's model profiles (names only: never a key or an endpoint)."""
    from rar.llm.profiles import Profiles

    try:
        return sorted(p.name for p in Profiles.load())
    except RarError:
        return []


def check_model(model: Any, mode: str) -> str:
    """``model`` as a run takes it, once it is known to connect: an unknown model or profile is
    a 400 ``unknown-model``, a provider without its key a 400 ``missing-key`` (naming the
    variables to set, never a value). The offline planner needs no check."""
    if (
        not isinstance(model, str)
        or not _MODEL.fullmatch(model.strip())
        or ".." in model
        or "//" in model
    ):
        raise ApiError(
            400,
            "unknown-model",
            "model must be planner:rule-based, provider:model (e.g. openai:gpt-4o-mini) or a "
            "profile name",
        )
    name: str = model.strip()
    if name == _default_model() or name.startswith("planner:"):
        return name
    from rar.errors import ConfigError, MissingAPIKeyError
    from rar.llm.client import Client
    from rar.llm.profiles import Profiles

    try:
        spec = name
        if name == "auto":
            from rar.science.planner_model import auto_profile

            spec = auto_profile(mode, Profiles.load()).name
        Client(spec, cache=False).connect()
    except MissingAPIKeyError as exc:
        raise ApiError(400, "missing-key", exc.message) from None
    except ConfigError as exc:
        raise ApiError(400, "unknown-model", exc.message) from None
    except RarError as exc:
        raise ApiError(400, "bad-model", exc.message) from None
    return name


def whole(value: Any, name: str) -> int:
    """A whole number given as a JSON number or its digits, within ±(2**53 − 1)."""
    allowed = f"{name} must be a whole number from {-MAX_SAFE_INTEGER} to {MAX_SAFE_INTEGER}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ApiError(400, f"bad-{name}", allowed)
    if isinstance(value, str):
        if not re.fullmatch(r"-?[0-9]{1,16}", value.strip()):
            raise ApiError(400, f"bad-{name}", f"{allowed}, not {value[:40]!r}")
        value = int(value.strip())
    number: int = value
    if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        raise ApiError(400, f"bad-{name}", allowed)
    return number


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mode(value: Any) -> str:
    modes = _modes()
    if value not in modes:
        raise ApiError(400, "bad-mode", f"mode must be one of {', '.join(modes)}")
    return str(value)


def _check_corpus(corpora: CorpusRoot, name: Any) -> str:
    corpus = corpora.resolve(name)
    if corpus != DEMO:
        from rar.evidence import Corpus

        try:
            Corpus.load(corpus)  # as the run will: a corpus with no usable document is refused
        except RarError as exc:
            raise ApiError(400, "bad-corpus", exc.message) from None
    return corpus


async def _body(request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(415, "not-json", "send the request as application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise ApiError(413, "too-large", f"a request body is at most {MAX_BODY} bytes")
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise ApiError(413, "too-large", f"a request body is at most {MAX_BODY} bytes")
    try:
        value = orjson.loads(data or b"{}")
    except orjson.JSONDecodeError:
        raise ApiError(400, "bad-json", "the request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise ApiError(400, "bad-json", "the request body must be a JSON object")
    return value


def control_routes(
    viewer: Viewer, jobs: JobQueue, corpora: CorpusRoot, shell: Callable[[Request], Response]
) -> list[Route]:
    """The routes above, over ``viewer``'s store, queueing into ``jobs``."""

    def queued(kind: str, spec: dict[str, Any], title: str, source: str | None) -> Response:
        try:
            job = jobs.submit(kind, spec, title=title, source_run=source)
        except QueueFullError as exc:
            raise ApiError(429, "queue-full", str(exc)) from None
        answer = jobs.get(job.id) or {}
        return json_response({"job": answer, "url": f"/jobs/{job.id}"}, status=202)

    async def handle(
        request: Request, action: Callable[[Store, dict[str, Any]], Response]
    ) -> Response:
        try:
            body = await _body(request)
            answer: Response = await run_in_threadpool(
                lambda: viewer.with_store(lambda store: action(store, body))
            )
            return answer
        except ApiError as exc:
            return exc.response()

    def source_run(store: Store, ref: str) -> tuple[str, str | None, dict[str, Any]]:
        """(run id, display status, manifest) of the run a request names."""
        run_id = viewer.resolve(store, ref)
        manifest = viewer.manifest_data(store, run_id)
        if manifest is None:
            raise ApiError(409, "incomplete", f"run {run_id} has no readable manifest")
        row = store.row_from_files(run_id)
        return run_id, store.display_status(row) if row is not None else None, manifest

    def replayable(store: Store, run_id: str, manifest: dict[str, Any], what: str) -> None:
        if not manifest.get("entrypoint"):
            raise ApiError(
                409,
                "not-replayable",
                f"run {run_id} records no entrypoint, so it cannot be re-executed to {what}",
            )
        if store.is_writing(run_id):
            raise ApiError(
                409, "still-running", f"run {run_id} is still being written; {what} it when done"
            )

    # --- the routes ---

    def control(request: Request) -> Response:
        return json_response(
            {
                **corpora.listing(),
                "modes": list(_modes()),
                "default_model": _default_model(),
                "profiles": _profile_names(),
                "branch_changes": list(BRANCH_CHANGES),
                **jobs.counts(),
            }
        )

    def job_list(request: Request) -> Response:
        return json_response({"jobs": jobs.jobs(), **jobs.counts()})

    def job_detail(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = jobs.get(job_id) if _JOB_ID.fullmatch(job_id) else None
        if job is None:
            return error_response(404, "job-not-found", f"no job {job_id[:40]!r} on this server")
        return json_response({"job": job})

    async def cancel(request: Request) -> Response:
        job_id = request.path_params["job_id"]

        def action(store: Store, body: dict[str, Any]) -> Response:
            job = jobs.cancel(job_id) if _JOB_ID.fullmatch(job_id) else None
            if job is None:
                raise ApiError(404, "job-not-found", f"no job {job_id[:40]!r} on this server")
            return json_response({"job": job})

        return await handle(request, action)

    async def ask(request: Request) -> Response:
        def action(store: Store, body: dict[str, Any]) -> Response:
            question = body.get("question")
            if not isinstance(question, str) or not question.strip():
                raise ApiError(400, "bad-question", "the question is empty; ask something")
            if len(question) > MAX_QUESTION:
                raise ApiError(
                    400, "bad-question", f"a question is at most {MAX_QUESTION} characters"
                )
            mode = _mode(body.get("mode", "owl_lite"))
            corpus = _check_corpus(corpora, body.get("corpus", DEMO))
            model = check_model(body.get("model") or _default_model(), mode)
            seed = whole(body.get("seed", 0), "seed")
            spec = {
                "question": question.strip(),
                "mode": mode,
                "corpus": corpus,
                "model": model,
                "seed": seed,
            }
            return queued("ask", spec, f"Ask: {question.strip()[:120]}", None)

        return await handle(request, action)

    async def replay(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store, body: dict[str, Any]) -> Response:
            run_id, _, manifest = source_run(store, ref)
            replayable(store, run_id, manifest, "replay")
            return queued("replay", {"run": run_id}, f"Replay {run_id} (strict)", run_id)

        return await handle(request, action)

    async def branch(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store, body: dict[str, Any]) -> Response:
            run_id, _, manifest = source_run(store, ref)
            replayable(store, run_id, manifest, "branch")
            events = viewer.log(store, run_id).events
            last = int(events[-1]["seq"]) if events else 0
            at = body.get("at")
            if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= last:
                raise ApiError(
                    400, "bad-at", f"at must be an event of run {run_id}: a number 0 to {last}"
                )
            changes = body.get("set")
            if not isinstance(changes, dict) or not changes:
                raise ApiError(
                    400,
                    "bad-change",
                    f"set must name what the branch changes: {', '.join(BRANCH_CHANGES)}",
                )
            config = _mapping(manifest.get("config"))
            tags = _mapping(manifest.get("tags"))
            science = tags.get("kind") == "science"
            checked: dict[str, Any] = {}
            for key, value in changes.items():
                if key == "seed":
                    checked["seed"] = whole(value, "seed")
                elif key == "mode":
                    if science:
                        checked["mode"] = _mode(value)
                    elif isinstance(value, str) and _FREE_MODE.fullmatch(value):
                        checked["mode"] = value
                    else:
                        raise ApiError(400, "bad-mode", "mode must be a short name")
                elif key == "model":
                    mode = str(checked.get("mode") or config.get("mode") or "owl_lite")
                    checked["model"] = check_model(value, mode)
                else:
                    raise ApiError(
                        400,
                        "bad-change",
                        f"a branch here changes {', '.join(BRANCH_CHANGES)}, not {str(key)[:40]!r}"
                        " (rar branch --set changes any setting)",
                    )
            said = ", ".join(f"{k} = {v}" for k, v in checked.items())
            title = f"Branch {run_id} at event {at}: {said}"
            return queued("branch", {"run": run_id, "at": at, "set": checked}, title, run_id)

        return await handle(request, action)

    async def resume(request: Request) -> Response:
        ref = request.path_params["run_id"]

        def action(store: Store, body: dict[str, Any]) -> Response:
            run_id, status, manifest = source_run(store, ref)
            replayable(store, run_id, manifest, "resume")
            if status not in ("waiting", "interrupted"):
                raise ApiError(
                    409,
                    "not-resumable",
                    f"run {run_id} is {status}: only a waiting or interrupted run resumes; "
                    "branch it instead",
                )
            now = body.get("now", False)
            if not isinstance(now, bool):
                raise ApiError(400, "bad-now", "now must be true or false")
            title = f"Resume {run_id}" + (" now, before its deadline" if now else "")
            return queued("resume", {"run": run_id, "now": now}, title, run_id)

        return await handle(request, action)

    return [
        Route("/new", shell, methods=["GET"]),
        Route("/jobs/{job_id}", shell, methods=["GET"]),
        Route("/api/control", control, methods=["GET"]),
        Route("/api/jobs", job_list, methods=["GET"]),
        Route("/api/jobs/{job_id}", job_detail, methods=["GET"]),
        Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Route("/api/runs", ask, methods=["POST"]),
        Route("/api/runs/{run_id}/replay", replay, methods=["POST"]),
        Route("/api/runs/{run_id}/branch", branch, methods=["POST"]),
        Route("/api/runs/{run_id}/resume", resume, methods=["POST"]),
    ]
