"""RAR, the Reproducible Agent Runtime.

Record an agent run as a hash-chained lab-notebook entry::

    import rar

    with rar.record("What is 17 * 23?", seed=7) as run:
        value = run.effect("tool", {"name": "calc", "args": {"expr": "17*23"}}, lambda: 17 * 23)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rar._version import __version__

if TYPE_CHECKING:
    from rar.errors import (
        AmbiguousRunIdError,
        AppendError,
        BlobMissingError,
        CanonicalizationError,
        ConfigError,
        CorruptionError,
        ManifestMissingError,
        RarError,
        RunClosedError,
        RunError,
        RunExistsError,
        RunLockedError,
        RunNotFoundError,
        StoreError,
        StoreNotWritableError,
        UserError,
    )
    from rar.hashing import Canonical, canonical, digest_bytes, digest_value
    from rar.interop import AsyncRecordingTransport, RecordingTransport
    from rar.redaction import Redactor
    from rar.runtime import Run, Span, record
    from rar.store import Manifest, RunStatus, Store, VerifyReport, verify_store
    from rar.study import study

# Public names are imported on first use: `import rar` stays cheap, and so does the CLI.
_EXPORTS = {
    "AmbiguousRunIdError": "rar.errors",
    "AppendError": "rar.errors",
    "AsyncRecordingTransport": "rar.interop",
    "BlobMissingError": "rar.errors",
    "Canonical": "rar.hashing",
    "CanonicalizationError": "rar.errors",
    "ConfigError": "rar.errors",
    "CorruptionError": "rar.errors",
    "Manifest": "rar.store",
    "ManifestMissingError": "rar.errors",
    "RarError": "rar.errors",
    "RecordingTransport": "rar.interop",
    "Redactor": "rar.redaction",
    "Run": "rar.runtime",
    "RunClosedError": "rar.errors",
    "RunError": "rar.errors",
    "RunExistsError": "rar.errors",
    "RunLockedError": "rar.errors",
    "RunNotFoundError": "rar.errors",
    "RunStatus": "rar.store",
    "Span": "rar.runtime",
    "Store": "rar.store",
    "StoreError": "rar.errors",
    "StoreNotWritableError": "rar.errors",
    "UserError": "rar.errors",
    "VerifyReport": "rar.store",
    "canonical": "rar.hashing",
    "digest_bytes": "rar.hashing",
    "digest_value": "rar.hashing",
    "record": "rar.runtime",
    "study": "rar.study",
    "verify_store": "rar.store",
}

__all__ = [
    "AmbiguousRunIdError",
    "AppendError",
    "AsyncRecordingTransport",
    "BlobMissingError",
    "Canonical",
    "CanonicalizationError",
    "ConfigError",
    "CorruptionError",
    "Manifest",
    "ManifestMissingError",
    "RarError",
    "RecordingTransport",
    "Redactor",
    "Run",
    "RunClosedError",
    "RunError",
    "RunExistsError",
    "RunLockedError",
    "RunNotFoundError",
    "RunStatus",
    "Span",
    "Store",
    "StoreError",
    "StoreNotWritableError",
    "UserError",
    "VerifyReport",
    "__version__",
    "canonical",
    "digest_bytes",
    "digest_value",
    "record",
    "study",
    "verify_store",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rar' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
