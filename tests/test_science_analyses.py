"""Standard analyses of data tables: chosen by columns and question, computed in the sandbox.

Each analysis runs its generated code in the real sandbox on synthetic data with known parameters
and a little deterministic noise; the values, standard errors and R² it reports are compared with
an independent computation done here with scipy, never with numbers copied from the code.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import optimize, stats

from rar.evidence import Corpus, demo_corpus_path
from rar.science.analyses import (
    Analysis,
    analyses_for,
    choose_analysis,
    column_roles,
    shown,
    slope_unit,
    unit_suffix,
)
from rar.science.figures import fit_figure, render_svg
from rar.science.tables import Table, analysis_code, parse_number, parse_tables

R = 8.314462618
KB, H = 1.380649e-23, 6.62607015e-34
# a few percent of scatter, the same every run
NOISE = (0.012, -0.009, 0.014, -0.011, 0.004, -0.013, 0.008, -0.002)
REPORT_KEYS = {"analysis", "method", "fit", "n", "r_squared", "data_range", "results", "plot"}
needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from rar.sandbox import Sandbox

    with Sandbox(tmp_path_factory.mktemp("analyses"), seed=0) as sandbox:
        yield sandbox


def run(box: Any, analysis: Analysis) -> dict[str, Any]:
    """The variables the analysis's code leaves in the sandbox (it must succeed, write nothing)."""
    result = box.run_cell(analysis.code, timeout=60)
    assert result.status == "ok", (result.error, result.stderr)
    assert not result.artifacts, result.artifacts
    variables: dict[str, Any] = result.variables
    variables["_stdout"] = result.stdout
    return variables


def table(columns: tuple[str, ...], *columns_values: Any, caption: str = "") -> Table:
    rows = tuple(tuple(float(v) for v in row) for row in zip(*columns_values, strict=True))
    return Table(columns, rows, caption)


def noisy(values: Any, scale: float = 1.0) -> np.ndarray:
    return np.asarray(values, dtype=float) * np.exp(scale * np.array(NOISE[: len(values)]))


def result(report: dict[str, Any], name: str, unit: str | None = None) -> dict[str, Any]:
    found = [r for r in report["results"] if r["name"] == name and unit in (None, r["unit"])]
    assert found, (name, report["results"])
    return found[0]


def linear(x: Any, y: Any) -> tuple[Any, np.ndarray]:
    """scipy's regression and numpy's covariance matrix of (slope, intercept)."""
    _, cov = np.polyfit(np.asarray(x), np.asarray(y), 1, cov=True)
    return stats.linregress(x, y), cov


def assert_report_shape(report: dict[str, Any]) -> None:
    assert set(report) == REPORT_KEYS
    assert set(report["data_range"]) == {"column", "min", "max", "unit"}
    for entry in report["results"]:
        assert set(entry) == {"name", "label", "value", "stderr", "unit"}
    plot = report["plot"]
    assert {"kind", "title", "x_label", "y_label", "x", "y"} <= set(plot)
    assert ({"slope", "intercept"} <= set(plot)) != ("curve" in plot)
    json.dumps(report)


# --- each analysis against an independent computation ------------------------------------------

T_K = np.array([290.0, 300.0, 310.0, 320.0, 330.0, 340.0, 350.0])


@needs_sandbox
def test_arrhenius_matches_an_independent_regression(box: Any) -> None:
    k = noisy(1.0e12 * np.exp(-85e3 / (R * T_K)), 0.5)
    analysis = choose_analysis(table(("T (K)", "k (s⁻¹)"), T_K, k), "activation energy?")
    assert analysis is not None and analysis.kind == "arrhenius"
    assert analysis.quantities[0] == "Ea"
    v = run(box, analysis)
    fit, _ = linear(1 / T_K, np.log(k))
    report = v["report"]
    assert_report_shape(report)
    ea = result(report, "Ea")
    assert ea["unit"] == "kJ/mol"
    assert ea["value"] == pytest.approx(-R * fit.slope / 1000, rel=1e-9)
    assert ea["stderr"] == pytest.approx(R * fit.stderr / 1000, rel=1e-9)
    assert report["r_squared"] == pytest.approx(fit.rvalue**2, rel=1e-12)
    assert ea["value"] == pytest.approx(85.0, abs=2.0)  # and it is near the truth
    prefactor = result(report, "A")
    assert prefactor["value"] == pytest.approx(math.exp(fit.intercept), rel=1e-9)
    assert prefactor["stderr"] == pytest.approx(math.exp(fit.intercept) * fit.intercept_stderr)
    # the flat variables the unit checker reads, and the old names
    assert v["Ea_kJ_per_mol"] == ea["value"] and v["Ea_stderr_kJ_per_mol"] == ea["stderr"]
    assert v["A_per_s"] == prefactor["value"]
    assert v["slope"] == pytest.approx(fit.slope) and v["intercept"] == pytest.approx(fit.intercept)
    assert v["T"] == pytest.approx(list(T_K)) and v["k"] == pytest.approx(list(k))
    assert v["x"] == pytest.approx(list(1 / T_K)) and v["n"] == 7
    assert report["data_range"] == {"column": "T (K)", "min": 290, "max": 350, "unit": "K"}
    plot = report["plot"]
    assert plot["x"] == pytest.approx(list(1000 / T_K)) and plot["slope"] == pytest.approx(
        fit.slope / 1000
    )


