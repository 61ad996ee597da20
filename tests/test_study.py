"""Studies on a real Dask LocalCluster: the grid, resuming, failing cells, replay, the report."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from rar.replay.engine import replay
from rar.science.runtime import result_of
from rar.store.store import Store
from rar.study import StudyResult, study
from rar.study.report import write_report

QUESTION = "What activation energy do the Kissinger DSC data in the corpus give?"
SEEDS = [1, 2, 3, 4]
SPEC: dict[str, Any] = {
    "name": "tiny",
    "questions": [QUESTION],
    "flows": [{"entrypoint": "study_flows:coin"}, {"entrypoint": "study_flows:broken"}],
    "seeds": SEEDS,
    "modes": ["owl_lite"],
}


@pytest.fixture(scope="module")
def studied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, StudyResult]:
    store = Store(tmp_path_factory.mktemp("study") / "runs")
    return store, study(SPEC, store=store, workers=2)


def _cell_runs(store: Store) -> Counter[str]:
    """How many completed runs each cell digest has in the store."""
    counts: Counter[str] = Counter()
    for row in store.list_runs():
        manifest = store.manifest(row.run_id)
        if "study_cell" in manifest.tags and manifest.status.value == "completed":
            counts[manifest.tags["study_cell"]] += 1
    return counts


def test_every_cell_runs_once_and_a_failing_cell_is_recorded(studied: Any) -> None:
    store, result = studied
    assert result.counts == {"cells": 12, "completed": 8, "failed": 4, "reused": 0}
    assert result.status == "completed_with_warnings"
    for cell in result.cells:
        if cell["status"] == "completed":
            assert store.manifest(cell["run_id"]).tags["study_cell"] == cell["digest"]
        else:
            assert cell["error"] == {"type": "ValueError", "message": "broken on purpose"}
            assert store.manifest(cell["run_id"]).status.value == "failed"
    assert set(_cell_runs(store).values()) == {1}


def test_a_rerun_reuses_finished_cells_and_runs_none_twice(studied: Any) -> None:
    store, first = studied
    again = study(SPEC, store=store, workers=1)
    assert again.run_id != first.run_id
    assert again.counts["reused"] == 8
    assert [c["run_id"] for c in again.cells if c["reused"]] == [
        c["run_id"] for c in first.cells if c["status"] == "completed"
    ]
    assert set(_cell_runs(store).values()) == {1}


def test_the_study_replays_strictly_without_running_a_cell(studied: Any) -> None:
    store, result = studied
    before = len(store.list_runs())
    report = replay(result.run_id, store=store)
    assert report.replay_status == "reproducible"
    assert report.served == 12
    assert len(store.list_runs()) == before + 1  # the replay run, and no cell run


def test_the_report_matches_values_computed_by_hand(studied: Any, tmp_path: Path) -> None:
    store, result = studied
    report, files = write_report(store, result.run_id[-8:], tmp_path / "report")
    done = [c for c in result.cells if c["status"] == "completed"]
    science = [c for c in done if c["run_id"] and store.manifest(c["run_id"]).tags["kind"] ==
               "science"]  # fmt: skip
    coins = [c for c in done if c not in science]
    assert len(science) == len(coins) == len(SEEDS)

    # the coin flow: answers "x = N" with N seeded
    values = [float(store.resolve_payload(_finished(store, c["run_id"])["result"])["answer"]
                    .removeprefix("x = ")) for c in coins]  # fmt: skip
    group = next(g for g in report["groups"] if g["label"] == "study_flows:coin")
    most = Counter(values).most_common(1)[0][1]
    assert most < len(values), "the seeds must disagree for this test to check the diffs"
    assert group["agreement_exact"] == pytest.approx(most / len(values))
    stats = group["values"]["x"]
    assert stats["mean"] == pytest.approx(statistics.fmean(values))
    assert stats["spread"] == pytest.approx(max(values) - min(values))
    assert stats["stdev"] == pytest.approx(statistics.stdev(values))
    assert stats["cv"] == pytest.approx(statistics.stdev(values) / statistics.fmean(values))
    assert len(group["disagreeing"]) == len(values) - most
    for item in group["disagreeing"]:
        assert Path(item["diff_markdown"]).is_file()
        assert item["run_id"] in Path(item["diff_json"]).name

    # the science question: Jaccard of anchor sets over every pair, audit pass rate
    results = [result_of(store, c["run_id"]) for c in science]
    anchors = [{(a["doc_id"], a["location"], a["content_hash"]) for a in r.anchors}
               for r in results]  # fmt: skip
    pairs = [len(a & b) / len(a | b) for a, b in combinations(anchors, 2)]
    question = next(g for g in report["groups"] if g["params"].get("question") == QUESTION)
    assert question["evidence_jaccard"] == pytest.approx(statistics.fmean(pairs))
    assert question["audit_pass_rate"] == sum(r.audit["passed"] for r in results) / len(results)
    assert question["agreement_exact"] == Counter(r.answer for r in results).most_common(1)[0][
        1
    ] / len(results)

    tokens = []
    for c in done:
        llm = store.manifest(c["run_id"]).stats.get("llm") or {}
        tokens.append(llm.get("input_tokens", 0) + llm.get("output_tokens", 0))
    assert report["distributions"]["tokens"]["median"] == statistics.median(tokens)
    assert report["counts"] == {"cells": 12, "completed": 8, "failed": 4, "missing": 0,
                                "reused": 0}  # fmt: skip
    assert report["replay"] == {"reproducible": 8, "runs": 8, "all_reproducible": True}
    assert report["study"]["replay"]["status"] == "reproducible"
    assert files["agreement_png"].read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in files["distributions_svg"].read_bytes()
    markdown = files["markdown"].read_text()
    assert "| G1 |" in markdown and "broken on purpose" in markdown


def _finished(store: Store, run_id: str) -> dict[str, Any]:
    return next(e for e in reversed(store.events(run_id)) if e["type"] == "run.finished")


def test_two_studies_diff_cell_by_cell(studied: Any) -> None:
    store, result = studied
    again = study(SPEC, store=store, workers=1)
    proc = subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store.root), "diff", result.run_id,
         again.run_id],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "study.cell" in proc.stdout and "reused" in proc.stdout
