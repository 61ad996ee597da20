"""When a waiting run is due: ``rar resume`` before the deadline says how long is left."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rar.store.store import Store


def time_left(store: Store, events: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(deadline, time left) of a waiting run whose deadline is still ahead, else None."""
    finished = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
    result = store.resolve_payload(finished.get("result")) if finished else None
    until = result.get("waiting_until") if isinstance(result, dict) else None
    if not isinstance(until, str):
        return None
    try:
        deadline = datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError:
        return None
    if deadline.tzinfo is None:
        deadline = deadline.replace(tzinfo=UTC)
    left = (deadline - datetime.now(UTC)).total_seconds()  # nondeterminism-ok: the wall clock
    if left <= 0:
        return None
    return deadline.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), _duration(left)


def _duration(seconds: float) -> str:
    """``1 h 59 min``, ``3 min 20 s``, ``12 s``."""
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
