"""Quantities with units in claims and computed results, read with ``pint``.

A claim states a quantity as ``<name> = <number> [± <error>] [<unit>]`` (also ``≈``, ``~``), e.g.
``Ea = 55.3 kJ/mol``, ``T_peak ≈ 512 K``, ``k = 1.2e-3 s^-1``, ``yield = 45 %``. Units are
written without spaces (``kJ/mol``, ``kJ*mol^-1``, ``kJ·mol⁻¹``, ``J/(mol*K)`` is not supported:
write ``J/mol/K``). A word after the number that is not a unit, or is an English word that pint
would also read as a unit (``at``, ``in``, ``a``, ...), leaves the quantity without a unit.

A computed result is given as

* a string ``"55300 J/mol"``,
* a mapping ``{"value": 55300, "unit": "J/mol"}`` (also ``magnitude``/``units``),
* a number under a name that carries its unit: ``Ea_kJ_per_mol = 55.3`` is ``Ea`` in ``kJ/mol``
  (``_per_`` divides, ``_`` multiplies),
* a bare number: a quantity without a unit (dimensionless).

A claim **agrees** with a computed value when both have the same dimensionality and, after
converting the computed value to the claim's unit, they differ by at most half a unit in the
last digit the claim states (``55.3`` → 0.05, ``55300`` → 0.5, ``5.53e4`` → 50), plus a relative
1e-9 for floating-point noise: a claim may round, but not beyond the digits it shows.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
_UNIT = r"(?:1/)?(?:[^\W\d]|[°µμΩÅ%])[\w°µμΩÅ%·*/^⁻⁰¹²³⁴⁵⁶⁷⁸⁹\-]*"
_CLAIM = re.compile(
    rf"(?P<name>[^\W\d]\w*)\s*(?:=|≈|~|≃)\s*(?P<number>{_NUMBER})"
    rf"(?:\s*(?:±|\+/-|\+-)\s*(?P<error>{_NUMBER}))?(?:\s*(?P<unit>{_UNIT}))?"
)
_VALUE = re.compile(rf"\s*(?P<number>{_NUMBER})\s*(?P<unit>{_UNIT})?\s*")
# English words pint would read as units (``at``: technical atmosphere, ``a``: year, ...)
_NOT_UNITS = frozenset(
    {"a", "an", "and", "are", "as", "at", "by", "for", "from", "in", "is", "of", "on", "or"}
    | {"per", "the", "to", "when", "where", "with"}
)
_SUPERSCRIPTS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹·", "-0123456789*")


def _import_pint() -> Any:
    """pint, imported without its optional dask support when dask is not imported yet.

    ``pint.compat`` imports dask whenever it is installed (the ``study`` extra brings it), and
    dask its own dependencies: ~0.15 s on every science run and replay, for dask arrays of
    quantities, which RAR never makes. A process that has imported dask already (a study's
    workers) keeps pint's support for it."""
    if "pint" in sys.modules or "dask" in sys.modules:
        import pint

        return pint
    sys.modules["dask"] = None  # type: ignore[assignment]  # pint's `import dask` fails
    try:
        import pint
    finally:
        if "dask" in sys.modules and sys.modules["dask"] is None:
            del sys.modules["dask"]
    return pint


@functools.cache
def registry() -> Any:
    """The one pint registry, made on first use.

    Parsing pint's unit definitions takes most of a second; pint can keep the parsed result in
    a cache folder (keyed by the definition files' contents, so a new pint version or changed
    definitions are parsed again), which makes a registry in ~0.1 s. RAR's per-user cache
    directory is used when there is one (:func:`rar.runtime.fingerprint.cache_dir`: private to
    the user, never another user's); without one, or when the cache cannot be read, the
    definitions are parsed as usual. Either way the registry holds the same definitions.
    """
    pint = _import_pint()

    from rar.runtime.fingerprint import cache_dir

    folder = cache_dir()
    if folder is not None:
        try:
            return pint.UnitRegistry(cache_folder=folder / "pint")
        except Exception:  # a damaged or foreign cache: parse the definitions instead
            pass
    return pint.UnitRegistry()


@dataclass(frozen=True, slots=True)
class StatedQuantity:
    """A number with an optional unit, as written (``text``) and as pint reads it."""

    name: str
    text: str
    magnitude: float
    unit: str | None  # the unit as written; None when there is none
    tolerance: float  # half a unit in the last stated digit
    problem: str | None = None  # why the unit could not be read, when it could not

    def quantity(self) -> Any:
        return registry().Quantity(self.magnitude, _pint_unit(self.unit or ""))


def _pint_unit(unit: str) -> str:
    unit = unit.translate(_SUPERSCRIPTS).replace("µ", "u").replace("μ", "u")
    return re.sub(r"\^?(-?\d+)", r"^\1", unit) if re.search(r"[A-Za-z]-?\d", unit) else unit


def _half_ulp(number: str) -> float:
    try:
        exponent = Decimal(number).as_tuple().exponent
    except InvalidOperation:
        return 0.0
    return 0.5 * 10.0 ** int(exponent) if isinstance(exponent, int) else 0.0


