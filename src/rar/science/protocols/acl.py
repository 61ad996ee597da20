"""Agent Communication Language: performatives, messages, and the bus that records them.

::

    bus = MessageBus(run)
    sent = bus.send(ACLMessage(performative=Performative.REQUEST, sender="planner",
                               receivers=("researcher",), content={"query": "Arrhenius"}))
    bus.receive("researcher")              # -> sent (with its message_id)
    bus.send(sent.reply(Performative.INFORM, "researcher", {"anchors": 3}))

Each :meth:`MessageBus.send` writes one ``message`` event (``performative``, ``sender``,
``receivers``, ``conversation_id``, ``reply_to``, ``content``, and ``protocol`` and
``artifacts`` when the message has them) in the run's current span with ``agent`` set to the
sender, then delivers the message to each receiver's inbox in the order
the receivers are listed. The event's ``content`` payload is the message *envelope*
``{"message_id": ..., "content": <the message's content>, "evidence": [...]}`` (``evidence`` only
when the message carries anchors), so ids, replies and evidence are all in the record;
:meth:`ACLMessage.from_event` reads a message back from an event.

Message ids come from ``run.uuid()`` (seeded and recorded, so a replay gets the same ids).
A bus without a run numbers its messages ``msg-000001``, ``msg-000002``, ... in send order.
"""

from __future__ import annotations

import enum
import threading
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rar.science.protocols._json import as_json
from rar.science.protocols.errors import ProtocolError

if TYPE_CHECKING:
    from rar.runtime.run import Run


class Performative(enum.StrEnum):
    """What a message does (after FIPA ACL, plus the Contract Net and argumentation acts)."""

    INFORM = "INFORM"  # tell a fact the sender holds true
    CONFIRM = "CONFIRM"  # confirm a proposition the receiver was unsure of
    DISCONFIRM = "DISCONFIRM"  # deny a proposition the receiver was unsure of
    REQUEST = "REQUEST"  # ask the receiver to perform an action
    QUERY = "QUERY"  # ask the receiver for information
    PROPOSE = "PROPOSE"  # put forward a plan or claim for acceptance
    COMMIT = "COMMIT"  # bind the sender to a course of action
    ACCEPT = "ACCEPT"  # accept a proposal
    REJECT = "REJECT"  # reject a proposal or bid
    CFP = "CFP"  # Contract Net: call for proposals on a task
    BID = "BID"  # Contract Net: a contractor's offer
    AWARD = "AWARD"  # Contract Net: the task goes to this contractor
    REPORT = "REPORT"  # Contract Net: the contractor's result (success or failure)
    CHALLENGE = "CHALLENGE"  # question a claim (the Auditor): justify it or retract it
    RETRACT = "RETRACT"  # withdraw a claim
    JUSTIFY = "JUSTIFY"  # support a claim with (more) evidence


class ACLMessage(BaseModel):
    """One message between agents. ``message_id`` is assigned by :meth:`MessageBus.send`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    performative: Performative
    sender: str = Field(min_length=1)
    receivers: tuple[str, ...] = Field(min_length=1)
    content: Any = None  # JSON: checked when the message is sent
    conversation_id: str | None = None
    reply_to: str | None = None
    message_id: str | None = None
    evidence: tuple[dict[str, Any], ...] = ()  # evidence anchors (EvidenceAnchor.to_json())
    protocol: str | None = None  # the interaction protocol, e.g. "fipa-contract-net"
    artifacts: tuple[str, ...] = ()  # names of the run's artifacts the message refers to

    @field_validator("receivers")
    @classmethod
    def _distinct_receivers(cls, receivers: tuple[str, ...]) -> tuple[str, ...]:
        if any(not r for r in receivers):
            raise ValueError("receiver names must be non-empty")
        if len(set(receivers)) != len(receivers):
            raise ValueError(f"receivers {list(receivers)} name an agent more than once")
        return receivers

    @field_validator("protocol")
    @classmethod
    def _named_protocol(cls, protocol: str | None) -> str | None:
        if protocol is not None and not protocol.strip():
            raise ValueError("a protocol must be named (or None for none)")
        return protocol

    @field_validator("artifacts")
    @classmethod
    def _named_artifacts(cls, artifacts: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name for name in artifacts):
            raise ValueError("artifact names must be non-empty")
        return artifacts

    def reply(
        self,
        performative: Performative | str,
        sender: str,
        content: Any = None,
        *,
        evidence: Sequence[Mapping[str, Any]] = (),
        artifacts: Sequence[str] = (),
    ) -> ACLMessage:
        """A reply to this message's sender, in the same conversation and protocol, naming this
        message."""
        if self.message_id is None:
            raise ProtocolError("only a sent message (one with a message_id) can be replied to")
        return ACLMessage(
            performative=Performative(performative),
            sender=sender,
            receivers=(self.sender,),
            content=content,
            conversation_id=self.conversation_id,
            reply_to=self.message_id,
            evidence=tuple(dict(a) for a in evidence),
            protocol=self.protocol,
            artifacts=tuple(artifacts),
        )

    def envelope(self) -> dict[str, Any]:
        """The ``content`` payload of this message's ``message`` event."""
        body: dict[str, Any] = {"message_id": self.message_id, "content": self.content}
        if self.evidence:
            body["evidence"] = [dict(a) for a in self.evidence]
        return body

    @classmethod
    def from_event(cls, event: Mapping[str, Any], envelope: Mapping[str, Any]) -> ACLMessage:
        """The message a ``message`` event recorded; ``envelope`` is its resolved ``content``."""
        return cls(
            performative=Performative(event["performative"]),
            sender=event["sender"],
            receivers=tuple(event["receivers"]),
            content=envelope.get("content"),
            conversation_id=event.get("conversation_id"),
            reply_to=event.get("reply_to"),
            message_id=envelope.get("message_id"),
            evidence=tuple(envelope.get("evidence") or ()),
            protocol=event.get("protocol"),  # absent in records made before protocols
            artifacts=tuple(event.get("artifacts") or ()),
        )


