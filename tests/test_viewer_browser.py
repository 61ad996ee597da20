"""The viewer's pages in a real browser: Playwright driving Debian's Chromium against the real
server on 127.0.0.1. Skipped when playwright or /usr/bin/chromium is missing."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM, ViewerServer, launch_chromium, new_page
from rar.demo import run_demo
from rar.evidence import demo_corpus_path
from rar.redaction import Redactor
from rar.replay import replay
from rar.runtime.start import record
from rar.science.runtime import ask_question
from rar.store.store import Store

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing (Debian package `chromium`); the browser tests need it",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
IMG = '<img src=x onerror="window.__xss=1">'
SCRIPT = "<script>window.__xss=2</script>"


def _record_runs(store: Store) -> dict[str, str]:
    ids = {"demo": run_demo(store).id}
    ids["replay"] = replay(ids["demo"], store=store).replay_run
    ids["science"] = ask_question("How is activation energy determined?", store=store).run_id
    run = record(
        f"xss goal {IMG} {SCRIPT}",
        store=store,
        seed=5,
        durable=False,
        redactor=Redactor(env={}),
        config={"mode": "record", "model": "model-x"},
        parent=(ids["demo"], 3),
    )
    with run:
        big = "x" * 400  # over the inline limit: the result is fetched through /api/payload
        run.effect(
            "tool",
            {"name": "evil", "args": {"q": SCRIPT}},
            lambda: {"content": f"tool said {IMG} and {SCRIPT}", "pad": big},
        )
        run.finish(result={"answer": f"answer {IMG} {SCRIPT}"})
    ids["xss"] = run.id
    # a long run whose cited evidence comes late, past the timeline's first pages
    run = record("long run", store=store, seed=6, durable=False, redactor=Redactor(env={}))
    with run:
        for i in range(450):
            run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: i)
        anchor = {
            "doc_id": "d1",
            "location": "paragraph_1",
            "content_hash": "sha256:" + "0" * 64,
            "snippet": "a late passage",
            "doc_title": "Doc",
            "relevance_score": 0.9,
        }
        run.log_event("evidence", agent="researcher", anchors=[anchor])
        run.finish(
            result={
                "answer": "late",
                "claims": [{"text": "late claim", "anchors": ["d1#paragraph_1"]}],
            }
        )
    ids["long"] = run.id
    # a ReAct step whose tool request is too large to be inline: the player fetches the blob
    run = record("a big tool call", store=store, seed=9, durable=False, redactor=Redactor(env={}))
    with run:
        query = "kissinger activation energy " * 20
        call = {"id": "call_1", "name": "lookup", "arguments": {"query": query}}
        thought = {"response": {"content": "I look it up.", "tool_calls": [call]}}
        run.effect(
            "llm", {"model": "m", "messages": [{"role": "user", "content": "?"}]}, lambda: thought
        )
        run.effect(
            "tool",
            {"name": "lookup", "args": {"query": query}, "call_id": "call_1"},
            lambda: {"content": "found it"},
        )
        run.finish(result={"answer": "found it"})
    ids["blob_tool"] = run.id
    # a run over a corpus that is edited afterwards: its cited passages no longer match
    corpus = store.root.parent / "edited-corpus"
    shutil.copytree(demo_corpus_path(), corpus)
    ids["edited"] = ask_question(
        "What activation energy do the Kissinger DSC data in the corpus give?",
        corpus=corpus,
        store=store,
    ).run_id
    # a corpus whose passage carries markup: cited, it must show as text
    evil = store.root.parent / "evil-corpus"
    evil.mkdir()
    (evil / "kissinger-markup.md").write_text(
        f"# Kissinger activation energy {SCRIPT}\n\n"
        f"The Kissinger DSC data give an activation energy of 125 kJ/mol {IMG} from the shift "
        "of the peak temperature with the heating rate.\n",
        encoding="utf-8",
    )
    ids["evil"] = ask_question(
        "What activation energy do the Kissinger DSC data give?",
        corpus=evil,
        mode="owl_lite",  # one passage: owl_dl would (rightly) drop a claim it alone supports
        store=store,
    ).run_id
    for doc in corpus.rglob("*.md"):
        lines = doc.read_text(encoding="utf-8").splitlines()
        doc.write_text("\n".join(f"{line} (revised)" if line.strip() else line for line in lines))
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer-browser") / "runs"
    store = Store(root, create=True)
    ids = _record_runs(store)
    store.list_runs()
    store.close()
    ARTIFACTS.mkdir(exist_ok=True)
    reader = Store(root)
    events = {run_id: reader.events(run_id) for run_id in ids.values()}
    # what each tool effect asked, inline in its event or in a blob
    tool_requests = {
        run_id: [
            reader.resolve_payload(e["request"])
            for e in run_events
            if e["type"] == "effect" and e["kind"] == "tool"
        ]
        for run_id, run_events in events.items()
    }
    reader.close()
    with ViewerServer(root) as server, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield {
                "ids": ids,
                "base": server.base_url,
                "browser": browser,
                "events": events,
                "tool_requests": tool_requests,
            }
        finally:
            browser.close()


@pytest.fixture
def page(world: dict[str, Any]) -> Iterator[Any]:
    with new_page(world["browser"]) as page:
        yield page


def test_run_list_shows_recorded_runs(world: dict[str, Any], page: Any) -> None:
    ids = world["ids"]
    page.goto(world["base"] + "/")
    rows = page.locator("#runs tbody tr.run-row")
    sync_api.expect(rows).to_have_count(len(ids))
    for run_id in ids.values():
        sync_api.expect(page.locator(f'tr[data-id="{run_id}"]')).to_be_visible()
    science = page.locator(f'tr[data-id="{ids["science"]}"]')
    sync_api.expect(science).to_contain_text("owl_lite")
    sync_api.expect(science).to_contain_text("completed")
    # lineage: the xss run names the demo run as its parent
    parent = page.locator(f'tr[data-id="{ids["xss"]}"] a[href="/runs/{ids["demo"]}"]')
    sync_api.expect(parent).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "viewer-runs.png"), full_page=True)

    page.fill("#filter", "xss goal")
    sync_api.expect(rows).to_have_count(1)
    page.fill("#filter", "")
    sync_api.expect(rows).to_have_count(len(ids))
    page.click('th[data-key="goal"]')
    goals = [g.lower() for g in page.locator("#runs tbody td.goal").all_inner_texts()]
    assert goals == sorted(goals)
    page.click('th[data-key="goal"]')
    goals = [g.lower() for g in page.locator("#runs tbody td.goal").all_inner_texts()]
    assert goals == sorted(goals, reverse=True)
    listed = page.request.get(world["base"] + "/api/runs").json()["runs"]
    page.select_option("#status-filter", "completed")
    sync_api.expect(rows).to_have_count(sum(r["status"] == "completed" for r in listed))
    page.select_option("#status-filter", "")
    # mode and model filters: three science runs are owl_lite; one run ran model-x
    page.select_option("#mode-filter", "owl_lite")
    sync_api.expect(rows).to_have_count(3)
    sync_api.expect(page.locator(f'tr[data-id="{ids["edited"]}"]')).to_be_visible()
    page.select_option("#mode-filter", "")
    page.select_option("#model-filter", "model-x")
    sync_api.expect(rows).to_have_count(1)
    sync_api.expect(page.locator(f'tr[data-id="{ids["xss"]}"]')).to_be_visible()
    page.select_option("#model-filter", "")
    # dates: every run was created today (UTC); nothing before 2000
    today = listed[0]["created_at"][:10]
    page.fill("#since-filter", today)
    sync_api.expect(rows).to_have_count(len(ids))
    page.fill("#until-filter", "2000-01-01")
    sync_api.expect(rows).to_have_count(0)
    page.fill("#until-filter", "")
    page.fill("#since-filter", "")
    # pick two runs to compare: the button leads to the diff page of those two
    compare = page.locator("#compare")
    sync_api.expect(compare).to_be_disabled()
    page.locator(f'tr[data-id="{ids["demo"]}"] input.pick-run').check()
    page.locator(f'tr[data-id="{ids["xss"]}"] input.pick-run').check()
    sync_api.expect(compare).to_be_enabled()
    compare.click()
    page.wait_for_url("**/diff?**")
    assert f"a={ids['demo']}" in page.url and f"b={ids['xss']}" in page.url
    assert not page.errors  # type: ignore[attr-defined]


def test_run_page_expands_an_effect(world: dict[str, Any], page: Any) -> None:
    run_id = world["ids"]["demo"]
    page.goto(f"{world['base']}/runs/{run_id}")
    sync_api.expect(page.locator("#summary")).to_contain_text(run_id)
    sync_api.expect(page.locator("#summary")).to_contain_text("verified")
    llm = page.locator('.ev[data-type="effect"][data-kind="llm"]').first
    with page.expect_response(lambda r: "/api/payload" in r.url and "field=request" in r.url):
        llm.locator("button.expand").click()
    sync_api.expect(llm.locator("pre.payload-request")).to_contain_text("messages")
    sync_api.expect(llm.locator("pre.payload-result")).not_to_have_text("loading…")
    # nested spans are indented by depth; collapsing a span hides what is inside it
    step = page.locator('.ev[data-type="span.start"][data-span="run/agent/step"]')
    inner = page.locator('.ev[data-span="run/agent/step/tool-0"]').first
    sync_api.expect(inner).to_be_visible()
    step.locator("button.toggle").click()
    sync_api.expect(inner).to_be_hidden()
    step.locator("button.toggle").click()
    sync_api.expect(inner).to_be_visible()
    sync_api.expect(page.locator("#answer-text")).to_contain_text("55.3")
    page.screenshot(path=str(ARTIFACTS / "viewer-run.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_claim_leads_to_its_passage(world: dict[str, Any], page: Any) -> None:
    run_id = world["ids"]["science"]
    page.goto(f"{world['base']}/runs/{run_id}")
    claims = page.locator("#evidence .claim")
    sync_api.expect(claims.first).to_be_visible()
    assert claims.count() >= 1
    anchor = claims.first.locator(".anchor").first
    sync_api.expect(anchor.locator(".badge").first).to_have_text("in evidence")
    sync_api.expect(anchor.locator(".hash-badge")).to_have_text("passage matches its hash")
    snippet = anchor.locator(".snippet")
    sync_api.expect(snippet).to_be_hidden()
    anchor.locator("a.anchor-link").click()
    sync_api.expect(snippet).to_be_visible()
    assert len(snippet.inner_text().strip()) > 20
    # messages show performative and sender → receivers
    sync_api.expect(page.locator('.ev[data-type="message"]').first).to_contain_text("→")
    # the replay player steps with the arrow keys
    sync_api.expect(page.locator("#player-pos")).to_contain_text("step 1 of")
    page.keyboard.press("ArrowRight")
    sync_api.expect(page.locator("#player-pos")).to_contain_text("step 2 of")
    page.keyboard.press("ArrowLeft")
    sync_api.expect(page.locator("#player-pos")).to_contain_text("step 1 of")
    # the timeline filters by event type and by agent
    page.select_option("#timeline-type", "message")
    rows = page.locator("#timeline .ev")
    messages = [e for e in world["events"][run_id] if e["type"] == "message"]
    sync_api.expect(rows).to_have_count(len(messages))
    sync_api.expect(page.locator("#timeline-info")).to_contain_text("filtered from")
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.type)")) == {"message"}
    page.select_option("#timeline-type", "")
    page.select_option("#timeline-agent", "researcher")
    researcher = [e for e in world["events"][run_id] if e.get("agent") == "researcher"]
    sync_api.expect(rows).to_have_count(len(researcher))
    page.select_option("#timeline-agent", "")
    sync_api.expect(rows).to_have_count(len(world["events"][run_id]))
    # the section bar links every section shown, panels included, and jumps to it
    sync_api.expect(page.locator("#panels")).to_have_attribute("data-ready", "1")
    nav = page.locator("#run-nav a")
    targets = [nav.nth(i).get_attribute("data-target") for i in range(nav.count())]
    assert targets[:3] == ["summary", "sec-answer", "sec-evidence"], targets
    assert {"sec-messages", "sec-bdi", "sec-audit"} <= set(targets), targets
    assert targets[-2:] == ["sec-replay", "sec-timeline"], targets
    page.locator('#run-nav a[data-target="sec-timeline"]').click()
    sync_api.expect(page.locator("#sec-timeline")).to_be_in_viewport()
    page.screenshot(path=str(ARTIFACTS / "viewer-science-run.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_summary_says_how_long_what_it_cost_and_whether_it_replays(
    world: dict[str, Any], page: Any
) -> None:
    ids = world["ids"]
    page.goto(f"{world['base']}/runs/{ids['demo']}")
    summary = page.locator("#summary")
    sync_api.expect(summary).to_contain_text("verified")
    sync_api.expect(page.locator("#run-duration")).to_have_text(re.compile(r"^\d+(\.\d+)? (ms|s)$"))
    tokens = re.compile(r"^[\d,]+ in · [\d,]+ out")
    sync_api.expect(page.locator("#run-tokens")).to_have_text(tokens)
    # the demo run was replayed: its page names the replay and its verdict
    replay_row = page.locator("#run-replay")
    sync_api.expect(replay_row).to_contain_text("reproducible")
    sync_api.expect(replay_row.locator(f'a[href="/runs/{ids["replay"]}"]')).to_be_visible()
    # the replay's own page shows its report
    page.goto(f"{world['base']}/runs/{ids['replay']}")
    own = page.locator("#run-replay")
    sync_api.expect(own).to_contain_text("strict replay of")
    sync_api.expect(own).to_contain_text("0 mismatched")
    sync_api.expect(own.locator(".badge")).to_have_text("reproducible")
    # a run nobody replayed says how to
    page.goto(f"{world['base']}/runs/{ids['xss']}")
    sync_api.expect(page.locator("#run-replay")).to_contain_text(f"rar replay {ids['xss']}")
    assert not page.errors  # type: ignore[attr-defined]


def test_the_answer_renders_its_markdown_as_text(world: dict[str, Any], page: Any) -> None:
    page.goto(f"{world['base']}/runs/{world['ids']['science']}")
    answer = page.locator("#answer-text")
    sync_api.expect(answer.locator("strong").first).to_have_text("Question.")
    assert answer.locator("li").count() >= 2
    assert "**" not in answer.inner_text()
    sync_api.expect(page.locator("#answer-source")).to_contain_text("**Question.**")
    assert not page.errors  # type: ignore[attr-defined]


def test_an_event_link_loads_the_timeline_up_to_it(world: dict[str, Any], page: Any) -> None:
    run_id = world["ids"]["long"]
    evidence = next(e for e in world["events"][run_id] if e["type"] == "evidence")
    page.goto(f"{world['base']}/runs/{run_id}")
    sync_api.expect(page.locator("#timeline-info")).to_contain_text("200 of")
    page.select_option("#timeline-type", "effect:tool")  # links show every event again
    link = page.locator(f'#evidence a.event-link[data-seq="{evidence["seq"]}"]')
    link.click()
    row = page.locator(f'#timeline .ev[data-seq="{evidence["seq"]}"]')
    sync_api.expect(row).to_have_class(re.compile(r"\btarget\b"))
    sync_api.expect(row).to_be_in_viewport()
    assert page.locator("#timeline-type").input_value() == ""
    assert page.locator("#timeline .ev").count() > evidence["seq"] - 1
    assert not page.errors  # type: ignore[attr-defined]


def test_edited_passage_shows_it_no_longer_matches(world: dict[str, Any], page: Any) -> None:
    page.goto(f"{world['base']}/runs/{world['ids']['edited']}")
    badges = page.locator("#evidence .claim .hash-badge")
    sync_api.expect(badges.first).to_be_visible()
    statuses = {badges.nth(i).get_attribute("data-status") for i in range(badges.count())}
    assert statuses and "matches" not in statuses, statuses
    sync_api.expect(badges.first).to_have_text("passage changed")
    anchor = page.locator("#evidence .claim .anchor").first
    anchor.locator("a.anchor-link").click()
    sync_api.expect(anchor.locator(".snippet .problems")).to_contain_text("changed")
    page.screenshot(path=str(ARTIFACTS / "viewer-edited-corpus.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_a_cited_passage_with_markup_shows_as_text(world: dict[str, Any], page: Any) -> None:
    page.goto(f"{world['base']}/runs/{world['ids']['evil']}")
    anchor = page.locator("#evidence .claim .anchor").first
    sync_api.expect(anchor).to_be_visible()
    anchor.locator("a.anchor-link").click()
    snippet = anchor.locator(".snippet")
    sync_api.expect(snippet).to_contain_text(IMG)
    page.locator(".ev[data-type='evidence'] button.expand").first.click()
    sync_api.expect(page.locator("pre.payload-anchors").first).to_contain_text(SCRIPT)
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#evidence img, #timeline img").count() == 0
    page.screenshot(path=str(ARTIFACTS / "viewer-passage-markup.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_unknown_run_page_is_a_404_linking_back(world: dict[str, Any], page: Any) -> None:
    answer = page.goto(f"{world['base']}/runs/no-such-run")
    assert answer is not None and answer.status == 404
    sync_api.expect(page.locator("h1")).to_contain_text("No run matches")
    page.click("#back-to-runs")
    sync_api.expect(page.locator("#runs tbody tr.run-row").first).to_be_visible()
    assert page.url.rstrip("/") == world["base"].rstrip("/")


def test_record_text_never_runs_as_html(world: dict[str, Any], page: Any) -> None:
    run_id = world["ids"]["xss"]
    page.goto(world["base"] + "/")
    goal = page.locator(f'tr[data-id="{run_id}"] td.goal')
    sync_api.expect(goal).to_contain_text(IMG)
    sync_api.expect(goal).to_contain_text(SCRIPT)

    page.goto(f"{world['base']}/runs/{run_id}")
    sync_api.expect(page.locator("#run-goal")).to_contain_text(IMG)
    sync_api.expect(page.locator("#run-goal")).to_contain_text(SCRIPT)
    sync_api.expect(page.locator("#answer-text")).to_contain_text(SCRIPT)
    tool = page.locator('.ev[data-type="effect"][data-kind="tool"]').first
    with page.expect_response(lambda r: "/api/payload" in r.url and "field=result" in r.url):
        tool.locator("button.expand").click()
    result = tool.locator("pre.payload-result")
    sync_api.expect(result).to_contain_text("tool said")
    assert "window.__xss=2</script>" in result.inner_text()
    page.keyboard.press("ArrowRight")  # the player shows the tool's observation as text too
    page.keyboard.press("ArrowRight")
    sync_api.expect(page.locator("#player-body")).to_contain_text("onerror")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#app img").count() == 0
    assert page.locator("#app script").count() == 0
    page.screenshot(path=str(ARTIFACTS / "viewer-xss-run.png"), full_page=True)


def test_damaged_run_shows_problems(world: dict[str, Any], page: Any, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run = record("to be damaged", store=store, seed=9, durable=False, redactor=Redactor(env={}))
    with run:
        run.effect("tool", {"name": "t", "args": {}}, lambda: "original answer")
    store.close()
    log = root / run.id / "events.jsonl"
    data = log.read_bytes()
    at = data.index(b"original answer")
    log.write_bytes(data[:at] + b"0" + data[at + 1 :])
    os.utime(log)
    with ViewerServer(root) as server:
        page.goto(f"{server.base_url}/runs/{run.id}")
        sync_api.expect(page.locator("#summary")).to_contain_text("verify failed")
        sync_api.expect(page.locator("#verify-problems li").first).to_be_visible()
        sync_api.expect(page.locator("#timeline .ev").first).to_be_visible()


def test_events_load_in_pages(page: Any, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run = record("many events", store=store, seed=8, durable=False, redactor=Redactor(env={}))
    with run:
        for i in range(250):
            run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: i)
    store.close()
    with ViewerServer(root) as server:
        page.goto(f"{server.base_url}/runs/{run.id}")
        total = run.manifest.events
        sync_api.expect(page.locator("#timeline-info")).to_have_text(f"200 of {total} events")
        sync_api.expect(page.locator("#timeline .ev")).to_have_count(200)
        # a click without scrolling: scrolled into view, the button loads the next page by
        # itself (an IntersectionObserver) and hides, which would race a scrolling click
        page.dispatch_event("#load-more", "click")
        sync_api.expect(page.locator("#timeline .ev")).to_have_count(total)
        sync_api.expect(page.locator("#load-more")).to_be_hidden()


def test_a_store_of_many_runs_draws_the_first_ones_then_all(
    world: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    redactor = Redactor(env={})
    for i in range(520):
        run = record(f"tiny run {i}", store=store, seed=i, durable=False, redactor=redactor)
        with run:
            run.effect("tool", {"name": "lookup", "args": {"i": i}}, lambda i=i: i)
    store.close()
    with ViewerServer(root) as server, new_page(world["browser"]) as page:
        page.goto(server.base_url + "/")
        rows = page.locator("#runs tbody tr.run-row")
        sync_api.expect(rows).to_have_count(500)
        sync_api.expect(page.locator("#runs-count")).to_have_text("520 of 520 runs")
        page.fill("#filter", "tiny run 51")  # 51, 510..519: all drawn
        sync_api.expect(rows).to_have_count(11)
        page.fill("#filter", "")
        sync_api.expect(rows).to_have_count(500)
        page.click("#show-all-runs")
        sync_api.expect(rows).to_have_count(520)


def test_a_run_being_written_is_followed_live(world: dict[str, Any], tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run = record("a live run", store=store, seed=3, durable=False, redactor=Redactor(env={}))
    run.__enter__()
    try:
        run.effect("tool", {"name": "first", "args": {}}, lambda: 1)
        with ViewerServer(root) as server, new_page(world["browser"]) as page:
            page.goto(f"{server.base_url}/runs/{run.id}")
            sync_api.expect(page.locator("#run-live")).to_be_visible()
            rows = page.locator("#timeline .ev")
            sync_api.expect(rows.first).to_be_visible()
            before = rows.count()
            run.effect("tool", {"name": "second", "args": {}}, lambda: 2)
            sync_api.expect(rows).to_have_count(before + 1)
            sync_api.expect(rows.last).to_contain_text("tool")
            run.__exit__(None, None, None)
            live = page.locator("#run-live")
            sync_api.expect(live).to_contain_text("finished while you watched")
            page.click("#run-live-reload")
            sync_api.expect(page.locator("#run-live")).to_be_hidden()
            sync_api.expect(page.locator("#summary .badge").first).to_have_text("completed")
    finally:
        if not run.finished:
            run.__exit__(None, None, None)
        store.close()


# the demo's tool requests are inline in their events; blob_tool's is a blob the page fetches
@pytest.mark.parametrize("which", ["demo", "blob_tool"])
def test_the_player_reads_like_a_react_loop(world: dict[str, Any], page: Any, which: str) -> None:
    run_id = world["ids"][which]
    events = world["events"][run_id]
    tools = [e for e in events if e["type"] == "effect" and e["kind"] == "tool"]
    assert tools
    assert ("value" in tools[0]["request"]) == (which == "demo"), tools[0]["request"]
    request = world["tool_requests"][run_id][0]
    name, args = request["name"], request["args"]
    page.goto(f"{world['base']}/runs/{run_id}")
    body = page.locator("#player-body")
    sync_api.expect(page.locator("#player-kind")).to_contain_text("thought")
    # the model's thought names the tool it calls, as name(arguments)
    sync_api.expect(body.locator(".step-call").first).to_contain_text(f"→ {name}(")
    sync_api.expect(body.locator("details.step-json")).to_have_count(1)
    page.locator("h1").click()
    page.keyboard.press("ArrowRight")
    sync_api.expect(page.locator("#player-kind")).to_contain_text("action")
    call = body.locator(".step-call")
    # the action is the call as name(arguments), whether the request was inline or a blob
    sync_api.expect(call).to_have_text(
        f"{name}({json.dumps(args, separators=(',', ':'), ensure_ascii=False)})"
    )
    page.keyboard.press("ArrowRight")
    sync_api.expect(page.locator("#player-kind")).to_contain_text("observation")
    sync_api.expect(body).not_to_have_text("loading…")
    assert not page.errors  # type: ignore[attr-defined]
