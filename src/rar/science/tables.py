"""Small numeric tables found in passages, with the caption that says what they hold.

The rule-based planner computes what a question asks from data tables in the evidence. This
module only reads them; :mod:`rar.science.analyses` decides which standard analysis a table calls
for and writes the code, which runs in the sandbox, never here.

A table is a markdown pipe table (a header row, a ``|---|`` rule, then rows) whose data cells
are all numbers; it ends at the first row that is not. At least two rows are needed. A cell is
read conservatively (:func:`parse_number`):

* plain decimals and ``e`` notation: ``412.4``, ``-0.18``, ``8.49e-6``, ``+3``, ``.5``;
* a unicode minus sign (U+2212) wherever ``-`` may stand: ``−0.18``, ``1.2e−3``;
* powers of ten: ``1.2 × 10⁻³``, ``1.2×10^-3``, ``1.2 x 10^-3``, ``1.2·10**-3``, ``10^5``;
* a trailing ``%``, dropped: ``12.5 %`` reads as 12.5 (the number stays in percent, as the
  column header would say).

Thousands separators (``1,234``) and decimal commas are refused, since each reads as the other,
and so is everything else (units in cells, ``n/a``, ranges, ``±``).

The caption (:attr:`Table.caption`) is the nearest markdown heading above the table, then the
last sentence of a prose paragraph directly above it (one that ends at most one blank line
before the table), joined by `` — ``: for the demo corpus it is e.g. ``Data: DSC peak
temperatures at four heating rates (Kissinger data)``.

**What a column holds** (:func:`column_role`) is read from its header, case-insensitively: the
name, and the unit in ``(…)``, ``[…]`` or after ``/`` (``T (K)``, ``T [K]``, ``T/K``). Sub- and
superscripts are read as digits (``v₀``, ``s⁻¹``, ``cm²/s``). The unit's dimension, from pint,
decides when the name does not: ``s⁻¹`` is a rate constant, ``S/cm`` a conductivity, ``K/min``
a heating rate, ``µM/s`` a rate (velocity), ``mM`` a concentration, ``MPa`` a stress or pressure.
The name decides first where it is specific: ``peak``/``Tp`` (peak temperature), ``α`` or
``conversion`` with a temperature (temperature at fixed conversion), ``dα/dt`` (conversion
rate), ``β``/``heating rate``, ``k``/``kcat``/``k_obs``/``rate constant``, ``D``/``diffusion``,
``σ``/``conductivity`` (``σ`` in a pressure unit is a stress), ``[S]``/``substrate``,
``v``/``v₀``/``velocity``/``rate``, ``[A]``/``C``/``concentration``, ``t``/``time``, ``T``/
``temperature``, ``strain``/``ε``, ``force``/``load``, ``extension``/``displacement``,
``absorbance``, ``reaction coordinate``, ``energy``, and index columns (``Image``, ``Run``,
``No``). A temperature is in °C when its unit is ``°C``, ``(C)`` or the header says Celsius.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

_MINUS = str.maketrans({"−": "-"})
_SUPERSCRIPT_DIGITS = str.maketrans("⁻⁺⁰¹²³⁴⁵⁶⁷⁸⁹", "-+0123456789")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉ₚ", "0123456789p")
_DECIMAL = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMBER = re.compile(rf"^{_DECIMAL}(?:[eE][-+]?\d+)?$")
_POWER_OF_TEN = re.compile(
    rf"^(?:(?P<mantissa>{_DECIMAL})\s*[×xX*·]\s*)?10\s*(?:\^|\*\*)\s*\(?(?P<exponent>[-+]?\d+)\)?$"
)
_SUPERSCRIPT_EXPONENT = re.compile(r"10([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]
    caption: str = ""  # the passage's heading or prose above the table, if any


def parse_number(cell: str) -> float | None:
    """The number a table cell holds under the rules of the module doc, else None."""
    text = cell.strip().translate(_MINUS)
    if text.endswith("%"):
        text = text[:-1].rstrip()
    # superscript exponents only after "10", so that "m²" or "x³" never read as numbers
    text = _SUPERSCRIPT_EXPONENT.sub(lambda m: "10^" + m[1].translate(_SUPERSCRIPT_DIGITS), text)
    if _NUMBER.match(text):
        number = float(text)
    elif power := _POWER_OF_TEN.match(text):
        mantissa = float(power["mantissa"]) if power["mantissa"] is not None else 1.0
        try:
            number = mantissa * 10.0 ** int(power["exponent"])
        except OverflowError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _is_table_row(line: str) -> bool:
    return line.startswith("|")


def _is_rule(line: str) -> bool:
    return set(line.replace("|", "").strip()) <= set("-: ") and "-" in line


def _caption(lines: list[str], start: int) -> str:
    """The heading above line ``start`` and the last sentence of the prose right above it."""
    heading = ""
    for line in reversed(lines[:start]):
        match = _HEADING.match(line)
        if match:
            heading = match[1].strip()
            break
    paragraph: list[str] = []
    i = start - 1
    if i >= 0 and not lines[i]:
        i -= 1  # one blank line between the prose and the table
    while i >= 0 and lines[i] and not _HEADING.match(lines[i]) and not _is_table_row(lines[i]):
        paragraph.insert(0, lines[i])
        i -= 1
    prose = " ".join(paragraph).replace("**", "").strip()
    if prose:
        prose = _SENTENCE_END.split(prose)[-1][:300].strip()
    return " — ".join(part for part in (heading, prose) if part)


def parse_tables(text: str) -> list[Table]:
    """Markdown pipe tables whose data cells are all numbers, with their captions."""
    tables: list[Table] = []
    lines = [line.strip() for line in text.splitlines()]
    i = 0
    while i < len(lines) - 2:
        header, rule = lines[i], lines[i + 1]
        if _is_table_row(header) and _is_rule(rule):
            columns = tuple(cell.strip() for cell in header.strip("|").split("|"))
            rows: list[tuple[float, ...]] = []
            j = i + 2
            while j < len(lines) and _is_table_row(lines[j]):
                cells = [parse_number(cell) for cell in lines[j].strip("|").split("|")]
                if len(cells) != len(columns) or any(c is None for c in cells):
                    break
                rows.append(tuple(c for c in cells if c is not None))
                j += 1
            if len(rows) >= 2:
                tables.append(Table(columns, tuple(rows), _caption(lines, i)))
            i = j
        else:
            i += 1
    return tables


# --- what a column holds --------------------------------------------------------------------

_UNIT_SUPERSCRIPTS = re.compile(r"[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_NO_UNIT = frozenset(
    {"", "-", "—", "a.u.", "a. u.", "au", "arb. units", "arb. u.", "counts", "cps"}
)
_CELSIUS = frozenset({"°c", "ºc", "c", "degc", "deg c", "° c", "celsius"})
_DIMENSIONS: dict[str, tuple[tuple[str, int], ...]] = {
    # kind: the dimensionality pint gives, as sorted (dimension, exponent) pairs
    "temperature": (("[temperature]", 1),),
    "time": (("[time]", 1),),
    "inverse_time": (("[time]", -1),),
    "temperature_rate": (("[temperature]", 1), ("[time]", -1)),
    "concentration": (("[length]", -3), ("[substance]", 1)),
    "mass_concentration": (("[length]", -3), ("[mass]", 1)),
    "concentration_rate": (("[length]", -3), ("[substance]", 1), ("[time]", -1)),
    "amount_rate": (("[substance]", 1), ("[time]", -1)),
    "second_order_rate": (("[length]", 3), ("[substance]", -1), ("[time]", -1)),
    "conductivity": (("[current]", 2), ("[length]", -3), ("[mass]", -1), ("[time]", 3)),
    "diffusivity": (("[length]", 2), ("[time]", -1)),
    "pressure": (("[length]", -1), ("[mass]", 1), ("[time]", -2)),
    "force": (("[length]", 1), ("[mass]", 1), ("[time]", -2)),
    "length": (("[length]", 1),),
    "energy": (("[length]", 2), ("[mass]", 1), ("[time]", -2)),
    "molar_energy": (("[length]", 2), ("[mass]", 1), ("[substance]", -1), ("[time]", -2)),
    "dimensionless": (),
}
_KINDS = {dims: kind for kind, dims in _DIMENSIONS.items()}
_INDEX_WORDS = frozenset({"image", "index", "run", "no", "entry", "sample", "step", "point", "#"})


def split_header(header: str) -> tuple[str, str]:
    """(name, unit) of a column header: ``T (K)``, ``T [K]``, ``T/K``; the unit may be ``""``."""
    text = header.strip()
    if text.endswith(")") and "(" in text:
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if text[:i].strip():
                    return text[:i].strip(), text[i + 1 : -1].strip()
                break
    bracket = re.fullmatch(r"(.*\S)\s+\[([^\]]+)\]", text)
    if bracket:
        return bracket[1], bracket[2].strip()
    # quantity calculus, "T/K" or "k / s^-1", but not a derivative such as "dα/dt"
    solidus = re.fullmatch(r"([^/\s]{1,8}|.+\s)/\s*([^/]+)", text)
    if solidus and not re.search(r"\bd\S*/\s*d", text):
        return solidus[1].strip(), solidus[2].strip()
    return text, ""


def pint_unit(unit: str) -> str:
    """A unit as written in a header (``s⁻¹``, ``µM/s``, ``K·min⁻¹``) in pint's syntax."""
    text = unit.strip().replace("µ", "u").replace("μ", "u").replace("Å", "angstrom")
    text = text.replace("Ω", "ohm").replace("·", "*").replace("×", "*").replace("−", "-")
    return _UNIT_SUPERSCRIPTS.sub(lambda m: "^" + m[0].translate(_SUPERSCRIPT_DIGITS), text)


