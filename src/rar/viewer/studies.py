"""The store's studies for the viewer (``/api/studies``, ``/api/studies/{id}``).

A study is a run of kind ``study`` (:mod:`rar.study`). Its page shows the report that
``rar study report STUDY`` wrote into ``<store>/studies/<id>/report.json``: the viewer reads
that file and never computes a report itself, since a report replays every cell run and a
``GET`` changes nothing. Without a report (never made, or made into another directory with
``-o``) the page gets the study's cells as recorded, each with its run and status, and the
command that makes the report.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import orjson

from rar.store._fs import read_regular
from rar.store.store import Store
from rar.study.listing import list_studies
from rar.study.report import default_report_dir, group_key, study_cells
from rar.viewer.http import ApiError

__all__ = ["MAX_REPORT_BYTES", "report_command", "studies_document", "study_document"]

MAX_REPORT_BYTES = 64 << 20
"""A ``report.json`` larger than this is not read (a report of 10,000 cells is ~20 MB)."""

_CELL_FIELDS = ("digest", "params", "run_id", "status", "reused", "error")


def report_command(study_id: str) -> str:
    return f"rar study report {study_id}"


def studies_document(store: Store) -> dict[str, Any]:
    """The store's studies, newest first (see :func:`rar.study.listing.list_studies`)."""
    studies = list_studies(store)
    return {"studies": studies, "total": len(studies)}


def study_document(store: Store, study_id: str) -> dict[str, Any]:
    """One study: its row of the list, and its report (``report.json``) or, when there is none,
    its recorded cells and the command that reports it. ``report_error`` says why a report
    file that exists could not be read."""
    manifest = store.manifest(study_id)
    if manifest.tags.get("kind") != "study":
        raise ApiError(
            404,
            "not-a-study",
            f"run {study_id} is not a study (its kind is {manifest.tags.get('kind')!r}); "
            "the studies are listed at /studies",
        )
    row = next((s for s in list_studies(store) if s["run_id"] == study_id), None)
    study = row or {
        "run_id": study_id,
        "name": manifest.tags.get("study", ""),
        "status": manifest.status.value,
        "goal": manifest.goal,
        "created_at": manifest.created_at,
        "cells": int(manifest.config.get("cells", 0)),
        "reported": False,
    }
    report, problem = _read_report(store, study_id)
    document: dict[str, Any] = {
        "id": study_id,
        "study": study,
        "command": report_command(study_id),
        "report": report,
        "report_error": problem,
        "cells": None,
    }
    if report is None:
        cells = study_cells(store, study_id)
        document["cells"] = [{k: c.get(k) for k in _CELL_FIELDS} for c in cells]
    return document


def _read_report(store: Store, study_id: str) -> tuple[dict[str, Any] | None, str | None]:
    path = default_report_dir(store, study_id) / "report.json"
    again = f"make it again with {report_command(study_id)}"
    try:
        if os.lstat(path).st_size > MAX_REPORT_BYTES:
            return None, f"report.json is larger than {MAX_REPORT_BYTES >> 20} MB; read report.md"
        raw = read_regular(path)  # never through a symbolic link
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        return None, f"report.json {why}; {again}"
    try:
        report = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, f"report.json is not valid JSON ({exc}); {again}"
    if not isinstance(report, dict) or not _is_report(report):
        return None, f"report.json is not a study report; {again}"
    for cell in report["cells"]:  # which group each cell is in (the page links it)
        cell["group"] = group_key(cell["params"]) if isinstance(cell.get("params"), dict) else None
    return report, None


def _is_report(report: dict[str, Any]) -> bool:
    return (
        isinstance(report.get("groups"), list)
        and isinstance(report.get("cells"), list)
        and all(isinstance(c, dict) for c in report["cells"])
    )
