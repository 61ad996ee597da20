"""The protocol and state layer of the science runtime's agents.

* :mod:`~rar.agents.bdi` — :class:`BDIState`: beliefs, desires, intentions; every change a
  ``bdi.update`` event;
* :mod:`~rar.agents.acl` — :class:`Performative`, :class:`ACLMessage` and the :class:`MessageBus`
  that records each message as a ``message`` event and delivers it;
* :mod:`~rar.agents.contract_net` — :class:`ContractNet`: CFP → BID → evaluation → AWARD/REJECT
  → REPORT, with the task state machine;
* :mod:`~rar.agents.argumentation` — Dung frameworks and their grounded extension;
* :mod:`~rar.agents.audit` — the Auditor's six checks, :class:`AuditReport` and challenges;
* :mod:`~rar.agents.modes` — :class:`Mode` (``owl_lite``, ``owl_dl``, ``owl_full``) and its
  thresholds.

``docs/agents.md`` describes the protocols and the recorded events.
"""

from rar.agents.acl import ACLMessage, MessageBus, Performative
from rar.agents.argumentation import Argument, ArgumentationFramework, Label
from rar.agents.audit import (
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
from rar.agents.bdi import BDIComponent, BDIOp, BDIState
from rar.agents.contract_net import (
    CONTRACT_NET_PROTOCOL,
    TRANSITIONS,
    Bid,
    ContractNet,
    Task,
    TaskState,
    bid_score,
)
from rar.agents.errors import IllegalTransitionError, InvalidBidError, ProtocolError
from rar.agents.modes import POLICIES, Mode, ModePolicy

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
