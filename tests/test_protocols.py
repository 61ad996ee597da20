"""The science runtime's protocols: BDI state, ACL messages, Contract Net, argumentation, audit."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rar.errors import CanonicalizationError
from rar.hashing import digest_value
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.science.protocols import (
    ACLMessage,
    ArgumentationFramework,
    BDIState,
    ContractNet,
    Draft,
    IllegalTransitionError,
    InvalidBidError,
    Label,
    MessageBus,
    Mode,
    Performative,
    ProtocolError,
    TaskState,
    audit,
    bid_score,
    log_audit,
)
from rar.store.events import EVENT_ADAPTER
from rar.store.store import Store

QUIET = Redactor(env={})


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return record("agents", store=tmp_path / "runs", seed=1, redactor=QUIET)


def recorded(run: Run, event_type: str) -> list[dict[str, Any]]:
    """The run's events of one type, after finishing it; every event validates."""
    run.finish()
    events = run.store.events(run.id)
    for event in events:
        EVENT_ADAPTER.validate_python(event)
    return [e for e in events if e["type"] == event_type]


def bdi_rows(run: Run) -> list[tuple[str, str, str, str, Any]]:
    return [
        (e["agent"], e["component"], e["op"], e["key"], run.store.resolve_payload(e.get("value")))
        for e in recorded(run, "bdi.update")
    ]


# --- BDI -----------------------------------------------------------------------------------------


def test_every_bdi_change_is_a_bdi_update_event_with_component_op_and_key(run: Run) -> None:
    state = BDIState("researcher", run)
    state.believe("corpus", {"documents": 12})
    state.believe("corpus", {"documents": 13})
    state.desire("answer", "Ea")
    state.intend("search", {"query": "Arrhenius"})
    state.drop_intention("search")
    state.forget("corpus")
    assert bdi_rows(run) == [
        ("researcher", "beliefs", "add", "corpus", {"documents": 12}),
        ("researcher", "beliefs", "replace", "corpus", {"documents": 13}),
        ("researcher", "desires", "add", "answer", "Ea"),
        ("researcher", "intentions", "add", "search", {"query": "Arrhenius"}),
        ("researcher", "intentions", "remove", "search", None),
        ("researcher", "beliefs", "remove", "corpus", None),
    ]


def test_bdi_updates_are_written_in_the_current_span(run: Run) -> None:
    state = BDIState("planner", run)
    with run.span("planner", agent="planner"):
        state.intend("plan", ["research", "compute"])
    assert [e["span"] for e in recorded(run, "bdi.update")] == ["run/planner"]


def test_unchanged_values_and_absent_entries_record_nothing(run: Run) -> None:
    state = BDIState("a", run)
    state.believe("x", 1)
    state.believe("x", 1.0)  # the same JSON value
    assert state.forget("missing") is False
    state.believe("x", True)  # equal in Python, not in JSON: a change
    assert [row[2] for row in bdi_rows(run)] == ["add", "replace"]


def test_the_state_rebuilt_from_the_record_equals_the_snapshot(run: Run) -> None:
    state = BDIState("auditor", run)
    state.believe("mode", "owl_dl")
    state.desire("verify", ["c1", "c2"])
    state.intend("check", {"claim": "c1"})
    state.replace("intentions", "check", {"claim": "c2"})
    other = BDIState("planner", run)
    other.believe("mode", "owl_lite")
    snapshot = state.snapshot()
    rebuilt = BDIState.rebuild("auditor", recorded(run, "bdi.update"), run.store.resolve_payload)
    assert rebuilt.snapshot() == snapshot
    assert snapshot["intentions"] == {"check": {"claim": "c2"}}


