"""SVG figures of the fits the Executor computes: pure Python, deterministic, escaped.

When a computation fits a data table (any analysis of :mod:`rar.science.analyses`), the
Executor records a plot of the fit as a run artifact::

    record_fit_figure(run, result, index)   # artifacts/figures/kissinger-fit-1.svg, or nothing

The figure is built on the host from what the sandbox already returned, never by running code:
no matplotlib, no randomness, no clock. A cell that left a ``report`` with a ``plot`` is drawn
from it: the points ``x``, ``y`` and either the straight line ``slope``/``intercept`` (in the
plotted units) or a ``curve`` of ``[x, y]`` points (a non-linear fit such as Michaelis–Menten),
with the headline result (``results[0]``, ± its standard error) and R² as the note. Older cells
are drawn from their variables: ``beta`` and ``Tp`` (Kissinger), ``T`` and ``k`` (Arrhenius), or
``x`` and ``y`` with an optional ``slope`` and ``intercept``. The artifact is named after the
plot's kind, ``figures/<kind>-fit-<n>.svg``; a kind that is not a short lower-case word is
drawn as ``linear``, so the name never depends on odd text from the cell.

The same variables give the same bytes, so a replayed run records the same artifact. What the
cell returned is checked before use (finite numbers, matching lengths, at most 1,000 points,
texts cut at 200 characters). Every text in the SVG is XML-escaped, and the SVG uses
presentation attributes only (no ``style``, no script), so it displays under a strict CSP.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from rar.science.analyses import shown

if TYPE_CHECKING:
    from rar.runtime.run import Run

R_J_PER_MOL_K = 8.314462618
SVG_MEDIA_TYPE = "image/svg+xml"

WIDTH, HEIGHT = 640, 420
LEFT, RIGHT, TOP, BOTTOM = 78, 24, 48, 62  # plot margins
_ATTR_ENTITIES = {'"': "&quot;", "'": "&apos;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_POINTS, MAX_TEXT = 1000, 200
# how a result's name is written in a figure's note
_SYMBOLS = {"dH_act": "ΔH‡", "dS_act": "ΔS‡", "dG_act": "ΔG‡", "t_half": "t½", "C0": "C₀"}


@dataclass(frozen=True, slots=True)
class FitFigure:
    """A fit to plot: the points, the line ``y = slope·x + intercept`` or a curve, labels."""

    kind: (
        str  # kissinger | arrhenius | eyring | michaelis_menten | linear | ...: names the artifact
    )
    title: str
    x_label: str
    y_label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    slope: float  # in the plotted units (unused when there is a curve)
    intercept: float
    note: str = ""
    curve: tuple[tuple[float, float], ...] = ()  # a fitted curve, drawn instead of the line


# --- from a computation's result to a figure ---------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _numbers(value: Any) -> tuple[float, ...] | None:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return None
    numbers = tuple(_number(v) for v in value)
    if not 2 <= len(numbers) <= MAX_POINTS or any(n is None for n in numbers):
        return None
    return tuple(n for n in numbers if n is not None)


def _label(value: Any, default: str = "") -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else default


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("all x values are equal: no line to fit")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, mean_y - slope * mean_x


def _line(
    variables: Mapping[str, Any], xs: Sequence[float], ys: Sequence[float]
) -> tuple[float, float]:
    """The computed fit (slope, intercept per unit of 1/T) when the cell has one, else ours."""
    slope, intercept = _number(variables.get("slope")), _number(variables.get("intercept"))
    if slope is not None and intercept is not None:
        return slope, intercept
    return least_squares(xs, ys)


def _r_squared(variables: Mapping[str, Any]) -> str:
    r2 = _number(variables.get("r_squared"))
    return f", R² = {r2:.6f}" if r2 is not None else ""


def figure_from_variables(variables: Mapping[str, Any]) -> FitFigure | None:
    """The fit the cell's variables describe (Kissinger, Arrhenius or a plain x/y line)."""
    beta, peak = _numbers(variables.get("beta")), _numbers(variables.get("Tp"))
    temperature, constant = _numbers(variables.get("T")), _numbers(variables.get("k"))
    if beta and peak and len(beta) == len(peak) and all(b > 0 for b in beta) and min(peak) > 0:
        inverse = [1.0 / t for t in peak]
        ys = [math.log(b / t**2) for b, t in zip(beta, peak, strict=True)]
        kind, title = "kissinger", "Kissinger plot"
        x_label, y_label = "1000/Tp (1/K)", "ln(β/Tp²)"
    elif (
        temperature
        and constant
        and len(temperature) == len(constant)
        and min(temperature) > 0
        and min(constant) > 0
    ):
        inverse = [1.0 / t for t in temperature]
        ys = [math.log(k) for k in constant]
        kind, title = "arrhenius", "Arrhenius plot"
        x_label, y_label = "1000/T (1/K)", "ln k"
    else:
        xs, ys_plain = _numbers(variables.get("x")), _numbers(variables.get("y"))
        if not xs or not ys_plain or len(xs) != len(ys_plain):
            return None
        slope, intercept = _line(variables, xs, ys_plain)
        return FitFigure(
            "linear",
            "Linear fit",
            "x",
            "y",
            xs,
            ys_plain,
            slope,
            intercept,
            f"y = {slope:.6g}·x + {intercept:.6g}{_r_squared(variables)}",
        )
    slope, intercept = _line(variables, inverse, ys)
    ea = _number(variables.get("Ea_kJ_per_mol"))
    if ea is None:
        ea = -slope * R_J_PER_MOL_K / 1000
    return FitFigure(
        kind,
        title,
        x_label,
        y_label,
        tuple(1000.0 * x for x in inverse),
        tuple(ys),
        slope / 1000.0,  # per unit of 1000/T
        intercept,
        f"Ea = {ea:.1f} kJ/mol{_r_squared(variables)}",
    )


