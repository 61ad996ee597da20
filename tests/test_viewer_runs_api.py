"""``rar view --allow-runs``: the server side of starting runs from the browser — who may ask
(token, Host, Origin), what may be named (corpora under the corpus root only), the queue (one
run at a time), clear refusals (bad model, missing key, bad input), and the read-only default
that has none of it. Served for real on 127.0.0.1 and asked over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from helpers import record_small_run
from tests.servers._local import LocalServer

from browser import ViewerServer
from rar.demo import run_demo
from rar.replay.engine import execute
from rar.store.store import Store
from rar.viewer.app import RunSettings, create_app
from rar.viewer.jobs import JobQueue
from rar.viewer.worker import spot_run

QUESTION = "What activation energy do the Kissinger DSC data in the corpus give?"
PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
)
TESTS = Path(__file__).resolve().parent


class RunsViewer(LocalServer[Any, Any]):
    """The viewer with runs allowed, on 127.0.0.1; its Host check knows the port once bound."""

    _label = "viewer-runs"

    def __init__(self, root: Path, **options: Any) -> None:
        super().__init__([])
        token = options.pop("access_token", None)
        self.app = create_app(root, runs=RunSettings(**options), access_token=token)

    @property
    def token(self) -> str:
        return str(self.app.state.page_token)

    @property
    def jobs(self) -> JobQueue:
        queue: JobQueue = self.app.state.jobs
        return queue

    def start(self) -> None:
        super().start()
        self.app.state.guard.port = self.port

    def stop(self) -> None:
        self.app.state.jobs.shutdown()
        super().stop()


def waiting_agent(run: Any, question: str) -> dict[str, Any]:
    """A run that waits an hour on its first execution and answers when resumed."""
    from rar.runtime.run import RunWaiting

    until = "2999-01-01T00:00:00+00:00"
    run.effect("wait", {"until": until, "reason": "data"}, lambda: {"until": until})
    if not run.last_effect_served():  # the first time: park the run
        raise RunWaiting(until, reason="data")
    return {"answer": f"answered {question}"}


def blocking_agent(run: Any, flag: str) -> dict[str, Any]:
    """A run that waits on its first execution and, resumed, holds its worker until the file
    ``flag`` exists: a job that stays running for as long as a test needs."""
    from rar.runtime.run import RunWaiting

    until = "2999-01-01T00:00:00+00:00"
    run.effect("wait", {"until": until, "reason": "a flag"}, lambda: {"until": until})
    if not run.last_effect_served():
        raise RunWaiting(until, reason="a flag")
    deadline = time.monotonic() + 120
    while not Path(flag).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"answer": "the flag is up"}


def with_tests_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers import the entrypoints of runs recorded here from this directory."""
    path = os.pathsep.join(filter(None, (str(TESTS), os.environ.get("PYTHONPATH"))))
    monkeypatch.setenv("PYTHONPATH", path)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("viewer-runs")
    root = base / "runs"
    store = Store(root, create=True)
    ids = {"demo": run_demo(store).id, "plain": record_small_run(store).id}
    store.close()
    corpora = base / "corpora"
    corpora.mkdir()
    shutil_copy_demo(corpora / "kinetics")
    (corpora / "empty").mkdir()
    (corpora / ".hidden").mkdir()
    (corpora / "notes.md").write_text("# not a directory\n")
    (corpora / "outside").symlink_to(base)  # a link out of the root
    (corpora / "etc").symlink_to("/etc")
    with RunsViewer(root, corpus_root=corpora) as server:
        client = httpx2.Client(base_url=server.base_url, timeout=30)
        yield {"server": server, "client": client, "ids": ids, "root": root, "base": base}
        client.close()


def shutil_copy_demo(target: Path) -> None:
    import shutil

    from rar.evidence import demo_corpus_path

    shutil.copytree(demo_corpus_path(), target)


def _post(world: dict[str, Any], path: str, body: Any = None, **headers: str) -> httpx2.Response:
    sent = {"X-RAR-Token": world["server"].token, **headers}
    return world["client"].post(path, json=body if body is not None else {}, headers=sent)


def _wait(world: dict[str, Any], job_id: str, timeout: float = 90) -> dict[str, Any]:
    job = world["server"].jobs.wait(job_id, timeout)
    assert job is not None and job["status"] in ("done", "failed", "cancelled"), job
    return job


# --- the read-only default ----------------------------------------------------------------------


