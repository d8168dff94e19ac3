"""The compact encoding the explorer derives by itself for states written plainly.

A model that offers no `codec()` and whose states are not ints gets a `PlainCodec` when it runs
on several workers. A state that is a tuple, a named tuple, or an attrs or dataclass instance
is split into its fields; each field value is interned (one table for every field: a value gets
one id wherever it appears) and the key is the tuple of those ids. A key of a plain tuple holds
only the ids; any other key starts with a negative number naming the state's *shape* (its
class and field count, in a second table). A state of any other kind is interned whole.

Everything on the hot path runs in C: encoding is `tuple(map(ids.__getitem__, state))` (a
field value met before is found by hashing it, which CPython does without a Python call),
decoding and translating are the same map over a list. So:

- it is a wire codec (`codec.InternerTables`): a state bound for another worker travels as a
  tuple of small ints plus the table entries that worker has not seen, never as the object
  tree, and the receiver rewrites the ids with `translate`;
- `owner_hash(key)` is the state's `stable_hash` (the same in every process), computed from
  each interned value's cached hash: a state's owner costs one C-level map, however deep the
  state;
- the visited store keeps tuples of shared small ints, and equal fields are stored once.

A class whose instances do not rebuild equal from their fields in order (an attrs field with
`init=False`, a converter that changes the value) is noticed on its first state and interned
whole instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

from pymc_resume.explore.store.codec import Interner, InternerTables
from pymc_resume.explore.store.persisted import resolve_class
from pymc_resume.explore.store.stable_hash import class_seed, combine, field_names, stable_hash

# A shape, as stored in the shapes table (plain data, so that any checkpoint format keeps it):
# ("class", module, qualified name, field count) for named tuples, attrs and dataclass
# classes, or ("whole",) for a state interned as one value. Plain tuples need no shape.
WHOLE = ("whole",)

Key = tuple[int, ...]


def _class_named(module: str, qualname: str) -> type:
    """The class a shape names. A restored checkpoint's shapes table is input, so the class is
    looked up only among modules already imported (the model's are), never imported, and must
    be a plain data class: a crafted table naming `os.system` is a ValueError, not a call."""
    return resolve_class(module, qualname)


@functools.lru_cache(maxsize=256)
def tuple_mapper(arity: int) -> Callable[[tuple, Any], tuple]:
    """`mapper(values, table)` is `tuple(map(table.__getitem__, values))` for `arity` values, as
    straight-line code generated once per arity: `(table[f0], table[f1], ...)`. It encodes a
    plain tuple state (table: the values' ids), hashes a key for its owner (the values'
    hashes) and translates another partition's key (its translation): what every successor
    and every state crossing pays. TwoPhase, 4 fields: 330-360 ns against 460-510 for the map,
    which calls a method-wrapper per field. Like the map it raises KeyError or IndexError for
    a value not in `table`; for a tuple of another length it raises ValueError."""
    if not 0 < arity <= 64:
        return lambda values, table: tuple(map(table.__getitem__, values))
    return straight_line(arity, lambda position, field: f"table[{field}]")


def straight_line(arity: int, lookup: Callable[[int, str], str]) -> Callable[[tuple, Any], tuple]:
    """`mapper(values, table)`: unpack `arity` values into f0, f1, ... and return the tuple of
    `lookup(position, name)` expressions, compiled once (`tuple_mapper`, `exchange.field_mapper`)."""
    fields = [f"f{i}" for i in range(arity)]
    source = (
        f"def mapper(values, table):\n    {', '.join(fields)}, = values\n"
        f"    return ({', '.join(lookup(i, field) for i, field in enumerate(fields))},)\n"
    )
    namespace: dict = {}
    exec(source, namespace)
    return namespace["mapper"]


class _NotPlain(Exception):
    """A batch holds a key other than a plain tuple's of one length: the general path."""


def _not_plain() -> bool:
    raise _NotPlain


class _Shape:
    """What decoding and hashing a key of one shape needs (derived from its table entry)."""

    __slots__ = ("build", "seed")

    build: Callable[[Any], Hashable] | None  # None: the state is interned whole
    seed: int | None  # None: hashed as a plain tuple (or whole)

    def __init__(self, entry: tuple) -> None:
        if entry[0] == "whole":
            self.build, self.seed = None, None
            return
        _kind, module, qualname, _arity = entry
        cls = _class_named(module, qualname)
        if issubclass(cls, tuple):  # a named tuple: equal to, and hashed as, a plain tuple
            self.build, self.seed = cls._make, None  # type: ignore[attr-defined]  # a named tuple's
        else:
            self.build, self.seed = (
                (lambda fields, cls=cls: cls(*fields)),
                class_seed(cls),  # type: ignore[arg-type]  # mypy: cls is type[object], "unhashable"
            )


def _tag(shape_id: int) -> int:
    """The first element of the keys of a shape: negative, as ids are not. It starts at -2
    because Python hashes -1 as -2: with tags -1 and -2, the keys of two shapes with equal
    field ids would hash alike, and a fingerprint store would take one state for the other."""
    return -2 - shape_id


def _shape_id(tag: int) -> int:
    return -2 - tag


class PlainCodec(InternerTables):
    """Per-partition tables of shapes and field values; keys are tuples of ids."""

    def __init__(self) -> None:
        self.shapes = Interner()
        self.values = Interner()
        self.tables = (self.shapes, self.values)
        # Derived from the tables, extended on demand (a restored checkpoint refills the
        # tables in place, so these catch up from whatever the tables hold).
        self._shapes: list[_Shape] = []
        self._hashes: list[int] = []  # stable_hash of each interned value
        # Per non-tuple state type: the first element of its keys, and how to read its
        # fields (None: the state is interned whole).
        self._by_type: dict[type, tuple[int, Callable | None]] = {}

    # --- encoding -----------------------------------------------------------------------

    def encode(self, state: Hashable) -> Key:
        if type(state) is tuple:
            try:
                return tuple(map(self.values.ids.__getitem__, state))
            except KeyError:  # a field value never seen before: intern it
                return tuple(map(self.values.id, state))
        tag, fields = self._by_type.get(type(state)) or self._learn(state)
        if fields is None:
            return tag, self.values.id(state)
        return (tag, *map(self.values.id, fields(state)))

    def _learn(self, state: Hashable) -> tuple[int, Callable | None]:
        """Decide how states of this one's (non-tuple) type are split, from the first one."""
        kind = type(state)
        fields: Callable[[Any], Any] | None
        entry: tuple
        fields, entry = None, WHOLE
        names = field_names(kind) or getattr(kind, "_fields", None)
        if names and "<locals>" not in kind.__qualname__:
            entry = ("class", kind.__module__, kind.__qualname__, len(names))
            if isinstance(state, tuple):
                fields = tuple
            else:
                fields = lambda value, names=names: [getattr(value, name) for name in names]
            # (ignore: a class shape always builds, and `fields` takes any state of `kind`)
            if _Shape(entry).build(fields(state)) != state:  # type: ignore[misc, arg-type]
                fields, entry = None, WHOLE
        found = (_tag(self.shapes.id(entry)), fields)
        self._by_type[kind] = found
        return found

    # --- decoding -----------------------------------------------------------------------

    def _shape(self, tag: int) -> _Shape:
        shapes, shape_id = self._shapes, _shape_id(tag)
        while len(shapes) <= shape_id:
            shapes.append(_Shape(self.shapes.values[len(shapes)]))
        return shapes[shape_id]

    def decode(self, key: Key) -> Hashable:
        values = self.values.values
        if not key or key[0] >= 0:
            return tuple(map(values.__getitem__, key))
        shape = self._shape(key[0])
        if shape.build is None:
            return values[key[1]]
        return shape.build(list(map(values.__getitem__, key[1:])))

    # --- between partitions ---------------------------------------------------------------

    def translate(self, key: Key, translation: list[list[int]]) -> Key:
        """Another partition's key (its ids; `translation` maps them to ours) as our key."""
        shapes, values = translation
        if not key or key[0] >= 0:
            return tuple(map(values.__getitem__, key))
        return (_tag(shapes[_shape_id(key[0])]), *map(values.__getitem__, key[1:]))

    def translate_keys(self, keys: list, translation: list[list[int]]) -> list:
        """`translate` of each key of a batch, the plain tuples' by `tuple_mapper` (no method
        call per key); any other key by `translate`."""
        values = translation[1]
        mapper = tuple_mapper(len(keys[0]) if keys else 0)
        try:
            return [mapper(key, values) for key in keys if key and key[0] >= 0 or _not_plain()]
        except (_NotPlain, ValueError):  # a tagged key, an empty one, or another length
            pass
        translate = self.translate
        return [translate(key, translation) for key in keys]

    def translate_batch(self, candidates: list, translation: list[list[int]]) -> list:
        """`translate_keys` of a batch of (key, parent) pairs."""
        keys = self.translate_keys([key for key, _ in candidates], translation)
        return list(zip(keys, [parent for _, parent in candidates]))

    def states_of_batch(self, candidates: list, translation: list[list[int]]) -> list:
        """Each (key, parent) pair of another partition's batch as (state, parent): its key
        translated (`translate_batch`), then decoded into our interned values."""
        decode = self.decode
        return [(decode(key), parent) for key, parent in self.translate_batch(candidates, translation)]

    def value_hashes(self) -> list[int]:
        """`stable_hash` of each interned value, by id (one list, extended in place)."""
        hashes, values = self._hashes, self.values.values
        if len(hashes) < len(values):
            hashes.extend(map(stable_hash, values[len(hashes) :]))
        return hashes

    def owner_hash(self, key: Key) -> int:
        """`stable_hash` of the state `key` encodes, from the interned values' hashes."""
        hashes = self.value_hashes()
        if not key or key[0] >= 0:
            return combine(map(hashes.__getitem__, key))
        shape = self._shape(key[0])
        if shape.build is None:
            return hashes[key[1]]
        if shape.seed is None:  # a named tuple
            return combine(map(hashes.__getitem__, key[1:]))
        return combine((shape.seed, *map(hashes.__getitem__, key[1:])))


def fits_plain_codec(model) -> bool:
    """Whether a model gets a `PlainCodec`: it has no codec of its own and its initial states
    are not ints (an int is already as compact as a key can be)."""
    if getattr(model, "codec", None) is not None:
        return False
    states = list(model.initial_states())
    return not all(type(state) is int for state in states)
