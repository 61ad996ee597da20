"""``rar view --allow-runs`` in a real browser: Playwright driving Debian's Chromium against the
real server on 127.0.0.1, its runs executed by real worker processes with the offline planner
and the demo corpus. Ask the README's question and see the answer; watch a run's progress;
replay and see ``reproducible``; branch at a step and see the diff; resume a waiting run; see
clear errors; cross-origin and tokenless posts refused; the read-only default has no control.
Skipped when playwright or /usr/bin/chromium is missing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import HTMLResponse
from starlette.routing import Route
from tests.servers._local import LocalServer

from browser import CHROMIUM, ViewerServer, launch_chromium, new_page
from rar.redaction import Redactor
from rar.replay.engine import execute
from rar.runtime.start import record
from rar.science.runtime import ask_question
from rar.store.store import Store
from test_viewer_runs_api import PROVIDER_KEYS, QUESTION, RunsViewer, with_tests_on_path

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing (Debian package `chromium`); the browser tests need it",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
expect = sync_api.expect

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
RUN_TIMEOUT_MS = 90_000  # a worker starts, then the run takes a few seconds


class OtherSite(LocalServer[Any, Any]):
    """Another origin on this machine: a page that tries to start runs on the viewer."""

    _label = "other-site"

    def __init__(self) -> None:
        super().__init__([Route("/", lambda request: HTMLResponse("<h1>another site</h1>"))])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("viewer-runs-browser")
    root = base / "runs"
    store = Store(root, create=True)
    science = ask_question(QUESTION, store=store).run_id
    store.close()
    corpora = base / "corpora"
    (corpora / "empty").mkdir(parents=True)
    ARTIFACTS.mkdir(exist_ok=True)
    with (
        RunsViewer(root, corpus_root=corpora) as server,
        OtherSite() as other,
        sync_api.sync_playwright() as pw,
    ):
        browser = launch_chromium(pw)
        try:
            yield {
                "server": server,
                "base": server.base_url,
                "other": other.base_url,
                "root": root,
                "science": science,
                "browser": browser,
            }
        finally:
            browser.close()


@pytest.fixture
def page(world: dict[str, Any]) -> Iterator[Any]:
    with new_page(world["browser"], timeout_ms=RUN_TIMEOUT_MS) as page:
        yield page


def _jobs(world: dict[str, Any]) -> list[dict[str, Any]]:
    return world["server"].jobs.jobs()


def _run_id(page: Any) -> str:
    found = re.search(r"/runs/([^/?#]+)$", page.url)
    assert found, page.url
    return found.group(1)


def test_asking_the_readme_question_shows_its_progress_and_answer(
    world: dict[str, Any], page: Any
) -> None:
    page.goto(world["base"] + "/")
    page.click("#new-run-link")
    page.wait_for_url("**/new")
    expect(page.locator("#new-corpus option")).to_have_count(2)  # demo and empty
    page.click("#new-example")
    expect(page.locator("#new-question")).to_have_value(QUESTION)
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-new.png"), full_page=True)
    page.click("#new-submit")
    page.wait_for_url(re.compile(r".*/runs/[^/]+$"))
    run_id = _run_id(page)
    live = page.locator("#run-live")
    if page.locator("#run-progress").count():  # the page opened while the agents worked
        expect(page.locator("#run-progress .progress-item[data-kind=search]")).to_contain_text(
            "Kissinger", timeout=RUN_TIMEOUT_MS
        )
        expect(live).to_contain_text("finished while you watched", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#answer-text")).to_contain_text("kJ/mol", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#evidence .claim").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-answer.png"), full_page=True)
    job = next(j for j in _jobs(world) if j["run_id"] == run_id)
    assert job["kind"] == "ask" and job["settings"]["corpus"] == "demo"
    assert not page.errors  # type: ignore[attr-defined]


def test_a_live_run_shows_rounds_searches_cells_and_audits_as_they_happen(
    world: dict[str, Any], page: Any
) -> None:
    store = Store(world["root"])
    run = record(
        "a run watched live", store=store, seed=2, durable=False, redactor=Redactor(env={})
    )
    run.__enter__()
    try:
        run.effect("tool", {"name": "warm-up", "args": {}}, lambda: 0)
        page.goto(f"{world['base']}/runs/{run.id}")
        progress = page.locator("#run-progress")
        expect(progress).to_be_visible()
        items = progress.locator(".progress-item")
        with run.span("research", agent="planner", protocol="fipa-contract-net"):
            for performative, sender, receivers in (
                ("CFP", "planner", ["researcher", "executor"]),
                ("BID", "researcher", ["planner"]),
                ("AWARD", "planner", ["researcher"]),
            ):
                run.log_event(
                    "message",
                    agent=sender,
                    performative=performative,
                    sender=sender,
                    receivers=receivers,
                    conversation_id="c1",
                    protocol="fipa-contract-net",
                    content={"task": "t1"},
                )
            expect(items.first).to_contain_text("awarded to researcher")
            run.effect(
                "tool",
                {"name": "search", "args": {"query": "Kissinger plot", "k": 2}},
                lambda: {"anchors": [{"doc_id": "d"}, {"doc_id": "e"}]},
            )
        expect(progress.locator("[data-kind=search]")).to_contain_text("“Kissinger plot”")
        expect(progress.locator("[data-kind=search]")).to_contain_text("2 passages")
        run.effect(
            "tool",
            {"name": "python", "args": {"code": "print(1)"}},
            lambda: {"status": "ok", "duration_ms": 12.0},
        )
        expect(progress.locator("[data-kind=cell]")).to_contain_text("ok")
        run.log_event("audit", agent="auditor", stage="final", report={"passed": True})
        expect(progress.locator("[data-kind=audit]")).to_contain_text("passed")
        expect(page.locator("#progress-counts")).to_contain_text(
            "1 Contract Net round · 1 search · 1 sandbox cell · 1 audit"
        )
        expect(page.locator("#answer")).to_contain_text("not finished")
        run.finish(result={"answer": "The answer, **finalized**."})
        expect(page.locator("#answer-text")).to_contain_text("The answer, finalized.")
        expect(progress.locator("[data-kind=finish]")).to_contain_text("completed")
        expect(page.locator("#run-status")).to_have_text("completed")
    finally:
        if not run.finished:
            run.finish(result={"answer": "stopped"})
        run.__exit__(None, None, None)
        store.close()
    assert not page.errors  # type: ignore[attr-defined]


def test_replay_from_the_run_page_says_reproducible(world: dict[str, Any], page: Any) -> None:
    source = world["science"]
    page.goto(f"{world['base']}/runs/{source}")
    page.click("#action-replay")
    page.wait_for_url(re.compile(rf".*/runs/(?!{source})[^/]+$"))
    replay_id = _run_id(page)
    expect(page.locator("#run-replay")).to_contain_text("reproducible", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#run-replay")).not_to_contain_text("non-reproducible")
    expect(page.locator("#run-replay")).to_contain_text("strict replay of")
    expect(page.locator("#action-compare")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-replay.png"), full_page=False)
    manifest = page.request.get(f"{world['base']}/api/runs/{replay_id}").json()["manifest"]
    assert manifest["parent"]["run_id"] == source
    assert not page.errors  # type: ignore[attr-defined]


def test_branch_at_a_player_step_then_compare_shows_the_diff(
    world: dict[str, Any], page: Any
) -> None:
    source = world["science"]
    page.goto(f"{world['base']}/runs/{source}")
    expect(page.locator("#player-kind")).to_contain_text("thought")
    seq = int(page.locator("#player-kind a.event-link").get_attribute("data-seq"))
    page.click("#player-branch")
    dialog = page.locator("#branch-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#branch-title")).to_contain_text(f"the thought of event #{seq}")
    expect(page.locator("#branch-at")).to_have_value(str(seq - 1))  # the step itself goes live
    expect(page.locator("#branch-explain")).to_contain_text(f"from event #{seq} on")
    page.select_option("#branch-key", "mode")
    page.select_option("#branch-value", "owl_dl")
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-branch.png"), full_page=False)
    page.click("#branch-start")
    page.wait_for_url(re.compile(rf".*/runs/(?!{source})[^/]+$"))
    branch_id = _run_id(page)
    expect(page.locator("#run-status")).to_have_text(
        re.compile("completed"), timeout=RUN_TIMEOUT_MS
    )
    page.click("#action-compare")
    page.wait_for_url("**/diff?**")
    assert f"a={source}" in page.url and f"b={branch_id}" in page.url
    expect(page.locator("#divergence")).to_be_visible()
    expect(page.locator("#divergence-reason")).to_have_text("different-request")
    expect(page.locator("#divergence-kind")).to_have_text("llm")
    expect(page.locator("#divergence")).to_contain_text("owl_dl")
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-branch-diff.png"), full_page=False)
    manifest = page.request.get(f"{world['base']}/api/runs/{branch_id}").json()["manifest"]
    assert manifest["parent"] == {"run_id": source, "seq": seq - 1}
    assert not page.errors  # type: ignore[attr-defined]


def test_branch_at_a_timeline_event_with_another_seed(world: dict[str, Any], page: Any) -> None:
    source = world["science"]
    page.goto(f"{world['base']}/runs/{source}")
    row = page.locator('#timeline .ev[data-seq="20"]')
    row.hover()
    row.locator("button.branch-here").click()
    expect(page.locator("#branch-title")).to_have_text("Branch at event #20")
    expect(page.locator("#branch-at")).to_have_value("19")
    page.select_option("#branch-key", "seed")
    expect(page.locator("#branch-value")).to_have_value("1")  # the run's seed + 1
    page.click("#branch-cancel")
    expect(page.locator("#branch-dialog")).to_be_hidden()
    row.locator("button.branch-here").click()
    page.select_option("#branch-key", "seed")
    page.fill("#branch-value", "7")
    page.fill("#branch-at", "20")
    expect(page.locator("#branch-explain")).to_contain_text("Events 1 to 20")
    page.click("#branch-start")
    page.wait_for_url(re.compile(rf".*/runs/(?!{source})[^/]+$"))
    branch_id = _run_id(page)
    expect(page.locator("#run-status")).to_have_text(
        re.compile("completed"), timeout=RUN_TIMEOUT_MS
    )
    manifest = page.request.get(f"{world['base']}/api/runs/{branch_id}").json()["manifest"]
    assert manifest["parent"] == {"run_id": source, "seq": 20}
    assert manifest["config"]["seed"] == 7
    assert not page.errors  # type: ignore[attr-defined]


def test_resume_a_waiting_run_from_its_page(
    world: dict[str, Any], page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tests_on_path(monkeypatch)  # the worker imports the run's entrypoint from the tests
    store = Store(world["root"])
    run = execute("test_viewer_runs_api:waiting_agent", inputs={"question": "q"}, store=store)
    store.close()
    page.goto(f"{world['base']}/runs/{run.id}")
    expect(page.locator("#run-status")).to_have_text("waiting")
    page.click("#action-resume")  # not due yet: said in the job's page
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-error")).to_contain_text("waiting until", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#job-error")).to_contain_text("--now")
    page.goto(f"{world['base']}/runs/{run.id}")
    page.check("#action-resume-now")
    page.click("#action-resume")
    # its job's page opens the run's page again once the resumed run is running
    expect(page.locator("#run-status")).to_have_text("completed", timeout=RUN_TIMEOUT_MS)
    assert page.url.endswith(f"/runs/{run.id}")
    expect(page.locator("#answer-text")).to_contain_text("answered q")
    assert not page.errors  # type: ignore[attr-defined]


def test_a_bad_model_a_missing_key_and_a_bad_corpus_are_said_in_the_page(
    world: dict[str, Any], page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROVIDER_KEYS:
        monkeypatch.delenv(name, raising=False)
    before = len(_jobs(world))
    page.goto(world["base"] + "/new")
    page.fill("#new-question", QUESTION)
    problem = page.locator("#new-error")
    page.fill("#new-model", "nosuchprofile")
    page.click("#new-submit")
    expect(problem).to_contain_text("unknown-model")
    expect(problem).to_contain_text("nosuchprofile")
    page.fill("#new-model", "openai:gpt-4o-mini")
    page.click("#new-submit")
    expect(problem).to_contain_text("missing-key")
    expect(problem).to_contain_text("OPENAI_API_KEY")
    page.fill("#new-model", "planner:rule-based")
    page.select_option("#new-corpus", "empty")
    page.click("#new-submit")
    expect(problem).to_contain_text("bad-corpus")
    expect(problem).to_contain_text("is empty")
    page.select_option("#new-corpus", "demo")
    page.fill("#new-question", "   ")
    page.click("#new-submit")
    expect(problem).to_contain_text("bad-question")
    assert page.url.endswith("/new") and len(_jobs(world)) == before
    page.screenshot(path=str(ARTIFACTS / "viewer-runs-error.png"), full_page=True)
    assert not [e for e in page.errors if "status of 400" not in e]  # type: ignore[attr-defined]


def test_the_queue_shows_jobs_waiting_behind_a_running_one(
    world: dict[str, Any], page: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with_tests_on_path(monkeypatch)
    flag = tmp_path / "go"
    store = Store(world["root"])
    held = execute("test_viewer_runs_api:blocking_agent", inputs={"flag": str(flag)}, store=store)
    store.close()
    page.goto(world["base"] + "/new")
    token = page.locator('meta[name="rar-token"]').get_attribute("content")
    started = page.evaluate(
        """async ([token, held, question]) => {
          const send = (path, body) => fetch(path, { method: "POST",
            headers: { "Content-Type": "application/json", "X-RAR-Token": token },
            body: JSON.stringify(body) }).then((answer) => answer.json()).then((a) => a.job.id);
          const ids = [await send(`/api/runs/${held}/resume`, { now: true })];
          for (const mode of ["owl_lite", "owl_dl"]) {
            ids.push(await send("/api/runs", { question, mode }));
          }
          return ids;
        }""",
        [token, held.id, QUESTION],
    )
    try:
        page.goto(world["base"] + "/new#jobs")
        # one run at a time: the resumed run holds the worker until the flag is up
        row = lambda job_id: page.locator(f'#jobs-table tr.job-row[data-id="{job_id}"]')  # noqa: E731
        expect(row(started[0])).to_have_attribute("data-status", "running")
        expect(row(started[1])).to_contain_text("queued (#1)")
        expect(row(started[2])).to_contain_text("queued (#2)")
        expect(page.locator('#jobs-table tr.job-row[data-status="running"]')).to_have_count(1)
        expect(page.locator("#jobs-info")).to_contain_text("1 running, 2 waiting; 1 at a time")
        page.screenshot(path=str(ARTIFACTS / "viewer-runs-queue.png"), full_page=True)
        page.goto(f"{world['base']}/jobs/{started[2]}")  # its page waits, then opens the run
        expect(page.locator("#job-state")).to_contain_text("waiting: 1 job before it")
    finally:
        flag.touch()
    page.wait_for_url(re.compile(r".*/runs/[^/]+$"), timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("completed", timeout=RUN_TIMEOUT_MS)
    page.goto(world["base"] + "/new#jobs")
    for job_id in started:
        expect(row(job_id)).to_have_attribute("data-status", "done", timeout=RUN_TIMEOUT_MS)
    assert not page.errors  # type: ignore[attr-defined]


def test_a_cross_origin_post_and_a_post_without_the_token_are_refused(
    world: dict[str, Any], page: Any
) -> None:
    before = len(_jobs(world))
    viewer = world["base"]
    page.goto(world["other"] + "/")
    # a "simple" request needs no preflight: it reaches the server, which refuses its origin
    status = page.evaluate(
        """async (url) => {
          try {
            await fetch(url, { method: "POST", mode: "no-cors",
              headers: { "Content-Type": "text/plain" },
              body: JSON.stringify({ question: "from another site" }) });
            return "sent";
          } catch (err) { return "blocked"; }
        }""",
        viewer + "/api/runs",
    )
    assert status == "sent"
    # with the header a real request needs, the browser asks first, and the viewer never agrees
    status = page.evaluate(
        """async (url) => {
          try {
            const answer = await fetch(url, { method: "POST",
              headers: { "Content-Type": "application/json", "X-RAR-Token": "guessed" },
              body: JSON.stringify({ question: "from another site" }) });
            return String(answer.status);
          } catch (err) { return "blocked"; }
        }""",
        viewer + "/api/runs",
    )
    assert status == "blocked"
    assert len(_jobs(world)) == before
    # on the viewer's own page, a POST without the page's token is refused too
    page.goto(viewer + "/")
    answer = page.evaluate(
        """async () => {
          const answer = await fetch("/api/runs", { method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ question: "no token" }) });
          return [answer.status, (await answer.json()).error];
        }"""
    )
    assert answer == [403, "bad-token"]
    assert len(_jobs(world)) == before


def test_the_read_only_viewer_offers_none_of_these_controls(
    world: dict[str, Any], page: Any
) -> None:
    with ViewerServer(world["root"]) as server:
        page.goto(f"{server.base_url}/runs/{world['science']}")
        expect(page.locator("#timeline .ev").first).to_be_visible()
        expect(page.locator("#player-kind")).to_contain_text("thought")
        expect(page.locator("#run-actions")).to_be_hidden()
        assert page.locator("#run-actions *").count() == 0
        for selector in (
            "#action-replay",
            "#action-branch",
            "#player-branch",
            ".branch-here",
            "#new-run-link",
            "meta[name=rar-token]",
        ):
            assert page.locator(selector).count() == 0, selector
        page.goto(server.base_url + "/")
        expect(page.locator("#runs tbody tr.run-row").first).to_be_visible()
        assert page.locator("#new-run-link").count() == 0
        answer = page.evaluate(
            """async () => {
              const answer = await fetch("/api/runs", { method: "POST",
                headers: { "Content-Type": "application/json", "X-RAR-Token": "x" },
                body: JSON.stringify({ question: "q" }) });
              return answer.status;
            }"""
        )
        assert answer == 405
        missing = page.goto(server.base_url + "/new")
        assert missing is not None and missing.status == 404


def test_with_an_access_token_the_printed_address_opens_the_viewer(
    world: dict[str, Any], page: Any
) -> None:
    secret = "a-token-for-this-browser-test"
    with RunsViewer(world["root"], access_token=secret) as server:
        refused = page.goto(server.base_url + "/")
        assert refused is not None and refused.status == 401
        expect(page.locator("h1")).to_contain_text("access token")
        page.goto(f"{server.base_url}/?token={secret}")
        assert page.url == server.base_url + "/"  # the token left the address bar
        expect(page.locator("#runs tbody tr.run-row").first).to_be_visible()
        page.click("#new-run-link")
        expect(page.locator("#new-corpus option")).to_have_count(1)
        page.goto(f"{server.base_url}/runs/{world['science']}")
        expect(page.locator("#action-replay")).to_be_enabled()
    assert not [e for e in page.errors if "401" not in e]  # type: ignore[attr-defined]
