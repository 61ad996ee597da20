"""The sandbox runs the Python environment RAR runs in: a venv's interpreter and site-packages,
wherever the venv lives (here: under /tmp, which the sandbox covers with its own tmpfs), and
nothing of the host beyond that installation. Without numpy & co. it says so plainly."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import rar
from rar.sandbox import Sandbox, SandboxStartError
from rar.sandbox import interpreter as _interpreter

SRC = str(Path(rar.__file__).resolve().parents[1])  # the checkout's src/, never bound
HAVE_BWRAP = shutil.which("bwrap") is not None
MODES = [
    pytest.param(
        False,
        id="bubblewrap",
        marks=pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed"),
    ),
    pytest.param(True, id="unsafe_local"),
]
DRIVER = """
import json, sys
from rar.sandbox import Sandbox
workspace, unsafe, cells = sys.argv[1], sys.argv[2] == "unsafe", json.loads(sys.argv[3])
with Sandbox(workspace, unsafe_local=unsafe) as box:
    results = [box.run_cell(code).as_dict() for code in cells]
    print(json.dumps({"info": box.info, "missing": list(box.missing_libraries),
                      "results": results}))
"""
PROBE = """
import os, sys
import rar_sandbox_marker
marker = rar_sandbox_marker.VALUE
prefix, executable = sys.prefix, sys.executable
flags = [sys.flags.no_user_site, sys.flags.safe_path]
pythonpath = "PYTHONPATH" in os.environ
import importlib.util
libraries = {n: getattr(importlib.util.find_spec(n), "origin", None)
             for n in ("numpy", "scipy", "matplotlib")}
