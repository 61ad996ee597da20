"""The Executor's fit figure: a deterministic, escaped SVG recorded as a run artifact."""

from __future__ import annotations

import math
import shutil
import xml.etree.ElementTree as ET
from itertools import pairwise
from typing import Any

import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.hashing import digest_bytes
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.replay import execute, replay
from rar.science import protocol as p
from rar.science.figures import (
    FitFigure,
    fit_figure,
    nice_ticks,
    record_fit_figure,
    render_svg,
)
from rar.science.orchestrator import Orchestrator
from rar.science.runtime import ask_question
from rar.store.store import Store

SVG = "{http://www.w3.org/2000/svg}"
KISSINGER = "What activation energy do the Kissinger DSC data in the corpus give?"
BETA = [2, 5, 10, 20]
TP = [412.4, 422.5, 430.4, 438.6]
needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)


def kissinger_result(**extra: Any) -> dict[str, Any]:
    """What the sandbox returns for the rule-based planner's Kissinger cell."""
    xs = [1.0 / t for t in TP]
    ys = [math.log(b / t**2) for b, t in zip(BETA, TP, strict=True)]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    variables = {
        "beta": BETA,
        "Tp": TP,
        "x": xs,
        "y": ys,
        "slope": slope,
        "intercept": my - slope * mx,
        "r_squared": 0.9999953228639767,
        "Ea_kJ_per_mol": -slope * 8.314462618 / 1000,
        **extra,
    }
    return {"status": "ok", "variables": variables, "stdout": "", "error": None}


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(el.itertext()) for el in root.iter(f"{SVG}text")]


def line_y_at(line: ET.Element, x: float) -> float:
    x1, y1, x2, y2 = (float(line.attrib[k]) for k in ("x1", "y1", "x2", "y2"))
    return y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def test_a_kissinger_fit_is_plotted_as_well_formed_svg() -> None:
    figure = fit_figure(kissinger_result())
    assert figure is not None and figure.kind == "kissinger"
    root = parse(render_svg(figure))
    labels = texts(root)
    assert "Kissinger plot" in labels
    assert "ln(β/Tp²)" in labels and "1000/Tp (1/K)" in labels
    assert any("Ea = 125.1 kJ/mol" in t for t in labels)
    # one point per row of the data table, at (1000/Tp, ln(beta/Tp^2))
    points = list(root.iter(f"{SVG}circle"))
    data = [c for c in points if "data-x" in c.attrib]
    assert len(data) == len(TP)
    for circle, beta, tp in zip(data, BETA, TP, strict=True):
        assert float(circle.attrib["data-x"]) == pytest.approx(1000 / tp, rel=1e-5)
        assert float(circle.attrib["data-y"]) == pytest.approx(math.log(beta / tp**2), rel=1e-5)
    # the fitted line passes through the points (R^2 = 0.99999): within a pixel of each
    fit = [el for el in root.iter(f"{SVG}line") if el.attrib.get("class") == "fit"]
    assert len(fit) == 1
    for circle in data:
        cx, cy = float(circle.attrib["cx"]), float(circle.attrib["cy"])
        assert abs(line_y_at(fit[0], cx) - cy) < 1.0
    # later points (smaller 1000/Tp) are drawn to the left and higher up
    xs = [float(c.attrib["cx"]) for c in data]
    ys = [float(c.attrib["cy"]) for c in data]
    assert xs == sorted(xs, reverse=True) and ys == sorted(ys, reverse=True)


def test_an_arrhenius_fit_is_plotted() -> None:
    temperature = [288.0, 298.0, 308.0, 318.0, 328.0, 338.0]
    ea, a = 102.9e3, 1.0e13
    k = [a * math.exp(-ea / (8.314462618 * t)) for t in temperature]
    figure = fit_figure({"status": "ok", "variables": {"T": temperature, "k": k}})
    assert figure is not None and figure.kind == "arrhenius"
    # no slope in the variables: the line is fitted here, and gives the activation energy back
    assert figure.slope * 1000 * -8.314462618 / 1000 == pytest.approx(102.9, rel=1e-9)
    root = parse(render_svg(figure))
    assert "ln k" in texts(root) and "1000/T (1/K)" in texts(root)
    assert any("Ea = 102.9 kJ/mol" in t for t in texts(root))
    assert len([c for c in root.iter(f"{SVG}circle") if "data-x" in c.attrib]) == 6