@needs_sandbox
def test_celsius_temperatures_are_converted_to_kelvin(box: Any) -> None:
    k = noisy(1.0e12 * np.exp(-85e3 / (R * T_K)), 0.5)
    kelvin = run(box, analyses_for(table(("T (K)", "k (s⁻¹)"), T_K, k))[0])
    celsius_table = table(("Temperature (°C)", "k (s⁻¹)"), T_K - 273.15, k)
    assert column_roles(celsius_table) == {
        "temperature": 0,
        "temperature_celsius": 0,
        "rate_constant": 1,
    }
    celsius = run(box, analyses_for(celsius_table)[0])
    assert celsius["Ea_kJ_per_mol"] == pytest.approx(kelvin["Ea_kJ_per_mol"], rel=1e-9)
    assert celsius["T"] == pytest.approx(list(T_K))
    assert celsius["report"]["data_range"]["unit"] == "°C"
    assert celsius["report"]["data_range"]["min"] == pytest.approx(290 - 273.15)
    also = table(("T (C)", "k (s⁻¹)"), T_K - 273.15, k)
    assert "+ 273.15" in analyses_for(also)[0].code


@needs_sandbox
def test_eyring_gives_enthalpy_entropy_and_gibbs_energy_of_activation(box: Any) -> None:
    dh, ds = 70e3, -40.0
    k = noisy(KB * T_K / H * math.exp(ds / R) * np.exp(-dh / (R * T_K)), 0.5)
    found = analyses_for(table(("T (K)", "k (s⁻¹)"), T_K, k), "enthalpy of activation")
    analysis = found[0]
    assert analysis.kind == "eyring" and analysis.method == "Eyring plot"
    assert analysis.quantities == ("dH_act", "dS_act", "dG_act")
    v = run(box, analysis)
    report = v["report"]
    assert_report_shape(report)
    fit, cov = linear(1 / T_K, np.log(k / T_K))
    ln_kb_h = math.log(KB / H)
    assert v["dH_act_kJ_per_mol"] == pytest.approx(-R * fit.slope / 1000, rel=1e-9)
    assert v["dH_act_stderr_kJ_per_mol"] == pytest.approx(R * fit.stderr / 1000, rel=1e-9)
    assert v["dS_act_J_per_mol_per_K"] == pytest.approx(R * (fit.intercept - ln_kb_h), rel=1e-9)
    assert v["dS_act_stderr_J_per_mol_per_K"] == pytest.approx(R * fit.intercept_stderr, rel=1e-9)
    # ΔG‡ = ΔH‡ − TΔS‡ at 298.15 K, its error from the full covariance of slope and intercept
    grad = np.array([-R, -298.15 * R]) / 1000
    dg = -R * (fit.slope + 298.15 * (fit.intercept - ln_kb_h)) / 1000
    assert v["dG_act_kJ_per_mol"] == pytest.approx(dg, rel=1e-9)
    assert v["dG_act_stderr_kJ_per_mol"] == pytest.approx(math.sqrt(grad @ cov @ grad), rel=1e-6)
    assert report["r_squared"] == pytest.approx(fit.rvalue**2)
    assert v["dH_act_kJ_per_mol"] == pytest.approx(70.0, abs=2.0)
    assert v["dS_act_J_per_mol_per_K"] == pytest.approx(-40.0, abs=6.0)
    assert report["plot"]["kind"] == "eyring" and report["plot"]["y_label"] == "ln(k/T)"


@needs_sandbox
def test_eyring_puts_rate_constants_in_per_second(box: Any) -> None:
    k = noisy(KB * T_K / H * math.exp(-40 / R) * np.exp(-70e3 / (R * T_K)), 0.5)
    seconds = run(box, analyses_for(table(("T (K)", "k (s⁻¹)"), T_K, k), "Eyring")[0])
    minutes = run(box, analyses_for(table(("T (K)", "k (min⁻¹)"), T_K, 60 * k), "Eyring")[0])
    for name in ("dH_act_kJ_per_mol", "dS_act_J_per_mol_per_K", "dG_act_kJ_per_mol"):
        assert minutes[name] == pytest.approx(seconds[name], rel=1e-9)


