"""Request statistics of a flow: what its model calls cost in requests, tokens, time and money.

``request_duration_s`` adds up every request's own duration; ``effective_duration_s`` is the
time during which at least one request was running (the union of their intervals), which is
what parallel splits shorten. Throughput is measured over the effective duration:
``tps`` = (input + output tokens) / effective duration, ``output_tps`` = output tokens /
effective duration. ``cached`` counts answers served from RAR's response cache (no cost);
``cached_input_tokens`` counts prompt tokens the provider read from its own prompt cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from rar.llm.types import Usage


@dataclass(frozen=True, slots=True)
class RequestRecord:
    agent: str
    started: float  # perf_counter seconds
    ended: float
    usage: Usage
    cached: bool
    cost: float


@dataclass
class FlowStatistics:
    """Totals over a flow's model calls; :meth:`as_dict` is what ``--json`` prints."""

    records: list[RequestRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self.records.append(record)

    @property
    def requests(self) -> int:
        return len(self.records)

    @property
    def cached(self) -> int:
        return sum(r.cached for r in self.records)

    @property
    def input_tokens(self) -> int:
        return sum(r.usage.input_tokens for r in self.records)

    @property
    def cached_input_tokens(self) -> int:
        return sum(r.usage.cached_input_tokens for r in self.records)

    @property
    def output_tokens(self) -> int:
        return sum(r.usage.output_tokens for r in self.records)

    @property
    def reasoning_tokens(self) -> int:
        return sum(r.usage.reasoning_tokens for r in self.records)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.records)

    @property
    def request_duration_s(self) -> float:
        return sum(r.ended - r.started for r in self.records)

    @property
    def effective_duration_s(self) -> float:
        """The length of the union of the requests' intervals."""
        total, end = 0.0, float("-inf")
        for record in sorted(self.records, key=lambda r: r.started):
            if record.ended <= end:
                continue
            total += record.ended - max(record.started, end)
            end = record.ended
        return total

    def _per_second(self, tokens: int) -> float:
        duration = self.effective_duration_s
        return tokens / duration if duration > 0 else 0.0

    @property
    def tps(self) -> float:
        return self._per_second(self.input_tokens + self.output_tokens)

    @property
    def output_tps(self) -> float:
        return self._per_second(self.output_tokens)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "request_duration_s": round(self.request_duration_s, 6),
            "effective_duration_s": round(self.effective_duration_s, 6),
            "tps": round(self.tps, 3),
            "output_tps": round(self.output_tps, 3),
            "cost": round(self.cost, 8),
        }

    def run_stats(self) -> dict[str, float | int]:
        """The numbers added to the run's ``stats["flow"]`` (summed over the run's flows)."""
        return {
            "flows": 1,
            "requests": self.requests,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "request_duration_us": round(self.request_duration_s * 1e6),
            "effective_duration_us": round(self.effective_duration_s * 1e6),
            "cost": self.cost,
        }

    def __str__(self) -> str:
        d = self.as_dict()
        return (
            f"requests {d['requests']} (cached {d['cached']}) · tokens in {d['input_tokens']} "
            f"out {d['output_tokens']} · request time {d['request_duration_s']:.3f} s, "
            f"effective {d['effective_duration_s']:.3f} s · {d['tps']:.1f} tok/s "
            f"({d['output_tps']:.1f} out) · cost {d['cost']:.6f}"
        )
