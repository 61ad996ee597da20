"""``rar export RUN --format html``: one self-contained page, offline from ``file://``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from browser import CHROMIUM, launch_chromium
from rar.cli.export_cmd import export_command
from rar.demo import run_demo
from rar.export.html import (
    embed_json,
    embedded_payload,
    export_data,
    export_html,
    read_embedded,
)
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.viewer.app import SCRIPTS

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
IMG = '<img src=x onerror="window.__xss=1">'
SCRIPT = "<script>window.__xss=2</script>"
TIMEOUT_MS = 10_000
FIGURE = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
    b'<rect width="40" height="30" fill="#4a7"/><script>window.__xss=3</script></svg>'
)
DATA_RE = re.compile(r'<script type="application/json" id="rar-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from rar.science.runtime import ask_question

    root = tmp_path_factory.mktemp("export-html") / "runs"
    store = Store(root, create=True)
    ids = {"demo": run_demo(store).id}
    ids["science"] = ask_question("How is activation energy determined?", store=store).run_id
    run = record(
        f"xss goal {IMG} {SCRIPT}",
        store=store,
        seed=5,
        durable=False,
        redactor=Redactor(env={}),
        config={"mode": "record", "model": "model-x"},
    )
    with run:
        run.effect(
            "tool",
            {"name": "evil", "args": {"q": SCRIPT}},
            lambda: {"content": f"tool said {IMG} and {SCRIPT}", "pad": "x" * 400},
        )
        run.effect("tool", {"name": "big"}, lambda: {"blob": "y" * 300_000})
        run.artifact("figures/fit.svg", FIGURE, media_type="image/svg+xml")
        run.artifact("data/table.csv", b"x,y\n1,2\n", media_type="text/csv")
        run.finish(result={"answer": f"answer {IMG} {SCRIPT}"})
    ids["xss"] = run.id
    out = root.parent / "out"
    out.mkdir()
    files = {}
    for name, run_id in ids.items():
        files[name] = out / f"{name}.html"
        files[name].write_text(export_html(store, run_id), encoding="utf-8")
    # the same science run, compressed as a big run's export is
    files["science-gz"] = out / "science-gz.html"
    files["science-gz"].write_text(export_html(store, ids["science"], compress=True), "utf-8")
    yield {"store": store, "ids": ids, "files": files, "root": root}
    store.close()


def _data(text: str) -> dict[str, Any]:
    return read_embedded(text)


def test_no_external_references(world: dict[str, Any]) -> None:
    for path in world["files"].values():
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text
        assert not re.search(r"""(src|href)\s*=\s*["']?//""", text)
        assert not re.search(r"""\bsrc\s*=""", text.replace("src=x onerror", ""))
        assert '<link rel="stylesheet"' not in text
        assert "@import" not in text and "url(" not in text
        hrefs = re.findall(r"""href="([^"]*)\"""", text)
        assert all(h.startswith("data:") for h in hrefs), hrefs


def test_embedded_json_holds_the_run(world: dict[str, Any]) -> None:
    store, ids = world["store"], world["ids"]
    text = world["files"]["science"].read_text(encoding="utf-8")
    data = _data(text)
    assert data["run"]["id"] == ids["science"]
    events = data["events"]["events"]
    assert len(events) == data["run"]["summary"]["events"] == data["events"]["total"] > 0
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # every payload of every event reads back, from the embedded document, as the store
    # resolves it (message chains unlinked through the numbered blobs)
    checked = 0
    for ev in events:
        for field, ref in ev.items():
            if isinstance(ref, dict) and str(ref.get("digest", "")).startswith("sha256:"):
                plain = {k: v for k, v in ref.items() if k != "@"}
                assert embedded_payload(data, ev["seq"], field) == store.resolve_payload(plain)
                checked += 1
    assert checked > 20
    assert data["errors"] == {} and data["cut"] == {}
    # linked: no blob value names another blob by digest (numbers instead)
    assert "sha256:" not in json.dumps(
        [
            b
            for b in data["blobs"]
            if isinstance(b, dict) and ("item" in b or "$chain" in json.dumps(b))
        ]
    )
    anchors = data["run"]["anchors"]["anchors"]
    assert anchors and all(a["status"] == "matches" for a in anchors.values()), anchors
    # compressed or not, the same document
    gz = world["files"]["science-gz"].read_text(encoding="utf-8")
    head = gz.split("</head>", 1)[0]
    assert 'id="rar-data-gz"' in head and 'id="rar-data"' not in head
    assert _data(gz) == data