def kissinger_peaks(beta: list[float], ea: float, a_per_s: float) -> np.ndarray:
    """Peak temperatures that satisfy the Kissinger equation exactly (β in K/min)."""
    a = a_per_s * 60  # per minute, as β

    def residual(tp: float, b: float) -> float:
        return math.log(b / tp**2) - math.log(a * R / ea) + ea / (R * tp)

    return np.array([optimize.brentq(residual, 250.0, 900.0, args=(b,)) for b in beta])


@needs_sandbox
def test_kissinger_matches_an_independent_regression(box: Any) -> None:
    beta = [1.0, 2.0, 5.0, 10.0, 20.0]
    tp = kissinger_peaks(beta, 110e3, 5e12) + np.array(NOISE[:5]) * 10  # ±0.1 K
    data = table(("Heating rate β (K/min)", "Peak temperature Tp (K)"), beta, tp)
    analysis = choose_analysis(data)
    assert analysis is not None and analysis.kind == "kissinger"
    assert analysis.method == "Kissinger method"
    v = run(box, analysis)
    report = v["report"]
    assert_report_shape(report)
    fit, cov = linear(1 / tp, np.log(np.array(beta) / tp**2))
    assert v["Ea_kJ_per_mol"] == pytest.approx(-R * fit.slope / 1000, rel=1e-9)
    assert v["Ea_stderr_kJ_per_mol"] == pytest.approx(R * fit.stderr / 1000, rel=1e-9)
    assert report["r_squared"] == pytest.approx(fit.rvalue**2)
    assert v["Ea_kJ_per_mol"] == pytest.approx(110.0, abs=3.0)
    # A = (Ea/R)·exp(intercept), per minute as β, reported per second
    a = -fit.slope * math.exp(fit.intercept) / 60
    grad = np.array([1 / fit.slope, 1.0])  # of ln A with respect to (slope, intercept)
    assert v["A_per_s"] == pytest.approx(a, rel=1e-9)
    assert v["A_stderr_per_s"] == pytest.approx(a * math.sqrt(grad @ cov @ grad), rel=1e-6)
    assert v["beta"] == beta and v["Tp"] == pytest.approx(list(tp))
    assert report["data_range"]["column"] == "Peak temperature Tp (K)"
    assert report["plot"]["x_label"] == "1000/Tp (1/K)"


@needs_sandbox
def test_ozawa_flynn_wall_agrees_with_doyles_log10_form(box: Any) -> None:
    beta = np.array([2.0, 5.0, 10.0, 20.0, 40.0])
    ea = 140e3
    # Doyle: log10 β = const − 0.4567·Ea/(RT); temperatures at α = 0.5 with a little noise
    temperature = 0.4567 * ea / (R * (8.0 - np.log10(beta))) + np.array(NOISE[:5]) * 20
    data = table(("β (K/min)", "T at α = 0.5 (K)"), beta, temperature)
    analysis = choose_analysis(data)
    assert analysis is not None and analysis.kind == "ozawa_flynn_wall"
    assert analysis.method == "Ozawa–Flynn–Wall method"
    v = run(box, analysis)
    assert_report_shape(v["report"])
    fit, _ = linear(1 / temperature, np.log10(beta))  # the log10 form, as Ozawa wrote it
    assert v["Ea_kJ_per_mol"] == pytest.approx(-R * fit.slope / 0.4567 / 1000, rel=1e-9)
    assert v["Ea_stderr_kJ_per_mol"] == pytest.approx(R * fit.stderr / 0.4567 / 1000, rel=1e-9)
    assert v["report"]["r_squared"] == pytest.approx(fit.rvalue**2)
    assert v["Ea_kJ_per_mol"] == pytest.approx(140.0, abs=3.0)


@needs_sandbox
def test_friedman_matches_an_independent_regression(box: Any) -> None:
    temperature = np.array([480.0, 492.0, 503.0, 515.0])
    rate = noisy(1e13 * 0.5 * np.exp(-150e3 / (R * temperature)), 0.5)
    data = table(
        ("β (K/min)", "T at α = 0.5 (K)", "dα/dt at α = 0.5 (s⁻¹)"),
        [2, 5, 10, 20],
        temperature,
        rate,
    )
    assert [a.kind for a in analyses_for(data)] == ["friedman", "ozawa_flynn_wall"]
    v = run(box, analyses_for(data)[0])
    assert_report_shape(v["report"])
    fit, _ = linear(1 / temperature, np.log(rate))
    assert v["Ea_kJ_per_mol"] == pytest.approx(-R * fit.slope / 1000, rel=1e-9)
    assert v["Ea_stderr_kJ_per_mol"] == pytest.approx(R * fit.stderr / 1000, rel=1e-9)
    assert v["report"]["r_squared"] == pytest.approx(fit.rvalue**2)
    assert result(v["report"], "Af")["value"] == pytest.approx(math.exp(fit.intercept))


