"""The Contract Net protocol over ACL messages: announce, bid, evaluate, award, report.

::

    net = ContractNet(bus, manager="planner")
    task = net.announce({"goal": "fit Arrhenius"}, contractors=["executor", "researcher"])
    net.bid(task, "executor", success_probability=0.9, capability_match=1.0, cost=2, latency=5)
    net.bid(task, "researcher", success_probability=0.4, capability_match=0.2, cost=1, latency=1)
    winner = net.award(task)           # AWARD to the best bid, REJECT to the others
    net.start(task)                    # AWARDED -> IN_PROGRESS
    net.report(task, success=True, result={"Ea": "55.3 kJ/mol"})   # -> COMPLETED

Messages (all in the task's conversation, ``conversation_id`` = the task id, and all with
``protocol`` = ``"fipa-contract-net"``):

======== ======================= ================= ==========================================
step     performative            from -> to        content
======== ======================= ================= ==========================================
announce CFP                     manager -> all    ``task_id``, ``description``
bid      BID (reply to the CFP)  contractor -> mgr ``task_id`` and the four bid numbers
award    AWARD (reply to bid)    manager -> winner ``task_id``, ``score``, ``ranking``
award    REJECT (reply to bid)   manager -> other  ``task_id``, ``score``, ``winner``
report   REPORT (reply to AWARD) winner -> manager ``task_id``, ``success``, ``result``
cancel   INFORM (reply to CFP)   manager -> all    ``task_id``, ``cancelled``, ``reason``
======== ======================= ================= ==========================================

**Scoring**: ``score = 0.4·success_probability + 0.3·capability_match + 0.15/(1+cost) +
0.15/(1+latency)``; the best score wins, equal scores (to 12 decimal places, so that floating
noise cannot decide) go to the contractor whose name sorts first.

**Task states**: ANNOUNCED → BIDDING (first bid) → AWARDED → IN_PROGRESS → COMPLETED | FAILED;
ANNOUNCED or BIDDING → FAILED by :meth:`ContractNet.cancel`. Any other move raises
:class:`~rar.science.protocols.errors.IllegalTransitionError` before anything is recorded. Each
state change is recorded as a ``bdi.update`` of the manager's intention ``task:<task_id>`` (op
``add`` at announce, ``replace`` after), whose value holds the ``state``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from rar.science.protocols._json import as_json
from rar.science.protocols.acl import ACLMessage, MessageBus, Performative
from rar.science.protocols.bdi import BDIState
from rar.science.protocols.errors import IllegalTransitionError, InvalidBidError, ProtocolError

CONTRACT_NET_PROTOCOL = "fipa-contract-net"
"""The ``protocol`` of every Contract Net message (FIPA's name for the interaction protocol)."""


class TaskState(enum.StrEnum):
    ANNOUNCED = "ANNOUNCED"
    BIDDING = "BIDDING"
    AWARDED = "AWARDED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (TaskState.COMPLETED, TaskState.FAILED)


TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = {
    TaskState.ANNOUNCED: frozenset({TaskState.BIDDING, TaskState.FAILED}),
    TaskState.BIDDING: frozenset({TaskState.AWARDED, TaskState.FAILED}),
    TaskState.AWARDED: frozenset({TaskState.IN_PROGRESS}),
    TaskState.IN_PROGRESS: frozenset({TaskState.COMPLETED, TaskState.FAILED}),
    TaskState.COMPLETED: frozenset(),
    TaskState.FAILED: frozenset(),
}

WEIGHT_SUCCESS = 0.4
WEIGHT_CAPABILITY = 0.3
WEIGHT_COST = 0.15
WEIGHT_LATENCY = 0.15
TIE_DECIMALS = 12


def bid_score(
    success_probability: float, capability_match: float, cost: float, latency: float
) -> float:
    """0.4·success_probability + 0.3·capability_match + 0.15/(1+cost) + 0.15/(1+latency)."""
    return (
        WEIGHT_SUCCESS * success_probability
        + WEIGHT_CAPABILITY * capability_match
        + WEIGHT_COST / (1 + cost)
        + WEIGHT_LATENCY / (1 + latency)
    )


class Bid(BaseModel):
    """A contractor's offer for a task, as the manager received it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    contractor: str
    success_probability: float
    capability_match: float
    cost: float
    latency: float
    message_id: str

    @property
    def score(self) -> float:
        return bid_score(self.success_probability, self.capability_match, self.cost, self.latency)


@dataclass(slots=True)
class Task:
    """A task under Contract Net. Read it; change it only through :class:`ContractNet`."""

    task_id: str
    description: Any
    manager: str
    contractors: tuple[str, ...]
    cfp_id: str
    state: TaskState = TaskState.ANNOUNCED
    bids: dict[str, Bid] = field(default_factory=dict)
    winner: str | None = None
    award_id: str | None = None
    success: bool | None = None
    result: Any = None
    history: list[TaskState] = field(default_factory=lambda: [TaskState.ANNOUNCED])

    def summary(self) -> dict[str, Any]:
        """What the manager's intention ``task:<task_id>`` records."""
        value: dict[str, Any] = {"task_id": self.task_id, "state": self.state.value}
        if self.winner is not None:
            value["winner"] = self.winner
            value["score"] = self.bids[self.winner].score
        if self.success is not None:
            value["success"] = self.success
        return value


class ContractNet:
    """The manager's side of Contract Net over a :class:`MessageBus`.

    ``bdi`` is the manager's BDI state (so that its task intentions sit next to its other
    intentions); by default a new one is made on the bus's run.
    """

    def __init__(self, bus: MessageBus, manager: str, *, bdi: BDIState | None = None) -> None:
        if not manager:
            raise ValueError("a Contract Net needs the name of its manager")
        if bdi is not None and bdi.agent != manager:
            raise ValueError(f"the BDI state of {bdi.agent!r} is not the manager {manager!r}'s")
        self.bus = bus
        self.manager = manager
        self.bdi = bdi if bdi is not None else BDIState(manager, bus.run)
        self._tasks: dict[str, Task] = {}

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(self._tasks.values())

    def task(self, task: Task | str) -> Task:
        """The task with this id (or this task, checked to belong to this Contract Net)."""
        task_id = task.task_id if isinstance(task, Task) else task
        try:
            return self._tasks[task_id]
        except KeyError:
            raise ProtocolError(
                f"task {task_id!r} was not announced by {self.manager}'s Contract Net"
            ) from None

    # --- protocol steps ------------------------------------------------------------------------

    def announce(self, description: Any, contractors: Sequence[str]) -> Task:
        """Send a CFP for a task to the contractors; the task starts ANNOUNCED."""
        invited = tuple(contractors)
        if not invited:
            raise ProtocolError("a call for proposals needs at least one contractor")
        if self.manager in invited:
            raise ProtocolError(f"the manager {self.manager} cannot bid on its own task")
        as_json(description)  # refuse what the record cannot hold before anything is recorded
        task_id = self.bus.new_id("task")
        cfp = self._send(
            Performative.CFP,
            invited,
            {"task_id": task_id, "description": description},
            task_id,
        )
        assert cfp.message_id is not None
        task = Task(task_id, description, self.manager, invited, cfp.message_id)
        self._tasks[task_id] = task
        self.bdi.intend(_key(task), task.summary())
        return task

    def bid(
        self,
        task: Task | str,
        contractor: str,
        *,
        success_probability: float,
        capability_match: float,
        cost: float,
        latency: float,
    ) -> Bid:
        """Record a contractor's BID (a reply to the CFP); the first bid starts BIDDING."""
        task = self.task(task)
        if task.state not in (TaskState.ANNOUNCED, TaskState.BIDDING):
            raise IllegalTransitionError(
                f"{contractor} cannot bid on task {task.task_id}: it is {task.state}, and bids "
                "are taken only while it is ANNOUNCED or BIDDING",
                task_id=task.task_id,
                state=task.state.value,
            )
        if contractor not in task.contractors:
            raise ProtocolError(
                f"{contractor} was not invited to bid on task {task.task_id} "
                f"(invited: {', '.join(task.contractors)})"
            )
        if contractor in task.bids:
            raise ProtocolError(f"{contractor} has bid on task {task.task_id} already")
        values = {
            "success_probability": _check(contractor, "success_probability", success_probability),
            "capability_match": _check(contractor, "capability_match", capability_match),
            "cost": _check(contractor, "cost", cost),
            "latency": _check(contractor, "latency", latency),
        }
        message = self.bus.send(
            ACLMessage(
                performative=Performative.BID,
                sender=contractor,
                receivers=(self.manager,),
                content={"task_id": task.task_id, **values},
                conversation_id=task.task_id,
                reply_to=task.cfp_id,
                protocol=CONTRACT_NET_PROTOCOL,
            )
        )
        assert message.message_id is not None
        offer = Bid(
            task_id=task.task_id, contractor=contractor, message_id=message.message_id, **values
        )
        task.bids[contractor] = offer
        if task.state is TaskState.ANNOUNCED:
            self._move(task, TaskState.BIDDING)
        return offer

    def evaluate(self, task: Task | str) -> list[Bid]:
        """The task's bids, best first (ties: contractor name). Records nothing."""
        task = self.task(task)
        return sorted(
            task.bids.values(), key=lambda b: (-round(b.score, TIE_DECIMALS), b.contractor)
        )

    def award(self, task: Task | str) -> Bid:
        """AWARD the task to the best bid, REJECT the other bids; the task becomes AWARDED."""
        task = self.task(task)
        if task.state is TaskState.ANNOUNCED:
            raise ProtocolError(
                f"task {task.task_id} has no bids to award; wait for bids or cancel() it",
                task_id=task.task_id,
            )
        self._allow(task, TaskState.AWARDED)
        ranking = self.evaluate(task)
        best = ranking[0]
        award = self._send(
            Performative.AWARD,
            (best.contractor,),
            {
                "task_id": task.task_id,
                "score": best.score,
                "ranking": [{"contractor": b.contractor, "score": b.score} for b in ranking],
            },
            task.task_id,
            reply_to=best.message_id,
        )
        for other in ranking[1:]:
            self._send(
                Performative.REJECT,
                (other.contractor,),
                {
                    "task_id": task.task_id,
                    "score": other.score,
                    "winner": best.contractor,
                    "winning_score": best.score,
                },
                task.task_id,
                reply_to=other.message_id,
            )
        task.winner = best.contractor
        task.award_id = award.message_id
        self._move(task, TaskState.AWARDED)
        return best

    def start(self, task: Task | str) -> Task:
        """The winner starts the work: AWARDED → IN_PROGRESS."""
        task = self.task(task)
        self._allow(task, TaskState.IN_PROGRESS)
        self._move(task, TaskState.IN_PROGRESS)
        return task

    def report(
        self,
        task: Task | str,
        success: bool,
        result: Any = None,
        *,
        artifacts: Sequence[str] = (),
    ) -> Task:
        """The winner's REPORT (a reply to the AWARD): IN_PROGRESS → COMPLETED or FAILED.

        ``artifacts``: names of the artifacts the work produced (figures, tables), carried by
        the REPORT message.
        """
        task = self.task(task)
        if not isinstance(success, bool):
            raise ProtocolError(f"report success must be True or False, not {success!r}")
        target = TaskState.COMPLETED if success else TaskState.FAILED
        self._allow(task, target)
        as_json(result)
        assert task.winner is not None
        self.bus.send(
            ACLMessage(
                performative=Performative.REPORT,
                sender=task.winner,
                receivers=(self.manager,),
                content={"task_id": task.task_id, "success": success, "result": result},
                conversation_id=task.task_id,
                reply_to=task.award_id,
                protocol=CONTRACT_NET_PROTOCOL,
                artifacts=tuple(artifacts),
            )
        )
        task.success = success
        task.result = result
        self._move(task, target)
        return task

    def cancel(self, task: Task | str, reason: str) -> Task:
        """Give up a task nobody was awarded (no bids, no good bid): it becomes FAILED."""
        task = self.task(task)
        if task.state not in (TaskState.ANNOUNCED, TaskState.BIDDING):
            raise IllegalTransitionError(
                f"task {task.task_id} is {task.state}: only an ANNOUNCED or BIDDING task can be "
                "cancelled (an awarded task ends with its contractor's report)",
                task_id=task.task_id,
                state=task.state.value,
            )
        self._send(
            Performative.INFORM,
            task.contractors,
            {"task_id": task.task_id, "cancelled": True, "reason": reason},
            task.task_id,
            reply_to=task.cfp_id,
        )
        task.success = False
        self._move(task, TaskState.FAILED)
        return task

    # --- helpers -------------------------------------------------------------------------------

    def _send(
        self,
        performative: Performative,
        receivers: tuple[str, ...],
        content: dict[str, Any],
        conversation_id: str,
        *,
        reply_to: str | None = None,
    ) -> ACLMessage:
        return self.bus.send(
            ACLMessage(
                performative=performative,
                sender=self.manager,
                receivers=receivers,
                content=content,
                conversation_id=conversation_id,
                reply_to=reply_to,
                protocol=CONTRACT_NET_PROTOCOL,
            )
        )

    def _allow(self, task: Task, target: TaskState) -> None:
        if target not in TRANSITIONS[task.state]:
            allowed = ", ".join(sorted(TRANSITIONS[task.state])) or "none (it is finished)"
            raise IllegalTransitionError(
                f"task {task.task_id} cannot move from {task.state} to {target}; "
                f"from {task.state} it may move to: {allowed}",
                task_id=task.task_id,
                state=task.state.value,
                target=target.value,
            )

    def _move(self, task: Task, target: TaskState) -> None:
        self._allow(task, target)
        task.state = target
        task.history.append(target)
        self.bdi.intend(_key(task), task.summary())


def _key(task: Task) -> str:
    return f"task:{task.task_id}"


def _check(contractor: str, name: str, value: object) -> float:
    """A bid number, checked: probabilities and matches in [0, 1], cost and latency ≥ 0."""
    unit_interval = name in ("success_probability", "capability_match")
    wanted = "a number in [0, 1]" if unit_interval else "a finite number ≥ 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidBidError(f"bid from {contractor}: {name} must be {wanted}, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (unit_interval and number > 1):
        raise InvalidBidError(
            f"bid from {contractor}: {name} must be {wanted}, got {value!r}",
            contractor=contractor,
            field=name,
            value=number,
        )
    return number