def test_replacing_an_absent_entry_or_storing_a_non_json_value_fails_and_records_nothing(
    run: Run,
) -> None:
    state = BDIState("a", run)
    with pytest.raises(KeyError, match="no beliefs entry 'x' to replace"):
        state.replace("beliefs", "x", 1)
    with pytest.raises(CanonicalizationError):
        state.believe("x", math.nan)
    with pytest.raises(ValueError, match="unknown BDI component 'goals'"):
        state.set("goals", "x", 1)
    assert state.snapshot()["beliefs"] == {} and bdi_rows(run) == []


def test_a_state_without_a_run_holds_json_copies() -> None:
    value: dict[str, Any] = {"temperatures": (300, 310.0)}
    state = BDIState("a")
    state.believe("data", value)
    value["temperatures"] = ()
    assert state.beliefs == {"data": {"temperatures": [300, 310]}}


# --- ACL -----------------------------------------------------------------------------------------


def test_the_performatives_of_the_design_and_report_exist() -> None:
    fipa = ["INFORM", "CONFIRM", "DISCONFIRM", "REQUEST", "QUERY", "PROPOSE", "COMMIT"]
    protocols = ["ACCEPT", "REJECT", "CFP", "BID", "AWARD", "CHALLENGE", "RETRACT", "JUSTIFY"]
    assert {p.value for p in Performative} == {*fipa, *protocols, "REPORT"}


def test_a_sent_message_is_a_message_event_with_its_envelope(run: Run) -> None:
    bus = MessageBus(run)
    anchor = {"doc_id": "d1", "location": "paragraph_2", "content_hash": digest_value("p")}
    sent = bus.send(
        ACLMessage(
            performative=Performative.INFORM,
            sender="researcher",
            receivers=("planner", "auditor"),
            content={"anchors": 1},
            conversation_id="c-1",
            evidence=(anchor,),
        )
    )
    (event,) = recorded(run, "message")
    assert (event["performative"], event["sender"], event["receivers"]) == (
        "INFORM",
        "researcher",
        ["planner", "auditor"],
    )
    assert (event["agent"], event["conversation_id"], event["reply_to"]) == (
        "researcher",
        "c-1",
        None,
    )
    envelope = run.store.resolve_payload(event["content"])
    assert envelope == {
        "message_id": sent.message_id,
        "content": {"anchors": 1},
        "evidence": [anchor],
    }
    assert ACLMessage.from_event(event, envelope) == sent


def test_messages_reach_each_receiver_in_send_order() -> None:
    bus = MessageBus()
    first = bus.send(
        ACLMessage(performative=Performative.REQUEST, sender="p", receivers=("r", "e"))
    )
    second = bus.send(ACLMessage(performative=Performative.QUERY, sender="p", receivers=("r",)))
    assert bus.pending("r") == (first, second)
    assert bus.receive("r") == first and bus.receive("r") == second
    assert bus.receive("r") is None
    assert bus.receive_all("e") == [first] and bus.receive_all("e") == []


def test_a_reply_stays_in_the_conversation_and_names_the_message(run: Run) -> None:
    bus = MessageBus(run)
    question = bus.send(
        ACLMessage(
            performative=Performative.QUERY, sender="p", receivers=("r",), conversation_id="c"
        )
    )
    answer = bus.send(question.reply(Performative.INFORM, "r", {"answer": 42}))
    bus.send(
        ACLMessage(
            performative=Performative.INFORM, sender="p", receivers=("x",), conversation_id="o"
        )
    )
    assert answer.receivers == ("p",) and answer.reply_to == question.message_id
    assert bus.conversation("c") == (question, answer)
    assert recorded(run, "message")[1]["reply_to"] == question.message_id


def test_message_ids_come_from_the_run_seed(tmp_path: Path) -> None:
    ids = []
    for name in ("a", "b"):
        with record("ids", store=tmp_path / name, seed=1, redactor=QUIET) as run:
            bus = MessageBus(run)
            sent = [
                bus.send(ACLMessage(performative=Performative.INFORM, sender="p", receivers=("r",)))
            ]
            sent += [bus.send(sent[0].reply(Performative.INFORM, "r")) for _ in range(2)]
            ids.append([m.message_id for m in sent])
        uuid_effects = [e for e in run.store.events(run.id) if e.get("kind") == "uuid"]
        assert len(uuid_effects) == 3
    assert ids[0] == ids[1] and len(set(ids[0])) == 3


