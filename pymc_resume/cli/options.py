"""Option types shared by the commands: values a user can mistype get one line, exit 2."""

from __future__ import annotations

import json
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
            self.fail(f"{value!r} is not a number of seconds from {self.low:g} to {self.high:g}", param, ctx)
        return seconds


class AdapterOption(click.ParamType):
    """`KEY=VALUE`, one keyword argument of the adapter's constructor: the value is read as a
    JSON scalar when it parses as one (`3`, `0.5`, `true`, `null`, `"text"`), else taken as the
    string it is (`sqlite`). Whether the adapter takes the key is checked later, against its
    constructor (`bridge.registry.check_options`)."""

    name = "key=value"

    def convert(self, value, param, ctx) -> tuple[str, object]:
        if isinstance(value, tuple):
            return value
        key, equals, text = str(value).partition("=")
        if not equals or not key.strip().isidentifier():
            self.fail(f"{value!r} is not KEY=VALUE with KEY an identifier", param, ctx)
        return key.strip(), _json_scalar(text)


def _json_scalar(text: str) -> object:
    """The JSON scalar `text` spells, or `text` itself (a bare word, or JSON that is not a scalar)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
        return text
    return value


def adapter_options(pairs, fixed: dict | None = None) -> dict:
    """The constructor options of repeated `--adapter-option KEY=VALUE` (the last of a key
    wins), over `fixed` (options another flag sets, such as `--fault`)."""
    options = dict(fixed or {})
    options.update(dict(pairs))
    return options


def adapter_option_flag(function):
    """The `--adapter-option KEY=VALUE` flag (repeatable), shared by `fuzz` and `profile`."""
    return click.option(
        "--adapter-option",
        "adapter_option_pairs",
        type=AdapterOption(),
        multiple=True,
        metavar="KEY=VALUE",
        help="A keyword argument of the adapter's constructor (repeatable); VALUE is read as a JSON "
        "scalar when it parses as one, else as a string.",
    )(function)
