"""docs/store-format.md documents every event type and every field of each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rar.store.events import EVENT_MODELS, EventBase
from rar.store.manifest import Manifest

DOC = (Path(__file__).resolve().parents[1] / "docs" / "store-format.md").read_text()


def _section(event_type: str) -> str:
    for heading, body in re.findall(r"#### (.+?)\n(.*?)(?=\n#### |\n## )", DOC, flags=re.S):
        if f"`{event_type}`" in heading:
            return str(body)
    raise AssertionError(f"no section for {event_type} in docs/store-format.md")


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_every_event_type_and_field_is_documented(event_type: str) -> None:
    body = _section(event_type)
    common = set(EventBase.model_fields)
    for name in EVENT_MODELS[event_type].model_fields:
        if name in common or name == "type":
            continue
        assert f"`{name}`" in body, f"{event_type}.{name} is not documented"


def test_the_common_fields_are_documented() -> None:
    for name in [*EventBase.model_fields, "type"]:
        assert f"| `{name}` |" in DOC


def test_every_manifest_field_is_documented() -> None:
    for name in Manifest.model_fields:
        assert f"`{name}`" in DOC, f"manifest.{name} is not documented"