def test_text_in_the_svg_is_escaped() -> None:
    nasty = '<script>alert("x")</script> & <img src=x onerror="window.__xss=1"> \'q\''
    figure = FitFigure(
        "linear", nasty, f"x {nasty}", "y", (1.0, 2.0, 3.0), (2.0, 4.1, 5.9), 1.95, 0.1, note=nasty
    )
    svg = render_svg(figure)
    assert "<script" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg and "&amp;" in svg
    root = parse(svg)
    assert not list(root.iter(f"{SVG}script"))
    assert nasty in texts(root) and f"x {nasty}" in texts(root)
    assert nasty in root.attrib["aria-label"]  # attribute values round-trip too
    assert root.find(f"{SVG}title") is not None and nasty in (root.findtext(f"{SVG}title") or "")
    assert "style=" not in svg  # presentation attributes only: it shows under a strict CSP


def test_the_same_fit_gives_the_same_bytes() -> None:
    one = fit_figure(kissinger_result())
    two = fit_figure(kissinger_result())
    assert one is not None and two is not None
    assert render_svg(one) == render_svg(two)


@pytest.mark.parametrize(
    "result",
    [
        {"status": "error", "variables": kissinger_result()["variables"]},
        {"status": "ok"},
        {"status": "ok", "variables": {}},
        {"status": "ok", "variables": {"answer": 42, "x": [1, 2, 3]}},
        {"status": "ok", "variables": {"x": [1.0], "y": [2.0]}},
        {"status": "ok", "variables": {"x": [1.0, 1.0], "y": [2.0, 3.0]}},
        {"status": "ok", "variables": {"x": [1.0, 2.0], "y": [2.0, float("nan")]}},
        {"status": "ok", "variables": {"x": "12", "y": "34"}},
        {"status": "ok", "variables": {"beta": [2, 5], "Tp": [0, 400]}},
        {"status": "ok", "variables": "not a dict"},
        {"status": "ok", "variables": {"report": {"plot": {"x": [1, 2], "y": [1, 2, 3]}}}},
        {
            "status": "ok",
            "variables": {
                "report": {"plot": {"x": [1, 2], "y": [3, 4], "curve": [[0, "a"], [1, 2]]}}
            },
        },
        {"status": "ok", "variables": {"report": {"plot": {"x": [1, 1], "y": [3, 4]}}}},
        {"status": "ok", "variables": {"report": {"plot": "a line"}}},
    ],
)
def test_nothing_to_plot_gives_no_figure(result: dict[str, Any]) -> None:
    assert fit_figure(result) is None


def test_nice_ticks_cover_the_range() -> None:
    ticks = nice_ticks(2.28, 2.425)
    assert ticks[0] <= 2.28 and ticks[-1] >= 2.425
    steps = {round(b - a, 9) for a, b in pairwise(ticks)}
    assert steps == {0.05}


# --- from an analysis's report -----------------------------------------------------------------


def michaelis_menten_result(**plot: Any) -> dict[str, Any]:
    """What the sandbox returns for a Michaelis–Menten analysis: a report with a fitted curve."""
    vmax, km = 12.5, 3.2
    s = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    scatter = [0.01, -0.01, 0.02, 0, -0.02, 0.01, 0]
    v = [vmax * x / (km + x) * (1 + e) for x, e in zip(s, scatter, strict=True)]
    curve = [[32.0 * i / 49, vmax * (32.0 * i / 49) / (km + 32.0 * i / 49)] for i in range(50)]
    report = {
        "analysis": "michaelis_menten",
        "method": "Michaelis–Menten fit (non-linear least squares)",
        "fit": "v = Vmax·[S]/(Km + [S])",
        "n": len(s),
        "r_squared": 0.99871,
        "data_range": {"column": "[S] (mM)", "min": 0.5, "max": 32.0, "unit": "mM"},
        "results": [
            {
                "name": "Km",
                "label": "Michaelis constant",
                "value": km,
                "stderr": 0.153,
                "unit": "mM",
            },
            {
                "name": "Vmax",
                "label": "maximum rate",
                "value": vmax,
                "stderr": 0.21,
                "unit": "µM/s",
            },
        ],
        "plot": {
            "kind": "michaelis_menten",
            "title": "Michaelis–Menten fit",
            "x_label": "[S] (mM)",
            "y_label": "v₀ (µM/s)",
            "x": s,
            "y": v,
            "curve": curve,
            **plot,
        },
    }
    return {"status": "ok", "variables": {"report": report, "x": s, "y": v}}


