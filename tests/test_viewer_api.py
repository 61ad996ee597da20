"""``rar view``'s server and JSON API, served for real on 127.0.0.1 and read over HTTP."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from browser import ViewerServer
from rar.demo import run_demo
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.viewer import SECURITY_HEADERS, host_warning, is_loopback
from rar.viewer.artifacts import ARTIFACT_CSP

BIG_EVENTS = 1100
FIGURE = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
    b'<rect width="4" height="4"/></svg>'
)


def _runs_with_config(store: Store) -> dict[str, str]:
    ids: dict[str, str] = {}
    ids["demo"] = run_demo(store).id

    run = record(
        "alpha big run",
        store=store,
        seed=1,
        durable=False,
        redactor=Redactor(env={}),
        config={"mode": "record", "model": "model-a"},
    )
    with run:
        for i in range(BIG_EVENTS):
            run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: i)
    ids["big"] = run.id

    run = record("beta artifacts", store=store, seed=2, durable=False, redactor=Redactor(env={}))
    with run:
        run.artifact("report.txt", b"hello artifact\n")
        run.artifact("sub/data.json", b'{"x": 1}')
        run.artifact("figures/fit.svg", FIGURE, media_type="image/svg+xml")
        run.artifact("notes.txt", b"as recorded", media_type="text/plain")
    ids["art"] = run.id
    artifacts = store.run_dir(run.id) / "artifacts"
    (artifacts / "notes.txt").write_bytes(b"edited afterwards")  # no longer the recorded bytes
    os.symlink("/etc/passwd", artifacts / "passwd")
    os.symlink("/etc", artifacts / "etcdir")
    os.mkfifo(artifacts / "pipe")

    run = record(
        "gamma broken chain", store=store, seed=3, durable=False, redactor=Redactor(env={})
    )
    with run:
        run.effect("tool", {"name": "t", "args": {"i": 0}}, lambda: "original answer")
    ids["flipped"] = run.id
    log = store.run_dir(run.id) / "events.jsonl"
    data = log.read_bytes()
    at = data.index(b"original answer")
    log.write_bytes(data[:at] + b"0" + data[at + 1 :])  # one byte changed, JSON still valid

    run = record("delta malformed", store=store, seed=4, durable=False, redactor=Redactor(env={}))
    with run:
        for i in range(3):
            run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: i)
    ids["malformed"] = run.id
    log = store.run_dir(run.id) / "events.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[3] = lines[3][:-1] + b"#"  # the 4th line no longer parses
    log.write_bytes(b"\n".join(lines))
    return ids


def _tree_digest(root: Path) -> dict[str, str]:
    digests: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.name.startswith("index.sqlite"):
            continue
        if path.is_symlink():
            digests[rel] = "link:" + os.readlink(path)
        elif path.is_fifo():
            digests[rel] = "fifo"
        elif path.is_file():
            st = path.stat()
            digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + f":{st.st_mtime_ns}"
        elif path.is_dir():
            digests[rel] = "dir"
    return digests


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer") / "runs"
    store = Store(root, create=True)
    ids = _runs_with_config(store)
    store.list_runs()  # the index exists before the server starts
    store.close()
    before = _tree_digest(root)
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        yield {"root": root, "ids": ids, "client": client, "server": server, "before": before}


def _get(world: dict[str, Any], path: str, **params: Any) -> Any:
    return world["client"].get(path, params=params or None)


def _raw(world: dict[str, Any], target: str) -> tuple[int, bytes]:
    """A request line sent exactly as written (clients normalise ``..`` away)."""
    port = world["server"].port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


# --- runs -------------------------------------------------------------------------------------


def test_runs_newest_first_with_fields(world: dict[str, Any]) -> None:
    answer = _get(world, "/api/runs")
    assert answer.status_code == 200
    runs = answer.json()["runs"]
    ids = world["ids"]
    assert {r["id"] for r in runs} == set(ids.values())
    created = [(r["created_at"], r["id"]) for r in runs]
    assert created == sorted(created, reverse=True)
    big = next(r for r in runs if r["id"] == ids["big"])
    assert big["goal"] == "alpha big run"
    assert big["status"] == "completed"
    assert big["events"] >= BIG_EVENTS
    assert big["mode"] == "record" and big["model"] == "model-a"
    assert big["url"] == f"/api/runs/{ids['big']}"


def test_runs_filters_and_sorting(world: dict[str, Any]) -> None:
    ids = world["ids"]
    found = _get(world, "/api/runs", q="ALPHA").json()["runs"]
    assert [r["id"] for r in found] == [ids["big"]]
    suffix = ids["art"].rsplit("-", 1)[-1]
    assert [r["id"] for r in _get(world, "/api/runs", q=suffix).json()["runs"]] == [ids["art"]]
    assert _get(world, "/api/runs", status="failed").json()["runs"] == []
    completed = _get(world, "/api/runs", status="completed").json()["runs"]
    assert ids["big"] in {r["id"] for r in completed}
    oldest = _get(world, "/api/runs", sort="created_at").json()["runs"]
    newest = _get(world, "/api/runs", sort="-created_at").json()["runs"]
    assert [r["id"] for r in oldest] == [r["id"] for r in reversed(newest)]
    goals = [r["goal"].lower() for r in _get(world, "/api/runs", sort="goal").json()["runs"]]
    assert goals == sorted(goals)
    goals = [r["goal"].lower() for r in _get(world, "/api/runs", sort="-goal").json()["runs"]]
    assert goals == sorted(goals, reverse=True)
    statuses = [r["status"] for r in _get(world, "/api/runs", sort="status").json()["runs"]]
    assert statuses == sorted(statuses)
    assert _get(world, "/api/runs", sort="bogus").status_code == 400


def test_run_detail(world: dict[str, Any]) -> None:
    run_id = world["ids"]["demo"]
    answer = _get(world, f"/api/runs/{run_id[-8:]}")  # a prefix of the random part resolves
    assert answer.status_code == 200
    body = answer.json()
    assert body["id"] == run_id
    assert body["manifest"]["run_id"] == run_id
    assert body["summary"]["events"] == body["manifest"]["events"]
    assert body["summary"]["complete"] is True
    assert body["summary"]["event_types"]["run.started"] == 1
    assert body["verify"]["ok"] is True and body["verify"]["problems"] == []
    assert body["links"]["home"] == "/"
    again = _get(world, f"/api/runs/{run_id}").json()  # served from the verify cache
    assert again["verify"] == body["verify"]


def test_events_paging_over_1000(world: dict[str, Any]) -> None:
    run_id = world["ids"]["big"]
    first = _get(world, f"/api/runs/{run_id}/events", limit=5000).json()
    assert first["limit"] == 1000 and len(first["events"]) == 1000
    total = first["total"]
    assert total > 1000
    seen = list(first["events"])
    offset = first["next_offset"]
    while offset is not None:
        page = _get(world, f"/api/runs/{run_id}/events", offset=offset, limit=300).json()
        seen += page["events"]
        offset = page["next_offset"]
    assert [e["seq"] for e in seen] == list(range(1, total + 1))
    effect = next(e for e in seen if e["type"] == "effect")
    assert "digest" in effect["request"]  # payload references stay references
    empty = _get(world, f"/api/runs/{run_id}/events", offset=total + 10).json()
    assert empty["events"] == [] and empty["next_offset"] is None
    assert _get(world, f"/api/runs/{run_id}/events", offset=-1).status_code == 400
    assert _get(world, f"/api/runs/{run_id}/events", limit="x").status_code == 400


def test_events_filtered_by_type_agent_and_span(world: dict[str, Any]) -> None:
    run_id = world["ids"]["demo"]
    every = _get(world, f"/api/runs/{run_id}/events", limit=1000).json()["events"]
    detail = _get(world, f"/api/runs/{run_id}").json()["summary"]
    llm = _get(world, f"/api/runs/{run_id}/events", type="effect:llm").json()
    assert llm["total"] == detail["event_types"]["effect:llm"] > 0
    assert llm["all"] == len(every)
    assert all(e["type"] == "effect" and e["kind"] == "llm" for e in llm["events"])
    effects = _get(world, f"/api/runs/{run_id}/events", type="effect").json()
    assert effects["total"] == sum(e["type"] == "effect" for e in every)
    spans = {e["span"] for e in every if e["span"] != "run"}
    top = sorted(spans, key=len)[0]
    under = _get(world, f"/api/runs/{run_id}/events", span=top).json()["events"]
    assert under and all(e["span"] == top or e["span"].startswith(top + "/") for e in under)
    agents = detail["agents"]
    assert agents == sorted({e["agent"] for e in every if e.get("agent")})
    if agents:
        mine = _get(world, f"/api/runs/{run_id}/events", agent=agents[0]).json()["events"]
        assert mine and all(e.get("agent") == agents[0] for e in mine)
    paged = _get(world, f"/api/runs/{run_id}/events", type="effect", limit=1, offset=1).json()
    assert paged["events"] == effects["events"][1:2]
    none = _get(world, f"/api/runs/{run_id}/events", type="no-such-type").json()
    assert none["total"] == 0 and none["events"] == [] and none["next_offset"] is None


def test_blobs_and_payloads(world: dict[str, Any]) -> None:
    run_id = world["ids"]["demo"]
    events = _get(world, f"/api/runs/{run_id}/events").json()["events"]
    started = events[0]
    effect = next(e for e in events if e["type"] == "effect" and e["kind"] == "llm")
    digest = effect["request"]["digest"]
    if "value" not in effect["request"]:
        blob = _get(world, f"/api/blobs/{digest}")
        assert blob.status_code == 200 and blob.json()["digest"] == digest
    payload = _get(world, "/api/payload", run=run_id, seq=effect["seq"], field="request")
    assert payload.status_code == 200
    assert isinstance(payload.json()["value"]["request"]["messages"], list)  # chain unlinked
    nope = _get(world, "/api/payload", run=run_id, seq=started["seq"], field="nope")
    assert nope.status_code == 404
    assert _get(world, "/api/payload", run=run_id, seq="x", field="request").status_code == 400
    assert _get(world, "/api/payload", run=run_id, seq=99999, field="request").status_code == 404
    missing = "sha256:" + "0" * 64
    assert _get(world, f"/api/blobs/{missing}").status_code == 404
    for bad in ["sha256:abc", "md5:" + "0" * 32, "sha256:" + "A" * 64, "..", "sha256:" + "g" * 64]:
        answer = _get(world, f"/api/blobs/{bad}")
        assert answer.status_code in (400, 404), bad
        assert answer.headers["content-type"].startswith("application/json")
    assert _get(world, "/api/blobs/sha256:xyz").status_code == 400


def test_artifacts_served_and_traversal_refused(world: dict[str, Any]) -> None:
    run_id = world["ids"]["art"]
    base = f"/api/runs/{run_id}/artifacts"
    answer = _get(world, f"{base}/report.txt")
    assert answer.status_code == 200 and answer.content == b"hello artifact\n"
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["content-disposition"].startswith("attachment")
    assert _get(world, f"{base}/sub/data.json").content == b'{"x": 1}'
    refused = [
        f"{base}/passwd",  # symlink to /etc/passwd
        f"{base}/etcdir/passwd",  # through a symlinked directory
        f"{base}/pipe",  # FIFO
        f"{base}/sub",  # a directory
        f"{base}/nothing",
    ]
    for target in refused:
        answer = _get(world, target)
        assert answer.status_code in (400, 404), target
        assert b"root:" not in answer.content
    raw = [
        f"{base}/../manifest.json",
        f"{base}/%2e%2e/manifest.json",
        f"{base}/%2E%2E/%2e%2e/{run_id}/manifest.json",
        f"{base}/sub/../../events.jsonl",
        f"{base}/%2fetc%2fpasswd",
        f"{base}//etc/passwd",
        f"{base}/..%2f..%2f..%2fetc%2fpasswd",
        f"{base}/./report.txt",
        f"/api/runs/..%2f{run_id}/artifacts/report.txt",
        "/api/runs/%2e%2e/events",
    ]
    for target in raw:
        status, body = _raw(world, target)
        assert status in (400, 404), target
        assert b"root:" not in body and b"run_id" not in body, target


def test_recorded_pictures_inline_and_changed_artifacts_refused(world: dict[str, Any]) -> None:
    base = f"/api/runs/{world['ids']['art']}/artifacts"
    figure = _get(world, f"{base}/figures/fit.svg")
    assert figure.status_code == 200 and figure.content == FIGURE
    assert figure.headers["content-type"].startswith("image/svg+xml")
    assert figure.headers["content-disposition"].startswith("inline")
    # even opened on its own, an artifact runs no script: its own, stricter policy
    policy = figure.headers["content-security-policy"]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert figure.headers["x-content-type-options"] == "nosniff"
    changed = _get(world, f"{base}/notes.txt")
    assert changed.status_code == 409
    assert changed.json()["error"] == "artifact-changed"
    assert b"edited afterwards" not in changed.content


def test_run_list_filters_by_mode_model_and_date(world: dict[str, Any]) -> None:
    ids = world["ids"]
    listed = _get(world, "/api/runs").json()["runs"]
    by_mode = _get(world, "/api/runs", mode="record").json()["runs"]
    assert [r["id"] for r in by_mode] == [ids["big"]]
    assert [r["id"] for r in _get(world, "/api/runs", model="model-a").json()["runs"]] == [
        ids["big"]
    ]
    assert _get(world, "/api/runs", model="no-such-model").json()["runs"] == []
    day = listed[0]["created_at"][:10]
    assert len(_get(world, "/api/runs", since=day, until=day).json()["runs"]) == len(listed)
    assert _get(world, "/api/runs", until="2000-01-01").json()["runs"] == []
    assert _get(world, "/api/runs", since="2999-01-01T00:00").json()["runs"] == []
    for bad in ("yesterday", "2026-13", "1/2/2026"):
        answer = _get(world, "/api/runs", since=bad)
        assert answer.status_code == 400 and "since" in answer.json()["message"]


def test_unknown_run_page_is_html_404_linking_back(world: dict[str, Any]) -> None:
    answer = _get(world, "/runs/<script>nope")
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert '<a href="/" id="back-to-runs">' in answer.text
    assert "<script>nope" not in answer.text and "&lt;script&gt;nope" in answer.text
    named = _get(world, "/runs/nope-nope")
    assert named.status_code == 404 and "nope-nope" in named.text
    assert _get(world, f"/runs/{world['ids']['demo']}").status_code == 200


def test_unknown_run_is_404_json_with_link(world: dict[str, Any]) -> None:
    for path in ["/api/runs/nope", "/api/runs/nope/events", "/api/runs/nope/artifacts/x"]:
        answer = _get(world, path)
        assert answer.status_code == 404
        body = answer.json()
        assert body["home"] == "/" and "nope" in body["message"]
    assert _get(world, "/api/diff", a="nope", b=world["ids"]["demo"]).status_code == 404
    assert _get(world, "/api/nothing-here").json()["home"] == "/"


def test_corrupt_runs_answer_with_problems(world: dict[str, Any]) -> None:
    flipped = _get(world, f"/api/runs/{world['ids']['flipped']}")
    assert flipped.status_code == 200
    verify = flipped.json()["verify"]
    assert verify["ok"] is False and verify["problems"]

    run_id = world["ids"]["malformed"]
    answer = _get(world, f"/api/runs/{run_id}")
    assert answer.status_code == 200
    body = answer.json()
    assert body["verify"]["ok"] is False
    assert any(p["what"] == "malformed-line" for p in body["verify"]["problems"])
    assert body["summary"]["events"] == 3 and body["summary"]["complete"] is False
    events = _get(world, f"/api/runs/{run_id}/events").json()
    assert [e["seq"] for e in events["events"]] == [1, 2, 3]
    assert events["complete"] is False and events["problems"]


def test_diff(world: dict[str, Any]) -> None:
    ids = world["ids"]
    answer = _get(world, "/api/diff", a=ids["demo"], b=ids["big"])
    assert answer.status_code == 200
    body = answer.json()
    assert body["a"]["run_id"] == ids["demo"] and body["b"]["run_id"] == ids["big"]
    assert body["equivalent"] is False and body["steps"]
    same = _get(world, "/api/diff", a=ids["demo"], b=ids["demo"][-8:])
    assert same.status_code == 400 and same.json()["error"] == "same-run"


def test_security_headers_everywhere(world: dict[str, Any]) -> None:
    ids = world["ids"]
    paths = [
        "/",
        f"/runs/{ids['demo']}",
        "/api/runs",
        f"/api/runs/{ids['demo']}",
        "/api/runs/nope",
        "/api/blobs/bad",
        f"/api/runs/{ids['art']}/artifacts/report.txt",
        "/missing",
    ]
    for path in paths:
        answer = _get(world, path)
        for name, value in SECURITY_HEADERS.items():
            if name == "Content-Security-Policy" and "/artifacts/" in path:
                value = ARTIFACT_CSP  # stricter: no script at all, sandboxed
            assert answer.headers[name] == value, (path, name)
    page = _get(world, f"/runs/{ids['demo']}")
    assert page.headers["content-type"].startswith("text/html")
    assert ids["demo"] not in page.text  # no data inlined into HTML
    posted = world["client"].post("/api/runs")
    assert posted.status_code == 405
    assert posted.headers["X-Content-Type-Options"] == "nosniff"


def test_foreign_host_header_refused(world: dict[str, Any]) -> None:
    answer = world["client"].get("/api/runs", headers={"Host": "evil.example"})
    assert answer.status_code == 400
    assert answer.headers["Referrer-Policy"] == "no-referrer"


def test_store_not_modified_by_requests(world: dict[str, Any]) -> None:
    ids = world["ids"]
    for run_id in ids.values():
        _get(world, f"/api/runs/{run_id}")
        _get(world, f"/api/runs/{run_id}/events", limit=1000)
    _get(world, "/api/runs")
    _get(world, "/api/diff", a=ids["demo"], b=ids["flipped"])
    assert _tree_digest(world["root"]) == world["before"]


def test_a_torn_log_is_verified_reported_and_left_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run_id = run_demo(store).id
    store.close()
    log = root / run_id / "events.jsonl"
    with open(log, "ab") as handle:
        handle.write(b'{"seq": 999, "torn')
    before = _tree_digest(root)
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        body = client.get(f"/api/runs/{run_id}").json()
    assert body["verify"]["checked"] is True and body["summary"]["torn_bytes"] > 0
    assert body["verify"]["ok"] is False  # a torn line after run.finished is a problem
    assert any("torn" in p["what"] or "torn" in p["detail"] for p in body["verify"]["problems"])
    assert _tree_digest(root) == before


def test_a_run_being_written_shows_its_new_events(tmp_path: Path) -> None:
    """The parsed log is cached per run, and dropped as soon as the log grows."""
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run = record("live run", store=store, seed=1, durable=False, redactor=Redactor(env={}))
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client, run:
        run.effect("tool", {"name": "t", "args": {"i": 0}}, lambda: 0)
        first = client.get(f"/api/runs/{run.id}/events").json()
        again = client.get(f"/api/runs/{run.id}/events").json()
        assert again["total"] == first["total"]
        run.effect("tool", {"name": "t", "args": {"i": 1}}, lambda: 1)
        grown = client.get(f"/api/runs/{run.id}/events").json()
        assert grown["total"] == first["total"] + 1
        assert grown["events"][-1]["type"] == "effect" and grown["events"][-1]["ordinal"] == 1
        assert client.get(f"/api/runs/{run.id}").json()["summary"]["events"] == grown["total"]
    store.close()


def test_replay_reports_in_the_detail_and_the_replays_route(tmp_path: Path) -> None:
    from rar.replay import replay

    root = tmp_path / "runs"
    store = Store(root, create=True)
    source = run_demo(store).id
    first = replay(source, store=store).replay_run
    second = replay(source, store=store).replay_run
    store.close()
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        own = client.get(f"/api/runs/{first}").json()["replay"]
        assert own["replay_status"] == "reproducible" and own["mode"] == "strict"
        assert own["mismatched"] == 0 and own["served"] > 0 and own["result_equal"] is True
        assert client.get(f"/api/runs/{source}").json()["replay"] is None
        children = client.get(f"/api/runs/{source}/replays").json()["children"]
        assert [c["id"] for c in children] == [second, first]  # newest first
        assert all(c["replay"]["replay_status"] == "reproducible" for c in children)
        assert client.get(f"/api/runs/{first}/replays").json()["children"] == []
        assert client.get("/api/runs/nope/replays").status_code == 404


def test_missing_store_is_empty_and_not_created(tmp_path: Path) -> None:
    root = tmp_path / "absent"
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        assert client.get("/api/runs").json() == {"runs": [], "total": 0}
        assert client.get("/api/runs/x").status_code == 404
        assert client.get("/api/blobs/sha256:" + "0" * 64).status_code == 404
    assert not root.exists()


def test_host_warning() -> None:
    for host in ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]:
        assert is_loopback(host) and host_warning(host) is None
    for host in ["0.0.0.0", "::", "192.168.1.5", "example.org"]:
        warning = host_warning(host)
        assert warning is not None and host in warning and "run store" in warning


def test_view_command_shape() -> None:
    from rar.cli.view_cmd import view_command

    assert view_command.name == "view"
    names = {p.name for p in view_command.params}
    assert {"store_path", "host", "port", "no_open"} <= names


def test_page_shell_loads_every_viewer_file_in_order() -> None:
    import re

    from rar.viewer.app import SCRIPTS, STATIC_DIR, STYLES

    shell = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<script defer src="/static/([^"]+)"></script>', shell) == list(SCRIPTS)
    assert re.findall(r'<link rel="stylesheet" href="/static/([^"]+)">', shell) == list(STYLES)
    for name in (*SCRIPTS, *STYLES):
        assert (STATIC_DIR / name).is_file(), name


def test_an_offset_beyond_any_page_is_a_400_naming_the_range_not_a_500(
    world: dict[str, Any],
) -> None:
    run_id = world["ids"]["big"]
    for offset in (10**30, 2**64, 2**53, -(10**30)):
        answer = _get(world, f"/api/runs/{run_id}/events", offset=offset)
        assert answer.status_code == 400, (offset, answer.text)
        message = answer.json()["message"]
        assert message.startswith("offset ") and "from 0 to 9007199254740991" in message
    last = _get(world, f"/api/runs/{run_id}/events", offset=2**53 - 1).json()
    assert last["offset"] == 2**53 - 1 and last["events"] == [] and last["next_offset"] is None
    for seq in (10**30, 0, "١"):
        answer = _get(world, "/api/payload", run=run_id, seq=seq, field="request")
        assert answer.status_code == 400 and "seq" in answer.json()["message"]