def test_a_bus_without_a_run_numbers_its_messages() -> None:
    bus = MessageBus()
    sent = [
        bus.send(ACLMessage(performative=Performative.INFORM, sender="p", receivers=("r",)))
        for _ in "ab"
    ]
    assert [m.message_id for m in sent] == ["msg-000001", "msg-000002"]


def test_content_the_record_cannot_hold_is_refused_before_anything_is_recorded(run: Run) -> None:
    bus = MessageBus(run)
    with pytest.raises(CanonicalizationError):
        bus.send(
            ACLMessage(
                performative=Performative.INFORM, sender="p", receivers=("r",), content={1, 2}
            )
        )
    assert bus.messages == () and recorded(run, "effect") == recorded(run, "message") == []


def test_malformed_messages_are_refused() -> None:
    bus = MessageBus()
    with pytest.raises(ProtocolError, match="replies to 'nope', which is no message sent"):
        bus.send(
            ACLMessage(
                performative=Performative.INFORM, sender="p", receivers=("r",), reply_to="nope"
            )
        )
    with pytest.raises(ValidationError, match="more than once"):
        ACLMessage(performative=Performative.INFORM, sender="p", receivers=("r", "r"))
    with pytest.raises(ValidationError):
        ACLMessage.model_validate({"performative": "SHOUT", "sender": "p", "receivers": ["r"]})
    assert bus.messages == ()


# --- Contract Net --------------------------------------------------------------------------------

BIDS = {  # contractor: (success_probability, capability_match, cost, latency)
    "executor": (0.9, 0.8, 2.0, 1.0),
    "researcher": (0.5, 0.4, 1.0, 0.0),
    "auditor": (0.2, 0.1, 0.0, 3.0),
}


def bid_all(net: ContractNet, task: Any, bids: Mapping[str, tuple[float, ...]] = BIDS) -> None:
    for name, (p, m, c, t) in bids.items():
        net.bid(task, name, success_probability=p, capability_match=m, cost=c, latency=t)


def contract_net_round(run: Run) -> dict[str, Any]:
    """One full round, as an entrypoint: announce, three bids, award, start, report."""
    net = ContractNet(MessageBus(run), "planner")
    with run.span("contract_net", agent="planner"):
        task = net.announce({"goal": "fit Arrhenius"}, ["executor", "researcher", "auditor"])
        bid_all(net, task)
        winner = net.award(task)
        net.start(task)
        net.report(task, success=True, result={"Ea": "55.3 kJ/mol"})
    return {"winner": winner.contractor, "state": task.state.value, "task": task.task_id}


def test_a_contract_net_round_goes_from_cfp_to_completed(run: Run) -> None:
    result = contract_net_round(run)
    messages = recorded(run, "message")
    assert [(m["performative"], m["sender"], m["receivers"]) for m in messages] == [
        ("CFP", "planner", ["executor", "researcher", "auditor"]),
        ("BID", "executor", ["planner"]),
        ("BID", "researcher", ["planner"]),
        ("BID", "auditor", ["planner"]),
        ("AWARD", "planner", ["executor"]),
        ("REJECT", "planner", ["researcher"]),
        ("REJECT", "planner", ["auditor"]),
        ("REPORT", "executor", ["planner"]),
    ]
    assert {m["conversation_id"] for m in messages} == {result["task"]}
    bodies = [run.store.resolve_payload(m["content"]) for m in messages]
    ids = [b["message_id"] for b in bodies]
    cfp, bids, award_id = ids[0], ids[1:4], ids[4]
    assert [m["reply_to"] for m in messages] == [None, cfp, cfp, cfp, *bids, award_id]
    award = bodies[4]["content"]
    assert [r["contractor"] for r in award["ranking"]] == ["executor", "researcher", "auditor"]
    assert award["score"] == pytest.approx(0.4 * 0.9 + 0.3 * 0.8 + 0.15 / 3 + 0.15 / 2, abs=1e-12)
    assert bodies[7]["content"] == {
        "task_id": result["task"],
        "success": True,
        "result": {"Ea": "55.3 kJ/mol"},
    }
    states = [v["state"] for _, _, _, key, v in bdi_rows(run) if key == f"task:{result['task']}"]
    assert states == ["ANNOUNCED", "BIDDING", "AWARDED", "IN_PROGRESS", "COMPLETED"]