def _headline(report: Mapping[str, Any]) -> str:
    """``Ea = 125.1 ± 1.3 kJ/mol, R² = 0.9999`` from the report's first result and its R²."""
    parts = []
    results = report.get("results")
    first = results[0] if isinstance(results, Sequence) and results else None
    if isinstance(first, Mapping) and isinstance(first.get("name"), str):
        value, stderr = _number(first.get("value")), _number(first.get("stderr"))
        if value is not None:
            name = _SYMBOLS.get(first["name"], first["name"])
            unit = _label(first.get("unit"))
            parts.append(f"{name} = {shown(value, stderr)} {unit}".rstrip())
    r2 = _number(report.get("r_squared"))
    if r2 is not None:
        parts.append(f"R² = {r2:.4f}" if r2 < 0.99995 else f"R² = {r2:.6f}")
    return _label(", ".join(parts))


def figure_from_report(report: Mapping[str, Any]) -> FitFigure | None:
    """The fit a cell's ``report["plot"]`` describes: a line, or a curve; None when unusable."""
    plot = report.get("plot")
    if not isinstance(plot, Mapping):
        return None
    xs, ys = _numbers(plot.get("x")), _numbers(plot.get("y"))
    if not xs or not ys or len(xs) != len(ys):
        return None
    kind = plot.get("kind")
    kind = kind if isinstance(kind, str) and _KIND.fullmatch(kind) else "linear"
    labels = (
        _label(plot.get("title"), "Fit"),
        _label(plot.get("x_label"), "x"),
        _label(plot.get("y_label"), "y"),
    )
    raw_curve = plot.get("curve")
    if raw_curve is not None:
        if not isinstance(raw_curve, Sequence) or not 2 <= len(raw_curve) <= MAX_POINTS:
            return None
        pairs = [_numbers(point) for point in raw_curve]
        if any(pair is None or len(pair) != 2 for pair in pairs):
            return None
        curve = tuple((pair[0], pair[1]) for pair in pairs if pair is not None)
        return FitFigure(kind, *labels, xs, ys, 0.0, 0.0, _headline(report), curve)
    slope, intercept = _number(plot.get("slope")), _number(plot.get("intercept"))
    if slope is None or intercept is None:
        slope, intercept = least_squares(xs, ys)
    return FitFigure(kind, *labels, xs, ys, slope, intercept, _headline(report))


def fit_figure(result: Mapping[str, Any]) -> FitFigure | None:
    """The figure for a successful computation that fitted a line, else None (never raises)."""
    try:
        variables = result.get("variables")
        if result.get("status") != "ok" or not isinstance(variables, Mapping):
            return None
        report = variables.get("report")
        figure = figure_from_report(report) if isinstance(report, Mapping) else None
        if figure is None:
            figure = figure_from_variables(variables)
    except (ArithmeticError, ValueError, TypeError):
        return None
    if figure is None or min(figure.xs) == max(figure.xs):
        return None
    return figure


# --- SVG -----------------------------------------------------------------------------------------


def _text(value: str) -> str:
    return escape(value)


def _attr(value: str) -> str:
    return escape(value, _ATTR_ENTITIES)


