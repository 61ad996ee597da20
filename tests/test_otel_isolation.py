"""Telemetry is off unless asked for: without it, no run and no export imports OpenTelemetry.

Runs in a fresh interpreter each time (``sys.modules`` of the test process has OpenTelemetry
loaded by other tests). Holds with or without the ``otel`` extra installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import json, sys
import rar

store, out, science = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.tools import default_tools

with rar.record("What is 6 * 7?", store=store) as run:
    with run.span("plain", agent="someone"):
        run.effect("tool", {"name": "t"}, lambda: 1)
    script = [Message.assistant(tool_calls=[tool_call("calculator", expression="6 * 7")]), "42"]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    Agent(client, default_tools()).run("What is 6 * 7?", run=run)
assert run.manifest.status.value == "completed"
from rar.cli import cli
args = ["--store", store]
try:
    if science:
        cli.main([*args, "run", "How is activation energy determined?", "--json"],
                 standalone_mode=False)
    cli.main([*args, "export", run.id, "--format", "otlp", "-o", out], standalone_mode=False)
except SystemExit as exc:
    assert not exc.code, exc.code
loaded = sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry."))
print(json.dumps(loaded))
"""


def _loaded(tmp_path: Path, *, science: bool = False, **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RAR_OTEL", "OTEL_"))}
    environ.update(env)
    out = tmp_path / "trace.json"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "runs"), str(out), "1" if science else "0"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["resourceSpans"]  # the export wrote OTLP/JSON
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_run_and_an_otlp_export_never_import_opentelemetry(tmp_path: Path) -> None:
    assert _loaded(tmp_path) == []


def test_rar_otel_0_is_off(tmp_path: Path) -> None:
    assert _loaded(tmp_path, RAR_OTEL="0") == []


@pytest.mark.slow
def test_a_science_run_never_imports_opentelemetry(tmp_path: Path) -> None:
    assert _loaded(tmp_path, science=True) == []


def test_rar_otel_1_does_import_it(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    # spans go to a closed port on loopback: the run must not mind
    loaded = _loaded(tmp_path, RAR_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert "opentelemetry.sdk.trace" in loaded


def test_rar_otel_without_opentelemetry_warns_and_records(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
        "import rar\n"
        "with rar.record('x', store=sys.argv[1]) as run:\n"
        "    run.effect('tool', {'name': 't'}, lambda: 1)\n"
        "print(run.manifest.status.value)\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RAR_OTEL", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "runs")],
        capture_output=True, text=True, env={**environ, "RAR_OTEL": "1"}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed"
    assert "RAR_OTEL is set" in done.stderr and "pip install 'rar[otel]'" in done.stderr
