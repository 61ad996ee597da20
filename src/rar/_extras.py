"""Whether an optional extra's package can be imported, without importing it."""

from __future__ import annotations

import importlib.util


def installed(module: str) -> bool:
    """True when ``module`` can be imported (False for a broken install, or one blocked)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
