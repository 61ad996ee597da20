"""Option types shared by several commands.

Numbers typed on the command line are read strictly: ASCII digits only (``+5``, ``1_000``,
``١٢`` or ``1e3`` are not whole numbers here), within a stated range, and a bad value is a usage
error (exit 2) naming the option and the range, never an internal error later on.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

MAX_SAFE_INTEGER = 2**53 - 1
"""``rar.hashing.MAX_SAFE_INTEGER``, not imported from there to keep the CLI's start-up light."""

_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
MAX_TIMEOUT_SECONDS = 86_400.0
"""The longest wall-clock limit ``rar sandbox run --timeout`` takes: a day."""


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:40] + "…")


class WholeNumber(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A whole number from ``minimum`` to ``maximum`` (by default at most 2**53 - 1, which
    canonical JSON holds exactly), written with ASCII digits."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int = MAX_SAFE_INTEGER) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        allowed = f"a whole number from {self.minimum} to {self.maximum}"
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if not _WHOLE.fullmatch(text):
                self.fail(f"{_shown(value)} is not {allowed}", param, ctx)
            if len(text) > 40:  # beyond any range here, and int() of it would cost
                self.fail(f"{_shown(value)} is out of range: give {allowed}", param, ctx)
            number = int(text)
        if not self.minimum <= number <= self.maximum:
            self.fail(f"{_shown(value)} is out of range: give {allowed}", param, ctx)
        return number


class Seconds(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A finite number of seconds, more than 0 and at most ``maximum`` (``0.5``, ``30``,
    ``1e2``; not ``nan``, ``inf`` or ``1_0``)."""

    name = "seconds"

    def __init__(self, maximum: float) -> None:
        self.maximum = maximum

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "S"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        allowed = f"a number of seconds above 0 and at most {self.maximum:g}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        else:
            text = str(value).strip()
            if not _DECIMAL.fullmatch(text):
                self.fail(f"{_shown(value)} is not {allowed}", param, ctx)
            number = float(text)
        if not (math.isfinite(number) and 0 < number <= self.maximum):
            self.fail(f"{_shown(value)} is out of range: give {allowed}", param, ctx)
        return number


class SeedType(WholeNumber):
    """A whole number that canonical JSON holds exactly (|seed| ≤ 2^53 − 1)."""

    def __init__(self) -> None:
        super().__init__(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)


SEED = SeedType()
COUNT = WholeNumber(1)
"""A count of at least 1 (``--limit``, ``--max-steps``)."""
EVENT_SEQ = WholeNumber(0)
"""An event's sequence number, 0 and up (``rar branch --at``)."""
PORT = WholeNumber(0, 65535)
TIMEOUT = Seconds(MAX_TIMEOUT_SECONDS)


def _enable_otel(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``--otel``: the runs this command records send live spans, as with ``RAR_OTEL=1``."""
    if not value:
        return
    import importlib.util
    import os

    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise click.UsageError("--otel needs OpenTelemetry: pip install 'rar[otel]'")
    before = os.environ.get("RAR_OTEL")
    if before and before.strip().lower() not in ("0", "false", "no", "off"):
        return  # already on (RAR_OTEL=console stays console)
    os.environ["RAR_OTEL"] = "1"

    def restore() -> None:  # for callers that run commands in-process (tests, notebooks)
        if before is None:
            os.environ.pop("RAR_OTEL", None)
        else:
            os.environ["RAR_OTEL"] = before

    ctx.call_on_close(restore)


def otel_option(function: Any) -> Any:
    """The ``--otel`` flag (no parameter of the command: it sets ``RAR_OTEL=1``)."""
    return click.option(
        "--otel",
        is_flag=True,
        expose_value=False,
        callback=_enable_otel,
        help="Send live OpenTelemetry spans of the run to the OTLP endpoint of "
        "OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318), as RAR_OTEL=1 does; "
        "needs pip install 'rar[otel]'. See docs/interop.md.",
    )(function)
