"""Import paths that moved, and the shims that keep the old ones working for one release.

RAR 0.1 renamed two packages that differed by one letter::

    rar.agent         → rar.loop                 the SDK's agent loop
    rar.agent.loop    → rar.loop
    rar.agents        → rar.science.protocols    the science runtime's BDI, ACL, Contract Net, audit
    rar.agents.<mod>  → rar.science.protocols.<mod>

The old modules are files under ``src/rar/agent/`` and ``src/rar/agents/``. Importing one emits
one :class:`~rar.errors.RarDeprecationWarning` naming the new path, attributed to the line that
imported it, once per old module and process. An old *module* (``rar.agents.bdi``) hands back
the new module object itself (:func:`alias`), so ``rar.agents.bdi is rar.science.protocols.bdi``
and every class, private name and monkeypatch is shared. An old *package* (``rar.agents``) stays
a package of its own — its submodules must be found as the shim files, not as the new package's
files, or each class would exist twice — and re-exports the new package's names, which are the
same objects. The old names go in RAR :data:`REMOVED_IN`.

:func:`current_name` maps a module name read from an old record (an exception's ``module``) to
where that module lives now, so replaying an old run needs neither the shims nor their warnings.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import FrameType, ModuleType

from rar.errors import RarDeprecationWarning

REMOVED_IN = "0.2"

_PROTOCOL_MODULES = (
    "_json",
    "_units",
    "acl",
    "argumentation",
    "audit",
    "bdi",
    "contract_net",
    "errors",
    "modes",
    "support",
)

#: every old module name → the module that replaced it
MOVED: dict[str, str] = {
    "rar.agent": "rar.loop",
    "rar.agent.loop": "rar.loop",
    "rar.agents": "rar.science.protocols",
    **{f"rar.agents.{name}": f"rar.science.protocols.{name}" for name in _PROTOCOL_MODULES},
}


def current_name(module: str) -> str:
    """The module's name today: ``module`` itself, or where it moved (outlives the shims)."""
    return MOVED.get(module, module)


def submodules(package: str) -> frozenset[str]:
    """The last parts of the old submodule names of an old package (``bdi``, ``loop``, ...)."""
    prefix = package + "."
    return frozenset(old[len(prefix) :] for old in MOVED if old.startswith(prefix))


def warn_moved(old: str) -> None:
    """Warn that module ``old`` moved, at the line outside the import machinery that imported it.

    The warning is attributed to the importing code, not to the shim, so the default filters
    show it to a script (``__main__``) and a test runner names the file to fix.
    """
    new = MOVED[old]
    message = f"{old} is deprecated and will be removed in RAR {REMOVED_IN}: import {new} instead"
    frame = _importer()
    if frame is None:
        warnings.warn(message, RarDeprecationWarning, stacklevel=2)
        return
    module_globals = frame.f_globals
    warnings.warn_explicit(
        message,
        RarDeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=str(module_globals.get("__name__", "<unknown>")),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )


def alias(old: str) -> ModuleType:
    """Warn, then make the import of ``old`` give the new module (called by an old module's file).

    The import system returns whatever ``sys.modules[old]`` holds once the old file has run, and
    sets it as the old package's attribute, so the shim's own module object is dropped.
    """
    warn_moved(old)
    module = importlib.import_module(MOVED[old])
    sys.modules[old] = module
    return module


class ShimPackage(ModuleType):
    """The module type of an old package: a submodule never hides a re-exported name.

    The import system sets each submodule it loads as an attribute of its package. The new
    package set ``audit`` (the module) and then bound ``audit`` (the function) over it, once;
    the old package would get the module back the first time ``rar.agents.audit`` is imported.
    """

    def __setattr__(self, name: str, value: object) -> None:
        held = self.__dict__.get(name)
        if isinstance(value, ModuleType) and held is not None and not isinstance(held, ModuleType):
            return
        super().__setattr__(name, value)


def _importer() -> FrameType | None:
    """The innermost frame that is neither this module, a shim, nor the import machinery."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not (name == __name__ or name in MOVED or name.partition(".")[0] == "importlib"):
            return frame
        frame = frame.f_back
    return None