def _fmt(value: float) -> str:
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 × 10ⁿ apart) covering [low, high]."""
    if high < low:
        low, high = high, low
    if high == low:
        high, low = high + 0.5, low - 0.5
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value = first + step * len(ticks)
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _decimals(ticks: Sequence[float]) -> int:
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    return max(0, -math.floor(math.log10(step))) if step > 0 else 0


def render_svg(figure: FitFigure) -> str:
    """The figure as a standalone SVG document (text escaped, deterministic)."""
    curve_xs = [x for x, _ in figure.curve]
    x_ticks = nice_ticks(min(*figure.xs, *curve_xs), max(*figure.xs, *curve_xs))
    if figure.curve:
        fitted = [y for _, y in figure.curve]
    else:
        fitted = [figure.slope * x + figure.intercept for x in (x_ticks[0], x_ticks[-1])]
    y_ticks = nice_ticks(min(*figure.ys, *fitted), max(*figure.ys, *fitted))
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    x_dec, y_dec = _decimals(x_ticks), _decimals(y_ticks)
    label = f"{figure.title}: {figure.y_label} against {figure.x_label}"
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{_attr(label)}" '
        f'font-family="sans-serif" font-size="12">',
        f"<title>{_text(label)}</title>",
        f"<desc>{_text(figure.note)}</desc>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{WIDTH / 2:.2f}" y="22" text-anchor="middle" font-size="15" '
        f'font-weight="bold" fill="#1d2330">{_text(figure.title)}</text>',
        f'<text x="{WIDTH / 2:.2f}" y="39" text-anchor="middle" fill="#444444">'
        f"{_text(figure.note)}</text>",
        '<g class="grid" stroke="#e3e6eb" stroke-width="1">',
    ]
    for x in x_ticks:
        out.append(f'<line x1="{_fmt(px(x))}" y1="{TOP}" x2="{_fmt(px(x))}" y2="{TOP + plot_h}"/>')
    for y in y_ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{_fmt(py(y))}" x2="{LEFT + plot_w}" y2="{_fmt(py(y))}"/>'
        )
    out.append("</g>")
    out.append(
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#1d2330" stroke-width="1"/>'
    )
    out.append('<g class="ticks" fill="#1d2330">')
    for x in x_ticks:
        out.append(
            f'<text x="{_fmt(px(x))}" y="{TOP + plot_h + 17}" text-anchor="middle">'
            f"{x:.{x_dec}f}</text>"
        )
    for y in y_ticks:
        out.append(
            f'<text x="{LEFT - 6}" y="{_fmt(py(y) + 4)}" text-anchor="end">{y:.{y_dec}f}</text>'
        )
    out.append("</g>")
    out.append(
        f'<text class="x-label" x="{_fmt(LEFT + plot_w / 2)}" y="{HEIGHT - 18}" '
        f'text-anchor="middle" fill="#1d2330">{_text(figure.x_label)}</text>'
    )
    out.append(
        f'<text class="y-label" x="18" y="{_fmt(TOP + plot_h / 2)}" '
        f'text-anchor="middle" fill="#1d2330" '
        f'transform="rotate(-90 18 {_fmt(TOP + plot_h / 2)})">'
        f"{_text(figure.y_label)}</text>"
    )
    if figure.curve:
        points = " ".join(f"{_fmt(px(x))},{_fmt(py(y))}" for x, y in figure.curve)
        out.append(
            f'<polyline class="fit" points="{points}" fill="none" stroke="#cf222e" '
            'stroke-width="2"/>'
        )
        rising = figure.curve[-1][1] > figure.curve[0][1]
    else:
        out.append(
            f'<line class="fit" x1="{_fmt(px(x0))}" y1="{_fmt(py(fitted[0]))}" '
            f'x2="{_fmt(px(x1))}" y2="{_fmt(py(fitted[1]))}" stroke="#cf222e" stroke-width="2"/>'
        )
        rising = figure.slope > 0
    out.append('<g class="points" fill="#0969da" stroke="#ffffff" stroke-width="1">')
    for x, y in zip(figure.xs, figure.ys, strict=True):
        out.append(
            f'<circle cx="{_fmt(px(x))}" cy="{_fmt(py(y))}" r="4.5" '
            f'data-x="{x:.6g}" data-y="{y:.6g}"/>'
        )
    out.append("</g>")
    # the legend goes in the top corner the line (or curve) leaves free
    legend_x = LEFT + plot_w - 150 if not rising else LEFT + 16
    legend_y = TOP + 14
    fit_name = "fitted curve" if figure.curve else "least-squares fit"
    out += [
        f'<g class="legend" transform="translate({legend_x} {legend_y})">',
        '<rect x="-8" y="-12" width="150" height="40" fill="#ffffff" stroke="#e3e6eb"/>',
        '<circle cx="4" cy="0" r="4.5" fill="#0969da"/>',
        '<text x="16" y="4" fill="#1d2330">data</text>',
        '<line x1="-4" y1="18" x2="12" y2="18" stroke="#cf222e" stroke-width="2"/>',
        f'<text x="16" y="22" fill="#1d2330">{fit_name}</text>',
        "</g>",
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def record_fit_figure(run: Run, result: Mapping[str, Any], index: int) -> str | None:
    """Record ``figures/<kind>-fit-<index>.svg`` when the computation fitted a line.

    Returns the artifact's name, or None when there is nothing to plot. Building the figure
    never raises; recording it fails only as any other event of the run would.
    """
    figure = fit_figure(result)
    if figure is None:
        return None
    try:
        svg = render_svg(figure).encode("utf-8")
    except (ArithmeticError, ValueError):
        return None
    name = f"figures/{figure.kind}-fit-{index}.svg"
    run.artifact(name, svg, media_type=SVG_MEDIA_TYPE, agent="executor")
    return name
