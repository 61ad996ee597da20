"""The viewer's study pages over HTTP: the list of studies, a study's report as ``rar study
report`` wrote it, a study not reported yet, a report file that cannot be read, and reads that
change nothing (a report is never computed by a GET)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from browser import ViewerServer
from rar.demo import run_demo
from rar.runtime.run import Run
from rar.store.store import Store
from rar.study import study
from rar.study.report import default_report_dir, group_key, write_report

XSS_ANSWER = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script> x = 1'
SPEC: dict[str, Any] = {
    "name": "viewer-study",
    "flows": [
        {"entrypoint": "study_flows:coin"},
        {"entrypoint": "study_flows:broken"},
        {"entrypoint": "test_viewer_studies:markup"},
    ],
    "seeds": [1, 2, 3, 4, 5],
}


def markup(run: Run) -> dict[str, Any]:
    """A flow cell (run by the Dask workers) whose answer is markup: shown, never run."""
    return {"answer": XSS_ANSWER, "claims": [{"text": "x = 1"}]}


def record_studies(root: Path) -> dict[str, Any]:
    """A store with a reported study, the same study run again (every cell reused, no report)
    and a run that is not a study."""
    store = Store(root, create=True)
    try:
        reported = study(SPEC, store=store, workers=2)
        report, _files = write_report(store, reported.run_id)
        again = study(SPEC, store=store)  # every cell done already: no cluster is started
        plain = run_demo(store).id
        store.list_runs()
    finally:
        store.close()
    return {"reported": reported, "again": again, "report": report, "plain": plain}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("viewer-studies") / "runs"
    made = record_studies(root)
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as http:
        yield {**made, "root": root, "http": http}


def _get(world: dict[str, Any], path: str) -> Any:
    answer = world["http"].get(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_list_names_each_study_newest_first_and_whether_it_is_reported(
    world: dict[str, Any],
) -> None:
    listed = _get(world, "/api/studies")
    ids = [s["run_id"] for s in listed["studies"]]
    assert ids == [world["again"].run_id, world["reported"].run_id]
    assert world["plain"] not in ids
    assert [s["reported"] for s in listed["studies"]] == [False, True]
    assert {s["cells"] for s in listed["studies"]} == {15}
    assert {s["name"] for s in listed["studies"]} == {"viewer-study"}
    assert listed["total"] == 2


def test_a_reported_study_answers_the_report_json_it_has_on_disk(world: dict[str, Any]) -> None:
    study_id = world["reported"].run_id
    doc = _get(world, f"/api/studies/{study_id[:-2]}")  # a unique prefix will do
    on_disk = orjson.loads((default_report_dir(Store(world["root"]), study_id) / "report.json")
                           .read_bytes())  # fmt: skip
    assert doc["id"] == study_id and doc["cells"] is None and doc["report_error"] is None
    report = doc["report"]
    assert report["groups"] == on_disk["groups"]
    assert report["counts"] == {"cells": 15, "completed": 10, "failed": 5, "missing": 0,
                                "reused": 0}  # fmt: skip
    assert report["replay"] == {"reproducible": 10, "runs": 10, "all_reproducible": True}
    coin = next(g for g in report["groups"] if g["label"] == "study_flows:coin")
    assert coin["disagreeing"], "the seeds must disagree for the page to link diffs"
    assert {d["run_id"] for d in coin["disagreeing"]} < {
        c["run_id"] for c in report["cells"] if c["params"]["entrypoint"] == "study_flows:coin"
    }
    for cell in report["cells"]:  # the page finds each cell's group by this key
        assert cell["group"] == group_key(cell["params"])
        assert cell["group"] in {g["key"] for g in report["groups"]}


def test_a_study_without_a_report_gives_its_cells_and_the_command_that_reports_it(
    world: dict[str, Any],
) -> None:
    again = world["again"]
    doc = _get(world, f"/api/studies/{again.run_id}")
    assert doc["report"] is None and doc["report_error"] is None
    assert doc["command"] == f"rar study report {again.run_id}"
    assert [c["digest"] for c in doc["cells"]] == [c["digest"] for c in again.cells]
    completed = [c for c in doc["cells"] if c["status"] == "completed"]
    assert len(completed) == 10 and all(c["reused"] for c in completed)
    failed = [c for c in doc["cells"] if c["status"] == "failed"]
    assert {c["error"]["message"] for c in failed} == {"broken on purpose"}


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("not json", "is not valid JSON"),
        ("link", "is a symbolic link"),
        ("not a report", "is not a study report"),
    ],
)
def test_a_report_file_that_cannot_be_read_is_said_and_the_cells_are_shown(
    world: dict[str, Any], damage: str, said: str
) -> None:
    again = world["again"].run_id
    folder = default_report_dir(Store(world["root"]), again)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.json"
    try:
        if damage == "link":
            os.symlink("/etc/passwd", path)
        else:
            path.write_bytes(b"{not json" if damage == "not json" else b'{"groups": 3}')
        doc = _get(world, f"/api/studies/{again}")
        assert doc["report"] is None
        assert said in doc["report_error"] and doc["command"] in doc["report_error"]
        assert len(doc["cells"]) == 15
    finally:
        path.unlink()


def test_a_reported_study_serves_the_figures_its_report_drew(world: dict[str, Any]) -> None:
    study_id = world["reported"].run_id
    folder = default_report_dir(Store(world["root"]), study_id)
    doc = _get(world, f"/api/studies/{study_id}")
    assert doc["figures"] == [
        "agreement.svg",
        "agreement.png",
        "distributions.svg",
        "distributions.png",
    ]
    assert _get(world, f"/api/studies/{world['again'].run_id}")["figures"] == []
    for name, media_type, start in (
        ("agreement.svg", "image/svg+xml", b"<?xml"),
        ("agreement.png", "image/png", b"\x89PNG"),
        ("distributions.svg", "image/svg+xml", b"<?xml"),
        ("distributions.png", "image/png", b"\x89PNG"),
    ):
        answer = world["http"].get(f"/api/studies/{study_id}/figures/{name}")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith(media_type)
        assert answer.content.startswith(start)
        assert answer.content == (folder / name).read_bytes()
        policy = answer.headers["content-security-policy"]
        assert "sandbox" in policy and "default-src 'none'" in policy  # an SVG runs no script
        assert answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "name",
    ["report.json", "report.md", "agreement.pdf", "%2e%2e%2freport.json", "agreement.svg%00"],
)
def test_only_the_report_figures_are_served(world: dict[str, Any], name: str) -> None:
    answer = world["http"].get(f"/api/studies/{world['reported'].run_id}/figures/{name}")
    assert answer.status_code == 404
    assert answer.json()["error"] in ("figure-not-found", "not-found")


def test_a_figure_that_is_a_link_or_a_report_directory_that_is_a_link_is_not_followed(
    world: dict[str, Any], tmp_path: Path
) -> None:
    again = world["again"].run_id
    folder = default_report_dir(Store(world["root"]), again)
    outside = tmp_path / "secret.svg"
    outside.write_text("<svg>not the store's</svg>")
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "agreement.svg"
    try:
        os.symlink(outside, link)
        answer = world["http"].get(f"/api/studies/{again}/figures/agreement.svg")
        assert answer.status_code == 404 and "symbolic link" in answer.json()["message"]
        assert b"not the store's" not in answer.content
    finally:
        link.unlink()
        folder.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "agreement.svg").write_text("<svg>not the store's</svg>")
    os.symlink(elsewhere, folder)
    try:
        answer = world["http"].get(f"/api/studies/{again}/figures/agreement.svg")
        assert answer.status_code == 404 and b"not the store's" not in answer.content
    finally:
        folder.unlink()
    answer = world["http"].get(f"/api/studies/{world['plain']}/figures/agreement.svg")
    assert answer.status_code == 404 and answer.json()["error"] == "not-a-study"


def test_a_run_that_is_not_a_study_and_an_unknown_id_are_404s(world: dict[str, Any]) -> None:
    answer = world["http"].get(f"/api/studies/{world['plain']}")
    assert answer.status_code == 404 and answer.json()["error"] == "not-a-study"
    answer = world["http"].get("/api/studies/20991231-000000-00000000")
    assert answer.status_code == 404 and answer.json()["error"] == "run-not-found"
    answer = world["http"].get("/api/studies/..%2F..%2Fetc")
    assert answer.status_code == 404


def test_the_pages_are_the_shell_and_reading_them_changes_nothing(world: dict[str, Any]) -> None:
    store = Store(world["root"])
    before = sorted(p.relative_to(world["root"]) for p in world["root"].rglob("*")
                    if "index.sqlite" not in p.name)  # fmt: skip
    for path in (
        "/studies",
        f"/studies/{world['reported'].run_id}",
        f"/studies/{world['again'].run_id}",
    ):
        page = world["http"].get(path)
        assert page.status_code == 200
        assert '<script defer src="/static/studies.js"></script>' in page.text
    for path in ("/api/studies", f"/api/studies/{world['again'].run_id}"):
        _get(world, path)
        assert world["http"].post(path, json={}).status_code == 405
    after = sorted(p.relative_to(world["root"]) for p in world["root"].rglob("*")
                   if "index.sqlite" not in p.name)  # fmt: skip
    assert after == before  # no replay run, no diff, no report written
    assert world["http"].get("/studies/nope").status_code == 404
    store.close()
