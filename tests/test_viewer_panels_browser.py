"""The run page's agent panels in a real browser: Playwright driving Debian's Chromium against
the real viewer on 127.0.0.1 — the message sequence diagram and Contract Net rounds, BDI state,
audit, argumentation graph and artifacts of a recorded science run, and recorded text that
tries to run as HTML. Skipped when playwright or /usr/bin/chromium is missing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM, ViewerServer, launch_chromium, new_page
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.science.protocols import (
    ACLMessage,
    ArgumentationFramework,
    BDIState,
    ContractNet,
    Draft,
    MessageBus,
    Performative,
    audit,
    log_audit,
)
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
XSS = f"{IMG} {SCRIPT}"


def as_json(text: str) -> str:
    """``text`` as it reads inside a JSON string (the panels print objects as JSON)."""
    return json.dumps(text)[1:-1]


TIMEOUT_MS = 15_000
KISSINGER = "What activation energy do the Kissinger DSC data in the corpus give?"
HAS_SANDBOX = shutil.which("bwrap") is not None


def _xss_run(store: Store) -> str:
    """A run whose messages, BDI values, audit and argumentation all carry markup."""
    run = record(
        "panels xss",
        store=store,
        seed=11,
        durable=False,
        redactor=Redactor(env={}),
        config={"mode": "owl_full", "model": "model-x"},
    )
    with run:
        bus = MessageBus(run)
        planner = BDIState("planner", run)
        net = ContractNet(bus, manager="planner", bdi=planner)
        task = net.announce({"kind": "research", "query": f"query {XSS}"}, ["researcher"])
        net.bid(
            task,
            "researcher",
            success_probability=0.9,
            capability_match=1.0,
            cost=1,
            latency=1,
        )
        net.award(task)
        net.start(task)
        net.report(task, success=True, result={"note": f"report {XSS}"})
        BDIState("researcher", run).believe(f"key {IMG}", {"found": f"belief {XSS}"})
        bus.send(
            ACLMessage(
                performative=Performative.INFORM,
                sender="researcher",
                receivers=("<i>critic</i>",),
                content={"text": f"inform {XSS}"},
            )
        )
        claim = f"claim {XSS}"
        report = audit(Draft(answer=claim, claims=[{"text": claim}]), "owl_lite")
        log_audit(run, report)
        for message in report.challenge_messages("auditor", ["planner"]):
            bus.send(message)
        bus.send(
            ACLMessage(
                performative=Performative.RETRACT,
                sender="planner",
                receivers=("auditor",),
                content={"claim": claim, "reason": f"retract {SCRIPT}"},
            )
        )
        graph = ArgumentationFramework()
        graph.add("claim-0", claim, [])
        graph.add("challenge-0", f"challenge {IMG}", [])
        graph.attack("challenge-0", "claim-0")
        run.artifact("notes/readme.txt", f"text {XSS}\n".encode(), media_type="text/plain")
        run.finish(result={"answer": f"answer {XSS}", "argumentation": graph.to_json()})
    return run.id


def _chatty_run(store: Store) -> str:
    """Sixty messages between five agents (one of them talking to itself)."""
    run = record("chatty", store=store, seed=12, durable=False, redactor=Redactor(env={}))
    with run:
        bus = MessageBus(run)
        agents = ["planner", "researcher", "executor", "auditor", "critic"]
        for i in range(60):
            sender = agents[i % 5]
            receiver = agents[(i * 3 + 1) % 5] if i % 7 else sender
            bus.send(
                ACLMessage(
                    performative=Performative.INFORM,
                    sender=sender,
                    receivers=(receiver,),
                    content={"i": i},
                )
            )
        run.finish(result={"answer": "done"})
    return run.id


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from rar.science.runtime import ask_question

    root = tmp_path_factory.mktemp("viewer-panels") / "runs"
    store = Store(root, create=True)
    ids = {
        "science": ask_question(KISSINGER, mode="owl_full", store=store).run_id,
        "xss": _xss_run(store),
        "chatty": _chatty_run(store),
    }
    events = {name: store.events(run_id) for name, run_id in ids.items()}
    payload = store.resolve_payload
    store.list_runs()
    ARTIFACTS.mkdir(exist_ok=True)
    with ViewerServer(root) as server, sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield {
                "ids": ids,
                "events": events,
                "payload": payload,
                "base": server.base_url,
                "browser": browser,
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


def _content(world: dict[str, Any], event: dict[str, Any]) -> Any:
    return world["payload"](event["content"])["content"]


def _num(value: float) -> str:
    """How the panel prints a score: at most three decimals, no trailing zeros."""
    return f"{round(value, 3):.3f}".rstrip("0").rstrip(".")


def test_messages_are_a_sequence_diagram_with_contract_net_rounds(
    world: dict[str, Any], page: Any
) -> None:
    events = world["events"]["science"]
    messages = [e for e in events if e["type"] == "message"]
    _open(world, page, "science")
    panel = page.locator("#panel-messages")
    agents = panel.locator(".seq-head g.agent")
    assert agents.evaluate_all("els => els.map(e => e.dataset.agent)") == [
        "planner",
        "researcher",
        "executor",
        "auditor",
    ]
    for name in ("planner", "researcher", "executor", "auditor"):
        expect(panel.locator(".seq-head")).to_contain_text(name)
    arrows = panel.locator(".seq-body g.msg")
    expect(arrows).to_have_count(len(messages))
    drawn = arrows.evaluate_all(
        "els => els.map(e => [Number(e.dataset.seq), e.dataset.performative, e.dataset.sender,"
        " e.dataset.receivers])"
    )
    assert drawn == [
        [m["seq"], m["performative"], m["sender"], ",".join(m["receivers"])] for m in messages
    ]
    # each arrow is labelled with its performative and has one arrowhead per receiver
    first = arrows.first
    expect(first.locator("text.msg-label")).to_have_text(messages[0]["performative"])
    expect(first.locator("path.msg-head")).to_have_count(len(messages[0]["receivers"]))

    # one Contract Net round per conversation, with bids, scores, the award and the report
    conversations = list(
        dict.fromkeys(m["conversation_id"] for m in messages if m["conversation_id"])
    )
    rounds = panel.locator(".cn-round")
    expect(rounds).to_have_count(len(conversations))
    assert len(conversations) >= 3
    for index, conversation in enumerate(conversations):
        mine = [m for m in messages if m["conversation_id"] == conversation]
        box = panel.locator(f'.cn-round[data-conversation="{conversation}"]')
        cfp = _content(world, next(m for m in mine if m["performative"] == "CFP"))
        expect(box.locator(".cn-number")).to_have_text(f"Round {index + 1}")
        expect(box.locator(".cn-kind")).to_have_text(cfp["description"]["kind"])
        bids = [m for m in mine if m["performative"] == "BID"]
        expect(box.locator("tr.cn-bid")).to_have_count(len(bids))
        for bid in bids:
            row = box.locator(f'tr.cn-bid[data-bidder="{bid["sender"]}"]')
            offer = _content(world, bid)
            for key in ("capability_match", "cost", "latency", "success_probability"):
                expect(row).to_contain_text(_num(offer[key]))
        award = next(m for m in mine if m["performative"] == "AWARD")
        ranking = _content(world, award)["ranking"]
        winner = award["receivers"][0]
        assert ranking[0]["contractor"] == winner
        expect(box.locator("tr.cn-bid.winner")).to_have_count(1)
        winning = box.locator("tr.cn-bid.winner")
        expect(winning).to_have_attribute("data-bidder", winner)
        expect(winning.locator(".badge")).to_have_text("awarded")
        expect(winning.locator(".cn-score")).to_have_text(_num(ranking[0]["score"]))
        for entry in ranking[1:]:
            loser = box.locator(f'tr.cn-bid[data-bidder="{entry["contractor"]}"]')
            expect(loser.locator(".cn-score")).to_have_text(_num(entry["score"]))
            expect(loser.locator(".badge")).to_have_text("rejected")
        expect(box.locator(".cn-award .cn-winner")).to_have_text(winner)
        expect(box.locator(".cn-reject")).to_have_count(
            len([m for m in mine if m["performative"] == "REJECT"])
        )
        expect(box.locator(".cn-report")).to_have_count(1)
    expect(rounds.first).to_contain_text(KISSINGER)

    # a message's content opens on click
    award = next(m for m in messages if m["performative"] == "AWARD")
    panel.locator(f'.seq-body g.msg[data-seq="{award["seq"]}"]').click()
    expect(page.locator("#msg-detail pre.msg-content")).to_contain_text('"ranking"')
    expect(page.locator("#msg-detail")).to_contain_text(award["conversation_id"])
    expect(page.locator("#msg-detail .msg-meta")).to_contain_text("fipa-contract-net")
    panel.screenshot(path=str(ARTIFACTS / "viewer-panel-messages.png"))
    assert not page.errors  # type: ignore[attr-defined]


def test_bdi_audit_and_argumentation_panels(world: dict[str, Any], page: Any) -> None:
    events = world["events"]["science"]
    _open(world, page, "science")

    # BDI: one section per agent, every update in order
    updates = [e for e in events if e["type"] == "bdi.update"]
    bdi = page.locator("#panel-bdi")
    sections = bdi.locator(".bdi-agent")
    assert sections.evaluate_all("els => els.map(e => e.dataset.agent)") == [
        "planner",
        "researcher",
        "executor",
        "auditor",
    ]
    for agent in ("planner", "researcher", "executor", "auditor"):
        mine = [e for e in updates if e["agent"] == agent]
        rows = bdi.locator(f'.bdi-agent[data-agent="{agent}"] tr.bdi-update')
        expect(rows).to_have_count(len(mine))
        assert rows.evaluate_all("els => els.map(e => Number(e.dataset.seq))") == [
            e["seq"] for e in mine
        ]
        assert rows.evaluate_all("els => els.map(e => e.dataset.op)") == [e["op"] for e in mine]
    cell = bdi.locator('.bdi-agent[data-agent="executor"] tr.bdi-update').first
    expect(cell).to_contain_text("cell:1")
    cell.locator("summary").click()  # shortened; the whole value on click
    expect(cell.locator("pre.full")).to_contain_text("Ea_kJ_per_mol")

    # audit: every check with its verdict and detail, challenges with their messages
    audits = [e for e in events if e["type"] == "audit"]
    expect(page.locator("#panel-audit section.audit")).to_have_count(len(audits))  # one each
    assert [e.get("stage") for e in audits][-1] == "final"  # what was delivered, audited last
    audit_event = audits[0]  # the planner's first draft: challenged, then justified
    report = world["payload"](audit_event["report"])
    section = f'#panel-audit section.audit[data-seq="{audit_event["seq"]}"]'
    checks = page.locator(f"{section} .audit-check")
    expect(checks).to_have_count(len(report["checks"]))
    for check in report["checks"]:
        box = page.locator(f'{section} .audit-check[data-check="{check["name"]}"]')
        expect(box).to_have_attribute("data-passed", "1" if check["passed"] else "0")
        expect(box.locator(".check-head .badge")).to_have_text(
            "pass" if check["passed"] else "fail"
        )
        expect(box.locator(".check-detail")).to_contain_text(check["detail"][:60])
    assert not report["passed"]
    challenges = [e for e in events if e.get("performative") == "CHALLENGE"]
    justified = [e for e in events if e.get("performative") == "JUSTIFY"]
    assert challenges and justified
    tied = page.locator('#panel-audit .audit-msg[data-performative="CHALLENGE"]')
    expect(tied).to_have_count(len(challenges))
    expect(page.locator('#panel-audit .audit-msg[data-performative="JUSTIFY"]')).to_have_count(
        len(justified)
    )
    # each challenge of the draft shows how it ended: justified, or retracted (left out after
    # more evidence did not settle it)
    draft_challenges = page.locator(f"{section} .audit-challenge")
    expect(draft_challenges.first).to_be_visible()
    badges = [b for b in draft_challenges.locator(".badge").all_inner_texts() if b.islower()]
    assert badges and all(b in ("justified", "retracted") for b in badges), badges

    # argumentation: nodes, attacks, the grounded extension and a legend; a text list too
    finished = [e for e in events if e["type"] == "run.finished"][-1]
    graph = world["payload"](finished["result"])["argumentation"]
    svg = page.locator("#panel-argumentation svg.arg-graph")
    expect(svg).to_be_visible()
    nodes = svg.locator("g.argument")
    expect(nodes).to_have_count(len(graph["arguments"]))
    assert nodes.evaluate_all("els => els.map(e => [e.dataset.id, e.dataset.label])") == [
        [a["id"], graph["labels"][a["id"]]] for a in graph["arguments"]
    ]
    grounded = svg.locator("g.argument.grounded")
    assert grounded.evaluate_all("els => els.map(e => e.dataset.id)") == graph["grounded"]
    assert {"IN", "OUT"} <= set(graph["labels"].values())
    attacks = svg.locator("g.attack")
    assert (
        attacks.evaluate_all("els => els.map(e => [e.dataset.from, e.dataset.to])")
        == (graph["attacks"])
    )
    expect(attacks.first.locator("path.attack-head")).to_have_count(1)
    expect(page.locator("#arg-grounded")).to_have_text(", ".join(graph["grounded"]))
    legend = page.locator("#arg-legend")
    for word in ("accepted", "rejected", "undecided", "attacks", "grounded"):
        expect(legend).to_contain_text(word)
    expect(page.locator("#arg-list li")).to_have_count(len(graph["arguments"]))
    for section in ("bdi", "audit", "argumentation"):
        page.locator(f"#panel-{section}").screenshot(
            path=str(ARTIFACTS / f"viewer-panel-{section}.png")
        )
    page.screenshot(path=str(ARTIFACTS / "viewer-panels-science.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]


@pytest.mark.skipif(not HAS_SANDBOX, reason="bubblewrap is missing: the fit is not computed")
def test_the_fit_figure_loads(world: dict[str, Any], page: Any) -> None:
    [artifact] = [e for e in world["events"]["science"] if e["type"] == "artifact"]
    _open(world, page, "science")
    item = page.locator(f'#panel-artifacts .artifact[data-name="{artifact["name"]}"]')
    expect(item).to_contain_text("image/svg+xml")
    img = item.locator("img.artifact-img")
    img.scroll_into_view_if_needed()
    page.wait_for_function(
        "el => el.complete && el.naturalWidth > 0", arg=img.element_handle(), timeout=TIMEOUT_MS
    )
    assert img.evaluate("el => el.naturalWidth") > 0
    assert img.get_attribute("src") == (
        f"/api/runs/{world['ids']['science']}/artifacts/{artifact['name']}"
    )
    page.locator("#panel-artifacts").screenshot(path=str(ARTIFACTS / "viewer-panel-artifacts.png"))
    assert not page.errors  # type: ignore[attr-defined]


def test_many_messages_scroll_under_a_fixed_header(world: dict[str, Any], page: Any) -> None:
    _open(world, page, "chatty")
    scroll = page.locator("#sequence")
    expect(scroll.locator("g.msg")).to_have_count(60)
    assert scroll.locator(".seq-head g.agent").evaluate_all(
        "els => els.map(e => e.dataset.agent)"
    ) == ["planner", "researcher", "executor", "auditor", "critic"]
    assert scroll.evaluate("el => el.scrollHeight > el.clientHeight + 100")
    scroll.evaluate("el => { el.scrollTop = el.scrollHeight; }")
    page.wait_for_function("() => document.getElementById('sequence').scrollTop > 100")
    head_top = scroll.locator(".seq-head").evaluate("el => el.getBoundingClientRect().top")
    box_top = scroll.evaluate("el => el.getBoundingClientRect().top")
    assert abs(head_top - box_top) < 3  # the agents' names stay in view
    last = scroll.locator("g.msg").last
    expect(last).to_be_visible()
    # the 60 messages of the diagram are still distinct rows, 30 px apart
    ys = scroll.locator("g.msg text.msg-seq").evaluate_all(
        "els => els.map(e => Number(e.getAttribute('y')))"
    )
    assert all(b - a >= 29 for a, b in pairwise(ys))
    # a message to oneself is a loop, not a missing arrow
    expect(scroll.locator("g.msg path.msg-self").first).to_be_attached()
    page.locator("#panel-messages").screenshot(path=str(ARTIFACTS / "viewer-panel-many.png"))
    assert not page.errors  # type: ignore[attr-defined]


def test_recorded_markup_in_panels_stays_text(world: dict[str, Any], page: Any) -> None:
    _open(world, page, "xss")
    messages = page.locator("#panel-messages")
    expect(messages.locator(".cn-round .cn-task")).to_contain_text(f"query {XSS}")
    expect(messages.locator(".seq-head")).to_contain_text("<i>critic</i>")
    inform = messages.locator('.seq-body g.msg[data-performative="INFORM"]')
    inform.click()
    expect(page.locator("#msg-detail pre.msg-content")).to_contain_text(as_json(f"inform {XSS}"))
    report = messages.locator(".cn-report")
    report.locator("summary").click()
    expect(report.locator("pre.full")).to_contain_text(as_json(f"report {XSS}"))

    bdi = page.locator('#panel-bdi .bdi-agent[data-agent="researcher"] tr.bdi-update')
    expect(bdi.locator(".bdi-key")).to_contain_text(f"key {IMG}")
    bdi.locator("summary").click()
    expect(bdi.locator("pre.full")).to_contain_text(as_json(f"belief {XSS}"))

    audit_panel = page.locator("#panel-audit")
    expect(audit_panel.locator('.audit-check[data-check="evidence_quantity"]')).to_contain_text(
        f"claim {XSS}"
    )
    quantity = audit_panel.locator('.audit-check[data-check="evidence_quantity"]')
    expect(quantity.locator('.audit-msg[data-performative="CHALLENGE"]')).to_have_count(1)
    expect(quantity.locator('.audit-msg[data-performative="RETRACT"]')).to_contain_text(SCRIPT)
    expect(quantity.locator(".audit-challenge .badge", has_text="retracted")).to_have_count(1)

    expect(page.locator("#arg-list")).to_contain_text(f"challenge {IMG}")
    expect(page.locator("#panel-argumentation svg title").first).to_have_count(1)
    svg_text = page.locator("#panel-argumentation svg.arg-graph").text_content() or ""
    assert "challenge <img" in svg_text and "claim <img" in svg_text
    link = page.locator('#panel-artifacts .artifact[data-name="notes/readme.txt"] a.artifact-link')
    expect(link).to_have_attribute(
        "href", f"/api/runs/{world['ids']['xss']}/artifacts/notes/readme.txt"
    )

    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#panels img").count() == 0
    assert page.locator("#app script").count() == 0
    assert page.locator("#panels i, #panels b").count() == 0
    page.screenshot(path=str(ARTIFACTS / "viewer-panels-xss.png"), full_page=True)
    assert not page.errors  # type: ignore[attr-defined]
