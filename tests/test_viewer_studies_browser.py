"""The study pages in a real browser: Playwright driving Debian's Chromium against the real
viewer on 127.0.0.1 — from the run list to the studies, a reported study's tables with links to
each cell's run and to the diff of a disagreeing run, a study without a report saying how to make
one, and recorded markup shown as text. Skipped when playwright or /usr/bin/chromium is
missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import ViewerServer, launch_chromium, new_page, require_browser
from test_viewer_studies import XSS_ANSWER, record_studies

sync_api = require_browser()
expect = sync_api.expect

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer-studies-browser") / "runs"
    made = record_studies(root)
    ARTIFACTS.mkdir(exist_ok=True)
    with ViewerServer(root) as server, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            with new_page(browser, timeout_ms=TIMEOUT_MS) as page:
                yield {**made, "base": server.base_url, "page": page}
        finally:
            browser.close()


def test_a_study_is_reached_from_the_run_list_and_shows_its_report(world: dict[str, Any]) -> None:
    page, report = world["page"], world["report"]
    reported, again = world["reported"].run_id, world["again"].run_id
    page.goto(f"{world['base']}/")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    page.click("#studies-link")
    page.wait_for_url(f"{world['base']}/studies")
    rows = page.locator("#studies tr.study-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-id", again)
    expect(rows.nth(0)).to_contain_text(f"rar study report {again}")
    expect(rows.nth(1).locator("td[data-key='report']")).to_have_text("reported")

    rows.nth(1).locator("a.study-link").click()
    page.wait_for_url(f"{world['base']}/studies/{reported}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    expect(page.locator("#study-replay")).to_contain_text("10 of 10 runs replay reproducible")
    groups = page.locator("#study-groups tr.group-row")
    expect(groups).to_have_count(3)
    coin = next(g for g in report["groups"] if g["label"] == "study_flows:coin")
    row = page.locator(f"#study-groups tr.group-row[data-key='{coin['key']}']")
    exact = f"{round(coin['agreement_exact'] * 1000) / 10:g}%"
    expect(row.locator("td[data-key='exact']")).to_have_text(exact)
    expect(row.locator("td[data-key='majority'] a")).to_have_attribute(
        "href", f"/runs/{coin['majority_run']}"
    )
    values = page.locator("#study-values tr")
    expect(values).to_have_count(1 + 2)  # the coin's x and the markup flow's x
    expect(page.locator("#study-distributions tr[data-name='latency_s']")).to_have_count(1)

    cells = page.locator("#study-cells tr.cell-row")
    expect(cells).to_have_count(15)
    expect(page.locator("#study-cells td[data-key='replay'] .badge.ok")).to_have_count(10)
    expect(page.locator("#study-cells td[data-key='run'] a")).to_have_count(15)  # failed too
    disagreeing = page.locator("#study-disagreeing tr.disagreeing-row")
    expect(disagreeing).to_have_count(len(coin["disagreeing"]))

    # the report's figures, drawn by rar study report, shown as pictures that loaded
    for stem in ("agreement", "distributions"):
        picture = page.locator(f"#study-figure-{stem} img")
        expect(picture).to_have_attribute("src", f"/api/studies/{reported}/figures/{stem}.svg")
        picture.scroll_into_view_if_needed()
        page.wait_for_function(
            "(el) => el.complete && el.naturalWidth > 0", arg=picture.element_handle()
        )
        expect(page.locator(f"#study-figure-{stem} a.figure-file")).to_have_count(2)

    # recorded markup is text: shown, never run
    expect(page.locator("#study-cells .study-answer", has_text=XSS_ANSWER)).to_have_count(5)
    assert page.evaluate("window.__pwned") is None
    page.screenshot(path=str(ARTIFACTS / "viewer-study.png"), full_page=True)

    first = coin["disagreeing"][0]
    link = page.locator(f"#study-disagreeing tr[data-run='{first['run_id']}'] a.diff-link")
    expect(link).to_have_attribute("href", f"/diff?a={coin['majority_run']}&b={first['run_id']}")
    link.click()
    page.wait_for_url(f"{world['base']}/diff?a={coin['majority_run']}&b={first['run_id']}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    expect(page.locator("#diff-verdict")).to_have_text("different")
    assert page.errors == []


def test_a_study_without_a_report_says_how_to_make_one(world: dict[str, Any]) -> None:
    page, again = world["page"], world["again"].run_id
    page.goto(f"{world['base']}/runs/{again}")  # the study's run page links its study page
    page.wait_for_selector('#panels[data-ready="1"]', state="attached")
    page.click("#study-page-link")
    page.wait_for_url(f"{world['base']}/studies/{again}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    expect(page.locator("#no-report code")).to_have_text(f"rar study report {again}")
    expect(page.locator("#study-cells tr.cell-row")).to_have_count(15)
    expect(page.locator("#study-cells td[data-key='reused']", has_text="yes")).to_have_count(10)
    expect(
        page.locator("#study-cells td[data-key='error']", has_text="broken on purpose")
    ).to_have_count(5)
    page.click("#back-to-studies")
    page.wait_for_url(f"{world['base']}/studies")
    assert page.errors == []
