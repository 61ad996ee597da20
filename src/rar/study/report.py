"""A study's report, computed from the store: what agreed across seeds, and what it cost.

:func:`study_report` reads the study run's ``study.cell`` effects (so a study that was stopped
half-way is reported too, with what it finished), each cell's run, and strictly replays every
run offline. Cells are grouped by their parameters without the seed: a group is one question
(or flow) in one mode, with one model, over one corpus, asked with every seed. Per group it gives
the answer agreement (exact and normalised), the spread of the computed values, the evidence
overlap, the audit pass rate, and the runs whose answer is not the group's majority answer, each
with its diff against a majority run saved in ``<store>/diffs/``. :func:`write_report` writes it
as ``report.json``, ``report.md`` and figures (PNG and SVG).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from rar.errors import ConfigError, RarError
from rar.hashing import digest_value
from rar.store.store import Store
from rar.study import metrics
from rar.study.cells import DONE, STUDIES_DIR
from rar.study.runner import CELL_KIND

REPORT_VERSION = "1"


def study_cells(store: Store, study_id: str) -> list[dict[str, Any]]:
    """Each cell of the study (grid order) with its recorded outcome, or ``status: missing``
    for a cell the study never finished (it was stopped)."""
    manifest = store.manifest(study_id)
    if manifest.tags.get("kind") != "study":
        raise ConfigError(
            f"run {study_id} is not a study (its kind is {manifest.tags.get('kind')!r}); "
            "give the id of a run made by rar study"
        )
    cells = store.resolve_payload(manifest.inputs["cells"].reference())
    outcomes: dict[str, dict[str, Any]] = {}
    for event in store.events(study_id):
        if event.get("type") == "effect" and event.get("kind") == CELL_KIND:
            request = store.resolve_payload(event["request"])
            if "result" in event:
                outcomes[request["digest"]] = store.resolve_payload(event["result"])
    return [
        {"digest": c["digest"], "params": c["params"],
         **outcomes.get(c["digest"], {"run_id": None, "status": "missing", "error": None})}
        for c in cells
    ]  # fmt: skip


def group_key(params: dict[str, Any]) -> str:
    """The digest of a cell's parameters without its seed: the same for every seed of a group."""
    return digest_value({k: v for k, v in params.items() if k != "seed"})


def _group_label(params: dict[str, Any]) -> str:
    if params["kind"] == "flow":
        return str(params["entrypoint"])
    return f"{params['question']} [{params['mode']}, {params['model']}, {params['corpus']}]"


def _observe(store: Store, cell: dict[str, Any]) -> dict[str, Any]:
    """What one finished run answered, cited, audited and cost."""
    from rar.science.runtime import result_of

    run_id = cell["run_id"]
    manifest = store.manifest(run_id)
    llm = dict(manifest.stats.get("llm") or {})
    seen: dict[str, Any] = {
        "cost": float(llm.get("cost") or 0.0),
        "tokens": int(llm.get("input_tokens") or 0) + int(llm.get("output_tokens") or 0),
        "latency_s": int(manifest.stats.get("wall_time_us") or 0) / 1e6,
    }
    if cell["params"]["kind"] == "flow":
        finished = next(e for e in reversed(store.events(run_id)) if e["type"] == "run.finished")
        return {**seen, **_flow_result(store.resolve_payload(finished.get("result")))}
    result = result_of(store, run_id)
    return {
        **seen,
        "answer": result.answer,
        "anchors": _anchor_keys(result.anchors),
        "audit_passed": bool(result.audit.get("passed")),
        "values": metrics.computed_values(result.claims),
    }


def _anchor_keys(anchors: list[dict[str, Any]]) -> list[str]:
    return sorted({f"{a.get('doc_id')}#{a.get('location')}@{a.get('content_hash')}"
                   for a in anchors})  # fmt: skip


def _flow_result(result: Any) -> dict[str, Any]:
    """A flow's answer: its ``answer`` (with ``claims``, ``anchors`` and ``audit`` when it
    returns them, as a science run does), else its whole result as canonical JSON."""
    if isinstance(result, dict) and isinstance(result.get("answer"), str):
        audit = result.get("audit")
        return {
            "answer": result["answer"],
            "anchors": _anchor_keys(list(result.get("anchors") or [])),
            "audit_passed": bool(audit.get("passed")) if isinstance(audit, dict) else None,
            "values": metrics.computed_values(list(result.get("claims") or [])),
        }
    answer = orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode()
    return {"answer": answer, "anchors": [], "audit_passed": None, "values": {}}


def _replay_status(store: Store, run_id: str) -> dict[str, Any]:
    from rar.replay.engine import replay

    try:
        report = replay(run_id, store=store, mode="strict")
    except RarError as exc:
        return {"status": "not-replayed", "replay_run": None, "error": exc.message}
    return {"status": report.replay_status, "replay_run": report.replay_run, "error": None}


