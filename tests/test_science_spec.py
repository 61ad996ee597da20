"""Task specs load the RAR paper's keys next to RAR's own, and name every mistake at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from rar.errors import ConfigError
from rar.science.spec import TaskSpec, load_spec, parse_spec

PAPER_SPEC = """\
# run_spec.yaml, as in the RAR paper's appendix B
task_description: "Analyze the application of quantum computing in cryptography"
mode: "owl_dl"
model: "gemini-3-pro-preview"
thinking_level: "high"
seed: 42
corpus_path: "./corpus"
max_steps: 20
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_papers_spec_loads(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, PAPER_SPEC))
    assert spec == TaskSpec(
        task="Analyze the application of quantum computing in cryptography",
        mode="owl_dl",
        model="gemini-3-pro-preview",
        thinking_level="high",
        seed=42,
        corpus="./corpus",
        max_steps=20,
    )


def test_the_thinking_level_defaults_to_the_modes() -> None:
    assert parse_spec({"task": "q"}, "spec.yaml").thinking_level is None


@pytest.mark.parametrize(
    ("key", "alias"), [("task", "task_description"), ("corpus", "corpus_path")]
)
def test_a_key_and_its_alias_together_are_an_error_naming_both(
    tmp_path: Path, key: str, alias: str
) -> None:
    question = "" if key == "task" else "task: q\n"
    path = _write(tmp_path, f"{question}{key}: a\n{alias}: b\n")
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    assert f"{key!r}" in caught.value.message and f"{alias!r}" in caught.value.message
    assert str(path) in caught.value.message


def test_an_alias_given_in_python_is_read_too() -> None:
    spec = TaskSpec.model_validate({"task_description": "q", "corpus_path": "docs"})
    assert (spec.task, spec.corpus) == ("q", "docs")


def test_every_unknown_key_is_named_in_one_error_with_the_valid_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "task: q\nmodd: owl_dl\nthinking: high\ncolour: blue\n")
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    message = caught.value.message
    assert message.startswith(f"{path}: unknown keys ")
    assert "'modd' (did you mean 'mode'?)" in message
    assert "'thinking' (did you mean 'thinking_level'?)" in message
    assert "'colour'" in message and "'colour' (did you mean" not in message
    assert "valid keys: task, mode, model, thinking_level, seed, corpus" in message
    assert "task_description, corpus_path" in message


def test_every_wrong_value_is_named_in_the_same_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "task: q\nmode: owl_huge\nthinking_level: max\nmax_steps: 0\nzz: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    message = caught.value.message
    for part in ("'zz'", "field 'mode'", "field 'thinking_level'", "field 'max_steps'"):
        assert part in message
    assert "minimal" in message  # the levels are listed


def test_a_missing_task_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"field 'task': Field required"):
        load_spec(_write(tmp_path, "mode: owl_dl\n"))


def test_a_spec_that_is_not_a_mapping_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "- task\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_spec(path)
