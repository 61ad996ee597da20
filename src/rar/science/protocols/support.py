"""Whether a claim is supported by the passages it cites: its words and its numbers.

The Auditor's ``support`` check asks two things of every claim:

* **its numbers** — each number the claim states (``150.3``, ``1.24 × 10⁴``, ``−35``) is written
  in one of the passages it cites, or is a result the Executor computed. A number matches when
  it agrees to the precision the claim states (``150`` matches ``150.3``? no: ``150`` allows
  ±0.5, so it matches ``149.8`` … ``150.49``), so rounding is allowed but not invention.
  Citation marks (``[2]``), superscript exponents and numbers inside names (``N₂O₅``, ``owl_dl``)
  are not claimed numbers.
* **its words** — the share of the claim's content words (the search tokens of
  :mod:`rar.evidence.analysis`: stop words dropped, plurals folded; numbers left to the first
  rule) found in the cited passages is at least the mode's share (``owl_lite`` 0.5, ``owl_dl``
  0.6, ``owl_full`` 0.7). An extractive claim scores 1.0; a paraphrase must keep most of its
  source's words; a claim built on words no cited passage holds does not pass.

A computed claim ("Ea = 125.1 ± 1.3 kJ/mol from a Kissinger fit …") passes when its numbers are
computed results or data in the cited table, and its words are in the cited passages (the data
table and the passage describing the method) or in the computation's own description (the
short strings of its variables: method, fit, labels, columns, units — see
:func:`computed_words`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from rar.evidence.analysis import tokenize

WORD_SHARE: dict[str, float] = {"owl_lite": 0.5, "owl_dl": 0.6, "owl_full": 0.7}

_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
# a number not glued to a word on its left (N₂O₅, owl_dl, x2), optionally × 10^n or e-notation
_NUMBER = re.compile(
    r"(?<![\w.\[])(?P<sign>[-+−]?)(?P<digits>\d+(?:,\d{3})*(?:\.\d+)?)"
    r"(?:\s*[×x]\s*10\^?(?P<power>[-−⁻]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)|[eE](?P<exp>[-+]?\d+))?"
    r"(?![\w\]])"
)
_CITATION = re.compile(r"\[\d+\]")


def numbers_in(text: str) -> list[tuple[str, float, float]]:
    """(as written, value, tolerance) of each number in ``text``; tolerance: half a last digit."""
    text = _CITATION.sub(" ", text)
    found: list[tuple[str, float, float]] = []
    for match in _NUMBER.finditer(text):
        digits = match["digits"].replace(",", "")
        sign = -1.0 if match["sign"] in ("-", "−") else 1.0
        exponent = 0
        if match["power"]:
            exponent = int(match["power"].translate(_SUPERSCRIPT).replace("−", "-"))
        elif match["exp"]:
            exponent = int(match["exp"])
        try:
            places = Decimal(digits).as_tuple().exponent
        except InvalidOperation:
            continue
        half = 0.5 * 10.0 ** (int(places) if isinstance(places, int) else 0)
        scale = 10.0**exponent
        found.append((match.group(0).strip(), sign * float(digits) * scale, half * scale))
    return found


def computed_numbers(values: Any, out: list[float] | None = None) -> list[float]:
    """Every finite number in a computation's variables (nested dicts and lists too)."""
    out = [] if out is None else out
    if isinstance(values, bool):
        return out
    if isinstance(values, int | float):
        if math.isfinite(values):
            out.append(float(values))
    elif isinstance(values, Mapping):
        for value in values.values():
            computed_numbers(value, out)
    elif isinstance(values, list | tuple):
        for value in values[:10_000]:
            computed_numbers(value, out)
    return out


def computed_words(values: Any, out: list[str] | None = None, depth: int = 0) -> str:
    """The text a computation left (its method, fit, labels, columns, units): what words of a
    claim about a computed value may come from, besides the passages it cites. Long strings
    (printed output, data) do not count: only short descriptions."""
    out = [] if out is None else out
    if depth > 6:
        return " ".join(out)
    if isinstance(values, str):
        if len(values) <= 200:
            out.append(values)
    elif isinstance(values, Mapping):
        for key, value in values.items():
            if key not in ("stdout", "stderr", "plot"):
                computed_words(value, out, depth + 1)
    elif isinstance(values, list | tuple):
        for value in values[:200]:
            computed_words(value, out, depth + 1)
    return " ".join(out)


def _matches(value: float, tolerance: float, pool: Iterable[float]) -> bool:
    allowed = tolerance + 1e-9 * abs(value)
    return any(abs(abs(value) - abs(other)) <= allowed for other in pool)


def unsupported_numbers(claim: str, sources: Iterable[str], computed: Iterable[float]) -> list[str]:
    """The numbers of ``claim`` found neither in ``sources`` nor among ``computed`` values.

    Signs are compared loosely (``−35`` matches a source's ``35`` in "ΔS‡ … −35"): a sign is
    often typeset apart from its number. Passages' numbers are read with their own precision.
    """
    pool = [value for text in sources for _w, value, _t in numbers_in(text)]
    pool += list(computed)
    return [
        written
        for written, value, tolerance in numbers_in(claim)
        if not _matches(value, tolerance, pool)
    ]


def word_share(claim: str, sources: Iterable[str]) -> tuple[float, list[str]]:
    """The share of the claim's content words found in ``sources``, and the words missing."""
    words = [w for w in dict.fromkeys(tokenize(claim)) if not _is_number(w)]
    if not words:
        return 1.0, []
    have: set[str] = set()
    for text in sources:
        have.update(tokenize(text))
    missing = [w for w in words if w not in have]
    return (len(words) - len(missing)) / len(words), missing


def _is_number(token: str) -> bool:
    return bool(re.fullmatch(r"[\d.]+", token))
