"""Reproducibility studies: a grid of runs on Dask, recorded as a run, and reported.

::

    import rar

    result = rar.study("examples/reproducibility.yaml", store="runs")
    result.run_id, result.counts

    from rar.study import write_report
    write_report(store, result.run_id)      # Markdown, JSON, PNG and SVG figures

Dask is imported only when a cell must run (``pip install 'rar[study]'``).
"""

from __future__ import annotations

from rar.study.cluster import SchedulerUnreachableError
from rar.study.runner import StudyResult, study
from rar.study.spec import Cell, FlowSpec, StudySpec, cells_of, load_study, parse_study

__all__ = [
    "Cell",
    "FlowSpec",
    "SchedulerUnreachableError",
    "StudyResult",
    "StudySpec",
    "cells_of",
    "load_study",
    "parse_study",
    "study",
]
