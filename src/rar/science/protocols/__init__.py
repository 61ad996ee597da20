"""The science runtime's agent protocols: the state and messages of its four agents.

Planner, Researcher, Executor and Auditor (:mod:`rar.science`) are built on these; nothing here
knows about them, and nothing here imports the rest of the science runtime.

* :mod:`~rar.science.protocols.bdi` — :class:`BDIState`: beliefs, desires, intentions; every
  change a ``bdi.update`` event;
* :mod:`~rar.science.protocols.acl` — :class:`Performative`, :class:`ACLMessage` and the
  :class:`MessageBus` that records each message as a ``message`` event and delivers it;
* :mod:`~rar.science.protocols.contract_net` — :class:`ContractNet`: CFP → BID → evaluation →
  AWARD/REJECT → REPORT, with the task state machine;
* :mod:`~rar.science.protocols.argumentation` — Dung frameworks and their grounded extension;
* :mod:`~rar.science.protocols.audit` — the Auditor's checks, :class:`AuditReport` and
  challenges;
* :mod:`~rar.science.protocols.modes` — :class:`Mode` (``owl_lite``, ``owl_dl``, ``owl_full``)
  and its thresholds.

``docs/protocols.md`` describes the protocols and the recorded events. Until RAR 0.2 the old name
``rar.agents`` still imports, with a deprecation warning.
"""

from rar.science.protocols.acl import ACLMessage, MessageBus, Performative
from rar.science.protocols.argumentation import Argument, ArgumentationFramework, Label
from rar.science.protocols.audit import (
    CHECKS,
    AuditReport,
    Challenge,
    Check,
    Draft,
    DraftClaim,
    Execution,
    Finding,
    audit,
    check_evidence_quantity,
    check_evidence_structure,
    check_relevance,
    check_runtime_errors,
    check_success,
    check_unit_consistency,
    log_audit,
)
from rar.science.protocols.bdi import BDIComponent, BDIOp, BDIState
from rar.science.protocols.contract_net import (
    CONTRACT_NET_PROTOCOL,
    TRANSITIONS,
    Bid,
    ContractNet,
    Task,
    TaskState,
    bid_score,
)
from rar.science.protocols.errors import IllegalTransitionError, InvalidBidError, ProtocolError
from rar.science.protocols.modes import POLICIES, Mode, ModePolicy

__all__ = [
    "CHECKS",
    "CONTRACT_NET_PROTOCOL",
    "POLICIES",
    "TRANSITIONS",
    "ACLMessage",
    "Argument",
    "ArgumentationFramework",
    "AuditReport",
    "BDIComponent",
    "BDIOp",
    "BDIState",
    "Bid",
    "Challenge",
    "Check",
    "ContractNet",
    "Draft",
    "DraftClaim",
    "Execution",
    "Finding",
    "IllegalTransitionError",
    "InvalidBidError",
    "Label",
    "MessageBus",
    "Mode",
    "ModePolicy",
    "Performative",
    "ProtocolError",
    "Task",
    "TaskState",
    "audit",
    "bid_score",
    "check_evidence_quantity",
    "check_evidence_structure",
    "check_relevance",
    "check_runtime_errors",
    "check_success",
    "check_unit_consistency",
    "log_audit",
]
