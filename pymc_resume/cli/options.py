"""Option types shared by the commands: values a user can mistype get one line, exit 2."""

from __future__ import annotations

import math

import click


class Seconds(click.ParamType):
    """A finite number of seconds within [low, high]: `nan`, `inf` and negatives are refused
    (a nan deadline never expires; an infinite one is a hang)."""

    name = "seconds"

    def __init__(self, low: float = 0.0, high: float = 7 * 24 * 3600.0) -> None:
        self.low, self.high = low, high

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not self.low <= seconds <= self.high:
            self.fail(f"{value!r} is not a number of seconds from {self.low:g} to {self.high:g}",
                      param, ctx)
        return seconds
