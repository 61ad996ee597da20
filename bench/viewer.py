"""The viewer on a 10k-event run in headless Chromium, and the size of its HTML export.

One run of ~10,000 events is recorded (durable=False) the way an agent loop writes it: 2,500
``step`` spans, each with one ``llm`` effect (a ~4 KB chat request: system prompt, two tool specs,
the task and the last two turns; the answer with a tool call and usage), one ``tool`` effect
(~1 KB of search results) and, every 10th step, an agent ``message``; then a final answer. The
store is served by the real viewer (``rar.viewer.create_app``, uvicorn in a thread on 127.0.0.1)
and Debian's ``/usr/bin/chromium`` is driven by Playwright. Each repetition opens a new browser
context (cold cache) and reads, in the page, ``performance.now()`` (time since navigation start)
at the first frame after the first ``#timeline .ev`` row exists, and when the page has settled
(``body[data-ready="1"]``, and ``#panels[data-ready="1"]`` when the page has that element).
Measured for the run page with a fresh server (the run's verification not yet cached) and with
a warm one, for the run list ``/``, and for the ``rar export --format html`` file opened from
``file://``. The export is also timed (``export_html``, a fresh ``Store`` each time) and sized,
with a breakdown of where its bytes go.

    python bench/viewer.py [--repeat 7] [--quick] [--steps 2500]

Goals: first timeline rows <= 1.5 s for a 10k-event run; the exported HTML <= 5 MB.
Browser rows are skipped (with a message) when playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _common
from _common import median, table, temp_dir, text

from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store

GOAL_FIRST_ROWS_S = 1.5
GOAL_EXPORT_BYTES = 5 * 1000 * 1000
STEPS = 2500
MESSAGE_EVERY = 10
TIMEOUT_MS = 120_000
POLL_MS = 100
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

# --- the run -------------------------------------------------------------------------------------


def record_run(store: Store, steps: int) -> str:
    """An agent-shaped run: per step a span with an llm and a tool effect, sometimes a message."""
    from rar.llm.types import Message, Request, ToolCall, ToolSpec

    rng = random.Random(7)
    system = Message.system("You are a careful research assistant. " + text(rng, 1200))
    task = Message.user("Task: " + text(rng, 300))
    tools = tuple(
        ToolSpec(
            name=name,
            description=text(rng, 200),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": text(rng, 60)},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
                },
                "required": ["query"],
            },
        )
        for name in ("search", "read_page")
    )
    history: list[Message] = []
    run = record(
        "Survey the literature and answer the question " + text(rng, 80),
        store=store,
        seed=1,
        durable=False,
        redactor=Redactor(env={}),
        config={"mode": "record", "model": "model-x"},
    )
    with run:
        for step in range(steps):
            with run.span("step", agent="researcher", n=step):
                request = Request(
                    model="model-x",
                    messages=(system, task, *history[-4:]),
                    tools=tools,
                    temperature=0.2,
                    max_tokens=1024,
                )
                call = ToolCall(
                    id=f"call_{step}",
                    name=tools[step % 2].name,
                    arguments=json.dumps({"query": text(rng, 60), "top_k": 5}),
                )
                answer = Message.assistant(text(rng, 400), [call])
                response = {
                    "response": {
                        **answer.plain(),
                        "model": "model-x",
                        "finish_reason": "tool_calls",
                        "usage": {"input_tokens": 1100 + step, "output_tokens": 140},
                    },
                    "cached": False,
                    "served_by": {"provider": "openai", "model": "model-x"},
                }
                llm = {"provider": "openai", "base_url": None, "request": request.payload()}
                run.effect("llm", llm, lambda response=response: response)
                found = text(rng, 900)
                run.effect(
                    "tool",
                    {
                        "name": call.name,
                        "version": "1",
                        "args": json.loads(call.arguments),
                        "call_id": call.id,
                    },
                    lambda found=found: {"ok": True, "content": found},
                )
                if step % MESSAGE_EVERY == 0:
                    run.log_event(
                        "message",
                        performative="INFORM",
                        sender="researcher",
                        receivers=["planner"],
                        conversation_id="c1",
                        content={"progress": step, "note": text(rng, 200)},
                    )
                history += [answer, Message.tool(call, found)]
        run.finish(result={"answer": text(rng, 1000)})
    return run.id


# --- the server ----------------------------------------------------------------------------------


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """The real viewer on a free 127.0.0.1 port (uvicorn in a daemon thread); yields its URL."""
    import uvicorn

    from rar.viewer import create_app

    # IPPROTO_TCP so that asyncio turns on TCP_NODELAY (no delayed-ACK stalls on loopback)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(root),
        log_level="critical",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="bench-viewer", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# --- the browser ---------------------------------------------------------------------------------

# Installed before any of the page's scripts: a MutationObserver notes performance.now() (ms since
# navigation start) when the first row exists, when body[data-ready] and when #panels[data-ready]
# turn "1" (as `<name>_dom`), and again at the next animation frame, once that is painted
# (as `<name>`).
_MARKS = """
(() => {
  const marks = window.__bench = {};
  const note = (name) => {
    if (marks[name + "_dom"] !== undefined) return;
    marks[name + "_dom"] = performance.now();
    requestAnimationFrame(() => { marks[name] = performance.now(); });
  };
  const check = () => {
    if (marks.row_dom === undefined && document.querySelector(%(selector)s)) note("row");
    if (document.body && document.body.dataset.ready === "1") note("ready");
    const panels = document.getElementById("panels");
    if (panels && panels.dataset.ready === "1") note("panels");
  };
  new MutationObserver(check).observe(document, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["data-ready"],
  });
})();
"""

_SETTLED = """() => {
  const m = window.__bench;
  if (!m || m.ready === undefined) return false;
  return !document.getElementById("panels") || m.panels !== undefined;
}"""

_RESOURCES = """() => performance.getEntriesByType("resource")
  .filter((e) => e.name.includes("/api/"))
  .map((e) => ({ name: e.name, start: e.startTime, end: e.responseEnd }))"""

_SHELL_DONE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  return nav ? nav.domContentLoadedEventEnd : null;
}"""


def browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright, or the `test` extras)"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (Debian package `chromium`)"
    return None


def open_page(browser: Any, url: str, selector: str) -> dict[str, Any]:
    """Times of one cold visit (new context), in ms since navigation start."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.add_init_script(_MARKS % {"selector": json.dumps(selector)})
        page.goto(url, wait_until="commit")
        # the times are taken in the page; a slow poll keeps this process (which also runs the
        # server thread) out of the way
        page.wait_for_function(
            "() => window.__bench && window.__bench.row !== undefined", polling=POLL_MS
        )
        try:
            page.wait_for_function(_SETTLED, polling=POLL_MS)
        except Exception as exc:  # a page that never settles is reported, not fatal
            errors.append(f"did not settle: {type(exc).__name__}")
        marks = page.evaluate("() => window.__bench")
        marks["api"] = page.evaluate(_RESOURCES)
        marks["dom_loaded"] = page.evaluate(_SHELL_DONE)
        marks["errors"] = errors
        return marks
    finally:
        context.close()


def settled(marks: dict[str, Any]) -> float | None:
    if marks.get("ready") is None:
        return None
    return max(marks["ready"], marks.get("panels") or 0.0)


def api_time(marks: dict[str, Any], path: str, what: str = "end") -> float:
    """When the first request of ``path`` (with or without a query) was sent (``what="start"``)
    or answered (``"end"``); 0 when there was none."""
    prefix = path if "?" in path else path + "?"
    ends = []
    for entry in marks["api"]:
        at = "/" + entry["name"].split("://", 1)[-1].split("/", 1)[-1]
        if at == path or at.startswith(prefix):
            ends.append(entry[what])
    return min(ends) if ends else 0.0


# --- the export ----------------------------------------------------------------------------------


_EMBEDDED = re.compile(r'<script[^>]*\bid="rar-data(?:-gz)?"[^>]*>(.*?)</script>', re.S)


def _label(event: dict[str, Any], field: str) -> str:
    what = str(event.get("type", "?"))
    if what == "effect":
        what = f"effect {event.get('kind')}"
    return f"{what} {field}"


def export_profile(store: Store, run_id: str, html: str) -> tuple[list[list[Any]], list[str]]:
    """Where the bytes of the exported page ``html`` go: its embedded JSON (from ``export_data``)
    by part, before compression and gzip-compressed alone, and notes on how the page holds it.
    Follows both layouts of the export: ``payloads`` ("seq:field" -> value) and ``blobs``
    (digest -> value, each stored once)."""
    from rar.export.html import embed_json, export_data

    data = export_data(store, run_id)
    text_of = embed_json
    whole = text_of(data)
    embedded = len(whole.encode())
    events = data.get("events", {}).get("events", [])
    by_seq = {e.get("seq"): e for e in events}
    groups: dict[str, Any] = {}
    for key, value in data.items():
        if key == "payloads" and isinstance(value, dict):  # "seq:field" -> plain value
            for name, payload in value.items():
                seq, _, field = name.partition(":")
                label = "payloads: " + _label(by_seq.get(int(seq), {}), field)
                groups.setdefault(label, {})[name] = payload
        elif key == "blobs" and isinstance(value, dict):  # digest -> value, each stored once
            owner: dict[str, str] = {}
            for event in events:
                for field, ref in event.items():
                    if isinstance(ref, dict) and isinstance(ref.get("digest"), str):
                        owner.setdefault(ref["digest"], _label(event, field))
            for digest, blob in value.items():
                label = owner.get(digest)
                if label is None:  # reached through a linked conversation
                    node = isinstance(blob, dict) and blob and set(blob) <= {"item", "prev"}
                    label = "chain nodes ($chain)" if node else "messages (via $chain)"
                groups.setdefault("blobs: " + label, {})[digest] = blob
        elif key == "events":
            groups["events (the log as JSON)"] = value
        elif key == "run":
            groups["run detail (/api/runs/{id})"] = value
        else:
            groups[key] = value
    rows = []
    for label, value in groups.items():
        part = text_of(value).encode()
        rows.append(
            [
                label,
                len(part),
                len(part) / 1e6,
                100 * len(part) / embedded,
                len(gzip.compress(part, 9)) / 1e6,
            ]
        )
    rows.sort(key=lambda r: -r[1])
    rows.append(
        [
            "embedded JSON, total",
            embedded,
            embedded / 1e6,
            100.0,
            len(gzip.compress(whole.encode(), 9)) / 1e6,
        ]
    )

    total = len(html.encode())
    found = _EMBEDDED.search(html)
    held = len(found.group(1).encode()) if found else 0
    compressed = found is not None and "rar-data-gz" in found.group(0)[:200]
    log = text_of(data.get("events", {}))
    digests = len(re.findall(r'"sha256:[0-9a-f]{64}"', log)) * (len("sha256:") + 64 + 2)
    ids: dict[str, str] = {}
    short = re.sub(
        r"sha256:[0-9a-f]{64}", lambda m: ids.setdefault(m.group(0), f"#{len(ids):x}"), whole
    )
    short_packed = len(gzip.compress(short.encode(), 9))
    notes = [
        f"the page holds the embedded JSON {'gzip-compressed, base64' if compressed else 'as is'}"
        f": {held / 1e6:.2f} MB; code, styles and markup {(total - held) / 1e6:.2f} MB; "
        f"page total {total / 1e6:.2f} MB",
        f"of the events JSON, {digests / 1e6:.2f} MB ({100 * digests / max(len(log), 1):.0f}%) "
        "are sha256 digests (prev and payload references)",
        f"with its {len(ids):,} distinct sha256 digests replaced by short ids, the embedded JSON "
        f"would be {len(short) / 1e6:.2f} MB, gzip -9 {short_packed / 1e6:.2f} MB "
        f"({4 * short_packed / 3e6:.2f} MB as base64)",
    ]
    return rows, notes


def time_export(root: Path, run_id: str, repeat: int) -> tuple[list[float], str]:
    from rar.export.html import export_html

    times = []
    html = ""
    for _ in range(repeat):
        store = Store(root)  # no warm blob or index handles between repetitions
        began = time.perf_counter()
        html = export_html(store, run_id)
        times.append(time.perf_counter() - began)
        store.close()
    return times, html


# --- main ----------------------------------------------------------------------------------------


def row(name: str, values: list[float | None], goal: float | None, unit: str = "ms") -> list[Any]:
    got = [v for v in values if v is not None]
    if not got:
        return [name, "-", "-", "-", f"<= {goal:,.0f} {unit}" if goal else "-", "-"]
    mid = median(got)
    return [
        name
        + (
            f" ({len(values) - len(got)} of {len(values)} missing)"
            if len(got) < len(values)
            else ""
        ),
        mid,
        min(got),
        max(got),
        f"<= {goal:,.0f} {unit}" if goal else "-",
        _common.verdict(mid <= goal) if goal else "-",
    ]


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--repeat", {"type": int, "default": None, "help": "visits per page (default 7)"}),
            ("--steps", {"type": int, "default": STEPS, "help": "step spans in the run"}),
        ],
    )
    repeat = args.repeat or (3 if args.quick else 7)
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("skipped: the viewer needs starlette and uvicorn (pip install -e '.[test]')")
        return
    missing = browser_missing()
    goal_ms = GOAL_FIRST_ROWS_S * 1e3
    rows: list[list[Any]] = []
    breakdown: list[list[Any]] = []
    errors: set[str] = set()
    with temp_dir("viewer") as tmp:
        root = tmp / "store"
        store = Store(root, create=True)
        began = time.perf_counter()
        run_id = record_run(store, args.steps)
        built = time.perf_counter() - began
        store.list_runs()
        log = store.run_dir(run_id) / "events.jsonl"
        events = sum(1 for _ in log.open("rb"))
        log_bytes = log.stat().st_size
        store_bytes = _common.dir_size(root)

        export_times, html = time_export(root, run_id, repeat)
        size = len(html.encode())
        profile, notes = export_profile(store, run_id, html)
        store.close()
        export_file = tmp / "run.html"
        export_file.write_text(html, encoding="utf-8")
        del html

        if missing is None:
            from playwright.sync_api import sync_playwright

            run_url = f"/runs/{run_id}"
            events_page = f"/api/runs/{run_id}/events?offset=0&"
            visits: dict[str, list[dict[str, Any]]] = {
                "run page, fresh server": [],
                "run page, warm server": [],
                "run list /": [],
                "export from file://": [],
            }
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
                try:
                    # first visits: a new server per visit, so the run's verification is not cached
                    for _ in range(repeat):
                        with serve(root) as base:
                            visits["run page, fresh server"].append(
                                open_page(browser, base + run_url, "#timeline .ev")
                            )
                    with serve(root) as base:
                        open_page(browser, base + run_url, "#timeline .ev")  # warms the server
                        for _ in range(repeat):
                            visits["run page, warm server"].append(
                                open_page(browser, base + run_url, "#timeline .ev")
                            )
                        for _ in range(repeat):
                            visits["run list /"].append(
                                open_page(browser, base + "/", "#runs tbody tr.run-row")
                            )
                    for _ in range(repeat):
                        visits["export from file://"].append(
                            open_page(browser, export_file.as_uri(), "#timeline .ev")
                        )
                finally:
                    browser.close()
            fresh = [m.get("row") for m in visits["run page, fresh server"]]
            fresh_got = [v for v in fresh if v is not None]
            warm_got = [m.get("row") for m in visits["run page, warm server"] if m.get("row")]
            if fresh_got:
                _common.summary("viewer first rows, fresh server", f"{median(fresh_got):,.0f} ms",
                                f"warm server {median(warm_got):,.0f} ms" if warm_got else "-",
                                f"<= {goal_ms:,.0f} ms", median(fresh_got) <= goal_ms)
            for name, marks in visits.items():
                first = "first run row" if name.startswith("run list") else "first timeline rows"
                rows.append(row(f"{name}: {first}", [m.get("row") for m in marks], goal_ms))
                rows.append(row(f"{name}: settled", [settled(m) for m in marks], None))
                for m in marks:
                    errors.update(m["errors"])
                if name.startswith("run page"):
                    breakdown.append(
                        [
                            name,
                            median([m.get("dom_loaded") or 0.0 for m in marks]),
                            median([api_time(m, f"/api/runs/{run_id}", "start") for m in marks]),
                            median([api_time(m, f"/api/runs/{run_id}") for m in marks]),
                            median([api_time(m, events_page, "start") for m in marks]),
                            median([api_time(m, events_page) for m in marks]),
                            median([m["row_dom"] for m in marks]),
                            median([m["row"] for m in marks]),
                            median([m.get("ready") or 0.0 for m in marks]),
                            median([m.get("panels") or 0.0 for m in marks]),
                        ]
                    )
        rows.append(row("export_html time", [t * 1e3 for t in export_times], None))
        rows.append(
            [
                "export_html size (MB)",
                size / 1e6,
                "-",
                "-",
                f"<= {GOAL_EXPORT_BYTES / 1e6:.0f} MB",
                _common.verdict(size <= GOAL_EXPORT_BYTES),
            ]
        )

    print(
        f"machine: {os.cpu_count()} CPUs; run: {events:,} events ({args.steps:,} step spans), "
        f"events.jsonl {log_bytes / 1e6:.2f} MB, store {store_bytes / 1e6:.2f} MB, "
        f"recorded in {built:.1f} s; export {size:,} bytes ({size / 1e6:.2f} MB)"
    )
    if missing:
        print(f"browser measures skipped: {missing}")
    print()
    print(
        table(
            ["measure", "median", "min", "max", "goal", "met"],
            rows,
            title=f"viewer: {repeat} visits each, new browser context per visit; ms since "
            "navigation start",
        )
    )
    if breakdown:
        print()
        print(
            table(
                [
                    "page",
                    "shell + scripts",
                    "detail asked",
                    "detail answered",
                    "events page 1 asked",
                    "answered",
                    "rows in DOM",
                    "rows painted",
                    "body ready",
                    "panels ready",
                ],
                breakdown,
                title="run page, where the time goes (ms since navigation start, medians)",
            )
        )
    print()
    print(
        table(
            ["part of the embedded JSON", "bytes", "MB", "%", "MB gzip -9 alone"],
            profile,
            title="exported HTML, where the bytes go: the embedded JSON by part (as is, gzipped)",
        )
    )
    for note in notes:
        print(note)
    if errors:
        print("\npage errors: " + "; ".join(sorted(errors)))


if __name__ == "__main__":
    main()