def _read_unit(unit: str | None) -> tuple[str | None, str | None]:
    """The unit when pint reads it, else (None, why not)."""
    if unit is None:
        return None, None
    unit = unit.rstrip("-/*^·")
    if not unit or unit.lower() in _NOT_UNITS:
        return None, None
    try:
        registry().parse_units(_pint_unit(unit))
    except Exception as exc:  # pint raises several types for text it cannot read
        return None, f"{unit!r} is not a unit pint knows ({type(exc).__name__})"
    return unit, None


def _stated(name: str, number: str, unit: str | None, text: str) -> StatedQuantity:
    plain = number.replace(",", "")
    read, problem = _read_unit(unit)
    return StatedQuantity(name, text.strip(), float(plain), read, _half_ulp(plain), problem)


def claim_quantities(text: str) -> list[StatedQuantity]:
    """Every ``name = number [unit]`` in a claim's text, in order."""
    text = text.replace("−", "-")
    return [_stated(m["name"], m["number"], m["unit"], m.group(0)) for m in _CLAIM.finditer(text)]


def computed_quantity(name: str, value: Any) -> StatedQuantity | None:
    """A computed result as a quantity, or None when it is not a number at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        return StatedQuantity(name, f"{name} = {value}", float(value), None, 0.0)
    if isinstance(value, str):
        match = _VALUE.fullmatch(value.replace("−", "-"))
        if match is None:
            return None
        return _stated(name, match["number"], match["unit"], f"{name} = {value.strip()}")
    if isinstance(value, dict):
        magnitude = value.get("value", value.get("magnitude"))
        unit = value.get("unit", value.get("units"))
        if isinstance(magnitude, bool) or not isinstance(magnitude, int | float):
            return None
        read, problem = _read_unit(str(unit)) if unit else (None, None)
        text = f"{name} = {magnitude} {unit or ''}".strip()
        return StatedQuantity(name, text, float(magnitude), read, 0.0, problem)
    return None


def unit_from_suffix(suffix: str) -> str | None:
    """``kJ_per_mol`` → ``kJ/mol`` when pint reads it, else None."""
    if suffix.startswith("per_"):  # k_per_s: 1/s
        suffix = "1_per_" + suffix[4:]
    unit = "/".join("*".join(p.split("_")) for p in suffix.split("_per_"))
    read, _ = _read_unit(unit)
    return read


def computed_for(name: str, values: dict[str, Any]) -> list[StatedQuantity]:
    """The computed results a claim's quantity ``name`` is compared with."""
    found: list[StatedQuantity] = []
    for key, value in values.items():
        if key == name:
            quantity = computed_quantity(key, value)
        elif key.startswith(name + "_") and isinstance(value, int | float):
            unit = unit_from_suffix(key[len(name) + 1 :])
            if unit is None:
                continue
            base = computed_quantity(key, value)
            quantity = None if base is None else _with_unit(base, unit)
        else:
            continue
        if quantity is not None:
            found.append(quantity)
    return found


def _with_unit(base: StatedQuantity, unit: str) -> StatedQuantity:
    text = f"{base.text} {unit}"
    return StatedQuantity(base.name, text, base.magnitude, unit, base.tolerance)


def disagreement(claim: StatedQuantity, computed: StatedQuantity) -> str | None:
    """Why a claimed quantity and a computed one disagree, or None when they agree."""
    if claim.problem and computed.unit is None and not computed.problem:
        # a word after the claimed number that is no unit ("n = 3 samples"): just a number
        claim = StatedQuantity(claim.name, claim.text, claim.magnitude, None, claim.tolerance)
    for side in (claim, computed):
        if side.problem:
            return f"{side.text}: {side.problem}"
    if (claim.unit is None) != (computed.unit is None):
        missing, other = (claim, computed) if claim.unit is None else (computed, claim)
        if not other.quantity().dimensionless:  # a bare 0.45 may stand for 45 %
            role = "the claim" if missing is claim else "the computed result"
            return (
                f"{role} {missing.text!r} has no unit but {other.text!r} has one; "
                "state the unit on both sides"
            )
    stated, result = claim.quantity(), computed.quantity()
    if stated.dimensionality != result.dimensionality:
        return (
            f"{claim.text!r} has dimension {_dims(stated)} but the computed "
            f"{computed.text!r} has dimension {_dims(result)} (claim ÷ computed: "
            f"{_dims(stated.dimensionality / result.dimensionality)})"
        )
    converted = float(result.to(stated.units).magnitude)
    allowed = claim.tolerance + 1e-9 * max(abs(claim.magnitude), abs(converted))
    if abs(converted - claim.magnitude) > allowed:
        in_claim_unit = f"{converted:.6g} {claim.unit or ''}".rstrip()
        return (
            f"{claim.text!r} disagrees with the computed {computed.text!r} (= {in_claim_unit}; "
            f"the claim's precision allows ±{claim.tolerance:g})"
        )
    return None


def _dims(quantity_or_dimensionality: Any) -> str:
    dims = getattr(quantity_or_dimensionality, "dimensionality", quantity_or_dimensionality)
    text = str(dims)
    return "dimensionless" if text in ("", "dimensionless") else text
