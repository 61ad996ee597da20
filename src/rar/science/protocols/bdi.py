"""BDI agent state: beliefs, desires and intentions as explicit, recorded values.

::

    state = BDIState("researcher", run)
    state.believe("corpus", {"documents": 12})      # bdi.update beliefs add corpus
    state.desire("answer", "activation energy")     # bdi.update desires add answer
    state.intend("search", {"query": "Arrhenius"})  # bdi.update intentions add search
    state.intend("search", {"query": "Ea"})         # bdi.update intentions replace search
    state.drop_intention("search")                  # bdi.update intentions remove search

Every change is one ``bdi.update`` event (``component``, ``op``, ``key``, ``value``) written in
the run's current span with ``agent`` set, so a viewer (or :meth:`BDIState.rebuild`) can
reconstruct the state at any point of the record. Setting an entry to the value it already
holds, or removing an absent entry, is not a change and writes nothing.

Values are JSON. They are normalized through canonical JSON before they are stored, so the
in-memory state equals what the record holds (``1.0`` reads back as ``1``, tuples as lists) and
later mutation of the caller's object does not leak into the state.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rar.science.protocols._json import as_json

if TYPE_CHECKING:
    from rar.runtime.run import Run


class BDIComponent(enum.StrEnum):
    BELIEFS = "beliefs"
    DESIRES = "desires"
    INTENTIONS = "intentions"


class BDIOp(enum.StrEnum):
    ADD = "add"
    REMOVE = "remove"
    REPLACE = "replace"


class BDIState:
    """One agent's beliefs, desires and intentions; every change recorded in ``run``.

    Without a run (``run=None``) the state works the same and records nothing: useful in unit
    tests and for planning that should leave no trace.
    """

    def __init__(self, agent: str, run: Run | None = None) -> None:
        if not isinstance(agent, str) or not agent:
            raise ValueError("a BDI state needs the non-empty name of its agent")
        self.agent = agent
        self.run = run
        self._components: dict[BDIComponent, dict[str, Any]] = {c: {} for c in BDIComponent}

    # --- views ---------------------------------------------------------------------------------

    @property
    def beliefs(self) -> dict[str, Any]:
        """The agent's beliefs (a copy: change them with :meth:`believe` and :meth:`forget`)."""
        return self._view(BDIComponent.BELIEFS)

    @property
    def desires(self) -> dict[str, Any]:
        return self._view(BDIComponent.DESIRES)

    @property
    def intentions(self) -> dict[str, Any]:
        return self._view(BDIComponent.INTENTIONS)

    def _view(self, component: BDIComponent) -> dict[str, Any]:
        return as_json(self._components[component])  # type: ignore[no-any-return]

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON: ``{"agent", "beliefs", "desires", "intentions"}``."""
        return {"agent": self.agent, **{c.value: self._view(c) for c in BDIComponent}}

    def __repr__(self) -> str:
        sizes = ", ".join(f"{len(self._components[c])} {c.value}" for c in BDIComponent)
        return f"<BDIState {self.agent}: {sizes}>"

    # --- changes -------------------------------------------------------------------------------

    def believe(self, key: str, value: Any) -> None:
        """Hold ``key`` to be ``value`` (added when new, replaced otherwise)."""
        self.set(BDIComponent.BELIEFS, key, value)

    def forget(self, key: str) -> bool:
        """Drop the belief ``key``; returns whether there was one."""
        return self.remove(BDIComponent.BELIEFS, key)

    def desire(self, key: str, value: Any) -> None:
        self.set(BDIComponent.DESIRES, key, value)

    def drop_desire(self, key: str) -> bool:
        return self.remove(BDIComponent.DESIRES, key)

    def intend(self, key: str, value: Any) -> None:
        self.set(BDIComponent.INTENTIONS, key, value)

    def drop_intention(self, key: str) -> bool:
        return self.remove(BDIComponent.INTENTIONS, key)

    def set(self, component: BDIComponent | str, key: str, value: Any) -> None:
        """Add ``key`` to a component, or replace its value when it is there already."""
        part = self._component(component)
        normalized = self._value(key, value)
        if key in part:
            if part[key] == normalized and _same_types(part[key], normalized):
                return
            op = BDIOp.REPLACE
        else:
            op = BDIOp.ADD
        self._log(BDIComponent(component), op, key, normalized)
        part[key] = normalized

    def replace(self, component: BDIComponent | str, key: str, value: Any) -> None:
        """Replace the value of an entry that must exist (a ``KeyError`` says when it does not)."""
        part = self._component(component)
        if key not in part:
            held = ", ".join(sorted(part)) or "none"
            raise KeyError(
                f"{self.agent} has no {BDIComponent(component).value} entry {key!r} to replace "
                f"(it holds: {held}); use set() to add one"
            )
        self.set(component, key, value)

    def remove(self, component: BDIComponent | str, key: str) -> bool:
        """Remove an entry; returns whether it was there (removing nothing records nothing)."""
        part = self._component(component)
        if key not in part:
            return False
        self._log(BDIComponent(component), BDIOp.REMOVE, key, None)
        del part[key]
        return True

    def _component(self, component: BDIComponent | str) -> dict[str, Any]:
        try:
            return self._components[BDIComponent(component)]
        except ValueError:
            names = ", ".join(c.value for c in BDIComponent)
            raise ValueError(f"unknown BDI component {component!r}; one of {names}") from None

    def _value(self, key: str, value: Any) -> Any:
        if not isinstance(key, str) or not key:
            raise ValueError(f"a BDI key must be a non-empty string, not {key!r}")
        return as_json(value)

    def _log(self, component: BDIComponent, op: BDIOp, key: str, value: Any) -> None:
        if self.run is None:
            return
        fields: dict[str, Any] = {
            "agent": self.agent,
            "component": component.value,
            "op": op.value,
            "key": key,
        }
        if op is not BDIOp.REMOVE:
            fields["value"] = value
        self.run.log_event("bdi.update", **fields)

    # --- from the record -----------------------------------------------------------------------

    @classmethod
    def rebuild(
        cls,
        agent: str,
        events: Iterable[Mapping[str, Any]],
        resolve: Callable[[Any], Any],
    ) -> BDIState:
        """The state of ``agent`` after the ``bdi.update`` events of a record.

        ``resolve`` turns a payload reference into its value (``store.resolve_payload``).
        The rebuilt state records nothing.
        """
        state = cls(agent)
        for event in events:
            if event.get("type") != "bdi.update" or event.get("agent") != agent:
                continue
            part = state._components[BDIComponent(event["component"])]
            if event["op"] == BDIOp.REMOVE:
                part.pop(event["key"], None)
            else:
                part[event["key"]] = resolve(event.get("value"))
        return state


def _same_types(a: Any, b: Any) -> bool:
    """Whether two equal JSON values also agree in kind (``True == 1`` in Python, not in JSON)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return True
