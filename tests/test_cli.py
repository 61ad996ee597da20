"""The `rar` command line: human output, --json shapes, exit codes and error messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def demo_run(store_path: Path) -> str:
    code, out, _ = rar(store_path, "demo", "--json")
    assert code == 0
    return str(orjson.loads(out)["run_id"])


def test_demo_records_a_run_and_says_how_to_inspect_it(store_path: Path) -> None:
    code, out, _ = rar(store_path, "demo")
    assert code == 0
    assert "55.3 kJ/mol" in out
    assert "3 llm call(s), 2 tool call(s)" in out
    assert "rar show" in out and "rar verify" in out


def test_list_shows_runs_newest_first_and_json_has_the_documented_fields(
    store_path: Path, demo_run: str
) -> None:
    code, out, _ = rar(store_path, "list")
    assert code == 0 and demo_run in out and "completed" in out
    code, out, _ = rar(store_path, "list", "--json")
    rows = orjson.loads(out)
    assert [r["run_id"] for r in rows] == [demo_run]
    assert set(rows[0]) == {
        "run_id",
        "status",
        "goal",
        "created_at",
        "finished_at",
        "events",
        "parent",
    }
    _, shown, _ = rar(store_path, "show", demo_run, "--json")
    assert rows[0]["events"] == len(orjson.loads(shown)["events"]) > 10


def test_list_of_an_empty_store_says_how_to_record_one(store_path: Path) -> None:
    code, out, _ = rar(store_path, "list")
    assert code == 0 and "rar demo" in out


def test_show_accepts_a_prefix_and_prints_the_timeline(store_path: Path, demo_run: str) -> None:
    code, out, _ = rar(store_path, "show", demo_run.rsplit("-", 1)[1][:4])
    assert code == 0
    assert "calculator" in out and "run.finished" in out and "llm scripted:demo" in out
    assert "[step:0]" in out and "[tool-0:0]" in out and "55.3" in out


def test_show_json_prints_manifest_and_events(store_path: Path, demo_run: str) -> None:
    _, out, _ = rar(store_path, "show", demo_run, "--json")
    data = orjson.loads(out)
    assert set(data) == {"manifest", "events"}
    assert data["manifest"]["run_id"] == demo_run
    events = data["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["kind"] for e in events if e["type"] == "effect"] == [
        "llm", "tool", "llm", "tool", "llm"]


def test_verify_exits_0_when_intact_and_1_listing_problems_when_not(
    store_path: Path, demo_run: str
) -> None:
    code, out, _ = rar(store_path, "verify")
    assert code == 0 and "ok" in out
    log = store_path / demo_run / "events.jsonl"
    log.write_bytes(log.read_bytes().replace(b"calculator", b"calculatoR", 1))
    code, out, _ = rar(store_path, "verify", demo_run)
    assert code == 1 and "chain" in out
    code, out, _ = rar(store_path, "verify", "--json")
    report = orjson.loads(out)
    assert report["ok"] is False
    assert {"run_id", "seq", "what", "detail", "expected", "actual", "path"} <= set(
        report["problems"][0]
    )


def test_an_unknown_run_id_is_a_clear_error_with_exit_2(store_path: Path, demo_run: str) -> None:
    code, _, err = rar(store_path, "show", "nosuchrun")
    assert code == 2
    assert "no run matches 'nosuchrun'" in err and "rar list" in err


def test_an_ambiguous_prefix_is_a_clear_error(store_path: Path) -> None:
    rar(store_path, "demo")
    rar(store_path, "demo")
    code, _, err = rar(store_path, "show", "2")
    assert code == 2 and "matches 2 runs" in err


def test_a_missing_manifest_is_named(store_path: Path, demo_run: str) -> None:
    (store_path / demo_run / "manifest.json").unlink()
    code, _, err = rar(store_path, "show", demo_run)
    assert code == 2  # no manifest: the run is not found by id
    assert "no run matches" in err
    code, out, _ = rar(store_path, "verify")
    assert code == 1 and "manifest" in out


def test_an_unwritable_store_is_a_clear_error_with_exit_3(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = rar(blocker / "runs", "demo")
    assert code == 3 and "cannot write the run store" in err


def test_verify_of_a_missing_store_says_so(tmp_path: Path) -> None:
    code, _, err = rar(tmp_path / "none", "verify")
    assert code == 2 and "no run store" in err


def test_python_dash_m_rar_works(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rar", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert "verify" in out.stdout and "demo" in out.stdout


@pytest.mark.parametrize("command", [["demo"], ["run", "What is Ea?"]])
@pytest.mark.parametrize("seed", ["99999999999999999999999", "-9007199254740992", "seven"])
def test_a_seed_out_of_range_is_bad_input_not_an_internal_error(
    store_path: Path, command: list[str], seed: str
) -> None:
    result = CliRunner().invoke(cli, ["--store", str(store_path), *command, "--seed", seed])
    assert result.exit_code == 2, result.output
    assert "--seed" in result.output and "internal error" not in result.output
    assert not store_path.exists() or not any(store_path.glob("2*"))  # nothing recorded


def test_a_seed_out_of_range_from_python_is_a_config_error(store_path: Path) -> None:
    from rar.errors import ConfigError
    from rar.runtime.start import record

    with pytest.raises(ConfigError, match="not a whole number between"):
        record("g", store=store_path, seed=2**53)
    with pytest.raises(ConfigError, match="not a whole number between"):
        record("g", store=store_path, seed=True)  # type: ignore[arg-type]
    assert record("g", store=store_path, seed=-(2**53 - 1)).manifest.config["seed"] == -(2**53 - 1)


def test_the_science_api_imports_as_documented() -> None:
    code = "from rar.science import ask_question, ScienceResult, result_of; print(ask_question)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import rar.science

    assert set(rar.science.__all__) == {"ScienceResult", "ask_question", "result_of"}


def test_the_license_file_is_the_declared_apache_license() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[1]
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
