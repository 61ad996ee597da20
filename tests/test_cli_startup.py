"""``rar --help`` imports no command module, and lists exactly what the real commands say."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

import rar.cli as cli_module


def _help(width: int) -> str:
    runner = CliRunner()
    result = runner.invoke(cli_module.cli, ["--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_lazy_summaries_match_the_real_commands(width: int) -> None:
    for name in cli_module._LAZY:  # start from the lazy state
        cli_module.cli.commands.pop(name, None)
    lazy = _help(width)
    cli_module.load_all_commands()
    real = _help(width)
    assert lazy == real, (
        "a command's help changed: update its summary in rar.cli._LAZY to the first paragraph "
        "of its help text"
    )
    for name, (_, _, summary) in cli_module._LAZY.items():
        command = cli_module.cli.commands[name]
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert summary == first, name


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['rar', '--help']\n"
        "try:\n"
        "    runpy.run_module('rar', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('rar.cli.') and "
        "m not in ('rar.cli.options',))\n"
        "heavy = sorted(m for m in ('pydantic', 'rar.store', 'rar.runtime', 'orjson') "
        "if m in sys.modules)\n"
        "print('LOADED', loaded, heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED [] []" in out.stderr, out.stderr
    assert "replay" in out.stdout and "view" in out.stdout


def test_a_lazy_command_runs_and_has_its_own_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli_module.cli, ["replay", "--help"])
    assert result.exit_code == 0
    assert "Re-execute a run offline" in result.output