def study_report(
    store: Store, study_ref: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The report of the study ``study_ref`` (a run id or a unique prefix), as a JSON-able dict.

    Every finished cell run, and the study run itself, is replayed strictly (offline);
    ``progress(done, total)`` is called as they are.
    """
    study_id = store.resolve(study_ref)
    cells = study_cells(store, study_id)
    finished = [c for c in cells if c.get("run_id") and c.get("status") in DONE]
    total = len(finished) + 1
    for number, cell in enumerate(finished, start=1):
        cell.update(_observe(store, cell))
        cell["normalised"] = metrics.normalise_answer(cell["answer"])
        cell["replay"] = _replay_status(store, cell["run_id"])
        if progress is not None:
            progress(number, total)
    study_replay = _replay_status(store, study_id)
    if progress is not None:
        progress(total, total)
    groups = _groups(store, cells)
    replays = [c["replay"]["status"] for c in finished]
    manifest = store.manifest(study_id)
    return {
        "report_version": REPORT_VERSION,
        "study": {
            "run_id": study_id,
            "name": manifest.tags.get("study", ""),
            "status": manifest.status.value,
            "created_at": manifest.created_at,
            "replay": study_replay,
        },
        "counts": {
            "cells": len(cells),
            "completed": len(finished),
            "failed": sum(1 for c in cells if c.get("status") not in DONE | {"missing"}),
            "missing": sum(1 for c in cells if c.get("status") == "missing"),
            "reused": sum(1 for c in cells if c.get("reused")),
        },
        "replay": {
            "reproducible": sum(1 for s in replays if s == "reproducible"),
            "runs": len(replays),
            "all_reproducible": bool(replays) and all(s == "reproducible" for s in replays),
        },
        "audit_pass_rate": _rate([c.get("audit_passed") for c in finished]),
        "distributions": {
            name: metrics.distribution([float(c[name]) for c in finished])
            for name in ("cost", "tokens", "latency_s")
        },
        "groups": groups,
        "cells": [_cell_row(c) for c in cells],
    }


def _rate(flags: list[bool | None]) -> float | None:
    judged = [f for f in flags if f is not None]
    return sum(judged) / len(judged) if judged else None


_CELL_FIELDS = (
    "digest", "params", "run_id", "status", "reused", "error", "answer", "normalised",
    "anchors", "audit_passed", "values", "cost", "tokens", "latency_s", "replay",
)  # fmt: skip


def _cell_row(cell: dict[str, Any]) -> dict[str, Any]:
    return {k: cell[k] for k in _CELL_FIELDS if k in cell}


def _groups(store: Store, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        order.setdefault(group_key(cell["params"]), []).append(cell)
    return [_group(store, key, members) for key, members in order.items()]


def _group(store: Store, key: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    done = [c for c in members if c.get("run_id") and c.get("status") in DONE]
    answers = [c["answer"] for c in done]
    normalised = [c["normalised"] for c in done]
    names = sorted({name for c in done for name in c["values"]})
    majority, _ = metrics.majority(normalised)
    reference = next((c for c in done if c["normalised"] == majority), None)
    return {
        "key": key,
        "label": _group_label(members[0]["params"]),
        "params": {k: v for k, v in members[0]["params"].items() if k != "seed"},
        "seeds": [c["params"]["seed"] for c in members],
        "runs": len(done),
        "failed": len(members) - len(done),
        "agreement_exact": metrics.agreement(answers),
        "agreement_normalised": metrics.agreement(normalised),
        "distinct_answers": len(set(answers)),
        "values": {
            name: metrics.spread([c["values"][name] for c in done if name in c["values"]])
            for name in names
        },
        "evidence_jaccard": metrics.mean_pairwise_jaccard([set(c["anchors"]) for c in done]),
        "audit_pass_rate": _rate([c["audit_passed"] for c in done]),
        "majority_run": reference["run_id"] if reference else None,
        "disagreeing": [
            _disagreeing(store, reference["run_id"], c)
            for c in done
            if reference is not None and c["normalised"] != majority
        ],
    }


def _disagreeing(store: Store, majority_run: str, cell: dict[str, Any]) -> dict[str, Any]:
    from rar.replay.diff import diff_runs
    from rar.replay.diff_report import save_diff

    diff = diff_runs(store, majority_run, cell["run_id"])
    saved = save_diff(store, diff)
    divergence = diff.first_divergence
    return {
        "run_id": cell["run_id"],
        "seed": cell["params"]["seed"],
        "answer": cell["answer"],
        "diff_json": str(saved.json),
        "diff_markdown": str(saved.markdown),
        "first_divergence": divergence.reason if divergence is not None else None,
    }


def default_report_dir(store: Store, study_id: str) -> Path:
    return store.root / STUDIES_DIR / study_id


def write_report(
    store: Store,
    study_ref: str,
    out: Path | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Compute the report and write ``report.json``, ``report.md`` and the figures into ``out``
    (default ``<store>/studies/<id>/``); return the report and the files written."""
    from rar.study.figures import write_figures
    from rar.study.markdown import report_markdown

    report = study_report(store, study_ref, progress=progress)
    out = out or default_report_dir(store, report["study"]["run_id"])
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {"json": out / "report.json", "markdown": out / "report.md"}
        files.update(write_figures(report, out))
        report["files"] = {name: path.name for name, path in files.items()}
        files["json"].write_bytes(
            orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
        )
        files["markdown"].write_text(report_markdown(report), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the study report into {out}: {exc.strerror or exc}; give a writable "
            "directory with -o DIR"
        ) from None
    return report, files