def test_conversation_stays_linked_in_the_export(tmp_path: Path) -> None:
    """A long conversation is embedded as message chains, each message once: linear size."""
    store = Store(tmp_path / "runs", create=True)
    sizes = {}
    for steps in (40, 80):
        run = record(f"chat {steps}", store=store, seed=1, durable=False, redactor=Redactor(env={}))
        with run:
            messages: list[dict[str, str]] = []
            for i in range(steps):
                messages.append({"role": "user", "content": f"question {i} " + "q" * 200})
                request = {"model": "m", "messages": list(messages)}
                reply = run.effect("llm", request, lambda i=i: {"content": f"answer {i}"})
                messages.append({"role": "assistant", "content": reply["content"]})
        sizes[steps] = len(export_html(store, run.id, compress=False).encode())
    # twice the steps: about twice the bytes (quadratic would be four times)
    assert sizes[80] < 2.4 * sizes[40], sizes
    store.close()


def test_recorded_script_is_escaped(world: dict[str, Any]) -> None:
    text = world["files"]["xss"].read_text(encoding="utf-8")
    match = DATA_RE.search(text)
    assert match is not None
    body = match.group(1)
    assert "<" not in body and ">" not in body and "&" not in body
    assert "\\u003c/script\\u003e" in body
    # the only </script> in the file close the data element and the viewer's scripts
    assert text.count("</script") == 1 + len(SCRIPTS)
    assert "window.__xss" not in DATA_RE.sub("", text)
    data = _data(text)
    assert SCRIPT in data["run"]["manifest"]["goal"]
    assert embed_json({"a": "</script>&"}) == '{"a":"\\u003c/script\\u003e\\u0026"}'


def test_big_payload_is_cut_with_a_note(world: dict[str, Any]) -> None:
    store, run_id = world["store"], world["ids"]["xss"]
    data = export_data(store, run_id)
    cut = list(data["cut"].values())
    assert len(cut) == 1 and "cut by rar export" in cut[0]
    assert len(cut[0].encode()) < 256 * 1024 + 200


