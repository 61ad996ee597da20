"""Deprecated: the science runtime's protocols are :mod:`rar.science.protocols` now.

``import rar.agents`` and ``from rar.agents.bdi import BDIState`` keep working until RAR 0.2, each
old module warning once (:class:`~rar.errors.RarDeprecationWarning`); every name is the new
module's own object. ``rar._moved`` explains the shims.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from rar._moved import ShimPackage, submodules, warn_moved
from rar.science.protocols import *  # noqa: F403
from rar.science.protocols import __all__ as __all__

warn_moved(__name__)
sys.modules[__name__].__class__ = ShimPackage

_SUBMODULES = submodules(__name__)


def __getattr__(name: str) -> Any:
    # `import rar.agents; rar.agents.bdi` worked before (the package imported its modules)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
