"""The numbers of a study report, as plain functions of plain values (checkable by hand).

* **agreement**: the share of runs giving the most common answer (1.0 when all agree), exactly
  and after :func:`normalise_answer`;
* **values**: the numbers the answers computed (``name = value`` in a claim), with their spread
  (max − min), sample standard deviation and coefficient of variation (stdev / |mean|);
* **evidence overlap**: the mean Jaccard index of the anchor sets over every pair of runs;
* **distributions**: min, median, mean, max of a list of numbers.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
SIGNIFICANT = 4  # digits numbers keep when answers are normalised
# "Ea = 125.12 ± 0.19 kJ/mol": the quantity's name before "=", its value right after
_VALUE = re.compile(r"^\s*([^=]{1,40}?)\s*=\s*([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)")


def normalise_answer(text: str) -> str:
    """``text`` with every run of whitespace one space and every number rounded to
    :data:`SIGNIFICANT` significant digits (``125.120`` and ``125.1`` both read ``125.1``)."""
    rounded = NUMBER.sub(lambda m: _number(m.group(0)), text)
    return " ".join(rounded.split())


def _number(token: str) -> str:
    try:
        return format(float(token), f".{SIGNIFICANT}g")
    except ValueError:  # pragma: no cover - the pattern only matches numbers
        return token


def majority(values: Sequence[str]) -> tuple[str | None, int]:
    """The most common value (the earliest among ties) and how many times it occurs."""
    if not values:
        return None, 0
    counts = Counter(values)
    best = max(counts.values())
    winner = next(v for v in values if counts[v] == best)
    return winner, best


def agreement(values: Sequence[str]) -> float | None:
    """The share of ``values`` equal to the most common one; None for no values."""
    _, count = majority(values)
    return count / len(values) if values else None


def computed_values(claims: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``{name: value}`` of the claims that state one (``Ea = 125.12 ± 0.19 kJ/mol``)."""
    found: dict[str, float] = {}
    for claim in claims:
        match = _VALUE.match(str(claim.get("text", "")))
        if match and match.group(1) not in found:
            found[match.group(1)] = float(match.group(2))
    return found


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """n, mean, min, max, spread (max − min), sample stdev and CV (stdev / |mean|)."""
    if not values:
        return {"n": 0, "mean": None, "min": None, "max": None, "spread": None,
                "stdev": None, "cv": None}  # fmt: skip
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "n": len(values),
        "mean": mean,
        "min": min(values),
        "max": max(values),
        "spread": max(values) - min(values),
        "stdev": stdev,
        "cv": stdev / abs(mean) if mean else None,
    }


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets agree fully (1.0)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def mean_pairwise_jaccard(sets: Sequence[set[str]]) -> float | None:
    """The mean Jaccard index over every pair; 1.0 for a single set, None for none."""
    if not sets:
        return None
    pairs = list(combinations(sets, 2))
    if not pairs:
        return 1.0
    return statistics.fmean(jaccard(a, b) for a, b in pairs)


def distribution(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, min, median, mean, max (None for an empty list)."""
    if not values:
        return {"n": 0, "min": None, "median": None, "mean": None, "max": None}
    return {
        "n": len(values),
        "min": min(values),
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "max": max(values),
    }