def is_celsius(header: str) -> bool:
    """Whether a (temperature) column is in degrees Celsius: ``°C``, ``(C)``, ``Celsius``."""
    name, unit = split_header(header)
    return unit.strip().lower() in _CELSIUS or "celsius" in name.lower() or "°c" in name.lower()


@functools.cache
def unit_kind(unit: str) -> str | None:
    """What a unit measures (``temperature``, ``inverse_time``, ``concentration``, ...)."""
    if unit.strip().lower() in _NO_UNIT:
        return None
    if unit.strip().lower() in _CELSIUS:
        return "temperature"
    from rar.science.protocols._units import registry

    try:
        dims = registry().Quantity(1, pint_unit(unit)).dimensionality
    except Exception:  # pint raises several types for text it cannot read
        return None
    return _KINDS.get(tuple(sorted((str(d), int(e)) for d, e in dict(dims).items())))


def _symbol_in(tokens: list[str], *symbols: str) -> bool:
    return bool(tokens) and tokens[0] in symbols


def column_role(header: str) -> str | None:
    """What a column holds, from its name and its unit; None when neither says."""
    name, unit = split_header(header)
    text = name.translate(_SUBSCRIPTS).lower()
    tokens = re.findall(r"\[[^\]]*\]|[^\W_]+(?:_[^\W_]+)*|#", text)
    first = re.findall(r"[^\W_]+(?:_[^\W_]+)*", name.translate(_SUBSCRIPTS))[:1]
    kind = unit_kind(unit) if unit else None
    celsius = is_celsius(header)
    conversion = "α" in tokens or "alpha" in tokens or "conversion" in tokens
    if re.search(r"d(?:α|a|alpha|x)\s*/\s*dt", text) or ("rate" in tokens and conversion):
        return "conversion_rate"
    if (
        "heating" in tokens
        or _symbol_in(tokens, "β", "beta", "φ", "phi")
        or (kind == "temperature_rate")
    ):
        return "heating_rate"
    is_temperature = (
        kind == "temperature"
        or celsius
        or "temperature" in tokens
        or (first and first[0][:1] == "T" and kind in (None, "temperature"))
    )
    if is_temperature and kind not in ("time", "inverse_time"):
        if "peak" in tokens or _symbol_in(tokens, "tp", "t_p", "tpeak", "t_peak", "tmax", "tm"):
            return "peak_temperature"
        if conversion or _symbol_in(tokens, "tα", "t_α", "t_alpha"):
            return "conversion_temperature"
        if _symbol_in(tokens, "t", "temperature", "temp", "θ") or "temperature" in tokens:
            return "temperature"
    if kind == "time" or "time" in tokens or (first == ["t"] and kind is None):
        return "time"
    if (
        "constant" in tokens
        or "turnover" in tokens
        or (
            tokens
            and re.fullmatch(r"k(?:_?[a-z0-9]{1,4})?", tokens[0])
            and tokens[0] != "kb"
            and kind in (None, "inverse_time", "second_order_rate")
        )
        or (kind in ("inverse_time", "second_order_rate") and "rate" in tokens)
    ):
        return "rate_constant"
    if "diffusion" in tokens or "diffusivity" in tokens or kind == "diffusivity":
        return "diffusion"
    if (_symbol_in(tokens, "σ", "sigma") and kind == "pressure") or "stress" in tokens:
        return "stress"
    if (
        "conductivity" in tokens
        or kind == "conductivity"
        or (_symbol_in(tokens, "σ", "sigma") and kind is None)
    ):
        return "conductivity"
    if "substrate" in tokens or _symbol_in(tokens, "[s]", "s", "[s]0", "s0"):
        return "substrate"
    if (
        "velocity" in tokens
        or _symbol_in(tokens, "v", "v0", "vo", "v_0", "vi", "v_i")
        or ("rate" in tokens and kind in (None, "concentration_rate", "amount_rate"))
        or kind in ("concentration_rate", "amount_rate")
    ):
        return "velocity"
    if (
        "concentration" in tokens
        or "conc" in tokens
        or (tokens and tokens[0].startswith("[") and tokens[0] != "[s]")
        or (_symbol_in(tokens, "c", "c0", "ca", "c_a", "ct", "c_t") and kind != "length")
        or kind in ("concentration", "mass_concentration")
    ):
        return "concentration"
    if "strain" in tokens or _symbol_in(tokens, "ε", "epsilon"):
        return "strain"
    if "force" in tokens or "load" in tokens or kind == "force":
        return "force"
    if {"extension", "elongation", "displacement", "deflection"} & set(tokens):
        return "extension"
    if "absorbance" in tokens or _symbol_in(tokens, "abs", "od"):
        return "absorbance"
    if "coordinate" in tokens or "path" in tokens:
        return "reaction_coordinate"
    if "energy" in tokens or kind in ("energy", "molar_energy") or _symbol_in(tokens, "e", "δe"):
        return "energy"
    if kind is None and tokens and tokens[0] in _INDEX_WORDS:
        return "index"
    if kind == "pressure":
        return "pressure"
    if kind == "length":
        return "length"
    return None


def column_roles(table: Table) -> dict[str, int]:
    """Role → index of the first column that plays it (see :func:`column_role`).

    ``temperature_celsius`` is added, for the first temperature-like column in °C.
    """
    roles: dict[str, int] = {}
    for index, header in enumerate(table.columns):
        role = column_role(header)
        if role is not None:
            roles.setdefault(role, index)
            if role.endswith("temperature") and is_celsius(header):
                roles.setdefault("temperature_celsius", index)
    return roles


def analysis_code(table: Table, question: str = "") -> tuple[str, str] | None:
    """(purpose, Python code) of the analysis the table calls for, else None.

    A thin wrapper over :func:`rar.science.analyses.choose_analysis`, kept for callers that
    want only the code.
    """
    from rar.science.analyses import choose_analysis  # analyses imports this module

    analysis = choose_analysis(table, question)
    return None if analysis is None else (analysis.purpose, analysis.code)
