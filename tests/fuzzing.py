"""What the fuzz tests (``tests/test_fuzz_*.py``) share: their example budget, a guard against
hangs, the errors RAR documents, and JSON-like values to feed parsers.

Each fuzz test names its own budget, small enough that the default run of one test stays under
about 10 s; ``pytest --hypothesis-profile=long tests/test_fuzz_*.py`` (the profile is registered
in ``conftest.py``) gives every one of them the profile's 20,000 examples and no deadline.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument


def _long_profile_loaded() -> bool:
    try:
        long = settings.get_profile("long")
    except InvalidArgument:  # imported outside pytest: conftest.py registered nothing
        return False
    current = settings.default
    return current is not None and current.max_examples >= long.max_examples


LONG = _long_profile_loaded()
"""Whether ``--hypothesis-profile=long`` is in force."""


def budget(examples: int) -> settings:
    """``examples`` examples (each within 2 s), or the long profile's when it is loaded."""
    if LONG:
        return settings()  # the loaded profile's examples and deadline
    return settings(max_examples=examples, deadline=2000)


class Hang(Exception):
    """A call took longer than a parser ever should: reported as the failing example."""


@contextmanager
def no_hang(seconds: float = 5.0) -> Iterator[None]:
    """Raise :class:`Hang` inside the block once ``seconds`` have passed (main thread only)."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def json_values(keys: st.SearchStrategy[str] | None = None, *, leaves: int = 25) -> Any:
    """JSON values as ``orjson.loads`` returns them: any scalar (64-bit integers, finite floats,
    any text), lists and objects, objects keyed by ``keys`` (default: any text)."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**64 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=20)
    )
    names = keys if keys is not None else st.text(max_size=10)
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(names, children, max_size=5)
        ),
        max_leaves=leaves,
    )
