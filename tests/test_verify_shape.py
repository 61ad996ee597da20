"""The fast event-shape checks of ``rar verify`` never accept what the pydantic models reject.

``rar.store._verify_shape`` lets a sound line skip pydantic. That is only safe if each check is
narrower than its model: these tests build a valid event of every type, check it passes the fast
check (so the fast path is taken), then mutate it every way a damaged line could be wrong and
check that whenever the fast check still says yes, pydantic says yes too.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any

import annotated_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from rar.store._verify_shape import FAST_CHECKS
from rar.store.events import EVENT_ADAPTER, EVENT_MODELS

DIGEST = "sha256:" + "ab" * 32


def example(annotation: Any, metadata: list[Any] = ()) -> Any:  # type: ignore[assignment]
    if annotation is Any:
        return {"any": [1, "two"]}
    if annotation is str:
        return "text"
    if annotation is int:
        low = max([1] + [int(m.ge) for m in metadata if isinstance(m, annotated_types.Ge)])
        return low
    if annotation is bool:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_example(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        return example(next(a for a in args if a is not type(None)), metadata)
    if origin is typing.Literal:
        return args[0]
    if origin is list:
        return [example(args[0])]
    if origin is dict:
        return {"key": example(args[1])}
    raise AssertionError(f"no example for {annotation}")


def model_example(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name == "digest" or name == "prev" or name == "tree":
            out[name] = DIGEST
        else:
            out[name] = example(info.annotation, list(info.metadata))
    return out


def valid_events() -> list[dict[str, Any]]:
    events = []
    for event_type, model in EVENT_MODELS.items():
        full = model_example(model)
        full["type"] = event_type
        events.append(full)
        minimal = {
            name: full[name] for name, info in model.model_fields.items() if info.is_required()
        }
        minimal["type"] = event_type
        events.append(minimal)
    return events


VALID = valid_events()
ODD_VALUES = [
    None, True, False, 0, -1, 2**70, 1.5, 1.0, "", "1", "ok", "text", [], ["x"], [1], {},
    {"digest": DIGEST}, {"digest": DIGEST, "size": 1}, {"digest": DIGEST, "size": "1"},
    {"type": "E", "message": "m"}, {"key": ["a"]}, {"key": 1}, {1: "a"},
]  # fmt: skip


def agrees(event: dict[str, Any]) -> None:
    check = FAST_CHECKS.get(event.get("type"))  # type: ignore[arg-type]
    if check is None or not check(event):
        return
    try:
        EVENT_ADAPTER.validate_python(event)
    except ValidationError as exc:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"fast check accepted an event pydantic rejects: {event!r}: {exc}")


def test_every_event_type_has_a_fast_check() -> None:
    assert set(FAST_CHECKS) == set(EVENT_MODELS)


@pytest.mark.parametrize("event", VALID, ids=lambda e: f"{e['type']}-{len(e)}")
def test_valid_events_take_the_fast_path(event: dict[str, Any]) -> None:
    EVENT_ADAPTER.validate_python(event)
    assert FAST_CHECKS[event["type"]](event)


@pytest.mark.parametrize("event", VALID, ids=lambda e: f"{e['type']}-{len(e)}")
def test_each_field_mutated_or_removed(event: dict[str, Any]) -> None:
    for key in list(event):
        if key == "type":
            continue
        removed = dict(event)
        del removed[key]
        agrees(removed)
        for odd in ODD_VALUES:
            changed = dict(event)
            changed[key] = copy.deepcopy(odd)
            agrees(changed)
            value = event[key]
            if isinstance(value, dict):  # one level down: a payload reference, an error value
                for inner in list(value):
                    nested = copy.deepcopy(event)
                    nested[key][inner] = copy.deepcopy(odd)
                    agrees(nested)
                    del nested[key][inner]
                    agrees(nested)
                nested = copy.deepcopy(event)
                nested[key]["extra"] = 1
                agrees(nested)
    extra = dict(event)
    extra["unexpected"] = 1
    agrees(extra)
    assert not FAST_CHECKS[event["type"]](extra)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_random_mutations(event: dict[str, Any], data: st.DataObject) -> None:
    mutated = copy.deepcopy(event)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(mutated)))
        if key == "type":
            continue
        mutated[key] = data.draw(json_values)
    agrees(mutated)


def test_payload_fields_are_payload_references() -> None:
    """The fast path of the walk reads ``event[key]["digest"]`` for these keys without checking
    their type again: every model must declare them as (optional) payload references."""
    from rar.store._verify_log import _PAYLOAD_KEYS
    from rar.store.events import PayloadRef

    for model in EVENT_MODELS.values():
        for key in _PAYLOAD_KEYS:
            if key in model.model_fields:
                annotation = model.model_fields[key].annotation
                assert annotation in (PayloadRef, PayloadRef | None), (model, key, annotation)
