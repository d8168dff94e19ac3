"""A hash of a state that is the same in every process: what decides a state's owner.

Python's `hash()` of a str (or bytes) is salted per interpreter (PYTHONHASHSEED), so a string
state hashed in two processes started apart, a run and its recovery, lands in different
partitions and is explored twice. `stable_hash` hashes the value's contents instead: ints as
Python does (never salted; but -1, which Python hashes as -2), strings through BLAKE2b, tuples
and frozensets and attrs or dataclass instances from their parts. Values that are equal hash
equal (a named tuple hashes as the tuple it equals, an IntEnum as its int), since the visited
store treats them as one state.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Hashable
from hashlib import blake2b

import attrs

MASK = (1 << 64) - 1
MULTIPLIER = 1_000_003
NONE_HASH = 0x9E37_79B9_7F4A_7C15
FROZENSET_SEED = 0x6A09_E667_F3BC_C908
MINUS_ONE_HASH = 0x0C6E_F372_FE94_F82B  # -1's hash (`number_hash`): below 2**60, as ints' are


@functools.lru_cache(maxsize=1 << 16)
def text_hash(text: str) -> int:
    """A string's hash, the same in every process."""
    digest = blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def spread(part_hash: int) -> int:
    """A part's hash with its bits mixed (splitmix64's finalizer), before a set sums it: small
    ints hash to themselves, and a plain sum would make {1, 2} and {0, 3} one set. With
    workers that exchange fingerprints the hash *is* the state's fingerprint, so a collision
    would lose a state, not just place one."""
    z = part_hash & MASK
    z = ((z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB) & MASK
    return z ^ (z >> 31)


def combine(part_hashes) -> int:
    """Combine the hashes of a sequence's parts, in order: CPython's hash of the tuple of
    them, which holds only ints and so is not salted (it is computed in C, which matters: the
    plain codec combines the cached hashes of a key's parts this way for every new state)."""
    return hash(tuple(part_hashes))


@functools.lru_cache(maxsize=1024)
def class_seed(cls: type) -> int:
    """The seed of an attrs or dataclass instance's hash: its class's full name."""
    return text_hash(f"{cls.__module__}.{cls.__qualname__}")


def field_names(cls: type) -> tuple[str, ...] | None:
    """The fields of an attrs or dataclass class, in order; None for any other class."""
    if attrs.has(cls):
        return tuple(field.name for field in attrs.fields(cls))
    if dataclasses.is_dataclass(cls):
        return tuple(field.name for field in dataclasses.fields(cls))
    return None


@functools.lru_cache(maxsize=1 << 12)
def container_hash(value: tuple | frozenset) -> int:
    """A tuple's or frozenset's `stable_hash`, remembered for the last few thousand: the parts
    of a state (a channel, a message) recur in state after state, and only the cache's lookup
    (CPython's own hash and equality, in C) is paid for one met again, not a Python call per
    part all the way down."""
    if isinstance(value, tuple):  # named tuples equal plain tuples, so they hash alike
        return combine(map(stable_hash, value))
    # order-free: equal sets iterate in different orders
    return (FROZENSET_SEED + sum(map(spread, map(stable_hash, value))) * MULTIPLIER + len(value)) & MASK


def number_hash(value: float) -> int:
    """A number's hash: CPython's (an int's is itself modulo 2**61 - 1, which `partition`
    computes in numpy for owners), except for -1, which CPython hashes as -2. Taken as it is,
    a field that holds both -1 and -2 would hash them alike, and workers that exchange
    fingerprints would refuse the model."""
    return MINUS_ONE_HASH if value == -1 else hash(value)


def stable_hash(value: Hashable) -> int:
    """`value`'s hash from its contents, equal in every process for the types listed above;
    any other type falls back to its own `hash()` (stable unless it hashes a string)."""
    kind = type(value)
    if kind is int or kind is bool:
        return MINUS_ONE_HASH if value == -1 else hash(value)  # (`number_hash`, inline: hot)
    if kind is str:
        return text_hash(value)
    if value is None:
        return NONE_HASH
    if isinstance(value, (tuple, frozenset)):
        return container_hash(value)
    if isinstance(value, (int, float)):  # IntEnum, IntFlag, -1.0: equal to their number
        return number_hash(value)
    if isinstance(value, str):  # StrEnum: equal to its text
        return text_hash(str.__str__(value))
    if isinstance(value, bytes):
        return text_hash(value.decode("latin-1"))
    if isinstance(value, enum.Enum):
        return (class_seed(kind) * MULTIPLIER + text_hash(value.name)) & MASK
    names = field_names(kind)
    if names is not None:
        return combine((class_seed(kind), *(stable_hash(getattr(value, name)) for name in names)))
    return hash(value)


# A field's hash in a key: non-negative, so that a key of hashes never starts with a negative
# number, which marks the plain codec's keys of other shapes (attrs, named tuples, ...); and
# below 2**61 - 1, so that CPython's hash of the key, the state's fingerprint, takes each part
# as itself. (With 63 bits a part was hashed modulo 2**61 - 1, and -4's, 2**63 - 4, met 0's:
# two workers took the states (0, "x") and (-4, "x") for one.)
PART_MASK = (1 << 60) - 1


def part_hash(value) -> int:
    """A field value's hash in a key of hashes (`exchange.HashKeys`) or a codec's fingerprint
    (`codec.PartHashes`)."""
    return stable_hash(value) & PART_MASK
