"""The packages that moved: rar.agent → rar.loop, rar.agents → rar.science.protocols.

The old names keep working for one release: each old module warns once, at the line that
imported it, and hands out the new modules' own objects. RAR's own code, tests and benchmarks
never use them (this file and the shims excepted).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from rar._moved import MOVED, REMOVED_IN, current_name
from rar.errors import RarDeprecationWarning
from rar.replay.source import exception_from_record

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SHIM_DIRS = (SRC / "rar" / "agent", SRC / "rar" / "agents")
OLD_PACKAGES = ("rar.agent", "rar.agents")


def _python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def _old(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RarDeprecationWarning)
        return importlib.import_module(name)


def _is_old(module: str) -> bool:
    return any(module == old or module.startswith(old + ".") for old in OLD_PACKAGES)


# --- the old names warn once and give the same objects -----------------------------------

WARNINGS_SCRIPT = """
import json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import rar.agents
    from rar.agents.bdi import BDIState
    import rar.agents.contract_net
    from rar.agent import Agent
    from rar.agent.loop import Agent as LoopAgent
    import rar.agents.bdi, rar.agent.loop           # already imported: no second warning
    from rar.agents import bdi, acl, Mode            # acl on first use, through the package
import rar.loop, rar.science.protocols as new
print(json.dumps({
    "warnings": [[type(w.message).__name__, str(w.message), w.filename, w.lineno]
                 for w in caught],
    "same": [
        BDIState is new.bdi.BDIState,
        rar.agents.bdi is new.bdi,
        bdi is new.bdi,
        acl is new.acl,
        rar.agents.contract_net is new.contract_net,
        rar.agents.contract_net.ContractNet is new.ContractNet,
        Mode is new.Mode,
        rar.agents.audit is new.audit,
        Agent is LoopAgent is rar.loop.Agent,
        rar.agent.loop is rar.loop,
    ],
}))
"""


def test_each_old_module_warns_once_at_the_importing_line_and_gives_the_new_objects() -> None:
    done = _python(WARNINGS_SCRIPT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(report["same"]), report["same"]
    lines = WARNINGS_SCRIPT.splitlines()

    def line_of(text: str) -> int:
        return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text))

    expected = [
        ("rar.agents", "rar.science.protocols", line_of("import rar.agents")),
        ("rar.agents.bdi", "rar.science.protocols.bdi", line_of("from rar.agents.bdi")),
        (
            "rar.agents.contract_net",
            "rar.science.protocols.contract_net",
            line_of("import rar.agents.contract_net"),
        ),
        ("rar.agent", "rar.loop", line_of("from rar.agent import")),
        ("rar.agent.loop", "rar.loop", line_of("from rar.agent.loop")),
        ("rar.agents.acl", "rar.science.protocols.acl", line_of("from rar.agents import bdi")),
    ]
    assert [(cat, filename) for cat, _, filename, _ in report["warnings"]] == [
        ("RarDeprecationWarning", "<string>")
    ] * len(expected)
    for (_, message, _, lineno), (old, new, line) in zip(report["warnings"], expected, strict=True):
        assert message == (
            f"{old} is deprecated and will be removed in RAR {REMOVED_IN}: import {new} instead"
        )
        assert lineno == line, message


def test_the_default_filters_show_the_warning_to_a_script() -> None:
    done = _python("from rar.agents.bdi import BDIState")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"<string>:1: RarDeprecationWarning: rar.agents is deprecated and will be removed in RAR "
        f"{REMOVED_IN}: import rar.science.protocols instead",
        f"<string>:1: RarDeprecationWarning: rar.agents.bdi is deprecated and will be removed in "
        f"RAR {REMOVED_IN}: import rar.science.protocols.bdi instead",
    ]


def test_warnings_as_errors_make_an_old_import_fail() -> None:
    done = _python("import rar.agent", "-W", "error::DeprecationWarning")
    assert done.returncode == 1
    assert "RarDeprecationWarning: rar.agent is deprecated" in done.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_module_gives_the_new_objects(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    module = _old(old)
    if old in OLD_PACKAGES:  # a package of its own (its submodules are the shims), same names
        assert module is not new
        names = list(new.__all__)
        assert names and list(module.__all__) == names
        for name in names:
            assert getattr(module, name) is getattr(new, name), name
    else:  # the module itself
        assert module is new
        assert sys.modules[old] is new


def test_objects_made_under_one_name_are_instances_under_the_other() -> None:
    from rar.loop import StopReason
    from rar.science.protocols.bdi import BDIState
    from rar.science.protocols.errors import IllegalTransitionError, ProtocolError
    from rar.science.protocols.modes import Mode

    old_bdi, old_errors, old_modes = (_old(f"rar.agents.{n}") for n in ("bdi", "errors", "modes"))
    old_loop = _old("rar.agent.loop")
    assert isinstance(BDIState("planner"), old_bdi.BDIState)
    assert isinstance(old_bdi.BDIState("planner"), BDIState)
    assert old_modes.Mode("owl_dl") is Mode.OWL_DL
    assert old_loop.StopReason.COMPLETED is StopReason.COMPLETED
    with pytest.raises(old_errors.ProtocolError):
        raise IllegalTransitionError("no such move")
    assert issubclass(old_errors.IllegalTransitionError, ProtocolError)


def test_a_recorded_exception_of_a_moved_module_is_recreated_without_the_shims() -> None:
    from rar.science.protocols.errors import ProtocolError

    assert current_name("rar.agents.errors") == "rar.science.protocols.errors"
    assert current_name("rar.store") == "rar.store"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RarDeprecationWarning)
        exc = exception_from_record(
            {"type": "ProtocolError", "message": "bad bid", "module": "rar.agents.errors"}
        )
    assert type(exc) is ProtocolError and str(exc) == "bad bid"


# --- RAR's own code uses the new names -----------------------------------------------------


def _modules_under_src() -> list[str]:
    names = []
    for path in sorted((SRC / "rar").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_the_shims_are_exactly_the_moved_modules() -> None:
    assert {name for name in _modules_under_src() if _is_old(name)} == set(MOVED)
    assert not any(_is_old(new) for new in MOVED.values())


def test_every_module_imports_with_rar_deprecation_warnings_as_errors() -> None:
    modules = [m for m in _modules_under_src() if not _is_old(m) and m != "rar.__main__"]
    assert "rar.science.protocols.bdi" in modules and "rar.loop" in modules
    code = (
        "import importlib, json, sys, warnings\n"
        "from rar.errors import RarDeprecationWarning\n"
        "warnings.simplefilter('error', RarDeprecationWarning)\n"
        "failed = {}\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed[name] = f'{type(exc).__name__}: {exc}'\n"
        "old = sorted(m for m in sys.modules if m.split('.')[:2] in (['rar', 'agent'],"
        " ['rar', 'agents']))\n"
        "print(json.dumps({'failed': failed, 'old': old}))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"failed": {}, "old": []}


_OLD_NAME = re.compile(r"\brar\.agents?\b")
_OLD_TARGET = re.compile(r"rar\.agents?(\.\w+)*(:[\w.]+)?")  # a whole string naming old code


def _old_imports(path: Path, root: Path = ROOT) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if _is_old(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if _is_old(node.module) else []
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _OLD_TARGET.fullmatch(node.value)
        ):  # importlib.import_module("rar.agents.bdi"), an entrypoint, a monkeypatch target
            names = [node.value.partition(":")[0]]
        found += [(getattr(node, "lineno", 0), name) for name in names]
    return [f"{path.relative_to(root)}:{line}: {name}" for line, name in sorted(found)]


def test_no_code_of_rar_imports_an_old_name() -> None:
    files = [
        path
        for folder in ("src", "tests", "bench", "examples")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not any(path.is_relative_to(shim) for shim in SHIM_DIRS)
        and path not in (Path(__file__).resolve(), SRC / "rar" / "_moved.py")
    ]
    assert len(files) > 50
    assert [hit for path in files for hit in _old_imports(path)] == []


def test_the_docs_use_the_new_names() -> None:
    # docs/design.md's "Package layout" names the old ones once, to say they are going
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    hits = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in pages
        if page.name != "design.md"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if _OLD_NAME.search(line) or "rar/agents" in line or "rar/agent/" in line
    ]
    assert hits == []


def test_the_check_finds_every_way_of_naming_an_old_module(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    source = (
        '"""rar.agents in prose is fine."""\n'
        "import rar.agents.bdi\n"
        "from rar.agent import Agent\n"
        "from rar import loop\n"
        "from rar.science.protocols import bdi\n"
        "def f():\n"
        "    from rar.agents._units import registry\n"
        "importlib.import_module('rar.agents.acl')\n"
        "monkeypatch.setattr('rar.agent.loop.time', None)\n"
        "entrypoint = 'rar.agent.loop:main'\n"
    )
    path.write_text(source, encoding="utf-8")
    assert _old_imports(path, root=tmp_path) == [
        f"probe.py:{line}: {name}"
        for line, name in [
            (2, "rar.agents.bdi"),
            (3, "rar.agent"),
            (7, "rar.agents._units"),
            (8, "rar.agents.acl"),
            (9, "rar.agent.loop.time"),
            (10, "rar.agent.loop"),
        ]
    ]


def test_the_protocols_load_without_the_science_runtime() -> None:
    code = (
        "import sys, rar.science.protocols.bdi\n"
        "print(sorted(m for m in sys.modules if m.startswith('rar.')))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout))
    assert "rar.science.protocols.audit" in loaded
    above = {m for m in loaded if m.startswith("rar.science.") and ".protocols" not in m}
    assert above == set() and not loaded & {"rar.loop", "rar.flow", "rar.llm", "rar.sandbox"}
