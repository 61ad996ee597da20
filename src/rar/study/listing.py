"""The studies in a store: runs whose manifest says ``kind: study``."""

from __future__ import annotations

from typing import Any

from rar.errors import RarError
from rar.store.store import Store
from rar.study.cells import STUDIES_DIR

GOAL_PREFIX = "study "  # every study run's goal starts so: only those manifests are read


def list_studies(store: Store) -> list[dict[str, Any]]:
    """Each study, newest first: run id, name, status, goal, cell count, whether reported."""
    if not store.exists:
        return []
    studies = []
    for row in store.list_runs():
        if not (row.goal or "").startswith(GOAL_PREFIX):
            continue
        try:
            manifest = store.manifest(row.run_id)
        except RarError:
            continue
        if manifest.tags.get("kind") != "study" or "replay_of" in manifest.tags:
            continue
        studies.append({
            "run_id": row.run_id,
            "name": manifest.tags.get("study", ""),
            "status": store.display_status(row),
            "goal": row.goal,
            "created_at": row.created_at,
            "cells": int(manifest.config.get("cells", 0)),
            "reported": (store.root / STUDIES_DIR / row.run_id / "report.json").is_file(),
        })  # fmt: skip
    return studies