class MessageBus:
    """Records and delivers messages: one ``message`` event per send, FIFO inbox per agent."""

    def __init__(self, run: Run | None = None) -> None:
        self.run = run
        self._sent: list[ACLMessage] = []
        self._by_id: dict[str, ACLMessage] = {}
        self._inboxes: defaultdict[str, deque[ACLMessage]] = defaultdict(deque)
        self._counters: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.RLock()

    def new_id(self, prefix: str = "msg") -> str:
        """A fresh id: ``run.uuid()`` with a run, else ``<prefix>-<n>`` counted per prefix."""
        if self.run is not None:
            return str(self.run.uuid())
        with self._lock:
            self._counters[prefix] += 1
            return f"{prefix}-{self._counters[prefix]:06d}"

    def send(self, message: ACLMessage) -> ACLMessage:
        """Record ``message``, deliver it, and return it as sent (with its ``message_id``)."""
        with self._lock:
            if message.reply_to is not None and message.reply_to not in self._by_id:
                raise ProtocolError(
                    f"{message.performative} from {message.sender} replies to "
                    f"{message.reply_to!r}, which is no message sent on this bus"
                )
            as_json(message.envelope())  # refuse what the record cannot hold, before an id
            if message.message_id is None:
                message = message.model_copy(update={"message_id": self.new_id("msg")})
            elif message.message_id in self._by_id:
                raise ProtocolError(f"message id {message.message_id!r} was used already")
            assert message.message_id is not None
            if self.run is not None:
                # protocol and artifacts only when set: other messages are recorded as before
                extra: dict[str, Any] = {}
                if message.protocol is not None:
                    extra["protocol"] = message.protocol
                if message.artifacts:
                    extra["artifacts"] = list(message.artifacts)
                self.run.log_event(
                    "message",
                    agent=message.sender,
                    performative=message.performative.value,
                    sender=message.sender,
                    receivers=list(message.receivers),
                    conversation_id=message.conversation_id,
                    reply_to=message.reply_to,
                    content=message.envelope(),
                    **extra,
                )
            self._sent.append(message)
            self._by_id[message.message_id] = message
            for receiver in message.receivers:
                self._inboxes[receiver].append(message)
            return message

    def receive(self, agent: str) -> ACLMessage | None:
        """The oldest undelivered message for ``agent``, or None when its inbox is empty."""
        with self._lock:
            inbox = self._inboxes.get(agent)
            return inbox.popleft() if inbox else None

    def receive_all(self, agent: str) -> list[ACLMessage]:
        """Every undelivered message for ``agent``, oldest first; empties the inbox."""
        with self._lock:
            inbox = self._inboxes.pop(agent, deque())
            return list(inbox)

    def pending(self, agent: str) -> tuple[ACLMessage, ...]:
        """The messages waiting for ``agent``, without taking them."""
        with self._lock:
            return tuple(self._inboxes.get(agent, ()))

    def conversation(self, conversation_id: str) -> tuple[ACLMessage, ...]:
        """Every message of a conversation, in send order."""
        with self._lock:
            return tuple(m for m in self._sent if m.conversation_id == conversation_id)

    def get(self, message_id: str) -> ACLMessage:
        with self._lock:
            try:
                return self._by_id[message_id]
            except KeyError:
                raise ProtocolError(f"no message {message_id!r} was sent on this bus") from None

    @property
    def messages(self) -> tuple[ACLMessage, ...]:
        """Every message sent on this bus, in send order."""
        with self._lock:
            return tuple(self._sent)
