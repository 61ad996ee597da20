"""Golden trajectories for pytest: record an agent run once, then replay it strictly in every test.

The plugin is installed with RAR (entry point ``pytest11``: ``rar``). A test hands an
entrypoint ``function(run, **inputs)`` to the ``rar_cassette`` fixture::

    from rar.testing import GoldenResult

    def test_one_tool_call(rar_cassette):
        golden: GoldenResult = rar_cassette.run(my_agent, inputs={"question": "2 + 3?"},
                                                name="one_tool_call")
        assert golden.result["answer"] == "The sum is 5."

* ``pytest --rar-record`` records (or overwrites) the cassette ``tests/golden/one_tool_call/``:
  a small RAR store holding that one run. Check it in.
* ``pytest`` replays it strictly: every model and tool call is served from the cassette, and
  the test fails with the first divergence (span, ordinal, kind, reason, field differences
  expected -> actual) as soon as the code asks for anything else. A missing cassette fails the
  test and says to run with ``--rar-record``; nothing is ever recorded without being asked.
* ``pytest --rar-record-mode=missing`` records only the cassettes that do not exist yet
  (``--rar-record`` is ``--rar-record-mode=all``; the default is ``none``).

``golden.result`` is what the function returned in the replay (``golden.report`` is the
:class:`~rar.replay.engine.ReplayReport`). If the recorded run raised, the replay raises the
same exception. Replays run in a temporary copy of the cassette, so they never change it.

**Names and places.** ``name`` defaults to the marker's name, else ``<test module>/<test name>``.
Cassettes live in ``golden/`` next to the test module; the ini option ``rar_cassettes`` (a
directory relative to the rootdir) or the marker's ``cassettes=`` (relative to the test module)
put them elsewhere::

    @pytest.mark.rar_golden("parallel_tools", cassettes="cassettes")
    def test_parallel(rar_cassette):
        rar_cassette.run(my_agent, inputs={...})

Records use ``Redactor(env={})`` (nothing from the test process's environment leaks into the
cassette) and seed 0; ``rar_cassette.run(..., seed=..., redactor=..., goal=..., tags=...)``
changes them. In the cassette directory, ``* -text`` in a ``.gitattributes`` keeps cassettes
byte-exact in git, and ``index.sqlite`` in a ``.gitignore`` ignores what the ``rar`` CLI adds when
it reads one. Annotate the fixture as ``rar.testing.plugin.RarCassette``. See ``docs/testing.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a test uses the fixture: pytest startup stays cheap
    from rar.redaction import Redactor
    from rar.testing.cassette import Entrypoint, GoldenResult

MODES = ("none", "missing", "all")
_RECORDED = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rar", "RAR golden trajectories (cassettes)")
    group.addoption(
        "--rar-record",
        action="store_const",
        const="all",
        dest="rar_record",
        default=None,
        help="record (overwrite) the RAR cassette of every selected test, then replay it",
    )
    group.addoption(
        "--rar-record-mode",
        choices=MODES,
        dest="rar_record_mode",
        default=None,
        help="none (default): replay only, a missing cassette fails; missing: record only "
        "cassettes that do not exist; all: same as --rar-record",
    )
    parser.addini(
        "rar_cassettes",
        "directory of RAR cassettes, relative to the rootdir (default: golden/ next to each "
        "test module)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rar_golden(name=None, *, cassettes=None): the RAR cassette the rar_cassette fixture "
        "uses (name; directory relative to the test module)",
    )
    config.stash[_RECORDED] = []


def record_mode(config: pytest.Config) -> str:
    """``none``, ``missing`` or ``all``: what this session may record."""
    flag = config.getoption("rar_record", None)
    mode = config.getoption("rar_record_mode", None)
    if flag and mode not in (None, "all"):
        raise pytest.UsageError(f"--rar-record contradicts --rar-record-mode={mode}")
    return str(flag or mode or "none")


class RarCassette:
    """The ``rar_cassette`` fixture: record or replay golden runs for one test."""

    def __init__(self, request: pytest.FixtureRequest, tmp_factory: pytest.TempPathFactory) -> None:
        from rar.testing.cassette import check_name, safe_name

        self._request = request
        self._tmp_factory = tmp_factory
        self.mode = record_mode(request.config)
        marker = request.node.get_closest_marker("rar_golden")
        marker_name = None
        marker_dir = None
        if marker is not None:
            unknown = set(marker.kwargs) - {"name", "cassettes"}
            if unknown or len(marker.args) > 1:
                raise TypeError(
                    f"{request.node.nodeid}: rar_golden takes (name=None, *, cassettes=None)"
                )
            marker_name = marker.args[0] if marker.args else marker.kwargs.get("name")
            marker_dir = marker.kwargs.get("cassettes")
        module_dir = request.path.parent
        ini = str(request.config.getini("rar_cassettes") or "")
        if marker_dir is not None:
            self.root = (module_dir / str(marker_dir)).resolve()
        elif ini:
            self.root = (request.config.rootpath / ini).resolve()
        else:
            self.root = module_dir / "golden"
        self.default_name = check_name(
            str(marker_name)
            if marker_name is not None
            else safe_name(f"{request.path.stem}/{request.node.name}")
        )
        self._used: set[str] = set()

    def path(self, name: str | None = None) -> Path:
        """The directory of cassette ``name`` (default: this test's)."""
        from rar.testing.cassette import check_name

        return self.root / check_name(name or self.default_name)

    def run(
        self,
        entrypoint: Entrypoint,
        inputs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        seed: int = 0,
        redactor: Redactor | None = None,
        **record_options: Any,
    ) -> GoldenResult:
        """Replay cassette ``name`` with ``entrypoint(run, **inputs)`` (record it when asked).

        Returns the :class:`~rar.testing.GoldenResult` (``.result``, ``.report``). Fails the
        test with the first divergence when the code no longer does what was recorded, and
        when the cassette is missing and recording was not asked for.
        """
        from rar.redaction import Redactor
        from rar.testing.cassette import (
            CassetteError,
            GoldenMismatchError,
            cassette_exists,
            check_name,
            record_cassette,
            replay_cassette,
        )

        cassette_name = check_name(name or self.default_name)
        if cassette_name in self._used:
            raise ValueError(
                f"{self._request.node.nodeid} uses cassette {cassette_name!r} twice; give each "
                "rar_cassette.run() its own name="
            )
        self._used.add(cassette_name)
        path = self.root / cassette_name
        redactor = redactor if redactor is not None else Redactor(env={})
        exists = cassette_exists(path)
        nodeid = self._request.node.nodeid
        try:
            if self.mode == "all" or (self.mode == "missing" and not exists):
                outcome = record_cassette(
                    path,
                    entrypoint,
                    inputs=inputs,
                    seed=seed,
                    redactor=redactor,
                    name=cassette_name,
                    **record_options,
                )
                self._request.config.stash[_RECORDED].append(str(path))
                return outcome
            if exists:
                workdir = self._tmp_factory.mktemp("rar-replay-")
                return replay_cassette(
                    path,
                    entrypoint,
                    inputs=inputs,
                    workdir=workdir,
                    redactor=redactor,
                    name=cassette_name,
                )
            problem = (
                f"no RAR cassette {cassette_name!r} at {path}.\n"
                f"Record it with: pytest --rar-record {nodeid}"
            )
        except (GoldenMismatchError, CassetteError) as exc:
            problem = exc.message
            if problem.endswith("pytest --rar-record"):  # make the advice copy-pastable
                problem = f"{problem} {nodeid}"
        # failing outside the except clause keeps pytest from printing the message twice
        pytest.fail(problem, pytrace=False)


@pytest.fixture
def rar_cassette(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> RarCassette:
    """Record (with ``--rar-record``) or strictly replay golden RAR runs; see ``rar.testing``."""
    return RarCassette(request, tmp_path_factory)


def pytest_report_header(config: pytest.Config) -> str | None:
    mode = record_mode(config)
    return None if mode == "none" else f"rar: recording cassettes (mode {mode})"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    recorded = config.stash.get(_RECORDED, [])
    if recorded:
        terminalreporter.section("rar cassettes recorded")
        for path in recorded:
            terminalreporter.write_line(path)
