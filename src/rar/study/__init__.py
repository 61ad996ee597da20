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

import sys
import types
from typing import Any

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


class _CallableModule(types.ModuleType):
    """``rar.study(...)`` is :func:`study` even once ``rar.study`` the package is imported
    (importing a subpackage sets it as an attribute of ``rar``, over the lazy export)."""

    def __call__(self, *args: Any, **kwargs: Any) -> StudyResult:
        return study(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
