"""The diff page, /diff?a=RUN&b=RUN, in a real browser: Playwright driving Debian's Chromium
against the real viewer on 127.0.0.1. Skipped when playwright or /usr/bin/chromium is missing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM, ViewerServer, launch_chromium, new_page
from rar.redaction import Redactor
from rar.replay.diff import diff_runs
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store.store import Store

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
IMG = '<img src=x onerror="window.__xss=1">'
SCRIPT = "<script>window.__xss=2</script>"
ANSWER_A = "The answer is 42.\nIt was found by search.\nDone."
ANSWER_B = "The answer is 43.\nIt was found by search.\nDone."
BIG_STEPS, BIG_DIVERGES_AT = 1600, 1300


def _run(
    store: Store, goal: str, work: Callable[[Run], None], *, answer: str | None, finish: bool = True
) -> str:
    run = record(goal, store=store, seed=1, durable=False, redactor=Redactor(env={}))
    with run:
        work(run)
        if finish:
            run.finish(result={"answer": answer})
    return run.id


def _tools(query: str) -> Callable[[Run], None]:
    """lookup (the same in every run), search for ``query``, fetch (the same)."""

    def work(run: Run) -> None:
        run.effect("tool", {"name": "lookup", "args": {"q": "shared"}}, lambda: {"ok": True})
        run.effect("tool", {"name": "search", "args": {"q": query, "k": 3}}, lambda: [query])
        run.effect("tool", {"name": "fetch", "args": {"url": "doc-1"}}, lambda: "the page")

    return work


def _many(diverge_at: int | None) -> Callable[[Run], None]:
    def work(run: Run) -> None:
        for i in range(BIG_STEPS):
            q = "changed" if i == diverge_at else "same"
            run.effect("tool", {"name": f"t{i % 7}", "args": {"i": i, "q": q}}, lambda i=i: i)

    return work


def _record_runs(store: Store) -> dict[str, str]:
    from rar.science.runtime import ask_question

    ids = {
        "a": _run(store, "tools, alpha", _tools("alpha"), answer=ANSWER_A),
        "b": _run(store, "tools, beta", _tools("beta"), answer=ANSWER_B),
        "a2": _run(store, "tools, alpha again", _tools("alpha"), answer=ANSWER_A),
        "none": _run(store, "no answer", _tools("alpha"), answer=None, finish=False),
        "xss": _run(
            store, f"xss goal {IMG} {SCRIPT}", _tools(SCRIPT), answer=f"answer {IMG}\n{SCRIPT}"
        ),
        "big_a": _run(store, "many steps", _many(None), answer="big"),
        "big_b": _run(store, "many steps, one changed", _many(BIG_DIVERGES_AT), answer="big"),
    }
    ids["science_a"] = ask_question("How is activation energy determined?", store=store).run_id
    ids["science_b"] = ask_question("What does the Kissinger method measure?", store=store).run_id
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer-diff-browser") / "runs"
    store = Store(root, create=True)
    ids = _record_runs(store)
    pairs = {
        "ab": ("a", "b"),
        "equal": ("a", "a2"),
        "none": ("a", "none"),
        "xss": ("a", "xss"),
        "big": ("big_a", "big_b"),
        "science": ("science_a", "science_b"),
    }
    diffs = {k: diff_runs(store, ids[x], ids[y]).as_dict() for k, (x, y) in pairs.items()}
    store.list_runs()
    store.close()
    ARTIFACTS.mkdir(exist_ok=True)
    with ViewerServer(root) as server, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield {"ids": ids, "diffs": diffs, "base": server.base_url, "browser": browser}
        finally:
            browser.close()


@pytest.fixture
def page(world: dict[str, Any]) -> Iterator[Any]:
    with new_page(world["browser"]) as page:
        yield page


def _open(world: dict[str, Any], page: Any, a: str, b: str) -> None:
    ids = world["ids"]
    page.goto(f"{world['base']}/diff?a={ids.get(a, a)}&b={ids.get(b, b)}")
    expect(page.locator("body[data-ready='1']")).to_have_count(1)


def test_first_divergence_field_and_highlighted_row(world: dict[str, Any], page: Any) -> None:
    ids, expected = world["ids"], world["diffs"]["ab"]
    first = expected["first_divergence"]
    assert first["status"] == "different-request" and first["index"] == 1  # the search step
    _open(world, page, "a", "b")
    header = page.locator("#diff-header")
    for key in ("a", "b"):
        link = header.locator(f'#diff-run-{key} a[href="/runs/{ids[key]}"]')
        expect(link).to_have_text(ids[key])
    expect(header.locator("#diff-run-a")).to_contain_text("tools, alpha")
    expect(header.locator("#diff-run-b")).to_contain_text("completed")
    expect(page.locator("#diff-verdict")).to_have_text("different")
    expect(page.locator('#diff-counts [data-status="same"]')).to_have_text("2 same")
    expect(page.locator('#diff-counts [data-status="different-request"]')).to_have_text(
        "1 different-request"
    )

    expect(page.locator("#divergence-reason")).to_have_text("different-request")
    expect(page.locator("#divergence-kind")).to_have_text("tool")
    fields = page.locator("#divergence-fields tbody tr")
    expect(fields).to_have_count(1)
    expect(fields.first.locator("td.path")).to_have_text("args.q")
    expect(fields.first.locator("td.value-a")).to_have_text('"alpha"')
    expect(fields.first.locator("td.value-b")).to_have_text('"beta"')

    rows = page.locator("#diff-steps .step")
    expect(rows).to_have_count(3)
    row = page.locator("#first-divergence")
    expect(row).to_have_count(1)
    expect(row).to_have_class("step status-different-request differs first-divergence")
    expect(row).to_have_attribute("data-index", str(first["index"]))
    expect(row).to_have_attribute("data-a-seq", str(first["a"]["seq"]))
    expect(row).to_have_attribute("data-b-seq", str(first["b"]["seq"]))
    expect(row.locator(".seq.side-a")).to_have_text(f"#{first['a']['seq']}")
    expect(row.locator(".label.side-a")).to_have_text("search")  # from A's events
    expect(row).to_be_in_viewport()
    assert page.locator("#diff-steps .first-divergence").count() == 1
    assert rows.nth(0).get_attribute("class") == "step status-same same"

    page.click("#jump-to-divergence")
    expect(row).to_be_in_viewport()
    # a click shows both sides' request and result next to each other
    row.locator(".label.side-b").click()
    detail = page.locator("#diff-steps .diff-detail")
    expect(detail.locator(".side-a pre.payload-request")).to_contain_text('"alpha"')
    expect(detail.locator(".side-b pre.payload-request")).to_contain_text('"beta"')
    expect(detail.locator(".side-b pre.payload-result")).to_contain_text("beta")

    udiff = page.locator("#answer-udiff")
    expect(udiff.locator(".line-del")).to_have_text(["-The answer is 42."])
    expect(udiff.locator(".line-add")).to_have_text(["+The answer is 43."])
    expect(udiff.locator(".line-ctx").first).to_have_text(" It was found by search.")
    expect(page.locator("#evidence-same")).to_be_visible()
    expect(page.locator('#manifest-fields tr[data-path="goal"] td.value-b')).to_contain_text(
        "tools, beta"
    )
    expect(page.locator("#metrics-diff tbody tr").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "viewer-diff.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_equivalent_runs(world: dict[str, Any], page: Any) -> None:
    assert world["diffs"]["equal"]["equivalent"] is True
    _open(world, page, "a", "a2")
    expect(page.locator("#diff-verdict")).to_have_text("equivalent")
    expect(page.locator("#diff-verdict")).to_have_attribute("data-equivalent", "true")
    expect(page.locator("#divergence-none")).to_contain_text("No step differs")
    expect(page.locator("#first-divergence")).to_have_count(0)
    expect(page.locator("#diff-steps .step.same")).to_have_count(3)
    expect(page.locator("#diff-steps .differs")).to_have_count(0)
    expect(page.locator("#answer-equal")).to_be_visible()
    expect(page.locator("#answer-udiff")).to_have_count(0)
    assert not page.errors  # type: ignore[attr-defined]


def test_evidence_differences_are_listed(world: dict[str, Any], page: Any) -> None:
    evidence = world["diffs"]["science"]["evidence"]
    assert evidence["added"] and evidence["removed"]
    _open(world, page, "science_a", "science_b")
    expect(page.locator("#diff-verdict")).to_have_text("different")
    added = page.locator("#evidence-added li")
    removed = page.locator("#evidence-removed li")
    expect(added).to_have_count(len(evidence["added"]))
    expect(removed).to_have_count(len(evidence["removed"]))
    for anchor, items in ((evidence["added"][0], added), (evidence["removed"][0], removed)):
        key = f"{anchor['doc_id']}#{anchor['location']}"
        item = items.and_(page.locator(f'[data-anchor="{key}"]'))
        expect(item.locator(".anchor-key")).to_have_text(key)
        expect(item.locator(".snippet")).to_contain_text(anchor["snippet"][:30])
    first = world["diffs"]["science"]["first_divergence"]
    expect(page.locator("#divergence-reason")).to_have_text(first["status"])
    expect(page.locator("#divergence-fields td.path").first).to_have_text(
        first["fields"][0]["path"]
    )
    expect(page.locator("#answer-udiff .line-del").first).to_contain_text("activation energy")
    expect(page.locator("#answer-udiff .line-add").first).to_contain_text("Kissinger")
    page.screenshot(path=str(ARTIFACTS / "viewer-diff-science.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


def test_one_side_without_an_answer(world: dict[str, Any], page: Any) -> None:
    answer = world["diffs"]["none"]["answer"]
    assert answer["b"] is None and answer["a"] == ANSWER_A
    _open(world, page, "a", "none")
    expect(page.locator("#answer-none-b")).to_contain_text("B has no answer")
    expect(page.locator("#answer-none-a")).to_have_count(0)
    expect(page.locator("#answer-udiff .line-del")).to_have_count(3)
    expect(page.locator("#answer-udiff .line-add")).to_have_count(0)
    assert not page.errors  # type: ignore[attr-defined]


def test_unknown_run_and_same_run_are_errors_with_a_way_back(
    world: dict[str, Any], page: Any
) -> None:
    _open(world, page, "nope", "a")
    error = page.locator("#diff-error")
    expect(error).to_contain_text("nope")
    expect(error.locator('a[href="/"]')).to_be_visible()
    expect(page.locator("#diff-steps")).to_have_count(0)

    _open(world, page, "a", "a")
    expect(page.locator("#diff-error")).to_contain_text("two different runs")
    expect(page.locator('#diff-error a[href="/"]')).to_be_visible()

    page.goto(f"{world['base']}/diff")
    expect(page.locator("#diff-form input[name=a]")).to_be_visible()


def test_record_text_never_runs_as_html(world: dict[str, Any], page: Any) -> None:
    _open(world, page, "a", "xss")
    expect(page.locator("#diff-run-b .diff-goal")).to_have_text(f"xss goal {IMG} {SCRIPT}")
    added = page.locator("#answer-udiff .line-add")
    expect(added).to_have_text([f"+answer {IMG}", f"+{SCRIPT}"])
    value_b = page.locator("#divergence-fields td.value-b")
    expect(value_b).to_have_text(f'"{SCRIPT}"')
    page.locator("#first-divergence .index").click()
    expect(page.locator(".diff-detail .side-b pre.payload-result")).to_contain_text(SCRIPT)
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#app img").count() == 0
    assert page.locator("#app script").count() == 0
    page.screenshot(path=str(ARTIFACTS / "viewer-diff-xss.png"), full_page=True)


def test_a_long_diff_is_paged(world: dict[str, Any], page: Any) -> None:
    expected = world["diffs"]["big"]
    first = expected["first_divergence"]
    assert len(expected["steps"]) == BIG_STEPS and first["index"] == BIG_DIVERGES_AT
    _open(world, page, "big_a", "big_b")
    rows = page.locator("#diff-steps .step")
    # the first 500 steps and the 500 around the first divergence; the rest behind buttons
    expect(rows).to_have_count(1000)
    expect(page.locator("#diff-steps-info")).to_have_text(f"1000 of {BIG_STEPS} steps shown")
    row = page.locator("#first-divergence")
    expect(row).to_have_attribute("data-index", str(BIG_DIVERGES_AT))
    expect(row).to_have_attribute("data-a-seq", str(first["a"]["seq"]))
    expect(row.locator(".label.side-b")).to_have_text(f"t{BIG_DIVERGES_AT % 7}")
    expect(row).to_be_in_viewport()
    gaps = page.locator("#diff-steps .diff-gap")
    expect(gaps).to_have_count(2)
    expect(gaps.first).to_contain_text("Steps 501–1000 not shown")
    gaps.first.locator("button.show-more").click()
    expect(rows).to_have_count(1500)
    indexes = rows.evaluate_all("rs => rs.map(r => Number(r.dataset.index))")
    assert indexes == list(range(1500))
    page.click("#diff-show-more")
    expect(rows).to_have_count(BIG_STEPS)
    expect(gaps).to_have_count(0)
    page.check("#diff-only-differences")
    visible = page.locator("#diff-steps .step:visible")
    expect(visible).to_have_count(sum(s["status"] != "same" for s in expected["steps"]))
    assert not page.errors  # type: ignore[attr-defined]