@pytest.mark.parametrize(
    ("contractor", "expected"),
    [
        ("executor", 0.4 * 0.9 + 0.3 * 0.8 + 0.15 / 3 + 0.15 / 2),  # 0.725
        ("researcher", 0.4 * 0.5 + 0.3 * 0.4 + 0.15 / 2 + 0.15 / 1),  # 0.545
        ("auditor", 0.4 * 0.2 + 0.3 * 0.1 + 0.15 / 1 + 0.15 / 4),  # 0.2975
    ],
)
def test_bids_are_scored_by_the_weighted_formula(contractor: str, expected: float) -> None:
    net = ContractNet(MessageBus(), "planner")
    task = net.announce("t", list(BIDS))
    bid_all(net, task)
    scores = {b.contractor: b.score for b in net.evaluate(task)}
    assert scores[contractor] == pytest.approx(expected, abs=1e-12)
    assert bid_score(*BIDS[contractor]) == scores[contractor]
    assert [b.contractor for b in net.evaluate(task)] == ["executor", "researcher", "auditor"]


def test_equal_scores_go_to_the_contractor_whose_name_sorts_first() -> None:
    net = ContractNet(MessageBus(), "planner")
    task = net.announce("t", ["zeta", "alpha", "mid"])
    # 0.4·0.4 + 0.3·0 = 0.4·0.1 + 0.3·0.4 = 0.16, but zeta's float score is 1 ulp higher
    bid_all(net, task, {"zeta": (0.4, 0, 1, 1), "mid": (0.1, 0.4, 1, 1), "alpha": (0.1, 0.4, 1, 1)})
    assert bid_score(0.4, 0.0, 1, 1) > bid_score(0.1, 0.4, 1, 1)
    assert [b.contractor for b in net.evaluate(task)] == ["alpha", "mid", "zeta"]
    assert net.award(task).contractor == "alpha"


