"""Run model-written Python in an isolated, warm worker (bubblewrap); see docs/sandbox.md.

::

    from rar.sandbox import Sandbox, Limits

    with Sandbox(workspace, limits=Limits(memory_bytes=512 << 20)) as box:
        result = box.run_cell("import numpy as np\\nx = float(np.pi)")
        result.status, result.variables          # "ok", {"x": 3.141592653589793}

    # through the record, as the science runtime's Executor does:
    run.effect("sandbox", {"code": code}, lambda: box.run_cell(code).as_dict())
"""

from __future__ import annotations

from rar.sandbox.errors import (
    INSTALL_HINT,
    SandboxClosedError,
    SandboxError,
    SandboxStartError,
    SandboxUnavailableError,
)
from rar.sandbox.limits import Limits
from rar.sandbox.result import VOLATILE_FIELDS, Artifact, CellResult, Refused
from rar.sandbox.sandbox import Sandbox

__all__ = [
    "INSTALL_HINT",
    "VOLATILE_FIELDS",
    "Artifact",
    "CellResult",
    "Limits",
    "Refused",
    "Sandbox",
    "SandboxClosedError",
    "SandboxError",
    "SandboxStartError",
    "SandboxUnavailableError",
]
