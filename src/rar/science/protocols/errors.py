"""Errors of the agent protocols, under :class:`rar.errors.UserError`::

    UserError
    └── ProtocolError              a message or protocol step breaks the rules of the protocol
        ├── IllegalTransitionError a task was asked to move between states the machine forbids
        └── InvalidBidError        a bid's numbers are out of range (also a ValueError)

They are raised in code, before anything is recorded: a protocol step that fails leaves no
``message`` or ``bdi.update`` event behind.
"""

from __future__ import annotations

from rar.errors import UserError


class ProtocolError(UserError):
    """A message or a protocol step breaks the rules (unknown task, duplicate bid, ...)."""


class IllegalTransitionError(ProtocolError):
    """A Contract Net task cannot move from its current state to the one asked for."""


class InvalidBidError(ProtocolError, ValueError):
    """A bid's success probability, capability match, cost or latency is out of range."""