def kissinger_report_result() -> dict[str, Any]:
    """A Kissinger analysis's report: the line in plotted units (1000/Tp), Ea with its error."""
    variables = kissinger_result()["variables"]
    report = {
        "analysis": "kissinger",
        "results": [
            {
                "name": "Ea",
                "label": "activation energy",
                "value": variables["Ea_kJ_per_mol"],
                "stderr": 0.19,
                "unit": "kJ/mol",
            }
        ],
        "r_squared": variables["r_squared"],
        "plot": {
            "kind": "kissinger",
            "title": "Kissinger plot",
            "x_label": "1000/Tp (1/K)",
            "y_label": "ln(β/Tp²)",
            "x": [1000 * x for x in variables["x"]],
            "y": variables["y"],
            "slope": variables["slope"] / 1000,
            "intercept": variables["intercept"],
        },
    }
    return {"status": "ok", "variables": {**variables, "report": report}}


def test_a_michaelis_menten_report_is_drawn_as_a_curve() -> None:
    figure = fit_figure(michaelis_menten_result())
    assert figure is not None and figure.kind == "michaelis_menten" and len(figure.curve) == 50
    root = parse(render_svg(figure))
    [curve] = [el for el in root.iter(f"{SVG}polyline") if el.attrib.get("class") == "fit"]
    points = [tuple(map(float, p.split(","))) for p in curve.attrib["points"].split()]
    assert len(points) == 50
    xs = [x for x, _ in points]
    assert xs == sorted(xs)  # drawn left to right, rising to the plateau
    assert points[-1][1] < points[0][1]  # SVG y grows downwards
    assert not [el for el in root.iter(f"{SVG}line") if el.attrib.get("class") == "fit"]
    data = [c for c in root.iter(f"{SVG}circle") if "data-x" in c.attrib]
    assert len(data) == 7
    labels = texts(root)
    assert "Km = 3.20 ± 0.15 mM, R² = 0.9987" in labels
    assert "fitted curve" in labels and "[S] (mM)" in labels and "v₀ (µM/s)" in labels


def test_a_curve_gives_the_same_bytes_every_time() -> None:
    one, two = fit_figure(michaelis_menten_result()), fit_figure(michaelis_menten_result())
    assert one is not None and two is not None
    assert render_svg(one).encode() == render_svg(two).encode()


def test_a_report_line_is_drawn_from_its_slope_and_intercept() -> None:
    figure = fit_figure(kissinger_report_result())
    assert figure is not None and figure.kind == "kissinger" and not figure.curve
    assert figure.note == "Ea = 125.12 ± 0.19 kJ/mol, R² = 0.999995"
    root = parse(render_svg(figure))
    [fit] = [el for el in root.iter(f"{SVG}line") if el.attrib.get("class") == "fit"]
    for circle in (c for c in root.iter(f"{SVG}circle") if "data-x" in c.attrib):
        assert abs(line_y_at(fit, float(circle.attrib["cx"])) - float(circle.attrib["cy"])) < 1.0


def test_an_unusable_report_falls_back_to_the_variables() -> None:
    result = kissinger_report_result()
    result["variables"]["report"]["plot"]["y"] = [1.0]  # one point: no plot
    figure = fit_figure(result)
    assert figure is not None and figure.kind == "kissinger"
    assert figure.note.startswith("Ea = 125.1 kJ/mol")  # the old note, from the variables


@pytest.mark.parametrize("kind", ["../../etc/passwd", "Kissinger", "", "a" * 60, 3])
def test_a_plot_kind_that_is_no_short_word_is_drawn_as_linear(kind: Any) -> None:
    figure = fit_figure(michaelis_menten_result(kind=kind))
    assert figure is not None and figure.kind == "linear"


