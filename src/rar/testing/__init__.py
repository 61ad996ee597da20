"""Testing with RAR: golden trajectories recorded once into cassettes and replayed strictly.

With pytest, use the ``rar_cassette`` fixture of the plugin (:mod:`rar.testing.plugin`,
registered automatically)::

    def test_one_tool_call(rar_cassette):
        golden = rar_cassette.run(my_agent, inputs={"question": "2 + 3?"}, name="one_tool_call")
        assert golden.result["answer"] == "The sum is 5."

Record with ``pytest --rar-record``; a plain ``pytest`` replays. Without pytest,
:func:`record_cassette` and :func:`replay_cassette` do the same (see :mod:`rar.testing.cassette`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.testing.cassette import (
        CassetteError,
        CassetteMissingError,
        GoldenMismatchError,
        GoldenResult,
        describe_mismatch,
        record_cassette,
        replay_cassette,
    )

__all__ = [
    "CassetteError",
    "CassetteMissingError",
    "GoldenMismatchError",
    "GoldenResult",
    "describe_mismatch",
    "record_cassette",
    "replay_cassette",
]


def __getattr__(name: str) -> Any:
    # imported on first use: the pytest plugin loads this package in every pytest process
    if name not in __all__:
        raise AttributeError(f"module 'rar.testing' has no attribute {name!r}")
    return getattr(importlib.import_module("rar.testing.cassette"), name)
