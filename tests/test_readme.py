"""The README's commands and examples work as written."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_quickstart_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    install, tests = blocks("bash")[:2]
    assert install.strip().startswith("pip install . && rar run ")
    assert tests.strip() in (ROOT / ".ci" / "run").read_text()


def _rar(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rar", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_main_job_and_the_inspection_commands_run(tmp_path: Path) -> None:
    main_job = shlex.split(blocks("bash")[0].strip().split("&&", 1)[1])
    assert main_job[0] == "rar"
    demo = _rar(main_job[1:], tmp_path)
    assert demo.returncode == 0, demo.stderr
    if shutil.which("bwrap"):  # the fit runs in the sandbox; without bubblewrap it is refused
        assert re.search(r"Ea = 125\.1\d* ± 0\.\d+ kJ/mol", demo.stdout), demo.stdout
    short = re.search(r"rar show (\w+)", demo.stdout)
    assert short
    for line in blocks("bash")[2].strip().splitlines():
        command = shlex.split(line.split("#")[0])
        assert command[0] == "rar"
        args = [short.group(1) if a == "97b3" else a for a in command[1:]]
        result = _rar(args, tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)


def test_the_science_commands_run(tmp_path: Path) -> None:
    (tmp_path / "analysis.py").write_text("import numpy as np\nprint(np.arange(3).sum())\n")
    (tmp_path / "src").symlink_to(ROOT / "src")
    for line in blocks("bash")[3].strip().splitlines():
        command = shlex.split(line.split("#")[0])
        if command[1] == "sandbox" and not shutil.which("bwrap"):
            continue
        result = _rar(command[1:], tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)


def test_the_model_commands_run_offline(tmp_path: Path) -> None:
    lines = blocks("bash")[4].strip().splitlines()
    for line in lines:
        command = shlex.split(line.split("#")[0])
        if "--model" in command:
            continue  # needs a provider's key: covered against a loopback server elsewhere
        result = _rar(command[1:], tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_examples_run(index: int, tmp_path: Path) -> None:
    code = blocks("python")[index]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "completed" in result.stdout
    verify = _rar(["verify"], tmp_path)
    assert verify.returncode == 0, verify.stdout


def test_the_viewer_commands_run(tmp_path: Path) -> None:
    import httpx2

    demo = _rar(["demo"], tmp_path)
    assert demo.returncode == 0, demo.stderr
    short = re.search(r"rar show (\w+)", demo.stdout)
    assert short
    lines = blocks("bash")[5].strip().splitlines()
    assert any(line.startswith("rar view") for line in lines)
    for line in lines:
        command = shlex.split(line.split("#")[0])
        args = [short.group(1) if a == "97b3" else a for a in command[1:]]
        if args[0] == "view":  # a server: start it on a free port, ask it, stop it
            server = subprocess.Popen(
                [sys.executable, "-m", "rar", *args, "--no-open", "--port", "0"],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert server.stdout is not None
                started = server.stdout.readline()
                url = re.search(r"(http://127\.0\.0\.1:\d+/)", started)
                assert url, started
                runs = httpx2.get(url.group(1) + "api/runs", timeout=10).json()["runs"]
                assert [r["id"].endswith(short.group(1)) for r in runs] == [True]
                page = httpx2.get(url.group(1) + f"runs/{runs[0]['id']}", timeout=10)
                assert page.status_code == 200 and "RAR viewer" in page.text
            finally:
                server.terminate()
                server.wait(timeout=10)
            continue
        result = _rar(args, tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
    assert (tmp_path / "run.html").read_text().startswith("<!doctype html>")
    assert '"format": "rar.trajectory/1"' in (tmp_path / "run.json").read_text()


def test_the_flow_commands_run_offline(tmp_path: Path) -> None:
    block = next(b for b in blocks("bash") if "rar flow demo" in b)
    for line in block.strip().splitlines():
        command = shlex.split(line.split("#")[0])
        result = _rar(command[1:], tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        assert "M, CodeSummarizer, ↴, M, FeatureIdentifier" in result.stdout


def test_the_export_commands_run(tmp_path: Path) -> None:
    demo = _rar(["demo"], tmp_path)
    assert demo.returncode == 0, demo.stderr
    short = re.search(r"rar show (\w+)", demo.stdout)
    assert short
    block = next(b for b in blocks("bash") if "--format rocrate" in b)
    for line in block.strip().splitlines():
        command = shlex.split(line.split("#")[0])
        args = [short.group(1) if a == "97b3" else a for a in command[1:]]
        result = _rar(args, tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
    assert (tmp_path / "crate" / "ro-crate-metadata.json").is_file()
    assert '"resourceSpans"' in (tmp_path / "trace.json").read_text()
    assert '"prefix"' in (tmp_path / "run.prov.json").read_text()


@pytest.mark.slow
def test_the_study_and_query_commands_run(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    block = next(b for b in blocks("bash") if "rar study" in b)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for line in block.strip().splitlines():
        command = shlex.split(line.split("#")[0])
        result = subprocess.run(
            [sys.executable, "-m", "rar", *command[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        if command[1] == "study" and command[2].endswith(".yaml"):
            assert "30" in result.stdout, result.stdout
        if command[1] == "search":
            assert "activation energy" in result.stdout.lower(), result.stdout