"""
LIBRARIES = ("numpy", "scipy", "matplotlib")
FIND_LIBRARIES = (
    "import importlib.util, json\n"
    f"print(json.dumps({{n: getattr(importlib.util.find_spec(n), 'origin', None) "
    f"for n in {list(LIBRARIES)!r}}}))"
)


def _venv(python: str, where: Path, *options: str) -> tuple[Path, Path]:
    """A venv made by ``python`` at ``where``; returns it and its own site-packages."""
    subprocess.run([python, "-m", "venv", "--without-pip", *options, str(where)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([str(where / "bin" / "python"), "-c", ask], check=True,
                             capture_output=True, text=True, timeout=60).stdout.strip()  # fmt: skip
    return where, Path(purelib)


@pytest.fixture(scope="module")
def tmp_venv() -> Iterator[Path]:
    """A venv under /tmp (inheriting the base's numpy, scipy, matplotlib, pydantic), with a
    module of its own; next to it a file the sandbox must not show."""
    top = Path(tempfile.mkdtemp(prefix="rar-venv-test-", dir="/tmp"))
    try:
        venv, site = _venv(sys.executable, top / "v", "--system-site-packages")
        (site / "rar_sandbox_marker.py").write_text("VALUE = 'from the venv'\n")
        (top / "secret.txt").write_text("sk-test-next-to-the-venv\n")
        yield venv
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def bare_venv() -> Iterator[Path]:
    """What a new user has: a venv of Debian's python3 (no numpy, scipy or matplotlib), rar
    importable through a .pth file (rar.sandbox needs the standard library only)."""
    base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    top = Path(tempfile.mkdtemp(prefix="rar-bare-venv-test-", dir="/tmp"))
    try:
        venv, site = _venv(base, top / "v")
        (site / "rar_src.pth").write_text(SRC + "\n")
        yield venv
    finally:
        shutil.rmtree(top, ignore_errors=True)


def drive(python: Path, workspace: Path, unsafe: bool, cells: list[str], **env: str) -> dict:  # type: ignore[type-arg]
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env
    done = subprocess.run(
        [str(python), "-c", DRIVER, str(workspace), "unsafe" if unsafe else "bwrap",
         json.dumps(cells)],
        capture_output=True, text=True, timeout=180, env=environ,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("unsafe", MODES)
def test_the_worker_runs_the_venvs_interpreter_and_site_packages(
    tmp_venv: Path, tmp_path: Path, unsafe: bool
) -> None:
    python = tmp_venv / "bin" / "python"
    out = drive(python, tmp_path / "ws", unsafe, [PROBE], PYTHONPATH=SRC)  # parent only
    result = out["results"][0]
    assert result["status"] == "ok", result["error"]
    found = result["variables"]
    assert found["marker"] == "from the venv"
    assert found["prefix"] == str(tmp_venv)
    assert found["executable"] == str(python)
    assert found["flags"] == [1, True]  # -s and -P
    assert found["pythonpath"] is False
    # what this venv's interpreter finds on the host (the base's libraries through
    # --system-site-packages, or none when the tests themselves run in a venv)
    here = json.loads(
        subprocess.run([str(python), "-c", FIND_LIBRARIES], capture_output=True, text=True,
                       check=True, timeout=60).stdout
    )  # fmt: skip
    assert found["libraries"] == here  # inside the sandbox, from the same files
    absent = [n for n in LIBRARIES if here[n] is None]
    assert out["missing"] == absent and out["info"]["missing_libraries"] == absent
    assert out["info"]["python"] == {"executable": str(python), "prefix": str(tmp_venv)}


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
def test_only_the_python_installation_is_bound(tmp_venv: Path, tmp_path: Path) -> None:
    home = str(Path.home())
    site = next((tmp_venv / "lib").glob("python3*/site-packages"))
    probe = (
        "import os\n"
        f"secret = os.path.exists({str(tmp_venv.parent / 'secret.txt')!r})\n"
        f"beside = sorted(os.listdir({str(tmp_venv.parent)!r}))\n"
        f"checkout = os.path.exists({SRC!r})\n"
        f"home = sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else []\n"
        "try:\n    import rar\n    rar_found = True\nexcept ImportError:\n    rar_found = False\n"
        f"try:\n    open({str(site / 'written.py')!r}, 'w')\n    written = True\n"
        "except OSError:\n    written = False\n"
    )
    out = drive(tmp_venv / "bin" / "python", tmp_path / "ws", False, [probe], PYTHONPATH=SRC)
    result = out["results"][0]
    assert result["status"] == "ok", result["error"]
    found = result["variables"]
    assert found["secret"] is False and found["beside"] == ["v"]
    assert found["checkout"] is False and found["rar_found"] is False  # .pth paths: not bound
    assert found["written"] is False and not (site / "written.py").exists()
    toward = {Path(p).relative_to(home).parts[0] for p in (sys.base_prefix, str(tmp_venv))
              if Path(p).is_relative_to(home)}  # fmt: skip
    assert set(found["home"]) <= toward  # only the path to the installation, not the home


@pytest.mark.parametrize("unsafe", MODES)
def test_missing_scientific_libraries_are_named_with_the_fix(
    bare_venv: Path, tmp_path: Path, unsafe: bool
) -> None:
    cells = ["import numpy as np", "from scipy import stats", "import matplotlib.pyplot as plt",
             "import no_such_module_here"]  # fmt: skip
    out = drive(bare_venv / "bin" / "python", tmp_path / "ws", unsafe, cells)
    assert out["missing"] == ["numpy", "scipy", "matplotlib"]
    assert out["info"]["missing_libraries"] == ["numpy", "scipy", "matplotlib"]
    assert out["info"]["python"]["prefix"] == str(bare_venv)
    for name, result in zip(("numpy", "scipy", "matplotlib"), out["results"], strict=False):
        assert result["status"] == "error"
        assert result["error"]["type"] == "ModuleNotFoundError"
        assert result["error"]["message"] == (
            f"{name} is not installed in the Python environment running RAR ({bare_venv}): "
            f"pip install {name}"
        )
        json.dumps(result, allow_nan=False)
    other = out["results"][3]["error"]
    assert other["message"] == "No module named 'no_such_module_here'"  # not ours to advise


def test_this_environments_libraries_are_reported_as_they_are(tmp_path: Path) -> None:
    absent = tuple(
        n for n in ("numpy", "scipy", "matplotlib") if importlib.util.find_spec(n) is None
    )
    with Sandbox(tmp_path / "ws", unsafe_local=True, preload=False) as box:
        assert box.missing_libraries == absent
        assert box.info["missing_libraries"] == list(absent)
        for name in LIBRARIES:
            result = box.run_cell(f"import {name}")
            assert result.ok == (name not in absent), result.error


# --- what gets bound, planned without starting anything ---------------------------------------


def test_the_executables_links_and_binary_outside_the_prefixes_are_recreated(
    tmp_path: Path,
) -> None:
    venv, elsewhere = tmp_path / "venv", tmp_path / "opt" / "bin"
    (venv / "bin").mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    (elsewhere / "python3.11").write_text("")
    (elsewhere / "python3").symlink_to("python3.11")
    (venv / "bin" / "python").symlink_to(elsewhere / "python3")
    base = str(tmp_path / "base")
    os.mkdir(base)
    plan = _interpreter.describe(str(venv / "bin" / "python"), (str(venv), base, str(venv), base),
                                 (), home=str(tmp_path / "home"), cwd="/")  # fmt: skip
    assert plan.problem is None and plan.is_venv
    assert [m.path for m in plan.mounts] == [base, str(venv)]
    assert plan.links == ((str(elsewhere / "python3"), "python3.11"),)  # the venv's own is bound
    assert plan.files == (str(elsewhere / "python3.11"),)  # the binary, not its directory
    args = plan.bwrap_args(set())
    binds = [args[i + 1 : i + 3] for i, arg in enumerate(args) if arg == "--ro-bind"]
    binary = str(elsewhere / "python3.11")
    assert binds == [[base, base], [str(venv), str(venv)], [binary, binary]]  # not opt/bin
    assert ["--symlink", "python3.11", str(elsewhere / "python3")] == args[-6:-3]


def test_an_environment_under_a_sandbox_mount_point_is_relocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    venv = work / "project" / ".venv"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(_interpreter, "RESERVED", (str(work),))
    plan = _interpreter.describe(str(venv / "bin" / "python"), (str(venv),) * 4, (),
                                 home="/nonexistent", cwd="/")  # fmt: skip
    (mount,) = plan.mounts
    assert mount.inside == _interpreter.RELOCATED + str(venv)
    assert plan.inside(str(venv / "bin" / "python")) == mount.inside + "/bin/python"


@pytest.mark.parametrize("holds", ["home", "cwd"])
def test_an_environment_holding_the_home_or_current_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holds: str
) -> None:
    prefix = tmp_path / "everything"  # e.g. `python -m venv ~` or `python -m venv .`
    inner = prefix / "projects"
    inner.mkdir(parents=True)
    places = {"home": "/nonexistent", "cwd": "/", holds: str(inner)}
    plan = _interpreter.describe(str(prefix / "bin" / "python"), (str(prefix),) * 4, (),
                                 home=places["home"], cwd=places["cwd"])  # fmt: skip
    assert plan.problem is not None and str(inner) in plan.problem
    with pytest.raises(SandboxStartError, match="contains"):
        plan.bwrap_args(set())
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: "/usr/bin/bwrap")
    monkeypatch.setattr(_interpreter, "current", lambda: plan)
    with pytest.raises(SandboxStartError, match="virtual environment of its own"):
        Sandbox(tmp_path / "ws", preload=False)