def test_illegal_transitions_are_refused_and_record_nothing(run: Run) -> None:
    net = ContractNet(MessageBus(run), "planner")
    task = net.announce("t", ["executor", "researcher"])
    with pytest.raises(IllegalTransitionError, match="cannot move from ANNOUNCED to IN_PROGRESS"):
        net.start(task)
    bid_all(net, task, {"executor": BIDS["executor"]})
    net.award(task)
    before = len(run.store.events(run.id))
    with pytest.raises(IllegalTransitionError, match=r"from AWARDED to COMPLETED; .* IN_PROGRESS"):
        net.report(task, success=True)
    with pytest.raises(IllegalTransitionError, match=r"cannot bid on task .* it is AWARDED"):
        net.bid(task, "researcher", success_probability=1, capability_match=1, cost=0, latency=0)
    with pytest.raises(IllegalTransitionError, match="from AWARDED to AWARDED"):
        net.award(task)
    with pytest.raises(IllegalTransitionError, match="only an ANNOUNCED or BIDDING task"):
        net.cancel(task, "too late")
    assert len(run.store.events(run.id)) == before
    net.start(task)
    net.report(task, success=True)
    with pytest.raises(IllegalTransitionError, match="may move to: none"):
        net.start(task)
    assert task.history == list(TaskState)[:5]  # ANNOUNCED ... COMPLETED


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("success_probability", 1.2, r"success_probability must be a number in \[0, 1\], got 1.2"),
        ("success_probability", -0.1, r"success_probability must be a number in \[0, 1\]"),
        ("capability_match", math.nan, r"capability_match must be a number in \[0, 1\]"),
        ("cost", -1, "cost must be a finite number ≥ 0, got -1"),
        ("latency", math.inf, "latency must be a finite number ≥ 0"),
        ("cost", True, "cost must be a finite number ≥ 0, not True"),
        ("latency", "fast", "latency must be a finite number ≥ 0, not 'fast'"),
    ],
)
def test_bad_bid_values_are_rejected_with_clear_messages(
    field: str, value: Any, message: str
) -> None:
    net = ContractNet(MessageBus(), "planner")
    task = net.announce("t", ["executor"])
    good: dict[str, Any] = {"success_probability": 0.5, "capability_match": 0.5}
    good.update(cost=1, latency=1)
    with pytest.raises(InvalidBidError, match=f"bid from executor: {message}"):
        net.bid(task, "executor", **{**good, field: value})
    assert task.state is TaskState.ANNOUNCED and task.bids == {}
    assert len(net.bus.messages) == 1  # only the CFP


def test_bids_from_uninvited_or_repeating_contractors_are_refused() -> None:
    net = ContractNet(MessageBus(), "planner")
    task = net.announce("t", ["executor"])
    with pytest.raises(ProtocolError, match="stranger was not invited to bid"):
        bid_all(net, task, {"stranger": (1, 1, 0, 0)})
    bid_all(net, task, {"executor": (1, 1, 0, 0)})
    with pytest.raises(ProtocolError, match=r"executor has bid on task .* already"):
        bid_all(net, task, {"executor": (1, 1, 0, 0)})


def test_a_failed_report_ends_the_task_failed(run: Run) -> None:
    net = ContractNet(MessageBus(run), "planner")
    task = net.announce("t", ["executor"])
    bid_all(net, task, {"executor": BIDS["executor"]})
    net.award(task)
    net.start(task)
    net.report(task, success=False, result={"error": "sandbox unavailable"})
    assert task.state is TaskState.FAILED and task.success is False
    report = recorded(run, "message")[-1]
    assert report["performative"] == "REPORT"
    assert run.store.resolve_payload(report["content"])["content"]["success"] is False
    assert net.bdi.intentions[f"task:{task.task_id}"]["state"] == "FAILED"


def test_a_task_without_bids_cannot_be_awarded_but_can_be_cancelled() -> None:
    net = ContractNet(MessageBus(), "planner")
    task = net.announce("t", ["executor", "researcher"])
    with pytest.raises(ProtocolError, match="has no bids to award; wait for bids or cancel"):
        net.award(task)
    net.cancel(task, "no contractor can do it")
    assert task.state is TaskState.FAILED
    inform = net.bus.messages[-1]
    assert inform.performative is Performative.INFORM and inform.receivers == task.contractors


def test_a_recorded_contract_net_round_replays_reproducibly(store: Store) -> None:
    source = execute(contract_net_round, store=store, seed=1, redactor=QUIET)
    report = replay(source.id, store=store, function=contract_net_round, redactor=QUIET)
    assert report.reproducible and report.result_equal is True and report.mismatched == 0

    def conversation(run_id: str) -> list[tuple[Any, ...]]:
        """Messages and state changes: where, what, and the digest of what they carried."""
        return [
            (e["type"], e["span"], e.get("performative") or e["key"], _digest(e))
            for e in store.events(run_id)
            if e["type"] in ("message", "bdi.update")
        ]

    original = conversation(source.id)
    assert len(original) == 8 + 5 and original == conversation(str(report.replay_run))


def _digest(event: dict[str, Any]) -> str:
    return str((event.get("content") or event.get("value") or {}).get("digest"))


