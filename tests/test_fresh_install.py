"""A fresh install, as a new user makes it: a copy of the checkout, a virtual environment made
from a Python that has none of RAR's dependencies, the README's quickstart command verbatim.

This is the test that sees what the rest of the suite cannot: a dependency that only the test
extras bring, a sandbox that runs the base interpreter instead of the environment's. It needs
a bare Python with ``venv`` (Debian: ``/usr/bin/python3`` and ``python3-venv``; or name one in
``RAR_BARE_PYTHON``) and the package index that ``pip install`` uses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx2
import pytest

from test_readme import blocks

ROOT = Path(__file__).resolve().parents[1]
BARE = os.environ.get("RAR_BARE_PYTHON", "/usr/bin/python3")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(BARE).is_file()
        or subprocess.run([BARE, "-c", "import venv, ensurepip"], capture_output=True).returncode,
        reason=f"no bare Python with venv at {BARE} (apt-get install python3-venv, or set "
        "RAR_BARE_PYTHON)",
    ),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]


def _fresh_copy(target: Path) -> Path:
    """The checkout's files as a fresh clone would have them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _user_environment(venv: Path, home: Path) -> dict[str, str]:
    """A new user's shell with the venv activated: no provider variable, no PYTHONPATH."""
    return {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "http_", "https_"))},
    }


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    """A copy of the checkout, a venv from the bare Python, and the quickstart's output."""
    base = tmp_path_factory.mktemp("fresh")  # under /tmp: the sandbox must see it all the same
    checkout = _fresh_copy(base / "rar")
    venv = base / "venv"
    subprocess.run([BARE, "-m", "venv", str(venv)], check=True, timeout=300)
    env = _user_environment(venv, base / "home")
    (base / "home").mkdir()
    quickstart = blocks("bash")[0].strip()
    assert quickstart.startswith("pip install . && rar run "), quickstart
    done = subprocess.run(
        ["bash", "-c", quickstart], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return checkout, env, done.stdout


def test_the_venv_is_not_the_base_python(fresh: tuple[Path, dict[str, str], str]) -> None:
    _, env, _ = fresh
    probe = subprocess.run(
        ["python", "-c", "import sys, numpy; print(sys.prefix != sys.base_prefix, numpy.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    inside, numpy_file = probe.stdout.split()
    assert inside == "True" and numpy_file.startswith(env["VIRTUAL_ENV"])


def test_the_installed_package_carries_its_license(fresh: tuple[Path, dict[str, str], str]) -> None:
    _, env, _ = fresh
    ask = (
        "import importlib.metadata as m; d = m.distribution('rar'); "
        "print(next(f for f in d.files if f.name == 'LICENSE').read_text()[:200])"
    )
    probe = subprocess.run(["python", "-c", ask], env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert "Apache License" in probe.stdout


def test_the_quickstart_prints_the_computed_activation_energy_with_the_audit_passed(
    fresh: tuple[Path, dict[str, str], str],
) -> None:
    _, _, output = fresh
    value = re.search(r"Ea = (\d+(?:\.\d+)?) ± (\d+(?:\.\d+)?) kJ/mol", output)
    assert value, output
    assert abs(float(value.group(1)) - 125.1) < 0.5  # the sandbox computed it
    assert 0 < float(value.group(2)) < 1  # with the standard error of the fit
    audit = re.search(r"Audit passed: (\d+)/(\d+) checks", output)
    assert audit and audit.group(1) == audit.group(2), output
    assert re.search(r"Run \S+ \(completed\)", output), output


def test_the_viewer_answers_its_first_request_and_export_works(
    fresh: tuple[Path, dict[str, str], str],
) -> None:
    checkout, env, output = fresh
    run_id = re.search(r"Run (\S+) \(completed\)", output)
    assert run_id
    exported = subprocess.run(
        ["rar", "export", run_id.group(1), "--format", "html", "-o", "run.html"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert (checkout / "run.html").read_text().startswith("<!doctype html>")
    server = subprocess.Popen(
        ["rar", "view", "--no-open", "--port", "0"],
        cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert url, line + (server.stderr.read() if server.poll() is not None else "")
        runs = httpx2.get(url.group(1) + "api/runs", timeout=10).json()["runs"]
        assert [run["id"] for run in runs] == [run_id.group(1)]
    finally:
        server.terminate()
        server.wait(timeout=10)