@needs_sandbox
def test_first_order_decay_gives_rate_constant_and_half_life(box: Any) -> None:
    t = np.array([0.0, 100.0, 200.0, 300.0, 450.0, 600.0, 800.0])
    conc = noisy(0.80 * np.exp(-2.5e-3 * t), 0.5)
    data = table(("t (s)", "[N₂O₅] (M)"), t, conc)
    analysis = choose_analysis(data, "What is the half-life?")
    assert analysis is not None and analysis.kind == "first_order"
    assert analysis.quantities[:2] == ("k", "t_half")
    v = run(box, analysis)
    report = v["report"]
    assert_report_shape(report)
    fit, _ = linear(t, np.log(conc))
    k, se = -fit.slope, fit.stderr
    assert v["k_per_s"] == pytest.approx(k, rel=1e-9) and v["k_stderr_per_s"] == pytest.approx(se)
    assert v["t_half_s"] == pytest.approx(math.log(2) / k, rel=1e-9)
    assert v["t_half_stderr_s"] == pytest.approx(math.log(2) * se / k**2, rel=1e-9)
    assert report["r_squared"] == pytest.approx(fit.rvalue**2)
    assert v["k_per_s"] == pytest.approx(2.5e-3, rel=0.05)
    assert result(report, "t_half")["unit"] == "s" and result(report, "k")["unit"] == "1/s"
    minutes = run(box, analyses_for(table(("time (min)", "C (mM)"), t / 60, conc * 1000))[0])
    assert minutes["t_half_min"] == pytest.approx(v["t_half_s"] / 60, rel=1e-9)


@needs_sandbox
def test_michaelis_menten_is_a_non_linear_fit_with_a_curve(box: Any) -> None:
    s = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    rate = noisy(12.5 * s / (3.2 + s))
    data = table(("[S] (mM)", "v₀ (µM/s)"), s, rate)
    analysis = choose_analysis(data, "What are Km and Vmax?")
    assert analysis is not None and analysis.kind == "michaelis_menten"
    assert analysis.method == "Michaelis–Menten fit (non-linear least squares)"
    v = run(box, analysis)
    report = v["report"]
    assert_report_shape(report)

    def mm(x: Any, vmax: float, km: float) -> Any:
        return vmax * x / (km + x)

    popt, pcov = optimize.curve_fit(mm, s, rate, p0=(1.0, 1.0))  # another start, same optimum
    se = np.sqrt(np.diag(pcov))
    assert v["Km_mM"] == pytest.approx(popt[1], rel=1e-5)
    assert v["Vmax_uM_per_s"] == pytest.approx(popt[0], rel=1e-5)
    assert v["Km_stderr_mM"] == pytest.approx(se[1], rel=1e-4)
    assert v["Vmax_stderr_uM_per_s"] == pytest.approx(se[0], rel=1e-4)
    residuals = rate - mm(s, *popt)
    assert report["r_squared"] == pytest.approx(
        1 - (residuals**2).sum() / ((rate - rate.mean()) ** 2).sum(), rel=1e-8
    )
    curve = report["plot"]["curve"]
    assert len(curve) == 50 and curve[0] == [0.0, 0.0] and curve[-1][0] == 32.0
    assert curve[-1][1] == pytest.approx(mm(32.0, *popt), rel=1e-5)
    assert "slope" not in report["plot"]
    figure = fit_figure({"status": "ok", "variables": v})
    assert figure is not None and figure.kind == "michaelis_menten" and len(figure.curve) == 50
    assert "<polyline" in render_svg(figure)


@needs_sandbox
def test_lineweaver_burk_when_the_question_asks_for_it(box: Any) -> None:
    s = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    rate = noisy(12.5 * s / (3.2 + s))
    data = table(("Substrate concentration (mM)", "Initial rate v0 (uM/s)"), s, rate)
    assert [a.kind for a in analyses_for(data)] == ["michaelis_menten"]
    analysis = analyses_for(data, "Use a double-reciprocal (Lineweaver–Burk) plot")[0]
    assert analysis.kind == "lineweaver_burk"
    v = run(box, analysis)
    assert_report_shape(v["report"])
    fit, cov = linear(1 / s, 1 / rate)
    km, vmax = fit.slope / fit.intercept, 1 / fit.intercept
    grad = np.array([1 / fit.intercept, -fit.slope / fit.intercept**2])
    assert v["Km_mM"] == pytest.approx(km, rel=1e-9)
    assert v["Km_stderr_mM"] == pytest.approx(math.sqrt(grad @ cov @ grad), rel=1e-6)
    assert v["Vmax_uM_per_s"] == pytest.approx(vmax, rel=1e-9)
    assert v["Vmax_stderr_uM_per_s"] == pytest.approx(fit.intercept_stderr / fit.intercept**2)


