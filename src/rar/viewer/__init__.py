"""``rar view``: a local web viewer of a run store — read-only by default; with
``--allow-runs`` it also starts, replays, branches and resumes runs, each in a worker process.

This package holds the server and its JSON API (:func:`create_app`), the run queue
(:mod:`rar.viewer.jobs`) and its worker (:mod:`rar.viewer.worker`); the pages are static files
that render the API's data as text. The server itself never writes a run's files.

Names are imported on first use, so a worker process (``python -m rar.viewer.worker``) does not
load the web server.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.viewer.app import SECURITY_HEADERS, RunSettings, create_app
    from rar.viewer.net import LOOPBACK_HOSTS, host_warning, is_loopback

__all__ = [
    "LOOPBACK_HOSTS",
    "SECURITY_HEADERS",
    "RunSettings",
    "create_app",
    "host_warning",
    "is_loopback",
]

_WHERE = {
    "LOOPBACK_HOSTS": "rar.viewer.net",
    "host_warning": "rar.viewer.net",
    "is_loopback": "rar.viewer.net",
    "SECURITY_HEADERS": "rar.viewer.app",
    "RunSettings": "rar.viewer.app",
    "create_app": "rar.viewer.app",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rar.viewer' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
