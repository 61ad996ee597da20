"""The store's studies for the viewer (``/api/studies``, ``/api/studies/{id}``).

A study is a run of kind ``study`` (:mod:`rar.study`). Its page shows the report that
``rar study report STUDY`` wrote into ``<store>/studies/<id>/report.json``: the viewer reads
that file and never computes a report itself, since a report replays every cell run and a
``GET`` changes nothing. Without a report (never made, or made into another directory with
``-o``) the page gets the study's cells as recorded, each with its run and status, and the
command that makes the report. The report's figures (``agreement``, ``distributions``; SVG and
PNG) are answered by ``/api/studies/{id}/figures/{name}``: only those names, only regular files
of the report's directory, under the same policy as artifacts (an SVG runs no script).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

import orjson
from starlette.responses import Response

from rar.store._fs import read_regular
from rar.store.store import Store
from rar.study.listing import list_studies
from rar.study.report import default_report_dir, group_key, study_cells
from rar.viewer.http import ApiError

__all__ = [
    "FIGURES",
    "MAX_REPORT_BYTES",
    "figure_response",
    "report_command",
    "studies_document",
    "study_document",
]

MAX_REPORT_BYTES = 64 << 20
"""A ``report.json`` larger than this is not read (a report of 10,000 cells is ~20 MB)."""

_CELL_FIELDS = ("digest", "params", "run_id", "status", "reused", "error")

FIGURES: dict[str, str] = {
    "agreement.svg": "image/svg+xml",
    "agreement.png": "image/png",
    "distributions.svg": "image/svg+xml",
    "distributions.png": "image/png",
}
"""The figure files ``rar study report`` writes, and their media types: nothing else is served."""
MAX_FIGURE_BYTES = 16 << 20


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
    manifest = _study_manifest(store, study_id)
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
        "figures": _figures(store, study_id) if report is not None else [],
    }
    if report is None:
        cells = study_cells(store, study_id)
        document["cells"] = [{k: c.get(k) for k in _CELL_FIELDS} for c in cells]
    return document


def _study_manifest(store: Store, study_id: str) -> Any:
    manifest = store.manifest(study_id)
    if manifest.tags.get("kind") != "study":
        raise ApiError(
            404,
            "not-a-study",
            f"run {study_id} is not a study (its kind is {manifest.tags.get('kind')!r}); "
            "the studies are listed at /studies",
        )
    return manifest


def _report_dir(store: Store, study_id: str) -> Any:
    """The report's directory, or None when it, or ``studies/`` above it, is not a directory of
    the store's own (a symbolic link could lead outside the store)."""
    folder = default_report_dir(store, study_id)
    for path in (folder.parent, folder):
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return None
        except OSError:
            return None
    return folder


def _figures(store: Store, study_id: str) -> list[str]:
    """The figure files the report's directory holds (regular files, not links)."""
    folder = _report_dir(store, study_id)
    if folder is None:
        return []
    present = []
    for name in FIGURES:
        try:
            if stat.S_ISREG(os.lstat(folder / name).st_mode):
                present.append(name)
        except OSError:
            continue
    return present


def figure_response(store: Store, study_id: str, name: str) -> Response:
    """One of the report's figures (see :data:`FIGURES`), read without following a link."""
    _study_manifest(store, study_id)
    media_type = FIGURES.get(name)
    if media_type is None:
        known = ", ".join(FIGURES)
        raise ApiError(404, "figure-not-found", f"a study report's figures are {known}")
    folder = _report_dir(store, study_id)
    if folder is None:
        raise ApiError(
            404,
            "figure-not-found",
            f"study {study_id} has no report directory of its own in the store; make its "
            f"report with {report_command(study_id)}",
        )
    path = folder / name
    try:
        if os.lstat(path).st_size > MAX_FIGURE_BYTES:
            raise ApiError(413, "figure-too-large", f"{name} is larger than 16 MB")
        data = read_regular(path)  # never through a symbolic link
    except FileNotFoundError:
        raise ApiError(
            404,
            "figure-not-found",
            f"study {study_id} has no {name}; make its report with {report_command(study_id)}",
        ) from None
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise ApiError(404, "figure-not-found", f"{name} {why}") from None
    from rar.viewer.artifacts import ARTIFACT_CSP

    return Response(
        data,
        media_type=media_type,
        headers={
            "Content-Disposition": f'inline; filename="{name}"',
            "Content-Security-Policy": ARTIFACT_CSP,
            "Cache-Control": "no-cache",
        },
    )


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