@needs_sandbox
def test_a_linear_fit_names_its_result_and_picks_a_sensible_unit(box: Any) -> None:
    strain = np.array([0.02, 0.04, 0.06, 0.08, 0.10, 0.12])
    stress = 2000.0 * strain + np.array(NOISE[:6]) * 5  # MPa per percent: 200 GPa
    data = table(("Stress (MPa)", "Strain (%)"), stress, strain)
    analysis = choose_analysis(data, "What is the Young's modulus?", quantity="Young's modulus")
    assert analysis is not None and analysis.kind == "linear"
    assert analysis.quantities == ("Youngs_modulus", "intercept")
    v = run(box, analysis)
    report = v["report"]
    assert_report_shape(report)
    fit, _ = linear(strain, stress)  # x is the strain, whichever column comes first
    modulus = result(report, "Youngs_modulus")
    assert modulus["label"] == "Young's modulus" and modulus["unit"] == "GPa"
    # 1 MPa per percent of strain is 100 MPa per unit strain, 0.1 GPa
    assert modulus["value"] == pytest.approx(fit.slope * 0.1, rel=1e-9)
    assert modulus["stderr"] == pytest.approx(fit.stderr * 0.1, rel=1e-9)
    assert v["Youngs_modulus_GPa"] == modulus["value"]
    assert result(report, "intercept")["value"] == pytest.approx(fit.intercept)
    assert result(report, "intercept")["stderr"] == pytest.approx(fit.intercept_stderr)
    assert report["r_squared"] == pytest.approx(fit.rvalue**2)
    assert v["slope"] == pytest.approx(fit.slope)  # in the table's units, MPa/%
    assert report["data_range"] == {"column": "Strain (%)", "min": 0.02, "max": 0.12, "unit": "%"}


@needs_sandbox
def test_a_spring_constant_is_given_in_newton_per_metre(box: Any) -> None:
    extension = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    force = 4.9 * extension + np.array(NOISE[:5])
    data = table(("Force (N)", "Extension (mm)"), force, extension)
    analysis = choose_analysis(data, "What is the spring constant (slope)?")
    assert analysis is not None and analysis.kind == "linear"
    v = run(box, analysis)
    fit, _ = linear(extension, force)
    assert v["slope_N_per_m"] == pytest.approx(fit.slope * 1000, rel=1e-9)
    assert v["slope_stderr_N_per_m"] == pytest.approx(fit.stderr * 1000, rel=1e-9)


@needs_sandbox
def test_two_points_give_a_value_but_no_standard_error(box: Any) -> None:
    # the two-point example of the corpus: 2.0e-3 s⁻¹ at 300 K, 1.2e-2 s⁻¹ at 320 K
    data = table(("T (K)", "k (s⁻¹)"), [300, 320], [2.0e-3, 1.2e-2])
    v = run(box, analyses_for(data)[0])
    expected = R * math.log(6.0) / (1 / 300 - 1 / 320) / 1000
    assert v["Ea_kJ_per_mol"] == pytest.approx(expected, rel=1e-9)
    assert round(v["Ea_kJ_per_mol"], 1) == 71.5
    assert v["Ea_stderr_kJ_per_mol"] is None and v["slope_stderr"] is None
    assert result(v["report"], "Ea")["stderr"] is None


@needs_sandbox
def test_each_result_is_printed_on_one_line(box: Any) -> None:
    data = table(
        ("Heating rate β (K/min)", "Peak temperature Tp (K)"),
        [2, 5, 10, 20],
        [412.4, 422.5, 430.4, 438.6],
    )
    v = run(box, analyses_for(data)[0])
    lines = v["_stdout"].strip().splitlines()
    assert len(lines) == len(v["report"]["results"])
    assert re.fullmatch(
        r"Ea = 125\.\d+ ± 0\.\d+ kJ/mol \(R² = 0\.\d{4,6}, n = 4, Tp 412\.4–438\.6 K\)", lines[0]
    ), lines[0]


def test_the_code_is_deterministic_and_self_contained() -> None:
    data = table(("T (K)", "k (s⁻¹)"), T_K, noisy(1e12 * np.exp(-85e3 / (R * T_K))))
    for question in ("", "Eyring", "slope"):
        for one, two in zip(
            analyses_for(data, question), analyses_for(data, question), strict=True
        ):
            assert one == two
            for forbidden in ("random", "time.", "datetime", "open(", "savefig", "write"):
                assert forbidden not in one.code, (one.kind, forbidden)
            compile(one.code, one.kind, "exec")


# --- the demo corpus: every table, the analysis a chemist would pick, the values it states -----


def demo_tables() -> dict[str, Table]:
    corpus = Corpus.load(demo_corpus_path())
    return {p.doc_id: t for p in corpus.passages for t in parse_tables(p.text)}


