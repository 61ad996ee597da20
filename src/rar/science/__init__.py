"""The science runtime: four agents answer a research question with evidence, offline.

::

    from rar.science import ask_question

    result = ask_question("What activation energy do the Kissinger data give?", mode="owl_dl")
    result.answer, result.anchors, result.audit, result.status, result.run_id
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.science.runtime import ScienceResult, ask_question, result_of

__all__ = ["ScienceResult", "ask_question", "result_of"]


def __getattr__(name: str) -> Any:
    # the runtime pulls in the evidence index and the agents: import it on first use only
    if name in __all__:
        from rar.science import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'rar.science' has no attribute {name!r}")