# --- argumentation -------------------------------------------------------------------------------


def framework(arguments: str, attacks: list[str]) -> ArgumentationFramework:
    af = ArgumentationFramework()
    for name in arguments:
        af.add(name, f"claim {name}")
    for pair in attacks:
        af.attack(pair[0], pair[1])
    return af


@pytest.mark.parametrize(
    ("arguments", "attacks", "grounded", "labels"),
    [
        ("abc", ["ab", "bc"], ["a", "c"], "IN OUT IN"),  # a chain: c is reinstated
        ("ab", ["ab", "ba"], [], "UNDEC UNDEC"),  # a mutual attack decides nothing
        ("abc", ["aa", "ab"], ["c"], "UNDEC UNDEC IN"),  # a self-attacker defeats nothing
        ("", [], [], ""),  # the empty framework
        ("abcd", ["ab", "bc", "cd"], ["a", "c"], "IN OUT IN OUT"),  # defence along a chain
        ("abcd", ["ab", "bc", "cd", "dc"], ["a"], "IN OUT UNDEC UNDEC"),
        ("abc", ["ab", "bc", "ca"], [], "UNDEC UNDEC UNDEC"),  # an odd cycle
    ],
)
def test_the_grounded_extension_and_labelling(
    arguments: str, attacks: list[str], grounded: list[str], labels: str
) -> None:
    af = framework(arguments, attacks)
    assert af.grounded() == grounded
    assert af.labelling() == dict(zip(arguments, map(Label, labels.split()), strict=True))


def test_a_framework_exports_to_json_and_back() -> None:
    af = framework("abc", ["ab", "bc"])
    anchor = {"doc_id": "d", "location": "paragraph_1"}
    af.add("d", "supported", support=[anchor])
    data = af.to_json()
    assert data == {
        "arguments": [{"id": n, "claim": f"claim {n}"} for n in "abc"]
        + [{"id": "d", "claim": "supported"}],
        "attacks": [["a", "b"], ["b", "c"]],
        "supports": {"a": [], "b": [], "c": [], "d": [anchor]},
        "grounded": ["a", "c", "d"],
        "labels": {"a": "IN", "b": "OUT", "c": "IN", "d": "IN"},
    }
    assert ArgumentationFramework.from_json(data).to_json() == data


def test_attacks_must_name_known_arguments() -> None:
    with pytest.raises(ValueError, match="unknown argument 'z'"):
        framework("a", ["az"])
    with pytest.raises(ValueError, match="exists already"):
        framework("aa", [])


# --- the audit -----------------------------------------------------------------------------------


def anchor(n: int, score: float = 0.9, **changes: Any) -> dict[str, Any]:
    base = {
        "doc_id": f"doc{n}",
        "location": f"paragraph_{n}",
        "content_hash": digest_value(f"passage {n}"),
        "snippet": f"passage {n} reports Ea = 55.3 kJ/mol",
        "relevance_score": score,
    }
    return {**base, **changes}


def draft(
    *, anchors: int = 3, score: float = 0.9, claim: str = "Ea = 55.3 kJ/mol", **extra: Any
) -> Draft:
    pool = [anchor(n, score) for n in range(1, anchors + 1)]
    refs = [f"{a['doc_id']}#{a['location']}" for a in pool]
    return Draft.model_validate(
        {
            "claims": [{"text": claim, "anchors": refs}],
            "anchors": pool,
            "executions": [{"status": "ok", "variables": {"Ea": "55300 J/mol"}}],
            "reports": [{"task_id": "t1", "success": True}],
            **extra,
        }
    )


@pytest.mark.parametrize("mode", list(Mode))
def test_a_well_supported_draft_passes_every_check(mode: Mode) -> None:
    report = audit(draft(), mode)
    assert [(c.name, c.passed, c.severity) for c in report.checks] == [
        (name, True, "info")
        for name in (
            "success",
            "evidence_quantity",
            "evidence_structure",
            "relevance",
            "runtime_errors",
            "unit_consistency",
            "support",
            "answers_question",
        )
    ]
    assert report.passed and not report.blocking and report.challenges == []