DEMO = [
    # doc, question, the analysis a chemist picks
    (
        "worked-examples/kissinger-dsc",
        "What activation energy do the Kissinger data give?",
        "kissinger",
    ),
    (
        "ozawa-flynn-wall-method",
        "What activation energy does the OFW method give?",
        "ozawa_flynn_wall",
    ),
    ("ozawa-flynn-wall-method", "", "ozawa_flynn_wall"),
    ("friedman-method", "What activation energy does the Friedman analysis give?", "friedman"),
    ("friedman-method", "", "friedman"),
    ("friedman-method", "Apply the Ozawa–Flynn–Wall method to these data", "ozawa_flynn_wall"),
    ("worked-examples/first-order-decomposition", "What is the activation energy?", "arrhenius"),
    (
        "worked-examples/eyring-analysis",
        "What are the enthalpy and entropy of activation?",
        "eyring",
    ),
    ("worked-examples/eyring-analysis", "What is the Arrhenius activation energy?", "arrhenius"),
    ("enzyme-kinetics-temperature", "What activation energy does kcat give?", "arrhenius"),
    (
        "diffusion-and-ionic-conductivity",
        "What is the activation energy of conduction?",
        "arrhenius",
    ),
]


@pytest.mark.parametrize(("doc", "question", "kind"), DEMO)
def test_every_demo_table_gets_the_analysis_a_chemist_would_pick(
    doc: str, question: str, kind: str
) -> None:
    chosen = choose_analysis(demo_tables()[doc], question)
    assert chosen is not None and chosen.kind == kind


def test_the_demo_tables_are_all_recognised() -> None:
    tables = demo_tables()
    assert set(tables) == {
        "dft-nudged-elastic-band",
        "diffusion-and-ionic-conductivity",
        "enzyme-kinetics-temperature",
        "friedman-method",
        "ozawa-flynn-wall-method",
        "worked-examples/eyring-analysis",
        "worked-examples/first-order-decomposition",
        "worked-examples/kissinger-dsc",
    }
    assert tables["worked-examples/kissinger-dsc"].caption == (
        "Data: DSC peak temperatures at four heating rates (Kissinger data)"
    )
    roles = {doc: column_roles(t) for doc, t in tables.items()}
    assert roles["worked-examples/kissinger-dsc"] == {"heating_rate": 0, "peak_temperature": 1}
    assert roles["friedman-method"] == {
        "heating_rate": 0,
        "conversion_temperature": 1,
        "conversion_rate": 2,
    }
    assert roles["diffusion-and-ionic-conductivity"] == {"temperature": 0, "conductivity": 1}
    assert roles["enzyme-kinetics-temperature"] == {"temperature": 0, "rate_constant": 1}
    assert roles["dft-nudged-elastic-band"] == {
        "index": 0,
        "reaction_coordinate": 1,
        "energy": 2,
    }


@pytest.mark.parametrize("question", ["", "What is the barrier?", "What is the slope?"])
def test_an_energy_profile_is_never_fitted(question: str) -> None:
    # the barrier of a NEB profile is its maximum, read off; a line through it means nothing
    assert analyses_for(demo_tables()["dft-nudged-elastic-band"], question) == []


@needs_sandbox
@pytest.mark.parametrize(
    ("doc", "question", "name", "unit", "value", "tolerance"),
    [
        ("ozawa-flynn-wall-method", "", "Ea", "kJ/mol", 150.3, 0.05),
        ("friedman-method", "", "Ea", "kJ/mol", 150.1, 0.05),
        ("worked-examples/kissinger-dsc", "", "Ea", "kJ/mol", 125.1, 0.05),
        ("worked-examples/first-order-decomposition", "", "Ea", "kJ/mol", 102.9, 0.05),
        ("worked-examples/eyring-analysis", "Eyring", "dH_act", "kJ/mol", 78.0, 0.05),
        ("worked-examples/eyring-analysis", "Eyring", "dS_act", "J/mol/K", -35.0, 0.5),
        ("worked-examples/eyring-analysis", "Eyring", "dG_act", "kJ/mol", 88.4, 0.1),
        ("worked-examples/eyring-analysis", "", "Ea", "kJ/mol", 80.6, 0.05),
        ("diffusion-and-ionic-conductivity", "", "Ea", "kJ/mol", 59.7, 0.05),
        ("diffusion-and-ionic-conductivity", "", "Ea", "eV", 0.62, 0.005),
        ("enzyme-kinetics-temperature", "", "Ea", "kJ/mol", 48.0, 0.5),
    ],
)
def test_the_demo_values_come_out(
    box: Any, doc: str, question: str, name: str, unit: str, value: float, tolerance: float
) -> None:
    analysis = choose_analysis(demo_tables()[doc], question)
    assert analysis is not None
    found = result(run(box, analysis)["report"], name, unit)
    assert found["value"] == pytest.approx(value, abs=tolerance)


@needs_sandbox
def test_the_first_order_example_reports_its_stated_uncertainty(box: Any) -> None:
    analysis = choose_analysis(demo_tables()["worked-examples/first-order-decomposition"])
    assert analysis is not None
    v = run(box, analysis)
    assert (round(v["Ea_kJ_per_mol"], 1), round(v["Ea_stderr_kJ_per_mol"], 1)) == (102.9, 0.4)
    assert "Ea = 102.9 ± 0.4 kJ/mol" in v["_stdout"] and "T 288–338 K" in v["_stdout"]


