"""The durable, append-only, content-addressed run store (see docs/store-format.md).

Names are imported on first use, so that reading a store (``rar list``) does not pay for
pydantic models it does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.store.events import EVENT_ADAPTER, EVENT_TYPES, Event, PayloadRef
    from rar.store.manifest import Manifest, RunStatus
    from rar.store.query import events_frame, search
    from rar.store.store import Store, default_store_path
    from rar.store.verify import Problem, VerifyReport, verify_store
    from rar.store.writer import RunWriter

_EXPORTS = {
    "EVENT_ADAPTER": "rar.store.events",
    "EVENT_TYPES": "rar.store.events",
    "Event": "rar.store.events",
    "PayloadRef": "rar.store.events",
    "Manifest": "rar.store.manifest",
    "RunStatus": "rar.store.manifest",
    "Store": "rar.store.store",
    "default_store_path": "rar.store.store",
    "Problem": "rar.store.verify",
    "VerifyReport": "rar.store.verify",
    "verify_store": "rar.store.verify",
    "RunWriter": "rar.store.writer",
    "events_frame": "rar.store.query",
    "search": "rar.store.query",
}

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "Event",
    "Manifest",
    "PayloadRef",
    "Problem",
    "RunStatus",
    "RunWriter",
    "Store",
    "VerifyReport",
    "default_store_path",
    "events_frame",
    "search",
    "verify_store",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rar.store' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
