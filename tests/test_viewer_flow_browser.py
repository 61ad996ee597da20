"""The run page's Flow panel in a real browser: Playwright driving Debian's Chromium against the
real viewer on 127.0.0.1 (and an exported page from ``file://``) — a flow's steps and merge as a
layered graph, its graph strings and statistics, several flows in one run, malformed flow
events, a flow of 200 splits, and no panel at all for a run without flows. Skipped when
playwright or /usr/bin/chromium is missing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM, ViewerServer, launch_chromium, new_page
from rar.export.html import export_html
from rar.store.store import Store
from rar.viewer.flows import flow_document
from test_viewer_flow_api import (
    ERROR_SPLIT,
    FAILED_GRAPH,
    GRAPH,
    XSS,
    record_flow_run,
    record_many_flows_run,
    record_plain_run,
)

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
TIMEOUT_MS = 15_000
BIG_SPLITS = 200
BIG_BUDGET_S = 8.0  # navigation to a drawn 200-split flow: about 1 s on a busy 2-core machine


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("viewer-flow-browser")
    root = tmp / "runs"
    store = Store(root, create=True)
    ids = {
        "flow": record_flow_run(store),
        "plain": record_plain_run(store),
        "many": record_many_flows_run(store),
        "big": record_flow_run(store, splits=BIG_SPLITS, goal="a flow of 200 splits"),
    }
    docs = {name: flow_document(store, store.events(run_id)) for name, run_id in ids.items()}
    exported = tmp / "flow.html"
    exported.write_text(export_html(store, ids["flow"]), encoding="utf-8")
    store.list_runs()
    ARTIFACTS.mkdir(exist_ok=True)
    with ViewerServer(root) as server, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield {
                "ids": ids,
                "docs": docs,
                "events": {name: store.events(run_id) for name, run_id in ids.items()},
                "base": server.base_url,
                "browser": browser,
                "exported": exported,
            }
        finally:
            browser.close()
            store.close()


@pytest.fixture
def page(world: dict[str, Any]) -> Iterator[Any]:
    with new_page(world["browser"], timeout_ms=TIMEOUT_MS) as page:
        yield page


def _open(world: dict[str, Any], page: Any, name: str) -> None:
    page.goto(f"{world['base']}/runs/{world['ids'][name]}")
    page.wait_for_selector('#panels[data-ready="1"]', state="attached")


def _nodes(svg: Any, what: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = svg.locator(what).evaluate_all(
        "els => els.map(e => { const r = e.querySelector('rect.flow-box');"
        " return { ...e.dataset, cls: e.getAttribute('class'),"
        " x: Number(r.getAttribute('x')), y: Number(r.getAttribute('y')),"
        " marks: (e.querySelector('.flow-marks') || {}).textContent || '' }; })"
    )
    return found


def _check_feature_flow(panel: Any) -> None:
    """What the Flow panel of the feature flow shows (served or exported)."""
    expect(panel.locator("section.flow")).to_have_count(1)
    svg = panel.locator("svg.flow-graph")
    expect(svg.locator("g.flow-node.step")).to_have_count(8)
    expect(svg.locator("g.flow-node.merge")).to_have_count(1)
    expect(svg.locator("g.flow-node.merge .flow-merge-label")).to_have_text("5↣1")
    expect(svg.locator("path.flow-edge")).to_have_count(1 + 5 + 5 + 1)
    expect(panel.locator("ol.flow-graphs li").first).to_have_text(GRAPH)
    expect(panel.locator("ol.flow-graphs li").nth(1)).to_have_text(FAILED_GRAPH)
    expect(panel.locator('table.flow-stats tr[data-key="requests"] td')).to_have_text("9")
    expect(panel.locator('table.flow-stats tr[data-key="cost"] td')).to_have_text("$0.0123")


def test_the_flow_panel_draws_steps_splits_merge_graphs_and_statistics(
    world: dict[str, Any], page: Any
) -> None:
    [flow] = world["docs"]["flow"]["flows"]
    _open(world, page, "flow")
    panel = page.locator("#panel-flow")
    _check_feature_flow(panel)
    expect(page.locator("#run-nav a[data-target='sec-flow']")).to_have_text("Flow")
    svg = panel.locator("svg.flow-graph")
    steps = _nodes(svg, "g.flow-node.step")
    [merge] = _nodes(svg, "g.flow-node.merge")
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_agent.setdefault(step["agent"], []).append(step)
    layer = {agent: {int(s["layer"]) for s in found} for agent, found in by_agent.items()}
    assert layer == {
        "CodeSummarizer": {0},
        "FeatureIdentifier": {1},
        "FeatureAnalyzer": {2},  # the five splits share one layer ...
        "AnswerGenerator": {4},
    }
    assert int(merge["layer"]) == 3
    splits = by_agent["FeatureAnalyzer"]
    assert [s["split"] for s in splits] == [f"{i}/5" for i in range(1, 6)]
    assert len({s["x"] for s in splits}) == 1  # ... side by side in one column, in split order
    ys = [s["y"] for s in splits]
    assert ys == sorted(ys) and len(set(ys)) == 5
    assert min(ys) < merge["y"] < max(ys)  # the chain runs through the middle of the splits
    # the failed split: marked as an error, with its retry and fatal glyphs
    failed = [s for s in steps if s["status"] == "error"]
    assert [s["split"] for s in failed] == [f"{ERROR_SPLIT}/5"]
    assert "status-error" in failed[0]["cls"] and failed[0]["marks"] == "⚠ ☢"
    expect(svg.locator("path.flow-edge.error")).to_have_count(2)
    assert [s["marks"] for s in steps if s["agent"] == "AnswerGenerator"] == ["✓"]
    node = flow["steps"][1 + ERROR_SPLIT]
    assert node["status"] == "error"
    target = svg.locator(f'g.flow-node[data-node="{node["node"]}"]')
    tooltip = target.locator("title").text_content() or ""
    first, last = node["events"]["first"], node["events"]["last"]
    assert node["node"] in tooltip and f"events #{first}–#{last}" in tooltip
    assert f"flow.step #{node['seq']}" in tooltip

    # a node selected: its step, span and events; then its span shown in the timeline
    target.click()
    expect(target).to_have_class("flow-node step status-error selected")
    detail = panel.locator(".flow-detail")
    expect(detail.locator(".flow-node-id")).to_have_text(node["node"])
    expect(detail.locator(".flow-range")).to_contain_text(f"#{first} – #{last} (5 events)")
    expect(detail).to_contain_text("ValueError: the answer is not JSON")
    expect(detail.locator("button.flow-parent")).to_have_text("FeatureIdentifier")
    panel.screenshot(path=str(ARTIFACTS / "viewer-panel-flow.png"))
    detail.locator("#flow-show").click()
    expect(page.locator("#timeline .ev.target")).to_have_attribute("data-seq", str(first))
    expect(page.locator("#timeline .ev.in-span")).to_have_count(node["events"]["count"])
    step_row = page.locator(f'#timeline .ev[data-seq="{node["seq"]}"]')
    expect(step_row).to_contain_text("qa: FeatureAnalyzer 3/5 error")
    # a parent button selects the parent node
    detail.locator("button.flow-parent").click()
    expect(svg.locator("g.flow-node.selected")).to_have_attribute("data-agent", "FeatureIdentifier")
    assert not page.errors  # type: ignore[attr-defined]


def test_a_run_without_flows_has_no_flow_panel(world: dict[str, Any], page: Any) -> None:
    asked: list[str] = []
    page.on("request", lambda req: asked.append(req.url))
    _open(world, page, "plain")
    expect(page.locator("#panel-flow")).to_have_count(0)
    expect(page.locator("#sec-flow")).to_have_count(0)
    expect(page.locator("#run-nav a[data-target='sec-flow']")).to_have_count(0)
    assert not [url for url in asked if url.endswith("/flow")]  # not even asked
    assert not page.errors  # type: ignore[attr-defined]


def test_several_flows_and_malformed_events(world: dict[str, Any], page: Any) -> None:
    _open(world, page, "many")
    panel = page.locator("#panel-flow")
    flows = panel.locator("section.flow")
    expect(flows).to_have_count(3)
    assert flows.evaluate_all("els => els.map(e => [e.dataset.flow, e.dataset.walk])") == [
        ["alpha", "1"],
        ["beta", "1"],
        ["alpha", "2"],
    ]
    alpha = flows.nth(0)
    expect(alpha.locator("g.flow-node")).to_have_count(2)
    expect(alpha.locator("path.flow-edge")).to_have_count(1)  # "run/nowhere" is not drawn
    expect(alpha.locator("g.flow-node.status-skipped")).to_have_count(1)
    expect(alpha.locator("g.flow-node.status-skipped .flow-marks")).to_have_text("○")
    beta = flows.nth(1)
    expect(beta.locator("g.flow-node")).to_have_count(2)
    expect(beta.locator("g.flow-node.grade-false .flow-marks")).to_have_text("✗")
    expect(beta.locator("g.flow-node title").first).to_contain_text(XSS)
    expect(beta.locator("ol.flow-graphs li")).to_have_text("M, Checker, ✗")
    expect(beta).to_contain_text("No statistics were recorded.")
    expect(flows.nth(2)).to_contain_text("no flow.end")
    skipped = page.locator("#flow-skipped li")
    expect(skipped).to_have_count(5)
    expect(skipped.nth(4)).to_contain_text("unknown flow event type 'flow.future'")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#panel-flow img").count() == 0
    panel.screenshot(path=str(ARTIFACTS / "viewer-panel-flow-many.png"))
    assert not page.errors  # type: ignore[attr-defined]


def test_a_flow_of_200_splits_draws_fast(world: dict[str, Any], page: Any) -> None:
    start = time.perf_counter()
    page.goto(f"{world['base']}/runs/{world['ids']['big']}")
    page.wait_for_selector("#panel-flow svg.flow-graph g.flow-node.merge", state="attached")
    took = time.perf_counter() - start
    svg = page.locator("#panel-flow svg.flow-graph")
    splits = _nodes(svg, 'g.flow-node.step[data-agent="FeatureAnalyzer"]')
    assert len(splits) == BIG_SPLITS
    assert {s["layer"] for s in splits} == {"2"} and len({s["x"] for s in splits}) == 1
    assert [s["split"] for s in splits] == [f"{i}/{BIG_SPLITS}" for i in range(1, 201)]
    expect(svg.locator("path.flow-edge")).to_have_count(2 + 2 * BIG_SPLITS)
    expect(svg.locator(".flow-merge-label")).to_have_text(f"{BIG_SPLITS}↣1")
    # selecting a node is one class change, not a redraw
    node = svg.locator('g.flow-node[data-split="150/200"]')
    node.scroll_into_view_if_needed()
    node.click()
    expect(page.locator(".flow-detail .flow-node-id")).to_have_text(
        "run/flow-qa/FeatureAnalyzer#150"
    )
    print(f"200-split flow drawn {took:.2f} s after navigation")
    assert took < BIG_BUDGET_S, took
    assert not page.errors  # type: ignore[attr-defined]


def test_the_exported_page_shows_the_flow_panel(world: dict[str, Any], page: Any) -> None:
    asked: list[str] = []
    page.on("request", lambda req: asked.append(req.url))
    page.goto(world["exported"].as_uri())
    page.wait_for_selector('#panels[data-ready="1"]', state="attached")
    _check_feature_flow(page.locator("#panel-flow"))
    page.locator("#panel-flow g.flow-node.status-error").click()
    expect(page.locator(".flow-detail")).to_contain_text("ValueError")
    assert all(url.startswith(("file:", "data:")) for url in asked), asked
    assert not page.errors  # type: ignore[attr-defined]