# --- selection by columns and question ---------------------------------------------------------

K_T = table(("T (K)", "k (s⁻¹)"), T_K, 1e12 * np.exp(-85e3 / (R * T_K)))


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is the activation energy?", "arrhenius"),
        ("What is the pre-exponential factor?", "arrhenius"),
        ("What is the enthalpy of activation?", "eyring"),
        ("What is the entropy of activation?", "eyring"),
        ("What is the Gibbs energy of activation at 25 °C?", "eyring"),
        ("Apply transition-state theory", "eyring"),
        ("Use an Eyring plot", "eyring"),
        ("What is the slope of the Arrhenius plot?", "arrhenius"),
        ("", "arrhenius"),
    ],
)
def test_the_question_chooses_between_analyses_of_the_same_table(question: str, kind: str) -> None:
    chosen = choose_analysis(K_T, question)
    assert chosen is not None and chosen.kind == kind


def test_a_linear_fit_is_offered_last_for_a_slope_and_first_when_asked_for() -> None:
    assert [a.kind for a in analyses_for(K_T, "What is the slope?")] == [
        "arrhenius",
        "eyring",
        "linear",
    ]
    assert [a.kind for a in analyses_for(K_T)] == ["arrhenius", "eyring"]
    assert analyses_for(K_T, "Make a linear calibration of k against T")[0].kind == "linear"


def test_a_heating_rate_with_a_plain_temperature_is_kissinger_unless_conversion_is_said() -> None:
    data = table(("β (K/min)", "T (K)"), [2, 5, 10, 20], [497.4, 509.7, 519.3, 529.3])
    assert [a.kind for a in analyses_for(data)] == ["kissinger", "ozawa_flynn_wall"]
    assert choose_analysis(data, "Ozawa–Flynn–Wall").kind == "ozawa_flynn_wall"  # type: ignore[union-attr]
    at_conversion = Table(data.columns, data.rows, "Temperatures at 50 % conversion")
    assert choose_analysis(at_conversion).kind == "ozawa_flynn_wall"  # type: ignore[union-attr]


def test_a_concentration_that_grows_is_no_first_order_decay() -> None:
    t = [0.0, 60.0, 120.0, 180.0]
    decays = table(("t (s)", "[A] (M)"), t, [1.0, 0.7, 0.5, 0.35])
    grows = table(("t (s)", "[P] (M)"), t, [0.0, 0.3, 0.5, 0.65])
    assert choose_analysis(decays).kind == "first_order"  # type: ignore[union-attr]
    assert [a.kind for a in analyses_for(grows)] == ["linear"]  # both columns are known


def test_unrelated_columns_give_nothing_unless_a_slope_is_asked_for() -> None:
    data = table(("a", "b"), [1, 2, 3], [2.0, 4.1, 5.9])
    assert analyses_for(data) == [] and choose_analysis(data) is None
    assert analysis_code(data) is None
    assert [a.kind for a in analyses_for(data, "What is the slope of b against a?")] == ["linear"]


def test_michaelis_menten_needs_three_points_and_lineweaver_burk_needs_the_question() -> None:
    two = table(("[S] (mM)", "v (µM/s)"), [1, 2], [3.0, 4.5])
    assert [a.kind for a in analyses_for(two)] == ["linear"]  # two points fix no hyperbola
    assert [a.kind for a in analyses_for(two, "Lineweaver–Burk")] == ["lineweaver_burk"]


def test_logarithms_need_positive_data() -> None:
    data = table(("T (K)", "k (s⁻¹)"), [300, 310, 320], [1e-3, 0.0, 3e-3])
    assert [a.kind for a in analyses_for(data)] == ["linear"]  # a line, never ln 0


@pytest.mark.parametrize(
    ("header", "role"),
    [
        ("Heating rate β (K/min)", "heating_rate"),
        ("q (K s⁻¹)", "heating_rate"),
        ("Tp (°C)", "peak_temperature"),
        ("T at α = 0.5 (K)", "conversion_temperature"),
        ("dα/dt at α = 0.5 (s⁻¹)", "conversion_rate"),
        ("T/K", "temperature"),
        ("Temperature [K]", "temperature"),
        ("kcat (s⁻¹)", "rate_constant"),
        ("k_obs (min^-1)", "rate_constant"),
        ("k (M⁻¹ s⁻¹)", "rate_constant"),
        ("D (cm²/s)", "diffusion"),
        ("σ (S/cm)", "conductivity"),
        ("σ (MPa)", "stress"),
        ("t (min)", "time"),
        ("[N₂O₅] (mol dm⁻³)", "concentration"),
        ("[S] (mM)", "substrate"),
        ("v₀ (µM/s)", "velocity"),
        ("Rate (µmol/min)", "velocity"),
        ("Strain (%)", "strain"),
        ("Extension (mm)", "extension"),
        ("Image", "index"),
        ("Energy relative to initial state (eV)", "energy"),
        ("Absorbance (a.u.)", "absorbance"),
    ],
)
def test_column_roles_come_from_names_and_units(header: str, role: str) -> None:
    assert column_roles(Table((header,), ((1.0,), (2.0,)))) == (
        {role: 0, "temperature_celsius": 0} if "°C" in header else {role: 0}
    )


