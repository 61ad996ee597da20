"""The durable, append-only, content-addressed run store (see docs/store-format.md)."""

from rar.store.events import EVENT_ADAPTER, EVENT_TYPES, Event, PayloadRef
from rar.store.manifest import Manifest, RunStatus
from rar.store.store import Store, default_store_path
from rar.store.verify import Problem, VerifyReport, verify_store
from rar.store.writer import RunWriter

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
    "verify_store",
]
