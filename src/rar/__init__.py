"""RAR, the Reproducible Agent Runtime.

Record an agent run as a hash-chained lab-notebook entry::

    import rar

    with rar.record("What is 17 * 23?", seed=7) as run:
        value = run.effect("tool", {"name": "calc", "args": {"expr": "17*23"}}, lambda: 17 * 23)
"""

from rar._version import __version__
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
    RunLockedError,
    RunNotFoundError,
    StoreError,
    StoreNotWritableError,
    UserError,
)
from rar.hashing import Canonical, canonical, digest_bytes, digest_value
from rar.redaction import Redactor
from rar.runtime import Run, Span, record
from rar.store import Manifest, RunStatus, Store, VerifyReport, verify_store

__all__ = [
    "AmbiguousRunIdError",
    "AppendError",
    "BlobMissingError",
    "Canonical",
    "CanonicalizationError",
    "ConfigError",
    "CorruptionError",
    "Manifest",
    "ManifestMissingError",
    "RarError",
    "Redactor",
    "Run",
    "RunClosedError",
    "RunError",
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
    "verify_store",
]