def test_units_name_the_flat_variables_and_the_slope() -> None:
    assert unit_suffix("kJ/mol") == "kJ_per_mol"
    assert unit_suffix("J/mol/K") == "J_per_mol_per_K"
    assert unit_suffix("s⁻¹") == "per_s" and unit_suffix("1/s") == "per_s"
    assert unit_suffix("µM/s") == "uM_per_s" and unit_suffix("cm²/s") == "cm2_per_s"
    assert unit_suffix("K·S/cm") == "K_S_per_cm"
    assert slope_unit("MPa", "%", 2000.0) == ("GPa", pytest.approx(0.1))
    assert slope_unit("MPa", "%", 0.5) == ("MPa", pytest.approx(100.0))
    assert slope_unit("N", "mm", 5.0) == ("N/m", pytest.approx(1000.0))
    assert slope_unit("mm", "m", 3.0) == ("", pytest.approx(0.001))
    assert slope_unit("a.u.", "mM", 3.0) == ("a.u./mM", 1.0)


# --- reading tables ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "number"),
    [
        ("412.4", 412.4),
        ("-0.18", -0.18),
        ("−0.18", -0.18),
        ("8.49e-6", 8.49e-6),
        ("1.2e−3", 1.2e-3),
        ("1.2 × 10⁻³", 1.2e-3),
        ("1.2×10^-3", 1.2e-3),
        ("3 x 10^4", 3e4),
        ("10^5", 1e5),
        ("12.5 %", 12.5),
        ("+3", 3.0),
    ],
)
def test_cells_may_use_a_unicode_minus_powers_of_ten_and_a_percent_sign(
    cell: str, number: float
) -> None:
    assert parse_number(cell) == pytest.approx(number, rel=1e-12)


@pytest.mark.parametrize("cell", ["1,234", "1 234", "n/a", "", "—", "5 K", "1e400", "2³", "10 5"])
def test_other_cells_are_not_numbers(cell: str) -> None:
    assert parse_number(cell) is None


def test_a_caption_is_the_heading_and_the_line_above_the_table() -> None:
    text = (
        "# Kinetics\n\nSome context. Table 1: rate constants at three temperatures.\n\n"
        "| T (°C) | k (min⁻¹) |\n|---|---|\n| 25 | 1.2 × 10⁻³ |\n| 35 | 3.1e−3 |\n| 45 | 7.4e−3 |\n"
    )
    (parsed,) = parse_tables(text)
    assert parsed.caption == "Kinetics — Table 1: rate constants at three temperatures."
    assert parsed.rows == ((25.0, 1.2e-3), (35.0, 3.1e-3), (45.0, 7.4e-3))
    assert analysis_code(parsed) == (
        choose_analysis(parsed).purpose,
        choose_analysis(parsed).code,  # type: ignore[union-attr]
    )


def test_values_are_shown_to_the_precision_of_their_error() -> None:
    assert shown(125.1234, 1.3) == "125.1 ± 1.3"
    assert shown(102.893, 0.39) == "102.9 ± 0.4"
    assert shown(-35.03, 1.0) == "-35.0 ± 1.0"
    assert shown(2.07e13, 1.2e12) == "(2.07 ± 0.12)e13"
    assert shown(55.31) == "55.31"


def test_the_figure_of_a_report_is_named_after_its_plot(tmp_path: Path) -> None:
    report = {
        "analysis": "eyring",
        "method": "Eyring plot",
        "fit": "ln(k/T) against 1/T",
        "n": 3,
        "r_squared": 0.999,
        "data_range": {"column": "T (K)", "min": 300, "max": 320, "unit": "K"},
        "results": [
            {
                "name": "dH_act",
                "label": "enthalpy of activation",
                "value": 78.01,
                "stderr": 0.31,
                "unit": "kJ/mol",
            }
        ],
        "plot": {
            "kind": "eyring",
            "title": "Eyring plot",
            "x_label": "1000/T (1/K)",
            "y_label": "ln(k/T)",
            "x": [3.33, 3.22, 3.12],
            "y": [-12.0, -11.2, -10.4],
            "slope": -7.9,
            "intercept": 14.3,
        },
    }
    figure = fit_figure({"status": "ok", "variables": {"report": report}})
    assert figure is not None and figure.kind == "eyring"
    assert figure.note == "ΔH‡ = 78.0 ± 0.3 kJ/mol, R² = 0.9990"
