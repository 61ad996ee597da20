"""ACL messages carry the interaction protocol and the artifacts they refer to (RAR paper,
§3.4.1), in the record too; messages recorded before those fields read back unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rar.redaction import Redactor
from rar.replay.diff import diff_runs
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.science.protocols import (
    CONTRACT_NET_PROTOCOL,
    ACLMessage,
    ContractNet,
    MessageBus,
    Performative,
)
from rar.store.events import EVENT_ADAPTER
from rar.store.store import Store

QUIET = Redactor(env={})


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return record("agents", store=tmp_path / "runs", seed=1, redactor=QUIET)


def messages(run: Run) -> list[dict[str, Any]]:
    run.finish()
    events = run.store.events(run.id)
    for event in events:
        EVENT_ADAPTER.validate_python(event)
    return [e for e in events if e["type"] == "message"]


def _contract_net_round(bus: MessageBus) -> None:
    net = ContractNet(bus, manager="planner")
    task = net.announce({"goal": "fit"}, ["executor", "researcher"])
    net.bid(task, "executor", success_probability=0.9, capability_match=1, cost=1, latency=1)
    net.bid(task, "researcher", success_probability=0.2, capability_match=0, cost=1, latency=1)
    net.award(task)
    net.start(task)
    net.report(task, success=True, result={"Ea": 55.3}, artifacts=["figures/kissinger-fit-1.svg"])


def test_a_message_has_no_protocol_and_no_artifacts_unless_given() -> None:
    message = ACLMessage(performative=Performative.INFORM, sender="a", receivers=("b",))
    assert message.protocol is None and message.artifacts == ()


def test_every_contract_net_message_names_the_protocol(run: Run) -> None:
    _contract_net_round(MessageBus(run))
    recorded = messages(run)
    assert [e["performative"] for e in recorded] == [
        "CFP",
        "BID",
        "BID",
        "AWARD",
        "REJECT",
        "REPORT",
    ]
    assert {e["protocol"] for e in recorded} == {CONTRACT_NET_PROTOCOL} == {"fipa-contract-net"}


def test_a_report_carries_the_artifacts_the_work_produced(run: Run) -> None:
    _contract_net_round(MessageBus(run))
    report = messages(run)[-1]
    assert report["artifacts"] == ["figures/kissinger-fit-1.svg"]
    assert all("artifacts" not in e for e in messages(run)[:-1])  # only when there are some


def test_protocol_and_artifacts_round_trip_through_the_record(run: Run) -> None:
    bus = MessageBus(run)
    sent = bus.send(
        ACLMessage(
            performative=Performative.INFORM,
            sender="executor",
            receivers=("planner",),
            content={"figure": 1},
            protocol="fipa-request",
            artifacts=("figures/fit.svg", "tables/points.csv"),
        )
    )
    (event,) = messages(run)
    envelope = run.store.resolve_payload(event["content"])
    assert ACLMessage.from_event(event, envelope) == sent


def test_a_reply_keeps_the_protocol_of_the_conversation(run: Run) -> None:
    bus = MessageBus(run)
    request = bus.send(
        ACLMessage(
            performative=Performative.REQUEST,
            sender="planner",
            receivers=("executor",),
            protocol="fipa-request",
        )
    )
    reply = request.reply(Performative.INFORM, "executor", {"ok": True}, artifacts=["fit.svg"])
    assert reply.protocol == "fipa-request" and reply.artifacts == ("fit.svg",)


def test_a_message_without_the_fields_is_recorded_as_before(run: Run) -> None:
    MessageBus(run).send(
        ACLMessage(performative=Performative.INFORM, sender="a", receivers=("b",), content=1)
    )
    (event,) = messages(run)
    assert "protocol" not in event and "artifacts" not in event


def test_a_message_recorded_before_the_fields_existed_reads_back() -> None:
    old = {
        "type": "message",
        "seq": 3,
        "ts": "2026-01-01T00:00:00.000000Z",
        "prev": "sha256:" + "0" * 64,
        "performative": "CFP",
        "sender": "planner",
        "receivers": ["executor"],
        "conversation_id": "t1",
        "reply_to": None,
        "content": {"digest": "sha256:" + "1" * 64, "size": 2, "value": {}},
    }
    parsed = EVENT_ADAPTER.validate_python(old)
    assert parsed.protocol is None and parsed.artifacts == []  # type: ignore[union-attr]
    message = ACLMessage.from_event(old, {"message_id": "m1", "content": None})
    assert message.protocol is None and message.artifacts == ()


@pytest.mark.parametrize("field", [{"protocol": " "}, {"artifacts": ("",)}])
def test_an_empty_protocol_or_artifact_name_is_refused(field: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ACLMessage(performative=Performative.INFORM, sender="a", receivers=("b",), **field)


def test_runs_whose_messages_differ_only_in_artifacts_differ_in_the_diff(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs", create=True)
    ids = []
    for artifacts in ((), ("fit.svg",)):
        run = record("agents", store=store, seed=1, redactor=QUIET)
        MessageBus(run).send(
            ACLMessage(
                performative=Performative.INFORM,
                sender="a",
                receivers=("b",),
                artifacts=artifacts,
            )
        )
        run.finish()
        ids.append(run.id)
    diff = diff_runs(store, ids[0], ids[1])
    assert diff.first_divergence is not None
    assert diff.first_divergence.aligned.status == "different-request"
    assert [f.path for f in diff.first_divergence.fields] == ["artifacts"]
