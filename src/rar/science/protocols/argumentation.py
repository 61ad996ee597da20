"""Dung abstract argumentation: claims, their support, attacks, the grounded extension.

::

    af = ArgumentationFramework()
    af.add("a", "Ea = 55.3 kJ/mol", support=[anchor])
    af.add("b", "the fit is unreliable")
    af.add("c", "the residuals are small")
    af.attack("b", "a")
    af.attack("c", "b")
    af.grounded()        # ['a', 'c']
    af.labelling()       # {'a': IN, 'b': OUT, 'c': IN}

The **grounded extension** is the least fixed point of the characteristic function
``F(S) = {a | every attacker of a is attacked by some member of S}``, computed by iterating
``F`` from the empty set (``F`` is monotone, so the iteration climbs to the least fixed point
in at most ``n`` steps). The **grounded labelling**: IN for the grounded extension, OUT for
arguments attacked by an IN argument, UNDEC for the rest. It is the sceptical semantics: it
accepts only what survives every attack, so a mutual attack leaves both sides UNDEC.

Support is evidence (anchor dicts) attached to an argument; it does not change the semantics
(this is Dung's framework, not a bipolar one) but travels with the export so a reader can
follow each accepted claim to its passages. Every output lists arguments in the order they
were added, so exports are deterministic.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rar.science.protocols._json import as_json


class Label(enum.StrEnum):
    IN = "IN"
    OUT = "OUT"
    UNDEC = "UNDEC"


@dataclass(frozen=True, slots=True)
class Argument:
    id: str
    claim: str
    support: tuple[dict[str, Any], ...] = field(default=())


class ArgumentationFramework:
    """A set of arguments and an attack relation between them."""

    def __init__(self) -> None:
        self._arguments: dict[str, Argument] = {}
        self._attacks: dict[tuple[str, str], None] = {}  # insertion-ordered set

    @property
    def arguments(self) -> tuple[Argument, ...]:
        return tuple(self._arguments.values())

    @property
    def attacks(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._attacks)

    def add(
        self, argument_id: str, claim: str = "", support: Iterable[Mapping[str, Any]] = ()
    ) -> Argument:
        """Add an argument (its id, its claim and the evidence supporting it)."""
        if not isinstance(argument_id, str) or not argument_id:
            raise ValueError(f"an argument id must be a non-empty string, not {argument_id!r}")
        if argument_id in self._arguments:
            raise ValueError(f"argument {argument_id!r} exists already")
        argument = Argument(argument_id, claim, tuple(as_json(dict(a)) for a in support))
        self._arguments[argument_id] = argument
        return argument

    def attack(self, attacker: str, target: str) -> None:
        """``attacker`` attacks ``target`` (both must exist; an argument may attack itself)."""
        for name in (attacker, target):
            if name not in self._arguments:
                raise ValueError(f"unknown argument {name!r}; add() it before it can attack")
        self._attacks[(attacker, target)] = None

    def attackers(self, argument_id: str) -> list[str]:
        return [a for a, b in self._attacks if b == argument_id]

    # --- semantics -----------------------------------------------------------------------------

    def characteristic(self, accepted: Iterable[str]) -> set[str]:
        """``F(S)``: the arguments every attacker of which is attacked by a member of ``S``."""
        members = set(accepted)
        defeated = {b for a, b in self._attacks if a in members}
        return {arg for arg in self._arguments if all(a in defeated for a in self.attackers(arg))}

    def grounded(self) -> list[str]:
        """The grounded extension, in the order the arguments were added."""
        current: set[str] = set()
        while True:
            following = self.characteristic(current)
            if following == current:
                break
            current = following
        return [arg for arg in self._arguments if arg in current]

    def labelling(self) -> dict[str, Label]:
        """The grounded labelling: IN, OUT (attacked by an IN argument), UNDEC."""
        accepted = set(self.grounded())
        defeated = {b for a, b in self._attacks if a in accepted}
        return {
            arg: Label.IN if arg in accepted else Label.OUT if arg in defeated else Label.UNDEC
            for arg in self._arguments
        }

    # --- JSON ----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """``{"arguments", "attacks", "supports", "grounded", "labels"}`` as plain JSON."""
        return {
            "arguments": [{"id": a.id, "claim": a.claim} for a in self._arguments.values()],
            "attacks": [[a, b] for a, b in self._attacks],
            "supports": {a.id: [dict(s) for s in a.support] for a in self._arguments.values()},
            "grounded": self.grounded(),
            "labels": {arg: label.value for arg, label in self.labelling().items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArgumentationFramework:
        """A framework from :meth:`to_json` output (``grounded`` and ``labels`` are recomputed)."""
        framework = cls()
        supports = data.get("supports") or {}
        for item in data.get("arguments", []):
            framework.add(item["id"], item.get("claim", ""), supports.get(item["id"], ()))
        for attacker, target in data.get("attacks", []):
            framework.attack(attacker, target)
        return framework