def test_report_texts_are_cut_and_escaped() -> None:
    nasty = "<script>x</script>" * 50
    figure = fit_figure(michaelis_menten_result(title=nasty, x_label=nasty))
    assert figure is not None and len(figure.title) == 200
    svg = render_svg(figure)
    assert "<script" not in svg
    parse(svg)


# --- recorded by the Executor ------------------------------------------------------------------


def scripted_fit_agent(run: Any, question: str) -> dict[str, Any]:
    """The orchestrator with a planner that asks for one computation, whose result is canned."""
    script = [
        Message.assistant(
            tool_calls=[tool_call(p.DELEGATE_EXECUTE, "e1", code="fit()", purpose="Kissinger fit")]
        ),
        Message.assistant(
            tool_calls=[tool_call(p.FINALIZE, "f1", answer_markdown="Fitted.", confidence=0.5)]
        ),
    ]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    orchestrator = Orchestrator(
        run,
        client,
        research=lambda q, k: {"anchors": []},
        execute=lambda code: run.effect(
            "tool", {"name": "python", "args": {"code": code}}, kissinger_result
        ),
        mode="owl_lite",
        max_steps=4,
    )
    return orchestrator.answer(question).result


def artifacts_of(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "artifact"]


def test_the_executor_records_the_figure_and_replay_stays_reproducible(store: Store) -> None:
    run = execute(scripted_fit_agent, inputs={"question": "q"}, store=store)
    [artifact] = artifacts_of(store, run.id)
    assert artifact["name"] == "figures/kissinger-fit-1.svg"
    assert artifact["media_type"] == "image/svg+xml"
    data = (store.run_dir(run.id) / "artifacts" / artifact["name"]).read_bytes()
    assert artifact["digest"] == digest_bytes(data) and artifact["size"] == len(data)
    parse(data.decode("utf-8"))
    report = replay(run.id, store=store, function=scripted_fit_agent)
    assert report.reproducible, report.first_divergence
    [again] = artifacts_of(store, report.replay_run)
    assert again["digest"] == artifact["digest"]


def test_a_failed_computation_records_no_figure(store: Store) -> None:
    run = execute(lambda run, question: _no_fit(run), inputs={"question": "q"}, store=store)
    assert artifacts_of(store, run.id) == []


def test_a_curve_is_recorded_under_its_plot_kind(store: Store) -> None:
    def agent(run: Any, question: str) -> dict[str, Any]:
        return {"name": record_fit_figure(run, michaelis_menten_result(), 2)}

    run = execute(agent, inputs={"question": "q"}, store=store)
    [artifact] = artifacts_of(store, run.id)
    assert artifact["name"] == "figures/michaelis_menten-fit-2.svg"
    report = replay(run.id, store=store, function=agent)
    assert report.reproducible, report.first_divergence
    [again] = artifacts_of(store, report.replay_run)
    assert again["digest"] == artifact["digest"]


def _no_fit(run: Any) -> dict[str, Any]:
    assert record_fit_figure(run, {"status": "error", "variables": {}}, 1) is None
    assert record_fit_figure(run, {"status": "ok", "variables": {"pi": 3.14}}, 2) is None
    return {"answer": "none"}


@needs_sandbox
def test_a_science_run_on_the_demo_corpus_records_its_fit(store: Store) -> None:
    result = ask_question(KISSINGER, mode="owl_full", store=store)
    assert "Ea = 125.12 ± 0.19 kJ/mol" in result.answer
    [artifact] = artifacts_of(store, result.run_id)
    assert artifact["name"] == "figures/kissinger-fit-1.svg"
    assert artifact["media_type"] == "image/svg+xml"
    path = store.run_dir(result.run_id) / "artifacts" / "figures" / "kissinger-fit-1.svg"
    root = parse(path.read_text(encoding="utf-8"))
    assert len([c for c in root.iter(f"{SVG}circle") if "data-x" in c.attrib]) == len(TP)
    assert store.get_blob(artifact["digest"]) == path.read_bytes()
    out = CliRunner().invoke(
        cli, ["--store", str(store.root), "replay", result.run_id], catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    assert out.output.startswith("reproducible"), out.output
