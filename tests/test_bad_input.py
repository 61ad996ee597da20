"""Hostile values for every number, offset, limit, duration and date a user can type: each is
refused with a clear 400 (viewer) or exit 2 (CLI) that names the parameter and what it may be,
never an internal error, a 500 or a traceback, and nothing is recorded or served because of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from helpers import record_small_run

from browser import ViewerServer
from rar.cli import cli
from rar.cli.options import MAX_SAFE_INTEGER as CLI_MAX_SAFE
from rar.hashing import MAX_SAFE_INTEGER
from rar.store.store import Store

HUGE = str(10**30)
# what a whole number must never be read as: too big or negative, not a number, not finite,
# empty, other digits than 0-9, Python-only spellings, control characters, very long
NOT_WHOLE_NUMBERS = [
    HUGE,
    str(2**64),
    str(MAX_SAFE_INTEGER + 1),
    "-1",
    "-" + HUGE,
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "abc",
    "1e3",
    "1.5",
    "0x10",
    "1_000",
    "+5",
    " 5 ",
    "5\n",
    "\x00",
    "١٢",  # Arabic-Indic digits: int() reads them as 12
    "１２",  # fullwidth digits
    "²",
    "9" * 5000,  # past int()'s 4300-digit limit
    "x" * 5000,
]


# --- the viewer -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("bad-input") / "runs"
    store = Store(root, create=True)
    run_id = record_small_run(store).id
    store.close()
    with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
        yield {"client": client, "run": run_id}


def _get(viewer: dict[str, Any], path: str, **params: str) -> httpx2.Response:
    return viewer["client"].get(path, params=params)  # type: ignore[no-any-return]


def _assert_bad_parameter(answer: httpx2.Response, name: str, allowed: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    body = answer.json()
    assert body["error"] == "bad-parameter" and body["home"] == "/"
    assert body["message"].startswith(name + " ") and allowed in body["message"]
    assert len(body["message"]) < 300  # a 5000-character value is not echoed whole


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS, ids=repr)
@pytest.mark.parametrize("name", ["offset", "limit"])
def test_event_page_numbers_are_refused_with_their_range(
    viewer: dict[str, Any], name: str, value: str
) -> None:
    answer = _get(viewer, f"/api/runs/{viewer['run']}/events", **{name: value})
    low = "0" if name == "offset" else "1"
    _assert_bad_parameter(answer, name, f"from {low} to {MAX_SAFE_INTEGER}")


@pytest.mark.parametrize("value", [*NOT_WHOLE_NUMBERS, "0"], ids=repr)
def test_a_payloads_seq_is_refused_with_its_range(viewer: dict[str, Any], value: str) -> None:
    answer = _get(viewer, "/api/payload", run=viewer["run"], seq=value, field="request")
    _assert_bad_parameter(answer, "seq", f"from 1 to {MAX_SAFE_INTEGER}")


def test_a_missing_seq_is_a_400_not_a_missing_event(viewer: dict[str, Any]) -> None:
    for params in ({"run": viewer["run"], "field": "request"}, {"seq": "", "run": viewer["run"]}):
        _assert_bad_parameter(_get(viewer, "/api/payload", **params), "seq", "required")


def test_the_largest_offset_and_limit_are_served(viewer: dict[str, Any]) -> None:
    page = _get(
        viewer,
        f"/api/runs/{viewer['run']}/events",
        offset=str(MAX_SAFE_INTEGER),
        limit=str(MAX_SAFE_INTEGER),
    )
    assert page.status_code == 200
    body = page.json()
    assert body["offset"] == MAX_SAFE_INTEGER and body["limit"] == 1000
    assert body["events"] == [] and body["next_offset"] is None
    first = _get(viewer, f"/api/runs/{viewer['run']}/events", offset="0", limit="1").json()
    assert [e["seq"] for e in first["events"]] == [1]


NOT_DATES = [
    "yesterday",
    "2026-13-01",  # no month 13
    "2026-02-30",
    "2026-11-30T25:00",
    "2026-11-30T08:61",
    "0000-01-01",  # before year 1
    "2026-11-30T08:30+02:00",  # every time is UTC
    "2026-11-30 08:30",
    "２０２６-１１-３０",  # fullwidth digits
    "٢٠٢٦-١١-٣٠",
    "2026-11-30\n",
    "2026-11-30T08:30:15." + "1" * 5000,
    "9" * 5000,
    HUGE,
    "-1",
    "nan",
    " ",
    "\x00",
]


@pytest.mark.parametrize("value", NOT_DATES, ids=repr)
@pytest.mark.parametrize("name", ["since", "until"])
def test_run_list_dates_are_refused_with_the_accepted_form(
    viewer: dict[str, Any], name: str, value: str
) -> None:
    _assert_bad_parameter(_get(viewer, "/api/runs", **{name: value}), name, "2026-11-30")


@pytest.mark.parametrize(
    "value", ["2026-11-30", "2026-11-30T08", "2026-11-30T08:30", "2026-11-30T08:30:15.123456Z"]
)
def test_run_list_dates_in_every_accepted_form(viewer: dict[str, Any], value: str) -> None:
    assert _get(viewer, "/api/runs", since=value).status_code == 200
    assert _get(viewer, "/api/runs", until=value).status_code == 200


def test_a_utc_marker_does_not_change_what_a_date_filter_keeps(viewer: dict[str, Any]) -> None:
    every = _get(viewer, "/api/runs").json()["runs"]
    minute = every[0]["created_at"][:16]  # 2026-11-30T08:30
    for name in ("since", "until"):
        plain = _get(viewer, "/api/runs", **{name: minute}).json()["runs"]
        marked = _get(viewer, "/api/runs", **{name: minute + "Z"}).json()["runs"]
        assert plain == marked == every


HOSTILE_TEXT = ["", " ", "\x00", "-1", HUGE, "nan", "١٢", "../../etc/passwd", "<script>",
                "x" * 5000]  # fmt: skip
TEXT_ROUTES = [
    ("/api/runs", "status"),
    ("/api/runs", "q"),
    ("/api/runs", "mode"),
    ("/api/runs", "model"),
    ("/api/runs", "sort"),
    ("/api/runs/{run}/events", "type"),
    ("/api/runs/{run}/events", "agent"),
    ("/api/runs/{run}/events", "span"),
    ("/api/payload", "run"),
    ("/api/payload", "field"),
    ("/api/diff", "a"),
    ("/api/diff", "b"),
    ("/diff", "a"),
]


@pytest.mark.parametrize("value", HOSTILE_TEXT, ids=lambda v: repr(v[:12]))
@pytest.mark.parametrize(("route", "name"), TEXT_ROUTES)
def test_text_parameters_never_fail_the_server(
    viewer: dict[str, Any], route: str, name: str, value: str
) -> None:
    path = route.format(run=viewer["run"])
    params = {"run": viewer["run"], "seq": "1", "field": "request"} if "payload" in path else {}
    answer = _get(viewer, path, **{**params, name: value})
    assert answer.status_code in (200, 400, 404), answer.text
    if path.startswith("/api/") and answer.status_code != 200:
        assert answer.json()["error"] and answer.json()["home"] == "/"


@pytest.mark.parametrize("value", ["-1", HUGE, "nan", "١٢", "x" * 3000, "%00", "..%2f..%2fetc"])
@pytest.mark.parametrize(
    "template",
    [
        "/api/runs/{v}",
        "/api/runs/{v}/events",
        "/api/runs/{v}/replays",
        "/api/runs/{run}/artifacts/{v}",
        "/api/blobs/{v}",
        "/runs/{v}",
        "/static/{v}",
    ],
)
def test_path_parameters_never_fail_the_server(
    viewer: dict[str, Any], template: str, value: str
) -> None:
    answer = viewer["client"].get(template.format(v=value, run=viewer["run"]))
    assert answer.status_code in (400, 404), answer.text


# --- the command line -------------------------------------------------------------------------


def _invoke(store: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", str(store), *args])


def _assert_usage_error(result: Any, option: str, allowed: str) -> None:
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert option in result.output and allowed in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


CLI_NOT_WHOLE = [v for v in NOT_WHOLE_NUMBERS if v not in (" 5 ", "5\n", "+5")] + [""]
# (command line before the value, the option named in the message, its smallest value)
WHOLE_OPTIONS = [
    (["list", "--limit"], "--limit", 1),
    (["ask", "hi", "--tools", "--max-steps"], "--max-steps", 1),
    (["run", "What is Ea?", "--max-steps"], "--max-steps", 1),
    (["branch", "nope", "--at"], "--at", 0),
    (["view", "--no-open", "--port"], "--port", 0),
]
WHOLE_CASES = [
    pytest.param(line, option, low, value, id=f"{option}={value[:12]!r}")
    for line, option, low in WHOLE_OPTIONS
    for value in CLI_NOT_WHOLE + (["0"] if low == 1 else [])
]


@pytest.mark.parametrize(("line", "option", "low", "value"), WHOLE_CASES)
def test_whole_number_options_are_refused_with_their_range(
    tmp_path: Path, line: list[str], option: str, low: int, value: str
) -> None:
    store = tmp_path / "runs"
    high = 65535 if option == "--port" else MAX_SAFE_INTEGER
    result = _invoke(store, *line, value)
    _assert_usage_error(result, option, f"from {low} to {high}")
    assert not store.exists()  # nothing was recorded, not even a store made


@pytest.mark.parametrize("command", [["demo"], ["run", "What is Ea?"]])
@pytest.mark.parametrize("value", [v for v in CLI_NOT_WHOLE if v != "-1"], ids=lambda v: v[:12])
def test_seeds_are_refused_with_their_range(tmp_path: Path, command: list[str], value: str) -> None:
    result = _invoke(tmp_path / "runs", *command, "--seed", value)
    _assert_usage_error(result, "--seed", f"from -{MAX_SAFE_INTEGER} to {MAX_SAFE_INTEGER}")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "value", [v for v in CLI_NOT_WHOLE if v not in ("-1", "")], ids=lambda v: repr(v[:12])
)
@pytest.mark.parametrize(
    ("key", "allowed"),
    [("seed", f"from -{MAX_SAFE_INTEGER} to"), ("max_steps", f"from 1 to {MAX_SAFE_INTEGER}")],
)
def test_branch_settings_that_are_numbers_are_refused_with_their_range(
    tmp_path: Path, key: str, allowed: str, value: str
) -> None:
    result = _invoke(tmp_path / "runs", "branch", "nope", "--at", "1", "--set", f"{key}={value}")
    _assert_usage_error(result, f"--set {key}", allowed)


def test_branch_max_steps_must_be_positive(tmp_path: Path) -> None:
    for value in ("0", "-1", ""):
        setting = f"max_steps={value}"
        result = _invoke(tmp_path / "runs", "branch", "nope", "--at", "1", "--set", setting)
        _assert_usage_error(result, "--set max_steps", "from 1 to")


NOT_SECONDS = ["0", "-1", "-0", "nan", "inf", "-inf", "Infinity", "1e309", HUGE, "86400.5", "abc",
               "", "1_0", "١٢", "0x10", "\x00", "9" * 5000]  # fmt: skip


@pytest.mark.parametrize("value", NOT_SECONDS, ids=lambda v: repr(v[:12]))
def test_a_sandbox_timeout_is_refused_with_its_range(tmp_path: Path, value: str) -> None:
    cell = tmp_path / "cell.py"
    cell.write_text("x = 1\n")
    result = CliRunner().invoke(cli, ["sandbox", "run", str(cell), "--timeout", value])
    _assert_usage_error(result, "--timeout", "above 0 and at most 86400")


@pytest.mark.parametrize("value", ["0.5", ".5", "5.", "1e2", "86400", " 30 "])
def test_sandbox_timeouts_in_range_are_read(value: str) -> None:
    from rar.cli.options import TIMEOUT

    assert 0 < TIMEOUT.convert(value, None, None) <= 86400


def test_the_cli_bound_is_canonical_jsons() -> None:
    assert CLI_MAX_SAFE == MAX_SAFE_INTEGER


def test_the_largest_values_in_range_are_taken(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    assert _invoke(store, "list", "--limit", str(MAX_SAFE_INTEGER)).exit_code == 0
    assert _invoke(store, "demo", "--seed", str(-MAX_SAFE_INTEGER), "--json").exit_code == 0
    assert _invoke(store, "list", "--limit", " 1 ").exit_code == 0  # spaces around are fine