def test_cli_writes_file(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    result = CliRunner().invoke(
        export_command,
        [world["ids"]["demo"], "--format", "html", "-o", str(out)],
        obj=str(world["root"]),
    )
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert _data(text)["run"]["id"] == world["ids"]["demo"]


# --- in a real browser, from file:// ---------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian package `chromium`)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        launched = launch_chromium(pw)
        try:
            yield launched
        finally:
            launched.close()


def _open(browser: Any, path: Path) -> tuple[Any, Any, list[str], list[str]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return context, page, requests, errors


def _offline_only(requests: list[str]) -> None:
    assert requests
    bad = [u for u in requests if not u.startswith(("file://", "data:", "about:"))]
    assert not bad, bad


@pytest.mark.parametrize("name", ["science", "science-gz"])
def test_browser_science_run_offline(world: dict[str, Any], browser: Any, name: str) -> None:
    from playwright.sync_api import expect

    context, page, requests, errors = _open(browser, world["files"][name])
    try:
        expect(page.locator("#summary")).to_contain_text("activation energy")
        expect(page.locator("#summary")).to_contain_text(world["ids"]["science"])
        total = _data(world["files"]["science"].read_text(encoding="utf-8"))["events"]["total"]
        expect(page.locator("#timeline > *")).to_have_count(total)
        expect(page.locator("#timeline-info")).to_contain_text(f"{total} of {total} events")
        expect(page.locator("#answer-text")).not_to_be_empty()
        claims = page.locator("#evidence .claim")
        expect(claims.first).to_be_visible()
        expect(page.locator("#evidence .badge.present").first).to_be_visible()
        expect(page.locator("#evidence .hash-badge").first).to_have_text("passage matches its hash")
        link = page.locator("#evidence .anchor-link").first
        link.click()
        expect(page.locator("#evidence .snippet").first).to_be_visible()
        # the replay player: ← / → keys step through the run
        pos = page.locator("#player-pos")
        expect(pos).to_contain_text("step 1 of")
        page.locator("h1").click()
        page.keyboard.press("ArrowRight")
        expect(pos).to_contain_text("step 2 of")
        page.keyboard.press("ArrowRight")
        expect(pos).to_contain_text("step 3 of")
        expect(page.locator("#player-body")).not_to_have_text("loading…")
        expect(page.locator("#player-body")).not_to_contain_text("could not load")
        page.keyboard.press("ArrowLeft")
        expect(pos).to_contain_text("step 2 of")
        # the timeline's filters work offline too
        events = _data(world["files"][name].read_text(encoding="utf-8"))["events"]["events"]
        page.select_option("#timeline-type", "effect:llm")
        llm = [e for e in events if e["type"] == "effect" and e.get("kind") == "llm"]
        expect(page.locator("#timeline .ev")).to_have_count(len(llm))
        page.select_option("#timeline-type", "")
        expect(page.locator("#timeline .ev")).to_have_count(total)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"export-html-{name}.png"), full_page=True)
        assert page.evaluate("window.__xss") is None
        _offline_only(requests)
        assert not errors, errors
    finally:
        context.close()


def test_browser_xss_run_offline(world: dict[str, Any], browser: Any) -> None:
    from playwright.sync_api import expect

    context, page, requests, errors = _open(browser, world["files"]["xss"])
    try:
        expect(page.locator("#run-goal")).to_have_text(f"xss goal {IMG} {SCRIPT}")
        expect(page.locator("#answer-text")).to_contain_text(SCRIPT)
        expect(page.locator("#timeline")).to_contain_text("evil")
        expect(page.locator("#app img:not(.artifact-img)")).to_have_count(0)
        pos = page.locator("#player-pos")
        body = page.locator("#player-body")
        page.locator("h1").click()
        page.keyboard.press("ArrowRight")  # the observation of the evil tool
        expect(pos).to_contain_text("step 2 of")
        expect(body).to_contain_text("tool said")
        expect(body).to_contain_text(SCRIPT)
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")  # the big tool's result: cut, with the note
        expect(body).to_contain_text("cut by rar export")
        page.keyboard.press("ArrowRight")
        expect(body).to_contain_text("answer")
        # the figure is inline as a data: URL (its script never runs); other files are named
        figure = page.locator('#panel-artifacts .artifact[data-name="figures/fit.svg"] img')
        expect(figure).to_be_visible()
        assert figure.get_attribute("src").startswith("data:image/svg+xml;base64,")
        assert page.evaluate("(img) => img.naturalWidth", figure.element_handle()) == 40
        table = page.locator('#panel-artifacts .artifact[data-name="data/table.csv"]')
        expect(table).to_contain_text("not included in this export")
        assert page.evaluate("typeof window.__xss") == "undefined"
        _offline_only(requests)
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_damaged_run_exports_with_its_problems_and_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run_id = run_demo(store).id
    store.close()
    pack = next((root / "blobs" / "packs").glob("*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a blob
    pack.write_bytes(bytes(data))
    out = tmp_path / "damaged.html"
    result = CliRunner().invoke(
        export_command, [run_id, "--format", "html", "-o", str(out)], obj=str(root)
    )
    assert result.exit_code == 0, result.output
    assert "does not verify" in result.stderr and "could not be read" in result.stderr
    embedded = _data(out.read_text(encoding="utf-8"))
    assert embedded["run"]["verify"]["ok"] is False and embedded["run"]["verify"]["problems"]
    assert any("does not match its digest" in why for why in embedded["errors"].values())
