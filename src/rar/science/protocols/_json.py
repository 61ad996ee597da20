"""JSON values as the record sees them."""

from __future__ import annotations

from typing import Any

from rar.hashing import canonical, from_canonical


def as_json(value: Any) -> Any:
    """A deep copy of ``value`` in the form a reader of the record gets back.

    The value passes through its RFC 8785 canonical form, so what an agent holds in memory is
    exactly what the record holds (``1.0`` becomes ``1``, tuples become lists) and a value the
    record cannot hold (NaN, a set, an object) raises
    :class:`~rar.errors.CanonicalizationError` naming its JSON path, before anything is written.
    """
    return from_canonical(canonical(value))
