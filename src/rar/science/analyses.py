"""Standard analyses of a data table, chosen by what its columns hold and what the question asks.

::

    analyses_for(table, question)     # every analysis that applies, best first
    choose_analysis(table, question)  # the best one, or None
    column_roles(table)               # {"heating_rate": 0, "peak_temperature": 1}

An :class:`Analysis` carries Python code for the sandbox; it never runs here. The host only
reads the table's headers (:func:`rar.science.tables.column_role`: names and units, with pint)
and writes the data into the code as literals.

**Which analyses apply** (by column roles, never by document name):

====================  ===========================================================================
kind                  columns
====================  ===========================================================================
``friedman``          a temperature at fixed conversion (``T at α``) and a rate ``dα/dt``
``kissinger``         a heating rate β and a peak temperature Tp (or a plain temperature)
``ozawa_flynn_wall``  a heating rate β and a temperature at fixed conversion (or a plain one)
``arrhenius``         a temperature and a rate constant (k, kcat), diffusion coefficient (D) or
                      ionic conductivity (σ: ln(σT) is fitted, the solid-state convention)
``eyring``            a temperature and a rate constant
``first_order``       a time and a concentration that decays
``michaelis_menten``  a substrate concentration and a rate (velocity), three rows or more
``lineweaver_burk``   a substrate concentration and a rate
``linear``            two numeric columns, when the question asks for a slope, a linear fit, a
                      calibration or proportionality, or when nothing more specific applies and
                      both columns have a known role (stress and strain, force and extension)
====================  ===========================================================================

Logarithms need positive data, and every fit needs two distinct x values: a table that has
neither gives no such analysis. Temperatures in °C are converted to kelvin in the code. Heating
rates are used as given (ln β: the unit cancels in the slope). An energy along a path (a
reaction coordinate or an image number with an energy, as a NEB profile) gives no analysis at
all, even when the question asks for a slope: its barrier is a maximum, read off, not fitted.
Columns with no known role give ``[]`` unless the question asks for a linear fit, which then
takes the first column as x and the next as y (index columns such as ``Image`` left out).

**Which comes first**: an analysis the question names ranks above one only the caption names,
which ranks above the rest; ties keep the order of the table above. So a k–T table gives the
Arrhenius plot, and the Eyring plot when the question speaks of Eyring, the enthalpy, entropy or
Gibbs energy of activation or the transition state; a table with β, T at α and dα/dt gives
Friedman unless the question says Ozawa–Flynn–Wall (or Doyle); Lineweaver–Burk needs the
question to say so (Lineweaver, Burk, double reciprocal). The linear fit comes last unless the
question asks for one explicitly (linear fit, regression, calibration, proportional, a modulus,
a stiffness); "slope" alone keeps the specific analysis first, since its fit has a slope. The
``quantity`` the question asks for (``"Young's modulus"``) counts as part of the question and
names the linear fit's result (its label, and its variable: ``Youngs_modulus_GPa``).

**What the code leaves** (all values full floats; rounding is for printing only): a JSON-able
``report`` dict — ``analysis``, ``method``, ``fit``, ``n``, ``r_squared``, ``data_range``
(``column``, ``min``, ``max``, ``unit``, as in the table), ``results`` (``name``, ``label``,
``value``, ``stderr``, ``unit``; headline first) and ``plot`` (``kind``, ``title``,
``x_label``, ``y_label``, ``x``, ``y`` and either ``slope``/``intercept`` of the plotted line or a
``curve`` of 50 ``[x, y]`` points) — plus flat variables for the unit checker,
``<name>_<unit>`` and ``<name>_stderr_<unit>`` (``Ea_kJ_per_mol``, ``t_half_s``, ``A_per_s``),
and ``x``, ``y``, ``slope``, ``intercept`` (of ``y`` against ``x``, unscaled), ``r_squared``,
``n`` and the data arrays (``beta``, ``Tp``, ``T``, ``k``, ...). It prints one line per result,
``Ea = 125.1 ± 1.3 kJ/mol (R² = 0.9999, n = 4, Tp 412.4–438.6 K)``. Standard errors come from
the regression (ordinary least squares in numpy, the figures of
:func:`scipy.stats.linregress`; the covariance of ``curve_fit`` for
Michaelis–Menten), propagated to derived values to first order, including the covariance of
slope and intercept (ΔG‡, the Kissinger A, Km from Lineweaver–Burk). Two points give a line but
no standard error (``None``). The code uses no randomness, no clock and writes no files.

The Ozawa–Flynn–Wall constant is Doyle's ``log₁₀ p(x) ≈ −2.315 − 0.4567·x`` in natural
logarithms: ``Ea = −R·slope / (0.4567·ln 10)``, 0.4567·ln 10 = 1.0516 (often rounded to 1.052).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rar.science.tables import Table, column_roles, is_celsius, pint_unit, split_header

__all__ = [
    "Analysis",
    "analyses_for",
    "choose_analysis",
    "column_roles",
    "shown",
    "slope_unit",
    "unit_suffix",
]

DOYLE = 0.4567 * math.log(10)  # ln β = const − DOYLE·Ea/(RT)


@dataclass(frozen=True, slots=True)
class Analysis:
    kind: str  # arrhenius | eyring | kissinger | ozawa_flynn_wall | friedman | first_order | ...
    method: str  # as a scientist names it: "Kissinger method"
    purpose: str  # one line: what is fitted against what
    code: str  # Python source for the sandbox
    quantities: tuple[str, ...]  # names of the results it reports, headline first


def shown(value: float, stderr: float | None = None) -> str:
    """``value ± stderr`` for display: the error to one significant digit (two when it starts
    with 1 or 2), the value to the same place (six significant digits at most); e-notation
    outside 0.001–100000."""
    if not math.isfinite(value):
        return str(value)
    if stderr is None or not math.isfinite(stderr) or stderr <= 0:
        return f"{value:.4g}"
    digits = 2 if f"{stderr:e}"[0] in "12" else 1
    scale = math.floor(math.log10(abs(value))) if value else 0
    # the place of the last digit shown: that of the error, but never beyond six digits
    place = max(math.floor(math.log10(stderr)) - digits + 1, scale - 5)
    if -3 <= scale < 5:
        decimals = max(0, -place)
        return f"{value:.{decimals}f} ± {stderr:.{decimals}f}"
    decimals = max(0, scale - place)
    return f"({value / 10**scale:.{decimals}f} ± {stderr / 10**scale:.{decimals}f})e{scale}"


# --- the question's words ----------------------------------------------------------------------

_WORDS: dict[str, re.Pattern[str]] = {
    kind: re.compile(pattern, re.IGNORECASE)
    for kind, pattern in {
        "friedman": r"friedman|differential isoconversional|dα/dt|isoconversional|conversion",
        "kissinger": r"kissinger|\bpeaks?\b|\bdsc\b",
        "ozawa_flynn_wall": r"ozawa|flynn|\bofw\b|\bfwo\b|doyle|isoconversional|conversion",
        "arrhenius": r"arrhenius|activation energ|\bea\b|pre-?exponential|frequency factor",
        "eyring": r"eyring|enthalp|entrop|gibbs|free energy of activation|transition[- ]state|"
        r"‡|δ[hsg]|d[hsg]_act",
        "first_order": r"half[- ]?li(?:fe|ves)|t½|t1/2|rate constant|decay|first[- ]order|"
        r"elimination|exponential|lifetime",
        "michaelis_menten": r"michaelis|menten|\bkm\b|k_m|v_?max|saturat|non-?linear|hyperbol",
        "lineweaver_burk": r"lineweaver|burk|double[- ]reciprocal",
    }.items()
}
_LINEAR_ASKED = re.compile(
    r"(?<!non)(?<!non-)linear|calibration|proportional|straight[- ]line|modulus|stiffness|"
    r"spring constant|sensitivity|regression",
    re.IGNORECASE,
)
_SLOPE_ASKED = re.compile(r"slope|gradient", re.IGNORECASE)
# never chosen unless the question names them
_ONLY_WHEN_ASKED = frozenset({"lineweaver_burk"})


def _asks(kind: str, text: str) -> bool:
    return bool(text) and bool(_WORDS[kind].search(text))


# --- the code every analysis shares ------------------------------------------------------------

_PRELUDE = '''\
import math

import numpy as np

R = 8.314462618  # gas constant, J/(mol K)


def _or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


def _line(x, y):
    """y = slope·x + intercept by ordinary least squares, with the standard errors of both
    (none from two points) and R²: the figures scipy.stats.linregress gives, without the
    two seconds its import takes."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    x_mean, y_mean = float(x.mean()), float(y.mean())
    sxx = float(((x - x_mean) ** 2).sum())
    slope = float(((x - x_mean) * (y - y_mean)).sum()) / sxx
    intercept = y_mean - slope * x_mean
    residual = float(((y - (slope * x + intercept)) ** 2).sum())
    total = float(((y - y_mean) ** 2).sum())
    r_squared = 1.0 - residual / total if total > 0 else 1.0
    if n > 2:
        s2 = residual / (n - 2)
        se_slope = math.sqrt(s2 / sxx)
        se_intercept = math.sqrt(s2 * (1.0 / n + x_mean**2 / sxx))
    else:
        se_slope = se_intercept = float("nan")
    cov = -x_mean * se_slope**2  # covariance of slope and intercept
    return slope, intercept, se_slope, se_intercept, cov, r_squared