def test_the_mode_thresholds_live_in_one_place() -> None:
    policies = [(m, m.policy.min_anchors, m.policy.min_relevance) for m in Mode]
    assert policies == [("owl_lite", 1, 0.15), ("owl_dl", 2, 0.30), ("owl_full", 3, 0.35)]
    assert [m.policy.argumentation for m in Mode] == [False, False, True]


@pytest.mark.parametrize(
    ("mode", "anchors", "passed"),
    [
        ("owl_lite", 1, True),
        ("owl_lite", 0, False),
        ("owl_dl", 1, False),
        ("owl_dl", 2, True),
        ("owl_full", 2, False),
        ("owl_full", 3, True),
    ],
)
def test_evidence_quantity_follows_the_mode(mode: str, anchors: int, passed: bool) -> None:
    check = audit(draft(anchors=anchors), mode).check("evidence_quantity")
    assert check.passed is passed
    if not passed:
        assert f"cites {anchors} anchors; {mode} needs" in check.detail


@pytest.mark.parametrize(
    ("mode", "score", "passed"),
    [
        ("owl_lite", 0.15, False),
        ("owl_lite", 0.16, True),
        ("owl_dl", 0.30, False),
        ("owl_dl", 0.31, True),
        ("owl_full", 0.35, False),
        ("owl_full", 0.36, True),
    ],
)
def test_relevance_must_exceed_the_mode_threshold(mode: str, score: float, passed: bool) -> None:
    check = audit(draft(score=score), mode).check("relevance")
    assert check.passed is passed
    if not passed:
        assert f"has relevance {score:g}, not above {score:g}" in check.detail


def test_evidence_structure_needs_complete_anchors_and_resolvable_references() -> None:
    def structure(pool: list[dict[str, Any]], refs: list[str]) -> str:
        claims = [{"text": "x", "anchors": refs}]
        check = audit({"claims": claims, "anchors": pool}, "owl_lite").check("evidence_structure")
        assert not check.passed and check.severity == "warning"
        return check.detail

    ref = ["doc1#paragraph_1"]
    assert "doc1#paragraph_1 lacks snippet" in structure([anchor(1, snippet="")], ref)
    assert "content_hash 'abc', not a digest" in structure([anchor(1, content_hash="abc")], ref)
    assert "reference 'd#9' names no anchor of the draft" in structure([], ["d#9"])


def test_success_fails_when_a_task_or_an_execution_failed() -> None:
    failed = draft(reports=[{"task_id": "t1", "success": False}])
    check = audit(failed, "owl_lite").check("success")
    assert not check.passed and check.severity == "error" and "t1 reported failure" in check.detail
    crashed = draft(executions=[{"task_id": "x1", "status": "error"}])
    assert "x1 ended with status 'error'" in audit(crashed, "owl_lite").check("success").detail


def test_runtime_errors_are_found_in_executions_tracebacks_and_steps() -> None:
    error = {"type": "ZeroDivisionError", "message": "division by zero"}
    traceback = "Traceback (most recent call last):\n  ...\nValueError: bad fit\n"
    check = audit(
        draft(
            executions=[{"status": "ok", "error": error}, {"status": "ok", "stderr": traceback}],
            errors=[{"type": "ToolError", "message": "search index missing"}],
        ),
        "owl_lite",
    ).check("runtime_errors")
    assert not check.passed and check.severity == "error"
    assert [f.problem for f in check.findings] == [
        "execution 1: ZeroDivisionError: division by zero",
        "execution 2 printed a traceback: ValueError: bad fit",
        "ToolError: search index missing",
    ]


