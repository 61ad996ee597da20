"""Small numeric tables found in passages, and the analysis code they call for.

The rule-based planner computes what a question asks from data tables in the evidence: rate
constants at several temperatures (an Arrhenius fit) or DSC peak temperatures at several heating
rates (a Kissinger fit). The code it writes runs in the sandbox, never here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_R = "8.314462618"


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]


def parse_tables(text: str) -> list[Table]:
    """Markdown pipe tables whose data cells are all numbers."""
    tables: list[Table] = []
    lines = [line.strip() for line in text.splitlines()]
    i = 0
    while i < len(lines) - 2:
        header, rule = lines[i], lines[i + 1]
        if (
            header.startswith("|")
            and set(rule.replace("|", "").strip()) <= set("-: ")
            and "-" in rule
        ):
            columns = tuple(cell.strip() for cell in header.strip("|").split("|"))
            rows: list[tuple[float, ...]] = []
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                cells = [cell.strip() for cell in lines[j].strip("|").split("|")]
                if len(cells) != len(columns) or not all(_NUMBER.match(c) for c in cells):
                    break
                rows.append(tuple(float(c) for c in cells))
                j += 1
            if len(rows) >= 2:
                tables.append(Table(columns, tuple(rows)))
            i = j
        else:
            i += 1
    return tables


def _column(table: Table, *needles: str) -> int | None:
    for index, name in enumerate(table.columns):
        lowered = name.lower()
        if any(needle in lowered for needle in needles):
            return index
    return None


def _values(table: Table, index: int) -> str:
    return "[" + ", ".join(repr(row[index]) for row in table.rows) + "]"


def _kelvin(table: Table, index: int) -> str:
    name = table.columns[index].lower()
    offset = " + 273.15" if ("°c" in name or "(c)" in name or "celsius" in name) else ""
    return f"np.array({_values(table, index)}){offset}"


def analysis_code(table: Table) -> tuple[str, str] | None:
    """(purpose, Python code) for a table the planner knows how to analyse, else None."""
    rate = _column(table, "heating rate", "β", "beta", "k/min")
    peak = _column(table, "peak", "tp", "t_p")
    temperature = _column(table, "temperature", "t (k)", "t/k", "t (°c)", "t [k]")
    constant = _column(table, "rate constant", "k (", "k/", "k [", "s⁻¹", "s^-1", "1/s")
    if rate is not None and peak is not None and rate != peak:
        purpose = "Kissinger fit: ln(beta/Tp^2) against 1/Tp gives -Ea/R"
        code = (
            "import numpy as np\n"
            f"R = {_R}  # J/(mol K)\n"
            f"beta = np.array({_values(table, rate)})  # K/min\n"
            f"Tp = {_kelvin(table, peak)}  # K\n"
            "x, y = 1.0 / Tp, np.log(beta / Tp**2)\n"
            "slope, intercept = np.polyfit(x, y, 1)\n"
            "fit = slope * x + intercept\n"
            "r_squared = float(1 - ((y - fit) ** 2).sum() / ((y - y.mean()) ** 2).sum())\n"
            "Ea_kJ_per_mol = float(-slope * R / 1000)\n"
            "print(f'Ea = {Ea_kJ_per_mol:.1f} kJ/mol (R^2 = {r_squared:.4f})')\n"
        )
        return purpose, code
    if temperature is not None and constant is not None and temperature != constant:
        purpose = "Arrhenius fit: ln k against 1/T gives -Ea/R"
        code = (
            "import numpy as np\n"
            f"R = {_R}  # J/(mol K)\n"
            f"T = {_kelvin(table, temperature)}  # K\n"
            f"k = np.array({_values(table, constant)})\n"
            "x, y = 1.0 / T, np.log(k)\n"
            "slope, intercept = np.polyfit(x, y, 1)\n"
            "fit = slope * x + intercept\n"
            "r_squared = float(1 - ((y - fit) ** 2).sum() / ((y - y.mean()) ** 2).sum())\n"
            "Ea_kJ_per_mol = float(-slope * R / 1000)\n"
            "A_per_s = float(np.exp(intercept))\n"
            "print(f'Ea = {Ea_kJ_per_mol:.1f} kJ/mol (R^2 = {r_squared:.4f})')\n"
        )
        return purpose, code
    return None
