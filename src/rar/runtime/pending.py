"""An effect in two steps: begun when the request is made, recorded when its answer is whole.

:meth:`Run.effect <rar.runtime.run.Run.effect>` performs and records in one call, which fits an
answer read at once. A streamed answer is handed on while it arrives and is whole only at its
end, so :meth:`Run.begin_effect <rar.runtime.run.Run.begin_effect>` takes the effect's place in
its span (its ordinal) when the request is made — where a replay looks it up — and the result is
recorded when the stream ends. Without the early ordinal, another effect of the same span during
the stream (a clock read, a second stream) would take it, and a replay, which serves at request
time, would not line up::

    effect = run.begin_effect("llm", request)
    recorded = effect.served()          # a replay: the recorded result (an error is raised)
    if recorded is None:                # recording (or live in a fork): perform it
        try:
            answer = read_the_whole_stream()
        except Exception as exc:
            effect.fail(exc)            # the error is recorded, then raised on
            raise
        recorded = effect.finish(answer)  # durable before it returns; redacted as recorded

This is the same sequence as ``Run.effect`` (prepare, serve from the source or perform, record),
split in two. The recording transport and ``rar proxy`` (:mod:`rar.interop`) use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rar.runtime import replaying

Staged = Callable[[Any], Callable[[], None] | None]
"""A hook :meth:`PendingEffect.finish` calls while the result's record is made durable; what it
returns, if anything, is called once the record is."""

if TYPE_CHECKING:
    from rar.runtime.run import Run, Span


class PendingEffect:
    """One effect whose ordinal is taken and whose result is not recorded yet."""

    def __init__(self, run: Run, kind: str, request: Any, *, started: int | None = None) -> None:
        """``started``: when the effect began (``time.perf_counter_ns()``), if before now."""
        self.run = run
        self.kind = kind
        span: Span
        span, ordinal, request_ref = run._prepare(kind, request)
        self.span, self.ordinal, self.request_ref = span, ordinal, request_ref
        self.done = False
        self._start = time.perf_counter_ns() if started is None else started

    @property
    def digest(self) -> str:
        """The request's digest: the cache key of an ``llm`` effect."""
        return str(self.request_ref["digest"])

    def served(self) -> Any | None:
        """In a replay, the recorded result (a recorded error is raised); None to go live."""
        if self.run.mode == "record":
            return None
        event = replaying.from_source(
            self.run, self.span, self.ordinal, self.kind, self.request_ref
        )
        if event is None:
            return None
        self.done = True
        return replaying.serve(
            self.run, self.span, self.ordinal, self.kind, self.request_ref, event
        )

    def finish(
        self,
        result: Any,
        *,
        read_back: bool = True,
        unseen: bool = False,
        staged: Staged | None = None,
    ) -> Any:
        """Record ``result`` (durably) and return it as the record holds it (redacted).

        ``read_back=False`` returns it redacted but not read back through canonical JSON, which
        saves parsing it again: a caller that reads only its strings, integers, booleans and
        None (which canonical JSON keeps as they are) gets the same values; a float, a tuple or
        a non-string key may differ from what a replay serves.

        ``unseen=True`` (with ``read_back=False``) says ``result`` holds an answer just received
        from outside, which the store cannot be expected to hold: it is written without asking
        (see :meth:`RunWriter.payload <rar.store.writer.RunWriter.payload>`).

        ``staged(recorded)`` is called with the result as recorded (redacted) once its event
        is written and before it is durable (the disk has been told to start writing it, so
        the work overlaps the write): a caller may stage output from it there that it
        completes only once the event is durable (``rar proxy`` sends an answer but its last
        byte). What ``staged`` returns, if anything, is called the moment the event is durable,
        before this returns (the proxy's sends the last byte). Should the event fail to be made
        durable, that is never called, this raises, and the staged output must be withdrawn,
        never completed. What either raises is logged, never raised."""
        if self.done:
            raise RuntimeError(
                f"the {self.kind} effect at {self.span.path} #{self.ordinal} is already "
                "recorded (or was served from the record); finish() records it once"
            )
        self.done = True
        return self.run._record_result(
            self.span,
            self.kind,
            self.ordinal,
            self.request_ref,
            result,
            self._start,
            read_back=read_back,
            unseen=unseen,
            staged=staged,
        )

    def fail(self, exc: BaseException) -> None:
        """Record ``exc`` as the effect's error."""
        if not self.done:
            self.done = True
            self.run._record_error(
                self.span, self.kind, self.ordinal, self.request_ref, exc, self._start
            )

    def event(self) -> dict[str, Any] | None:
        """The event just recorded for this effect (for the response cache), if it is still
        its span's latest."""
        event = self.span.last_effect
        if event is None or event.get("ordinal") != self.ordinal:
            return None
        if event.get("request", {}).get("digest") != self.digest:
            return None
        return event