@pytest.mark.parametrize(
    ("claim", "computed", "reason"),
    [
        ("Ea = 55.3 kJ/mol", "55300 J/mol", None),
        ("Ea = 55.3 kJ/mol", {"value": 55312, "unit": "J/mol"}, None),  # within the stated digits
        ("Ea = 55.3 kJ·mol⁻¹.", "55300 J/mol", None),
        ("T = 25 °C", "298.15 K", None),
        ("Ea = 55.3 kJ", "55300 J/mol", "claim ÷ computed: [substance]"),
        ("Ea = 55.3 K", "55300 J/mol", "'Ea = 55.3 K' has dimension [temperature] but"),
        ("Ea = 55.3 kJ/mol", "56100 J/mol", "(= 56.1 kJ/mol; the claim's precision allows ±0.05)"),
        ("Ea = 55.3 kJ/mol", 55300, "the computed result 'Ea = 55300' has no unit"),
        ("Ea = 55.3 kJ/mool", "55300 J/mol", "'kJ/mool' is not a unit pint knows"),
    ],
)
def test_units_in_claims_agree_with_computed_results(
    claim: str, computed: Any, reason: str | None
) -> None:
    work = [{"variables": {claim.split()[0]: computed}}]
    check = audit(draft(claim=claim, executions=work), "owl_lite").check("unit_consistency")
    if reason is None:
        assert check.passed and check.detail.startswith("1 claimed quantities agree")
    else:
        assert not check.passed and check.severity == "error" and reason in check.detail


def test_a_unit_can_be_named_in_the_variable_and_failed_work_is_not_compared() -> None:
    named = draft(executions=[{"variables": {"Ea_kJ_per_mol": 55.31}}])
    assert audit(named, "owl_dl").check("unit_consistency").passed
    wrong = draft(executions=[{"variables": {"Ea_kJ_per_mol": 60.0}}])
    assert not audit(wrong, "owl_dl").check("unit_consistency").passed
    failed = draft(executions=[{"status": "error", "variables": {"Ea": "1 K"}}])
    assert audit(failed, "owl_dl").check("unit_consistency").passed


def test_evidence_failures_are_warnings_in_owl_lite_and_errors_otherwise() -> None:
    lite, dl = audit(draft(anchors=0), "owl_lite"), audit(draft(anchors=1), "owl_dl")
    assert lite.check("evidence_quantity").severity == "warning"
    assert not lite.passed and not lite.blocking
    assert dl.check("evidence_quantity").severity == "error" and dl.blocking


def test_claims_lacking_evidence_are_challenged_to_justify_and_contradicted_ones_to_retract(
    run: Run,
) -> None:
    weak = draft(anchors=1, score=0.2, claim="Ea = 55.3 kJ").model_dump()
    weak["claims"].append({"text": "Rates rise with temperature."})
    report = audit(weak, "owl_dl")
    first, second = report.challenges
    assert (first.claim_id, first.resolve, first.needed_anchors) == ("claim-1", "RETRACT", 2)
    assert first.checks == ["evidence_quantity", "relevance", "unit_consistency"]
    assert (second.claim, second.resolve, second.needed_anchors) == (
        "Rates rise with temperature.",
        "JUSTIFY",
        2,
    )
    bus = MessageBus(run)
    for message in report.challenge_messages("auditor", ("planner",), conversation_id="audit-1"):
        bus.send(message)
    log_audit(run, report)
    messages = recorded(run, "message")
    assert [m["performative"] for m in messages] == ["CHALLENGE", "CHALLENGE"]
    content = run.store.resolve_payload(messages[1]["content"])["content"]
    assert content["claim"] == "Rates rise with temperature." and content["resolve"] == "JUSTIFY"
    (event,) = recorded(run, "audit")
    stored = run.store.resolve_payload(event["report"])
    assert event["agent"] == "auditor" and stored["mode"] == "owl_dl"
    assert stored["passed"] is False and len(stored["challenges"]) == 2