'''


@dataclass(frozen=True, slots=True)
class _Result:
    name: str
    label: str
    unit: str
    value: str  # expression in the cell
    stderr: str  # expression in the cell; NaN when there is none


@dataclass(frozen=True, slots=True)
class _Range:
    column: str
    values: tuple[float, ...]
    unit: str
    symbol: str

    def text(self) -> str:
        return f"{self.symbol} {min(self.values):g}–{max(self.values):g} {self.unit}".rstrip()


_RESERVED = frozenset({"x", "y", "n", "R", "slope", "intercept", "r_squared", "report"})


def unit_suffix(unit: str) -> str | None:
    """``kJ/mol`` → ``kJ_per_mol``, ``s⁻¹`` → ``per_s``: a variable name's unit part."""
    text = pint_unit(unit).replace("%", "percent").replace("°C", "degC")
    if not text:
        return None
    numerator: list[str] = []
    denominator: list[str] = []
    for op, factor in re.findall(r"([*/ ]?)\s*([^*/ ()]+)", text.replace("(", "").replace(")", "")):
        base, _, power = factor.partition("^")
        exponent = int(power) if re.fullmatch(r"-?\d+", power) else 1
        if base == "1":
            continue
        below = (op == "/") != (exponent < 0)
        named = base + (str(abs(exponent)) if abs(exponent) != 1 else "")
        (denominator if below else numerator).append(named)
    suffix = "_".join(numerator) + "".join(f"_per_{d}" for d in denominator)
    suffix = re.sub(r"\W", "", suffix.lstrip("_"))
    return suffix if suffix and suffix.isascii() else None


def _flat(name: str, unit: str) -> str:
    """The cell variable of a result: ``Ea_kJ_per_mol``; the bare name when the unit is unknown."""
    suffix = unit_suffix(unit) if unit else None
    if suffix is None:
        return name if name not in _RESERVED else f"{name}_value"
    return f"{name}_{suffix}"


def _array(values: Sequence[float], offset: float = 0.0) -> str:
    literal = "np.array([" + ", ".join(repr(float(v)) for v in values) + "])"
    return f"{literal} + {offset!r}" if offset else literal


def _cell(
    table_lines: Sequence[str],
    *,
    kind: str,
    method: str,
    fit: str,
    results: Sequence[_Result],
    plot: str,
    data_range: _Range,
    line_fit: bool = True,
) -> str:
    """The sandbox code: prelude, data, fit, flat result variables, ``report``, summary lines."""
    lines = [_PRELUDE.rstrip("\n") + "\n\n", inspect.getsource(shown), "", *table_lines, ""]
    entries = []
    for result in results:
        value, stderr = _flat(result.name, result.unit), _flat(f"{result.name}_stderr", result.unit)
        lines += [f"{value} = float({result.value})", f"{stderr} = _or_none({result.stderr})"]
        entries.append(
            f"        {{'name': {result.name!r}, 'label': {result.label!r}, 'value': {value}, "
            f"'stderr': {stderr}, 'unit': {result.unit!r}}},"
        )
    if line_fit:
        lines.append(
            "slope_stderr, intercept_stderr = _or_none(_se_slope), _or_none(_se_intercept)"
        )
    low, high = min(data_range.values), max(data_range.values)
    lines += [
        "",
        "report = {",
        f"    'analysis': {kind!r},",
        f"    'method': {method!r},",
        f"    'fit': {fit!r},",
        "    'n': n,",
        "    'r_squared': r_squared,",
        f"    'data_range': {{'column': {data_range.column!r}, 'min': {low!r}, 'max': {high!r}, "
        f"'unit': {data_range.unit!r}}},",
        "    'results': [",
        *entries,
        "    ],",
        f"    'plot': {plot},",
        "}",
        # four decimals, or six when four would round a near-perfect fit up to 1
        "_r2 = f'{r_squared:.4f}' if r_squared < 0.99995 else f'{r_squared:.6f}'",
        f"_context = f'R² = {{_r2}}, n = {{n}}, ' + {data_range.text()!r}",
        "for _result in report['results']:",
        "    _shown = shown(_result['value'], _result['stderr'])",
        "    _line_text = f\"{_result['name']} = {_shown} {_result['unit']}\".rstrip()",
        "    print(f'{_line_text} ({_context})')",
        "",
    ]
    return "\n".join(lines)


def _fit_lines(x: str, y: str) -> list[str]:
    return [
        f"x, y = {x}, {y}",
        "slope, intercept, _se_slope, _se_intercept, _cov, r_squared = _line(x, y)",
        "n = int(x.size)",
    ]


def _line_plot(kind: str, title: str, x_label: str, y_label: str, per_1000: bool) -> str:
    """The plot dict of a straight-line fit; reciprocal temperatures are plotted as 1000/T."""
    if per_1000:
        xs, slope = "(1000.0 * x).tolist()", "slope / 1000.0"
    else:
        xs, slope = "x.tolist()", "slope"
    return (
        f"{{'kind': {kind!r}, 'title': {title!r}, 'x_label': {x_label!r}, 'y_label': "
        f"{y_label!r}, 'x': {xs}, 'y': y.tolist(), 'slope': {slope}, 'intercept': intercept}}"
    )


# --- the analyses ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Context:
    table: Table
    roles: dict[str, int]
    question: str
    quantity: str | None

    def values(self, role: str) -> tuple[float, ...]:
        return tuple(row[self.roles[role]] for row in self.table.rows)

    def header(self, role: str) -> str:
        return self.table.columns[self.roles[role]]

    def unit(self, role: str) -> str:
        return split_header(self.header(role))[1]

    def kelvin(self, role: str) -> tuple[str, tuple[float, ...]]:
        """(code for the column in kelvin, the values in kelvin)."""
        offset = 273.15 if is_celsius(self.header(role)) else 0.0
        values = self.values(role)
        return _array(values, offset), tuple(v + offset for v in values)


def _positive(*columns: Sequence[float]) -> bool:
    return all(min(column) > 0 for column in columns)


def _spread(values: Sequence[float]) -> bool:
    return len(set(values)) >= 2


def _energy_results(energy_label: str, *, electronvolts: bool = False) -> list[_Result]:
    results = [
        _Result("Ea", energy_label, "kJ/mol", "-slope * R / 1000", "_se_slope * R / 1000"),
    ]
    if electronvolts:  # per particle, the solid-state convention: kB in eV/K
        results.append(
            _Result(
                "Ea",
                f"{energy_label} per particle",
                "eV",
                "-slope * 8.617333262e-5",
                "_se_slope * 8.617333262e-5",
            )
        )
    return results


def _temperature_range(c: _Context, role: str, symbol: str) -> _Range:
    unit = "°C" if is_celsius(c.header(role)) else "K"
    return _Range(c.header(role), c.values(role), unit, symbol)


def _kissinger(c: _Context) -> Analysis | None:
    rate = c.roles.get("heating_rate")
    peak = "peak_temperature" if "peak_temperature" in c.roles else "temperature"
    if rate is None or peak not in c.roles:
        return None
    temperature, kelvin = c.kelvin(peak)
    beta = c.values("heating_rate")
    if not _positive(beta, kelvin) or not _spread(kelvin):
        return None
    per_second = _per_second(c.unit("heating_rate"), default="K/min")
    fit = "ln(β/Tp²) against 1/Tp"
    code = _cell(
        [
            f"beta = {_array(beta)}  # heating rate, {c.unit('heating_rate') or 'as given'}",
            f"Tp = {temperature}  # peak temperature, K",
            *_fit_lines("1.0 / Tp", "np.log(beta / Tp**2)"),
            f"_A = -slope * math.exp(intercept) * {per_second!r}  # (Ea/R)·e^intercept, 1/s"
            + ("" if c.unit("heating_rate") else " (β taken as K/min)"),
            "_se_lnA = math.sqrt(max(0.0, _se_slope**2 / slope**2 + _se_intercept**2 "
            "+ 2 * _cov / slope))",
        ],
        kind="kissinger",
        method="Kissinger method",
        fit=fit,
        results=[
            *_energy_results("activation energy"),
            _Result("A", "pre-exponential factor", "1/s", "_A", "_A * _se_lnA"),
        ],
        plot=_line_plot("kissinger", "Kissinger plot", "1000/Tp (1/K)", "ln(β/Tp²)", True),
        data_range=_temperature_range(c, peak, "Tp"),
    )
    purpose = "Kissinger fit: ln(β/Tp²) against 1/Tp gives −Ea/R"
    return Analysis("kissinger", "Kissinger method", purpose, code, ("Ea", "A"))


def _ozawa_flynn_wall(c: _Context) -> Analysis | None:
    at = "conversion_temperature" if "conversion_temperature" in c.roles else "temperature"
    if "heating_rate" not in c.roles or at not in c.roles:
        return None
    temperature, kelvin = c.kelvin(at)
    beta = c.values("heating_rate")
    if not _positive(beta, kelvin) or not _spread(kelvin):
        return None
    code = _cell(
        [
            f"beta = {_array(beta)}  # heating rate, {c.unit('heating_rate') or 'as given'}",
            f"T = {temperature}  # temperature at the fixed conversion, K",
            f"DOYLE = {DOYLE!r}  # Doyle: ln p(x) ≈ −5.331 − 1.0516·x, x = Ea/RT",
            *_fit_lines("1.0 / T", "np.log(beta)"),
        ],
        kind="ozawa_flynn_wall",
        method="Ozawa–Flynn–Wall method",
        fit="ln β against 1/T at fixed conversion",
        results=[
            _Result(
                "Ea",
                "activation energy",
                "kJ/mol",
                "-slope * R / DOYLE / 1000",
                "_se_slope * R / DOYLE / 1000",
            ),
        ],
        plot=_line_plot("ozawa_flynn_wall", "Ozawa–Flynn–Wall plot", "1000/T (1/K)", "ln β", True),
        data_range=_temperature_range(c, at, "T"),
    )
    purpose = (
        "Ozawa–Flynn–Wall fit: ln β against 1/T at fixed conversion gives −1.052·Ea/R "
        "(Doyle's approximation)"
    )
    return Analysis("ozawa_flynn_wall", "Ozawa–Flynn–Wall method", purpose, code, ("Ea",))


def _friedman(c: _Context) -> Analysis | None:
    at = "conversion_temperature" if "conversion_temperature" in c.roles else "temperature"
    if "conversion_rate" not in c.roles or at not in c.roles:
        return None
    temperature, kelvin = c.kelvin(at)
    rate = c.values("conversion_rate")
    if not _positive(rate, kelvin) or not _spread(kelvin):
        return None
    unit = c.unit("conversion_rate")
    code = _cell(
        [
            f"T = {temperature}  # temperature at the fixed conversion, K",
            f"rate = {_array(rate)}  # dα/dt, {unit or 'as given'}",
            *_fit_lines("1.0 / T", "np.log(rate)"),
        ],
        kind="friedman",
        method="Friedman method",
        fit="ln(dα/dt) against 1/T at fixed conversion",
        results=[
            *_energy_results("activation energy"),
            _Result(
                "Af", "A·f(α)", unit, "math.exp(intercept)", "math.exp(intercept) * _se_intercept"
            ),
        ],
        plot=_line_plot("friedman", "Friedman plot", "1000/T (1/K)", "ln(dα/dt)", True),
        data_range=_temperature_range(c, at, "T"),
    )
    purpose = "Friedman fit: ln(dα/dt) against 1/T at fixed conversion gives −Ea/R"
    return Analysis("friedman", "Friedman method", purpose, code, ("Ea", "Af"))


_ARRHENIUS_FORMS = {
    # role: (array name, what is fitted, y label, prefactor name and label, solid-state)
    "rate_constant": ("k", "np.log(k)", "ln k", "A", "pre-exponential factor", False),
    "diffusion": ("D", "np.log(D)", "ln D", "D0", "pre-exponential factor D₀", True),
    "conductivity": (
        "sigma",
        "np.log(sigma * T)",
        "ln(σT)",
        "A",
        "pre-exponential factor of σT",
        True,
    ),
}


def _arrhenius(c: _Context) -> Analysis | None:
    role = next((r for r in _ARRHENIUS_FORMS if r in c.roles), None)
    if role is None or "temperature" not in c.roles:
        return None
    temperature, kelvin = c.kelvin("temperature")
    values = c.values(role)
    if not _positive(values, kelvin) or not _spread(kelvin):
        return None
    name, y, y_label, prefactor, prefactor_label, solid = _ARRHENIUS_FORMS[role]
    unit = c.unit(role)
    prefactor_unit = f"K·{unit}" if role == "conductivity" and unit else unit
    fit = f"{y_label} against 1/T"
    code = _cell(
        [
            f"T = {temperature}  # K",
            f"{name} = {_array(values)}  # {unit or 'as given'}",
            *_fit_lines("1.0 / T", y),
        ],
        kind="arrhenius",
        method="Arrhenius plot",
        fit=fit,
        results=[
            *_energy_results(
                "activation energy" if role != "diffusion" else "activation energy for diffusion",
                electronvolts=solid,
            ),
            _Result(
                prefactor,
                prefactor_label,
                prefactor_unit,
                "math.exp(intercept)",
                "math.exp(intercept) * _se_intercept",
            ),
        ],
        plot=_line_plot("arrhenius", "Arrhenius plot", "1000/T (1/K)", y_label, True),
        data_range=_temperature_range(c, "temperature", "T"),
    )
    purpose = f"Arrhenius fit: {fit} gives −Ea/R"
    return Analysis("arrhenius", "Arrhenius plot", purpose, code, ("Ea", prefactor))


def _per_second(unit: str, *, default: str) -> float:
    """What turns "per time unit of this rate" into "per second" (``K/min`` → 1/60), via pint;
    the default unit when the header has none pint can read."""
    from rar.science.protocols._units import registry

    ureg = registry()
    for text in (unit, default):
        try:
            quantity = ureg.Quantity(1, pint_unit(text))
            time = (
                quantity / ureg.Quantity(1, "K")
                if "[temperature]" in str(quantity.dimensionality)
                else quantity
            )
            return float(time.to("1/s").magnitude)
        except Exception:  # an unreadable unit: try the default
            continue
    return 1.0


def _eyring(c: _Context) -> Analysis | None:
    if "rate_constant" not in c.roles or "temperature" not in c.roles:
        return None
    temperature, kelvin = c.kelvin("temperature")
    k = c.values("rate_constant")
    if not _positive(k, kelvin) or not _spread(kelvin):
        return None
    unit = c.unit("rate_constant")
    factor = _rate_constant_factor(unit)
    scaled = f"np.array({_array(k)} * {factor!r})" if factor != 1.0 else _array(k)
    code = _cell(
        [
            "kB, h = 1.380649e-23, 6.62607015e-34  # J/K, J s (exact)",
            "T_ref = 298.15  # K, for the Gibbs energy of activation",
            f"T = {temperature}  # K",
            f"k = {scaled}  # 1/s (table: {unit or 'no unit, taken as s⁻¹'})",
            *_fit_lines("1.0 / T", "np.log(k / T)"),
            "_se_dG = R * math.sqrt(max(0.0, _se_slope**2 + T_ref**2 * _se_intercept**2 "
            "+ 2 * T_ref * _cov)) / 1000",
        ],
        kind="eyring",
        method="Eyring plot",
        fit="ln(k/T) against 1/T",
        results=[
            _Result(
                "dH_act",
                "enthalpy of activation",
                "kJ/mol",
                "-slope * R / 1000",
                "_se_slope * R / 1000",
            ),
            _Result(
                "dS_act",
                "entropy of activation",
                "J/mol/K",
                "R * (intercept - math.log(kB / h))",
                "R * _se_intercept",
            ),
            _Result(
                "dG_act",
                "Gibbs energy of activation at 298.15 K",
                "kJ/mol",
                "-R * (slope + T_ref * (intercept - math.log(kB / h))) / 1000",
                "_se_dG",
            ),
        ],
        plot=_line_plot("eyring", "Eyring plot", "1000/T (1/K)", "ln(k/T)", True),
        data_range=_temperature_range(c, "temperature", "T"),
    )
    purpose = (
        "Eyring fit: ln(k/T) against 1/T gives −ΔH‡/R (slope) and ln(kB/h) + ΔS‡/R (intercept)"
    )
    return Analysis("eyring", "Eyring plot", purpose, code, ("dH_act", "dS_act", "dG_act"))


def _rate_constant_factor(unit: str) -> float:
    """The factor that puts a rate constant in s⁻¹ (or M⁻ⁿ s⁻¹); 1.0 when pint cannot tell."""
    from rar.science.protocols._units import registry

    ureg = registry()
    try:
        quantity = ureg.Quantity(1, pint_unit(unit))
    except Exception:  # no unit, or one pint cannot read: taken as s⁻¹
        return 1.0
    for target in ("1/s", "1/M/s", "1/M^2/s"):
        if quantity.dimensionality == ureg.Quantity(1, target).dimensionality:
            return float(quantity.to(target).magnitude)
    return 1.0


def _first_order(c: _Context) -> Analysis | None:
    if "time" not in c.roles or "concentration" not in c.roles:
        return None
    t, conc = c.values("time"), c.values("concentration")
    if not _positive(conc) or not _spread(t):
        return None
    ordered = [value for _, value in sorted(zip(t, conc, strict=True))]
    if ordered[-1] >= ordered[0]:
        return None  # it does not decay
    t_unit, c_unit = c.unit("time") or "s", c.unit("concentration")
    code = _cell(
        [
            f"t = {_array(t)}  # {t_unit}",
            f"C = {_array(conc)}  # {c_unit or 'as given'}",
            *_fit_lines("t", "np.log(C)"),
            "_k = -slope",
        ],
        kind="first_order",
        method="first-order decay fit",
        fit="ln C against t",
        results=[
            _Result("k", "first-order rate constant", f"1/{t_unit}", "_k", "_se_slope"),
            _Result(
                "t_half", "half-life", t_unit, "math.log(2) / _k", "math.log(2) * _se_slope / _k**2"
            ),
            _Result(
                "C0",
                "initial concentration (fitted)",
                c_unit,
                "math.exp(intercept)",
                "math.exp(intercept) * _se_intercept",
            ),
        ],
        plot=_line_plot("first_order", "First-order decay", f"t ({t_unit})", "ln C", False),
        data_range=_Range(c.header("time"), t, t_unit, "t"),
    )
    purpose = "first-order decay fit: ln C against t gives −k; t½ = ln 2/k"
    return Analysis("first_order", "first-order decay fit", purpose, code, ("k", "t_half", "C0"))


def _substrate_and_rate(c: _Context) -> tuple[str, str] | None:
    substrate = "substrate" if "substrate" in c.roles else "concentration"
    if substrate not in c.roles or "velocity" not in c.roles:
        return None
    return substrate, "velocity"


def _michaelis_menten(c: _Context) -> Analysis | None:
    roles = _substrate_and_rate(c)
    if roles is None or len(c.table.rows) < 3:
        return None
    s, v = c.values(roles[0]), c.values(roles[1])
    if min(s) < 0 or not _spread(s) or max(v) <= 0:
        return None
    s_unit, v_unit = c.unit(roles[0]), c.unit(roles[1])
    code = _cell(
        [
            "from scipy.optimize import curve_fit",
            "",
            f"S = {_array(s)}  # substrate, {s_unit or 'as given'}",
            f"v = {_array(v)}  # rate, {v_unit or 'as given'}",
            "",
            "",
            "def _michaelis_menten(s, vmax, km):",
            "    return vmax * s / (km + s)",
            "",
            "",
            "_p0 = (float(v.max()), float(np.median(S)))  # a start read from the data",
            "_p, _pcov = curve_fit(_michaelis_menten, S, v, p0=_p0, maxfev=10000)",
            "_vmax, _km = float(_p[0]), float(_p[1])",
            "_se_vmax, _se_km = (float(e) for e in np.sqrt(np.diag(_pcov)))",
            "_residuals = v - _michaelis_menten(S, _vmax, _km)",
            "r_squared = float(1 - (_residuals**2).sum() / ((v - v.mean()) ** 2).sum())",
            "n = int(S.size)",
            "x, y = S, v",
            "_curve_s = np.linspace(0.0, float(S.max()), 50)",
            "_curve = [[float(a), float(b)] for a, b in "
            "zip(_curve_s, _michaelis_menten(_curve_s, _vmax, _km))]",
        ],
        kind="michaelis_menten",
        method="Michaelis–Menten fit (non-linear least squares)",
        fit="v = Vmax·[S]/(Km + [S])",
        results=[
            _Result("Km", "Michaelis constant", s_unit, "_km", "_se_km"),
            _Result("Vmax", "maximum rate", v_unit, "_vmax", "_se_vmax"),
        ],
        plot=(
            "{'kind': 'michaelis_menten', 'title': 'Michaelis–Menten fit', "
            f"'x_label': {c.header(roles[0])!r}, 'y_label': {c.header(roles[1])!r}, "
            "'x': x.tolist(), 'y': y.tolist(), 'curve': _curve}"
        ),
        data_range=_Range(c.header(roles[0]), s, s_unit, "[S]"),
        line_fit=False,
    )
    purpose = (
        "Michaelis–Menten fit: v = Vmax·[S]/(Km + [S]) by non-linear least squares gives Km "
        "and Vmax"
    )
    return Analysis(
        "michaelis_menten",
        "Michaelis–Menten fit (non-linear least squares)",
        purpose,
        code,
        ("Km", "Vmax"),
    )


def _lineweaver_burk(c: _Context) -> Analysis | None:
    roles = _substrate_and_rate(c)
    if roles is None:
        return None
    s, v = c.values(roles[0]), c.values(roles[1])
    if not _positive(s, v) or not _spread(s):
        return None
    s_unit, v_unit = c.unit(roles[0]), c.unit(roles[1])
    code = _cell(
        [
            f"S = {_array(s)}  # substrate, {s_unit or 'as given'}",
            f"v = {_array(v)}  # rate, {v_unit or 'as given'}",
            *_fit_lines("1.0 / S", "1.0 / v"),
            "_vmax, _km = 1.0 / intercept, slope / intercept",
            "_se_km = math.sqrt(max(0.0, (_se_slope / intercept) ** 2 + (slope * _se_intercept "
            "/ intercept**2) ** 2 - 2 * slope * _cov / intercept**3))",
        ],
        kind="lineweaver_burk",
        method="Lineweaver–Burk plot",
        fit="1/v against 1/[S]",
        results=[
            _Result("Km", "Michaelis constant", s_unit, "_km", "_se_km"),
            _Result("Vmax", "maximum rate", v_unit, "_vmax", "_se_intercept / intercept**2"),
        ],
        plot=_line_plot(
            "lineweaver_burk",
            "Lineweaver–Burk plot",
            f"1/[S] (1/{s_unit})" if s_unit else "1/[S]",
            f"1/v (1/({v_unit}))" if v_unit else "1/v",
            False,
        ),
        data_range=_Range(c.header(roles[0]), s, s_unit, "[S]"),
    )
    purpose = "Lineweaver–Burk fit: 1/v against 1/[S] gives Km/Vmax (slope) and 1/Vmax (intercept)"
    return Analysis("lineweaver_burk", "Lineweaver–Burk plot", purpose, code, ("Km", "Vmax"))


# independent and dependent variables of a plain linear fit, in order of preference
_X_ROLES = (
    "strain",
    "extension",
    "concentration",
    "substrate",
    "time",
    "temperature",
    "heating_rate",
    "length",
    "pressure",
)
_Y_ROLES = (
    "stress",
    "force",
    "absorbance",
    "velocity",
    "rate_constant",
    "conductivity",
    "diffusion",
    "energy",
)
# a slope is shown in the first unit of its family in which it is at least 1 (else the smallest)
_SLOPE_UNITS = (
    ("Pa", "kPa", "MPa", "GPa", "TPa"),
    ("N/m",),
    ("J/mol", "kJ/mol"),
    ("1/s",),
)


def _least_squares_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx


def _written_ratio(y_unit: str, x_unit: str) -> str:
    if not x_unit:
        return y_unit
    below = f"({x_unit})" if re.search(r"[/ *·]", x_unit) else x_unit
    return f"{y_unit or '1'}/{below}"


def slope_unit(y_unit: str, x_unit: str, estimate: float) -> tuple[str, float]:
    """(unit, factor): the slope of y against x, times factor, is in unit (pint, on the host).

    ``MPa`` against ``%`` with a slope near 2000 gives ``("GPa", 0.1)``; ``N`` against ``mm``
    gives ``("N/m", 1000.0)``; units of the same dimension give a pure number (``""``); units
    pint cannot read are kept as written (``"a.u./mM"``, factor 1).
    """
    from rar.science.protocols._units import registry

    ureg = registry()
    try:
        ratio = ureg.Quantity(1, pint_unit(y_unit) or "1") / ureg.Quantity(
            1, pint_unit(x_unit) or "1"
        )
        if not (y_unit or x_unit):
            return "", 1.0
        if ratio.dimensionless:
            return "", float(ratio.to("dimensionless").magnitude)
        for family in _SLOPE_UNITS:
            if ratio.dimensionality != ureg.Quantity(1, family[0]).dimensionality:
                continue
            factors = [float(ratio.to(unit).magnitude) for unit in family]
            chosen = next(
                (i for i in reversed(range(len(family))) if abs(estimate * factors[i]) >= 1),
                0,
            )
            return family[chosen], factors[chosen]
    except Exception:  # a unit pint cannot read, or an offset unit (°C): keep it as written
        pass
    return _written_ratio(y_unit, x_unit), 1.0


def _identifier(quantity: str | None) -> str:
    name = re.sub(r"[^0-9A-Za-z]+", "_", (quantity or "").replace("'", "")).strip("_")
    if not name:
        return "slope"
    return name if not name[0].isdigit() else f"q_{name}"


def _linear(c: _Context, *, need_roles: bool) -> Analysis | None:
    from rar.science.tables import column_role

    role_of = [column_role(header) for header in c.table.columns]
    usable = [i for i, role in enumerate(role_of) if role != "index"]
    if len(usable) < 2:
        return None
    x = next((i for r in _X_ROLES for i in usable if role_of[i] == r), usable[0])
    rest = [i for i in usable if i != x]
    y = next((i for r in _Y_ROLES for i in rest if role_of[i] == r), rest[0])
    if need_roles and (role_of[x] is None or role_of[y] is None):
        return None
    xs = tuple(row[x] for row in c.table.rows)
    ys = tuple(row[y] for row in c.table.rows)
    if not _spread(xs):
        return None
    (x_name, x_unit), (_, y_unit) = (
        split_header(c.table.columns[x]),
        split_header(c.table.columns[y]),
    )
    unit, factor = slope_unit(y_unit, x_unit, _least_squares_slope(xs, ys))
    name, label = _identifier(c.quantity), c.quantity or "slope"
    x_header, y_header = c.table.columns[x], c.table.columns[y]
    code = _cell(
        [
            f"x = {_array(xs)}  # {x_header}",
            f"y = {_array(ys)}  # {y_header}",
            "slope, intercept, _se_slope, _se_intercept, _cov, r_squared = _line(x, y)",
            "n = int(x.size)",
            f"_to_unit = {factor!r}  # the slope in {unit or 'a pure number'}",
        ],
        kind="linear",
        method="linear least-squares fit",
        fit=f"{y_header} against {x_header}",
        results=[
            _Result(name, label, unit, "slope * _to_unit", "_se_slope * _to_unit"),
            _Result("intercept", "intercept", y_unit, "intercept", "_se_intercept"),
        ],
        plot=_line_plot("linear", "Linear fit", x_header, y_header, False),
        data_range=_Range(x_header, xs, x_unit, x_name),
    )
    purpose = (
        f"linear least-squares fit: {y_header} against {x_header} gives the slope"
        f"{f' ({label})' if c.quantity else ''} and the intercept"
    )
    return Analysis("linear", "linear least-squares fit", purpose, code, (name, "intercept"))


_BUILDERS: tuple[tuple[str, Callable[[_Context], Analysis | None]], ...] = (
    ("friedman", _friedman),
    ("kissinger", _kissinger),
    ("ozawa_flynn_wall", _ozawa_flynn_wall),
    ("arrhenius", _arrhenius),
    ("eyring", _eyring),
    ("first_order", _first_order),
    ("michaelis_menten", _michaelis_menten),
    ("lineweaver_burk", _lineweaver_burk),
)


# --- selection ---------------------------------------------------------------------------------


def _is_profile(roles: dict[str, int]) -> bool:
    return "energy" in roles and ("reaction_coordinate" in roles or "index" in roles)


def analyses_for(
    table: Table, question: str = "", *, quantity: str | None = None
) -> list[Analysis]:
    """Every analysis that applies to the table, best first for the question (see module doc)."""
    roles = column_roles(table)
    if _is_profile(roles) or len(table.rows) < 2:
        return []
    context = _Context(table, roles, question, quantity)
    words = f"{question} {quantity or ''}"
    ranked: list[tuple[int, int, Analysis]] = []
    for order, (kind, build) in enumerate(_BUILDERS):
        asked, noted = _asks(kind, words), _asks(kind, table.caption)
        if kind in _ONLY_WHEN_ASKED and not asked:
            continue
        analysis = build(context)
        if analysis is not None:
            ranked.append((-(2 * asked + noted), order, analysis))
    explicit = bool(_LINEAR_ASKED.search(words))
    asked = explicit or bool(_SLOPE_ASKED.search(words))
    if asked or not ranked:
        linear = _linear(context, need_roles=not asked)
        if linear is not None:
            ranked.append((-2 if explicit else 0, len(_BUILDERS), linear))
    return [analysis for _, _, analysis in sorted(ranked, key=lambda item: item[:2])]


def choose_analysis(
    table: Table, question: str = "", *, quantity: str | None = None
) -> Analysis | None:
    """The analysis a scientist would pick for this table and question, else None."""
    found = analyses_for(table, question, quantity=quantity)
    return found[0] if found else None
