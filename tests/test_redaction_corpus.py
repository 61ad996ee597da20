"""The whole corpus: 0 leaks over every format × encoding × place, 0 false redactions over the
benign strings. Prints both tables (``tests/redaction_corpus.py`` explains what is measured;
``python tests/redaction_corpus.py`` prints the same figures, for docs/reliability.md)."""

from __future__ import annotations

from typing import Any

import pytest

import redaction_corpus as corpus


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    return corpus.measure()


def test_the_corpus_table(figures: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\n" + corpus.table(figures) + f"\n({figures['seconds']} s)")
    assert figures["leak_cases"] == [], figures["leak_cases"][:10]
    assert figures["false_cases"] == [], figures["false_cases"][:10]
    assert figures["leaks"] == 0 and figures["false_redactions"] == 0


def test_the_corpus_is_as_large_as_promised(figures: dict[str, Any]) -> None:
    assert len(figures["formats"]) >= 25
    assert figures["encodings"] == ["raw", "base64", "url", "split"]
    assert len(figures["places"]) == 9
    assert figures["cases"] == len(corpus.FORMATS) * (3 * len(corpus.PLACES) + len(corpus.STREAMED))
    assert figures["benign"] >= 2000
    assert figures["benign_by_category"]["URL-safe base64"]["strings"] >= 2000
    assert figures["env_literal_secrets"] == 0, "the benign environment holds no secret"


def test_every_case_would_be_caught_if_it_leaked() -> None:
    # The probes of a case find the case's own text: a leak cannot hide from the search.
    for case in corpus.cases():
        haystack = case.value if case.fake.key and case.place != "request_messages" else case.text
        assert any(probe in case.text or probe in haystack for probe in case.probes()), case.name
        assert all(len(probe) >= 8 for probe in case.probes()), case.name


def test_the_fakes_are_deterministic_and_distinct() -> None:
    first = [case.fake.text for case in corpus.cases()]
    assert first == [case.fake.text for case in corpus.cases()]
    assert len(set(first)) == len(first), "each case has its own secret"
