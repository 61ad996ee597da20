"""Option types shared by several commands."""

from __future__ import annotations

from typing import Any

import click


class SeedType(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A whole number that canonical JSON holds exactly (|seed| ≤ 2^53 − 1)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from rar.hashing import MAX_SAFE_INTEGER as bound

        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number", param, ctx)
        if not -bound <= number <= bound:
            self.fail(f"{value} is too large: a seed is between -{bound} and {bound}", param, ctx)
        return number


SEED = SeedType()
