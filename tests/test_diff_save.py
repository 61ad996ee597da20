"""`rar diff A B --save`: the diff as JSON and Markdown in `<store>/diffs/`, written atomically,
outside every run directory; a store that cannot be written is refused before anything is done.
(The refusal on a really read-only store is in test_readonly_store.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.errors import StoreError
from rar.llm import Message
from rar.replay.diff import diff_runs
from rar.replay.diff_report import diff_markdown, save_diff
from rar.store.store import Store
from rar.store.verify import verify_store
from test_diff import SCRIPT, record_agent

OTHER: list[str | Message] = [*SCRIPT[:2], "The answer is 16.0 | exactly <b>16</b>."]


def rar(store_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store_path), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def runs(store: Store) -> tuple[str, str]:
    return record_agent(store), record_agent(store, OTHER)


def test_save_writes_json_and_markdown_under_diffs_and_prints_the_paths(
    store: Store, store_path: Path, runs: tuple[str, str]
) -> None:
    a, b = runs
    code, out, _err = rar(store_path, "diff", a[-8:], b[-8:], "--save")
    assert code == 1  # saving does not change the verdict
    saved_json = store_path / "diffs" / f"{a}..{b}.json"
    saved_md = store_path / "diffs" / f"{a}..{b}.md"
    assert f"saved {saved_json}" in out and f"saved {saved_md}" in out
    assert orjson.loads(saved_json.read_bytes()) == diff_runs(store, a, b).as_dict()
    assert saved_md.read_text() == diff_markdown(diff_runs(store, a, b))
    assert sorted(os.listdir(store_path / "diffs")) == [saved_json.name, saved_md.name]  # no temp


def test_save_with_json_keeps_stdout_the_diff_and_names_the_files_on_stderr(
    store_path: Path, runs: tuple[str, str]
) -> None:
    a, b = runs
    code, out, err = rar(store_path, "diff", a, b, "--save", "--json")
    assert code == 1
    assert orjson.loads(out)["a"]["run_id"] == a
    assert f"saved {store_path / 'diffs' / f'{a}..{b}.json'}" in err


def test_the_runs_stay_sealed_and_verify_after_a_save(
    store: Store, store_path: Path, runs: tuple[str, str]
) -> None:
    a, b = runs
    before = {run: sorted(os.listdir(store_path / run)) for run in runs}
    assert rar(store_path, "diff", a, b, "--save")[0] == 1
    assert {run: sorted(os.listdir(store_path / run)) for run in runs} == before
    assert rar(store_path, "list", "--json")[1].count('"run_id"') == 2  # diffs/ is no run
    assert verify_store(Store(store_path)).ok


def test_saving_again_replaces_the_files_with_the_same_bytes(
    store: Store, runs: tuple[str, str]
) -> None:
    diff = diff_runs(store, *runs)
    first = save_diff(store, diff)
    data = first.json.read_bytes(), first.markdown.read_bytes()
    again = save_diff(store, diff)
    assert (again.json.read_bytes(), again.markdown.read_bytes()) == data


def test_the_markdown_report_keeps_tables_intact_and_carries_no_raw_html(
    store: Store, runs: tuple[str, str]
) -> None:
    text = diff_markdown(diff_runs(store, *runs))
    assert text.startswith(f"# Diff of run {runs[0]} and run {runs[1]}\n")
    assert "**different**" in text and "## First divergence" in text
    assert "```diff\n" in text and "+The answer is 16.0 | exactly <b>16</b>." in text  # fenced
    table_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert all("<b>" not in row for row in table_rows)
    assert all(row.count(" | ") - row.count("\\|") >= 1 for row in table_rows)


def test_equivalent_runs_save_too_and_exit_0(store: Store, store_path: Path) -> None:
    a, b = record_agent(store), record_agent(store)
    code, out, _ = rar(store_path, "diff", a, b, "--save")
    assert code == 0 and "saved" in out
    assert "**equivalent**" in (store_path / "diffs" / f"{a}..{b}.md").read_text()


def test_a_store_opened_read_only_is_refused_before_anything_is_written(
    store: Store, store_path: Path, runs: tuple[str, str]
) -> None:
    readonly = Store(store_path, read_only=True)
    with pytest.raises(StoreError) as caught:
        save_diff(readonly, diff_runs(readonly, *runs))
    assert caught.value.exit_code == 3
    assert str(store_path) in caught.value.message and "--json" in caught.value.message
    assert not (store_path / "diffs").exists()