def test_the_read_only_viewer_answers_no_state_changing_request(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run_id = run_demo(store).id
    store.close()
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        body = {"question": QUESTION}
        assert client.post("/api/runs", json=body).status_code == 405
        for path in (
            f"/api/runs/{run_id}/replay",
            f"/api/runs/{run_id}/branch",
            f"/api/runs/{run_id}/resume",
            "/api/jobs/job-1/cancel",
        ):
            assert client.post(path, json={}).status_code in (404, 405), path
        for path in ("/new", "/jobs/job-1", "/api/jobs", "/api/control"):
            assert client.get(path).status_code == 404, path
        page = client.get("/").text
        assert "rar-token" not in page and "actions.js" not in page and "/new" not in page
        assert client.get("/static/actions.js").status_code == 200  # a file, not a capability
        assert Store(root).list_runs()[0].run_id == run_id and len(Store(root).list_runs()) == 1


# --- who may ask --------------------------------------------------------------------------------


def test_the_page_carries_its_token_and_the_run_controls(world: dict[str, Any]) -> None:
    page = world["client"].get("/").text
    token = re.search(r'<meta name="rar-token" content="([^"]+)">', page)
    assert token and token.group(1) == world["server"].token and len(token.group(1)) >= 40
    assert '<script defer src="/static/actions.js"></script>' in page
    assert page.index("actions.js") < page.index("main.js")
    assert world["client"].get("/new").status_code == 200


def test_a_post_without_the_page_token_is_refused(world: dict[str, Any]) -> None:
    client = world["client"]
    body = {"question": QUESTION}
    for headers in ({}, {"X-RAR-Token": "nope"}, {"X-RAR-Token": world["server"].token[:-1]}):
        answer = client.post("/api/runs", json=body, headers=headers)
        assert answer.status_code == 403 and answer.json()["error"] == "bad-token", headers
    # the token is a header: not a query parameter, not a cookie
    answer = client.post(f"/api/runs?token={world['server'].token}", json=body)
    assert answer.status_code == 403
    answer = client.post(
        "/api/runs", json=body, headers={"Cookie": f"X-RAR-Token={world['server'].token}"}
    )
    assert answer.status_code == 403
    assert world["server"].jobs.jobs() == []


def test_a_cross_origin_post_is_refused_even_with_the_token(world: dict[str, Any]) -> None:
    port = world["server"].port
    body = {"question": QUESTION}
    for origin in (
        "http://evil.example",
        "null",
        f"http://127.0.0.1:{port + 1}",
        f"https://127.0.0.1:{port}",
        f"http://localhost:{port}",  # another origin than the Host asked for
    ):
        answer = _post(world, "/api/runs", body, Origin=origin)
        assert answer.status_code == 403 and answer.json()["error"] == "cross-origin", origin
    answer = _post(world, "/api/runs", body, **{"Sec-Fetch-Site": "cross-site"})
    assert answer.status_code == 403 and answer.json()["error"] == "cross-origin"
    assert world["server"].jobs.jobs() == []


def test_a_foreign_host_is_refused_which_stops_dns_rebinding(world: dict[str, Any]) -> None:
    port = world["server"].port
    client = world["client"]
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1"):
        for answer in (
            client.get("/api/runs", headers={"Host": host}),
            _post(world, "/api/runs", {"question": QUESTION}, Host=host),
        ):
            assert answer.status_code == 400 and answer.json()["error"] == "bad-host", host
    ok = client.get("/api/runs", headers={"Host": f"localhost:{port}"})
    assert ok.status_code == 200
    assert world["server"].jobs.jobs() == []


def test_a_form_post_is_refused_not_read(world: dict[str, Any]) -> None:
    """A cross-site form can send text/plain or urlencoded bodies, never a JSON request with
    the token header; even with the token, such bodies are refused."""
    client = world["client"]
    token = world["server"].token
    answer = client.post(
        "/api/runs", content=b'{"question": "x"}', headers={"Content-Type": "text/plain"}
    )
    assert answer.status_code == 403
    answer = client.post(
        "/api/runs",
        content=b"question=x",
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-RAR-Token": token},
    )
    assert answer.status_code == 415 and answer.json()["error"] == "not-json"
    big = client.post(
        "/api/runs",
        content=b'{"question": "' + b"x" * 70_000 + b'"}',
        headers={"Content-Type": "application/json", "X-RAR-Token": token},
    )
    assert big.status_code == 413
    for raw in (b"not json", b"[1, 2]"):
        answer = client.post(
            "/api/runs",
            content=raw,
            headers={"Content-Type": "application/json", "X-RAR-Token": token},
        )
        assert answer.status_code == 400 and answer.json()["error"] == "bad-json"


def test_an_access_token_gates_every_request(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    Store(root, create=True).close()
    secret = "s3cret-token-for-this-test"
    with (
        RunsViewer(root, access_token=secret) as server,
        httpx2.Client(base_url=server.base_url, follow_redirects=False) as client,
    ):
        assert client.get("/api/runs").status_code == 401
        assert client.get("/api/runs").json()["error"] == "token-required"
        page = client.get("/")
        assert page.status_code == 401 and "access token" in page.text
        assert client.get("/static/core.js").status_code == 401
        wrong = client.get("/?token=wrong-token-wrong-token")
        assert wrong.status_code == 401
        bearer = client.get("/api/runs", headers={"Authorization": f"Bearer {secret}"})
        assert bearer.status_code == 200
        opened = client.get(f"/new?token={secret}")
        assert opened.status_code == 303 and opened.headers["location"] == "/new"
        cookie = opened.headers["set-cookie"]
        assert secret in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert client.get("/api/control").status_code == 200  # the cookie carries it now
        # the page token is still needed to change anything
        answer = client.post("/api/runs", json={"question": QUESTION})
        assert answer.status_code == 403 and answer.json()["error"] == "bad-token"


# --- what may be named --------------------------------------------------------------------------


def test_the_page_lists_only_directories_under_the_corpus_root(world: dict[str, Any]) -> None:
    listing = world["client"].get("/api/control").json()
    names = [c["name"] for c in listing["corpora"]]
    assert names == ["demo", "empty", "kinetics"]  # no file, hidden entry or symbolic link
    assert listing["root"] is True and listing["modes"] == ["owl_lite", "owl_dl", "owl_full"]
    assert str(world["base"]) not in str(listing)  # names, not paths


@pytest.mark.parametrize(
    ("corpus", "says"),
    [
        ("../runs", "hidden or a relative path"),
        ("..", "hidden or a relative path"),
        ("/etc", "not a single directory name"),
        ("/", "not a single directory name"),
        ("kinetics/../../runs", "not a single directory name"),
        ("outside", "symbolic link"),
        ("etc", "symbolic link"),
        (".hidden", "hidden"),
        ("notes.md", "not a directory"),
        ("nowhere", "there is no corpus"),
        ("empty", "is empty: a corpus is a directory of text documents"),
        ("", "name of a corpus"),
        (["kinetics"], "name of a corpus"),
        ("kin\x00etics", "not a single directory name"),
    ],
)
def test_a_corpus_outside_the_root_or_unusable_is_refused(
    world: dict[str, Any], corpus: Any, says: str
) -> None:
    answer = _post(world, "/api/runs", {"question": QUESTION, "corpus": corpus})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad-corpus"
    assert says in answer.json()["message"]


def test_without_a_corpus_root_only_the_demo_corpus_is_offered(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    Store(root, create=True).close()
    (tmp_path / "docs").mkdir()
    with RunsViewer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        listing = client.get("/api/control").json()
        assert [c["name"] for c in listing["corpora"]] == ["demo"] and listing["root"] is False
        answer = client.post(
            "/api/runs",
            json={"question": QUESTION, "corpus": str(tmp_path / "docs")},
            headers={"X-RAR-Token": server.token},
        )
        assert answer.status_code == 400 and "only the demo corpus" in answer.json()["message"]


# --- clear refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"question": "  "}, "bad-question"),
        ({}, "bad-question"),
        ({"question": "x" * 4001}, "bad-question"),
        ({"question": QUESTION, "mode": "owl_huge"}, "bad-mode"),
        ({"question": QUESTION, "seed": "1e3"}, "bad-seed"),
        ({"question": QUESTION, "seed": True}, "bad-seed"),
        ({"question": QUESTION, "seed": 2**60}, "bad-seed"),
        ({"question": QUESTION, "model": "nosuchprofile"}, "unknown-model"),
        ({"question": QUESTION, "model": "bogus:model"}, "unknown-model"),
        ({"question": QUESTION, "model": "openai: gpt"}, "unknown-model"),
        ({"question": QUESTION, "model": "<script>"}, "unknown-model"),
        ({"question": QUESTION, "model": "gemini:../../v1/x"}, "unknown-model"),
    ],
)
def test_bad_input_is_refused_before_anything_is_queued(
    world: dict[str, Any], body: dict[str, Any], error: str
) -> None:
    before = len(world["server"].jobs.jobs())
    answer = _post(world, "/api/runs", body)
    assert answer.status_code == 400 and answer.json()["error"] == error, answer.text
    assert answer.json()["message"]
    assert len(world["server"].jobs.jobs()) == before


def test_a_missing_key_is_said_before_the_run_starts_and_no_key_is_echoed(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROVIDER_KEYS:
        monkeypatch.delenv(name, raising=False)
    before = len(world["server"].jobs.jobs())
    answer = _post(world, "/api/runs", {"question": QUESTION, "model": "openai:gpt-4o-mini"})
    assert answer.status_code == 400 and answer.json()["error"] == "missing-key"
    assert "OPENAI_API_KEY" in answer.json()["message"]
    # a key set for another provider is never echoed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef0123456789abcdef")
    answer = _post(world, "/api/runs", {"question": QUESTION, "model": "gemini:gemini-2.5-flash"})
    assert answer.status_code == 400 and answer.json()["error"] == "missing-key"
    assert "GEMINI_API_KEY" in answer.json()["message"]
    assert "0123456789abcdef" not in answer.text
    control = world["client"].get("/api/control").text
    assert "0123456789abcdef" not in control
    branched = _post(
        world,
        f"/api/runs/{world['ids']['demo']}/branch",
        {"at": 2, "set": {"model": "anthropic:claude-sonnet-4-5"}},
    )
    assert branched.status_code == 400 and branched.json()["error"] == "missing-key"
    assert "ANTHROPIC_API_KEY" in branched.json()["message"]
    assert len(world["server"].jobs.jobs()) == before


def test_replay_branch_and_resume_refuse_what_they_cannot_do(world: dict[str, Any]) -> None:
    demo, plain = world["ids"]["demo"], world["ids"]["plain"]
    cases = [
        ("/api/runs/nosuchrun/replay", {}, 404, "run-not-found"),
        ("/api/runs/..%2F..%2Fetc/replay", {}, 404, None),
        (f"/api/runs/{plain}/replay", {}, 409, "not-replayable"),
        (f"/api/runs/{demo}/branch", {"at": 10_000, "set": {"seed": 2}}, 400, "bad-at"),
        (f"/api/runs/{demo}/branch", {"at": -1, "set": {"seed": 2}}, 400, "bad-at"),
        (f"/api/runs/{demo}/branch", {"at": "3", "set": {"seed": 2}}, 400, "bad-at"),
        (f"/api/runs/{demo}/branch", {"at": 3}, 400, "bad-change"),
        (f"/api/runs/{demo}/branch", {"at": 3, "set": {"goal": "x"}}, 400, "bad-change"),
        (f"/api/runs/{demo}/branch", {"at": 3, "set": {"seed": "x"}}, 400, "bad-seed"),
        (f"/api/runs/{demo}/branch", {"at": 3, "set": {"model": "nope"}}, 400, "unknown-model"),
        (f"/api/runs/{demo}/resume", {}, 409, "not-resumable"),
        ("/api/jobs/job-999999/cancel", {}, 404, "job-not-found"),
    ]
    for path, body, status, error in cases:
        answer = _post(world, path, body)
        assert answer.status_code == status, (path, answer.text)
        if error:
            assert answer.json()["error"] == error, (path, answer.text)
    assert world["client"].get("/api/jobs/job-999999").status_code == 404
    assert world["client"].get("/api/jobs/../../etc").status_code == 404


# --- doing it -----------------------------------------------------------------------------------


def test_ask_replay_branch_end_to_end(world: dict[str, Any]) -> None:
    asked = _post(world, "/api/runs", {"question": QUESTION, "corpus": "kinetics", "seed": 4})
    assert asked.status_code == 202, asked.text
    job = asked.json()["job"]
    assert asked.json()["url"] == f"/jobs/{job['id']}" and job["status"] in ("queued", "running")
    done = _wait(world, job["id"])
    assert done["status"] == "done" and done["run_status"] == "completed", done
    run_id = done["run_id"]
    detail = world["client"].get(f"/api/runs/{run_id}").json()
    inputs = detail["manifest"]["inputs"]
    assert inputs["corpus"]["value"] == str((world["base"] / "corpora" / "kinetics").resolve())
    assert detail["manifest"]["config"]["seed"] == 4

    replayed = _wait(world, _post(world, f"/api/runs/{run_id}/replay").json()["job"]["id"])
    assert replayed["status"] == "done" and replayed["replay_status"] == "reproducible"
    assert replayed["source_run"] == run_id and replayed["run_id"] != run_id

    branched = _post(world, f"/api/runs/{run_id}/branch", {"at": 20, "set": {"seed": "9"}})
    assert branched.status_code == 202, branched.text
    assert branched.json()["job"]["settings"]["set"] == {"seed": 9}
    branch = _wait(world, branched.json()["job"]["id"])
    assert branch["status"] == "done", branch
    manifest = world["client"].get(f"/api/runs/{branch['run_id']}").json()["manifest"]
    assert manifest["parent"] == {"run_id": run_id, "seq": 20} and manifest["config"]["seed"] == 9
    diff = world["client"].get("/api/diff", params={"a": run_id, "b": branch["run_id"]}).json()
    assert diff["first_divergence"]["a"]["seq"] > 20


def test_resume_continues_a_waiting_run(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tests_on_path(monkeypatch)  # the worker imports the run's entrypoint from here

    store = Store(world["root"])
    run = execute("test_viewer_runs_api:waiting_agent", inputs={"question": "q"}, store=store)
    store.close()
    assert world["client"].get(f"/api/runs/{run.id}").json()["status"] == "waiting"
    early = _wait(world, _post(world, f"/api/runs/{run.id}/resume").json()["job"]["id"])
    assert early["status"] == "failed" and "waiting until" in early["error"]["message"]
    assert "--now" in early["error"]["message"]
    resumed = _wait(
        world, _post(world, f"/api/runs/{run.id}/resume", {"now": True}).json()["job"]["id"]
    )
    assert resumed["status"] == "done" and resumed["run_id"] == run.id, resumed
    assert resumed["run_status"] == "completed"
    assert _post(world, f"/api/runs/{run.id}/resume", {"now": True}).status_code == 409


# --- the queue ----------------------------------------------------------------------------------

FAKE_WORKER = r"""
import json, os, sys, threading, time
job = json.loads(sys.stdin.readline())
def orphaned():  # as the real worker: standard input closed, the job is over
    while sys.stdin.read(1):
        pass
    os._exit(4)
threading.Thread(target=orphaned, daemon=True).start()
print(json.dumps({"event": "run", "run_id": "run-" + job["name"]}), flush=True)
time.sleep(job.get("sleep", 0.3))
if job.get("fail"):
    print("something went wrong", file=sys.stderr, flush=True)
    sys.exit(3)
print(json.dumps({"event": "done", "run_id": "run-" + job["name"], "run_status": "completed"}),
      flush=True)
"""


def _fake_queue(tmp_path: Path, **options: Any) -> JobQueue:
    return JobQueue(tmp_path, command=[sys.executable, "-c", FAKE_WORKER], **options)


def test_the_queue_runs_one_job_at_a_time_in_order(tmp_path: Path) -> None:
    queue = _fake_queue(tmp_path)
    try:
        jobs = [queue.submit("ask", {"name": str(i)}, title=f"job {i}") for i in range(3)]
        seen_running: list[int] = []
        positions = {j["id"]: j["position"] for j in queue.jobs()}
        assert sorted(p for p in positions.values() if p is not None) in ([1, 2], [1, 2, 3])
        deadline = time.monotonic() + 30
        while not all(queue.get(j.id)["status"] == "done" for j in jobs):  # type: ignore[index]
            seen_running.append(queue.counts()["running"])
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert max(seen_running) == 1
        done = [queue.get(j.id) for j in jobs]
        assert [d["run_id"] for d in done] == ["run-0", "run-1", "run-2"]  # type: ignore[index]
        starts = [d["started_at"] for d in done]  # type: ignore[index]
        ends = [d["finished_at"] for d in done]  # type: ignore[index]
        assert starts == sorted(starts) and ends[0] <= starts[1] and ends[1] <= starts[2]
    finally:
        queue.shutdown()


def test_parallel_jobs_run_at_once_when_asked(tmp_path: Path) -> None:
    queue = _fake_queue(tmp_path, parallel=2)
    try:
        jobs = [queue.submit("ask", {"name": str(i), "sleep": 1.0}, title="x") for i in range(2)]
        deadline = time.monotonic() + 10
        while queue.counts()["running"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        for job in jobs:
            assert queue.wait(job.id, 30)["status"] == "done"  # type: ignore[index]
    finally:
        queue.shutdown()


def test_a_full_queue_refuses_and_a_cancelled_job_never_runs(tmp_path: Path) -> None:
    from rar.viewer.jobs import QueueFullError

    queue = _fake_queue(tmp_path, max_queued=2)
    try:
        first = queue.submit("ask", {"name": "a", "sleep": 2.0}, title="a")
        deadline = time.monotonic() + 10
        while queue.get(first.id)["status"] != "running":  # type: ignore[index]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        second = queue.submit("ask", {"name": "b"}, title="b")
        queue.submit("ask", {"name": "c"}, title="c")
        with pytest.raises(QueueFullError, match="at most 2"):
            queue.submit("ask", {"name": "d"}, title="d")
        assert queue.cancel(second.id)["status"] == "cancelled"  # type: ignore[index]
        stopped = queue.cancel(first.id)
        assert stopped is not None
        assert queue.wait(first.id, 10)["status"] == "cancelled"  # type: ignore[index]
        assert queue.get(second.id)["started_at"] is None  # type: ignore[index]
    finally:
        queue.shutdown()


def test_a_worker_that_dies_fails_its_job_with_what_it_said(tmp_path: Path) -> None:
    queue = _fake_queue(tmp_path)
    try:
        job = queue.submit("ask", {"name": "x", "fail": True, "sleep": 0}, title="x")
        failed = queue.wait(job.id, 30)
        assert failed is not None and failed["status"] == "failed"
        assert "exit code 3" in failed["error"]["message"]
        assert "something went wrong" in failed["error"]["message"]
        assert failed["run_id"] == "run-x"
    finally:
        queue.shutdown()


def test_the_server_queues_a_second_run_while_the_first_runs(world: dict[str, Any]) -> None:
    first = _post(world, "/api/runs", {"question": QUESTION}).json()["job"]
    second = _post(world, "/api/runs", {"question": QUESTION, "mode": "owl_dl"}).json()["job"]
    listed = {j["id"]: j for j in world["client"].get("/api/jobs").json()["jobs"]}
    assert listed[second["id"]]["status"] == "queued" and listed[second["id"]]["position"] >= 1
    counts = world["client"].get("/api/jobs").json()
    assert counts["running"] <= 1 and counts["parallel"] == 1
    a, b = _wait(world, first["id"]), _wait(world, second["id"])
    assert a["status"] == b["status"] == "done"
    assert a["finished_at"] <= b["started_at"]


def test_the_worker_spots_the_run_it_records_by_its_lock(tmp_path: Path) -> None:
    import threading

    store = Store(tmp_path / "runs", create=True)
    found = threading.Event()
    from rar.runtime.start import record

    run = record("spotted", store=store, seed=1)
    try:
        run.__enter__()
        assert spot_run(store.root, "0", found) == run.id
    finally:
        run.__exit__(None, None, None)
        store.close()
    found.set()
    assert spot_run(tmp_path / "runs", "0", found) is None


# --- the command --------------------------------------------------------------------------------


def _view(store: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rar",
            "view",
            "--store",
            str(store),
            "--no-open",
            "--port",
            "0",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_view_allow_runs_creates_the_store_and_serves_the_new_run_page(tmp_path: Path) -> None:
    store = tmp_path / "fresh"
    server = _view(store, "--allow-runs")
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "starts runs from the page" in line, line
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert url, line
        assert httpx2.get(url.group(1) + "new", timeout=10).status_code == 200
        assert store.is_dir()
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_view_beyond_loopback_with_runs_generates_and_requires_a_token(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    Store(store, create=True).close()
    server = _view(store, "--allow-runs", "--host", "0.0.0.0")
    try:
        assert server.stdout is not None and server.stderr is not None
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/)\?token=([A-Za-z0-9_-]{20,})", line)
        assert found, line
        base, token = found.group(1), found.group(3)
        assert httpx2.get(base + "api/runs", timeout=10).status_code == 401
        answer = httpx2.get(
            base + "api/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        assert answer.status_code == 200
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
    assert "access token" in err


def test_view_options_that_need_allow_runs_say_so(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    Store(store, create=True).close()
    for args in (("--corpus-root", str(tmp_path)), ("--parallel", "2")):
        out, err = _view(store, *args).communicate(timeout=30)
        assert "--allow-runs" in err and "http://" not in out
    out, err = _view(store, "--allow-runs", "--corpus-root", str(tmp_path / "nope")).communicate(
        timeout=30
    )
    assert "does not exist" in err and "http://" not in out
    out, err = _view(store, "--token", "short").communicate(timeout=30)
    assert "at least 16" in err
