"""Two small helpers for writing TLA+ state as immutable Python values.

A TLA+ function over a fixed finite domain (`[rm \\in RM |-> ...]`, `[p \\in 1..N |-> ...]`)
is encoded as a tuple indexed by position; `except_` is TLA+'s `[f EXCEPT ![i] = v]`.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def except_(function: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    """`[function EXCEPT ![index] = value]` for a function encoded as a tuple."""
    return function[:index] + (value,) + function[index + 1 :]
