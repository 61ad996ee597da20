"""Flow templates: {{key}}, {{{key}}}, [[key]] and [[key|hidden]] expand into splits."""

from __future__ import annotations

import json

import pytest

from rar.flow import Split, TemplateError, expand, merge_contexts


def test_the_hidden_variant_of_lm_lib_keeps_the_element_out_of_the_prompt() -> None:
    template = (
        "Analyze these items. Visible: [[name]] Hidden id used for internal scoring. [[id|hidden]]"
    )
    splits = expand(template, {"name": ["Alpha", "Beta"], "id": [42, 43]})
    assert [s.prompt for s in splits] == [
        "Analyze these items. Visible: Alpha Hidden id used for internal scoring. ",
        "Analyze these items. Visible: Beta Hidden id used for internal scoring. ",
    ]
    assert [s.context["id"] for s in splits] == [[42], [43]]
    assert [s.context["name"] for s in splits] == [["Alpha"], ["Beta"]]
    assert [(s.index, s.total) for s in splits] == [(0, 2), (1, 2)]
    assert "42" not in splits[0].prompt


def test_lists_join_with_blank_lines_scalars_show_as_text_and_json_is_verbatim() -> None:
    context = {"topic": "kinetics", "points": ["one", "two"], "data": {"T": [300, 310], "k": "é"}}
    (split,) = expand("{{topic}}:\n{{points}}\n{{{data}}}", context)
    assert split.prompt == 'kinetics:\none\n\ntwo\n{"T": [300, 310], "k": "é"}'
    assert split == Split(split.prompt, context, 0, 1)  # no branch: one split, context as given


def test_the_shortest_branched_list_sets_the_number_of_splits() -> None:
    splits = expand("[[a]]-[[b]]", {"a": [1, 2, 3], "b": ["x", "y"]})
    assert [s.prompt for s in splits] == ["1-x", "2-y"]
    assert expand("[[a]]", {"a": []}) == []


def test_an_element_that_is_not_text_shows_as_json() -> None:
    (split,) = expand("item: [[f]]", {"f": [{"name": "parser", "lines": 120}]})
    assert json.loads(split.prompt.removeprefix("item: ")) == {"name": "parser", "lines": 120}


def test_an_inserted_value_is_never_read_as_a_placeholder() -> None:
    context = {"a": "{{b}} [[c]] {{{b}}}", "b": "secret", "c": ["x"]}
    (split,) = expand("{{a}}", context)
    assert split.prompt == "{{b}} [[c]] {{{b}}}"


@pytest.mark.parametrize(
    ("template", "context", "message"),
    [
        ("{{nope}}", {"a": 1}, "agent summarizer: the template's {{nope}} names a key"),
        ("{{{nope}}}", {}, "the template's {{{nope}}} names a key the context does not hold"),
        ("[[nope|hidden]]", {"a": 1}, "(its keys: a)"),
        ("[[a]]", {"a": "text"}, "[[a]] branches over 'a', which must be a list, not str"),
    ],
)
def test_a_bad_placeholder_names_the_agent_and_the_key(
    template: str, context: dict[str, object], message: str
) -> None:
    with pytest.raises(TemplateError) as caught:
        expand(template, context, agent="summarizer")
    assert message in str(caught.value)


def test_merge_contexts_concatenates_list_keys_into_the_first() -> None:
    contexts = [{"f": ["a"], "n": [1], "keep": "first"}, {"f": ["b"], "n": 2}, {"other": 1}]
    assert merge_contexts(["f", "n"], contexts) == {"f": ["a", "b"], "n": [1, 2], "keep": "first"}
    assert merge_contexts(["f"], []) == {}
