"""Plain values as bytes and back, for everything the explorer reads from disk: never pickle.

A checkpoint folder is input like any other: whoever can write it must not be able to run code
through it, crash the reader, or make it report impossible counts. Unpickling runs whatever the
file names, so snapshots are written in this small tagged format instead. It holds plain values
only: None, bool, int (any size), float, str, bytes, bytearray, tuple, list, dict, frozenset,
`array.array`, and instances of named tuples, attrs classes, dataclasses and enums. A class is
written as its module and qualified name; on loading it is looked up only among the modules
already imported (nothing is imported and no module `__getattr__` runs) and accepted only if it
is one of those plain kinds, built from its fields.

A file is a header (magic, format version, body length, SHA-256 of the body) and the body. Every
check raises `SnapshotError`, naming the file and what is wrong. The checksum catches damage (a
truncated or torn file, flipped bits), not tampering: a crafted file can carry a correct one, so
the reader of the values still validates them (see `snapshot.restore_partition`).

Two shortcuts keep large snapshots fast: a list of ints is written as one raw block of
fixed-width integers (8-byte signed ones, or wider unsigned ones for packed state keys), and a
tuple or class instance met again (the same object) is written as a back-reference, so that
shared parts stay shared after loading. The writer remembers at most `MEMO_LIMIT` of them at a
time: a partition's codec tables hold a tuple for every distinct part of every state, and
remembering each (about 100 bytes in a dict) made a snapshot take half again the search's
memory. What it forgets it writes again in full, which loses sharing, never a value.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import struct
import sys
from array import array
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter
from types import ModuleType
from typing import BinaryIO, Literal, cast

import attrs
import numpy as np

from pymc_resume.errors import BadInput

MAGIC = b"PYMCSNAP"
VERSION = 1
HEADER = struct.Struct("<8sHQ32s")  # magic, format version, body length, SHA-256 of the body

_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_TAGGED_I64 = struct.Struct("<cq")  # a tag byte and an 8-byte signed int
FLUSH_AT = 1 << 20  # bytes a streaming writer (`dump`) buffers before it writes them
_ARRAY_CODES = "bBhHiIlLqQfd"  # array typecodes of plain numbers (not the unicode 'u', 'w')
_INT_LIST_MIN = 8  # lists at least this long, all ints, are written as one raw block
MEMO_LIMIT = 1 << 16  # tuples and instances a writer remembers for back-references, at most
_BIG_ENDIAN = sys.byteorder == "big"

# Tags: one byte before each value.
NONE, TRUE, FALSE = b"N", b"T", b"F"
INT, BIG_INT, FLOAT, STR, BYTES, BYTEARRAY = b"i", b"I", b"f", b"s", b"b", b"y"
TUPLE, LIST, DICT, FROZENSET, ARRAY, INT_LIST = b"t", b"l", b"d", b"z", b"a", b"n"
INSTANCE, BACK_REFERENCE = b"c", b"r"
_INT_TAG = INT[0]

# Kinds of plain classes.
NAMED_TUPLE, ENUM, ATTRS, DATACLASS = "named tuple", "enum", "attrs", "dataclass"


class SnapshotError(BadInput):
    """A checkpoint folder that cannot be recovered from; the message says why."""


def plain_kind(cls: object) -> str | None:
    """Which kind of plain class `cls` is, or None if it is none of them."""
    if not isinstance(cls, type):
        return None
    if issubclass(cls, enum.Enum):
        return ENUM
    if issubclass(cls, tuple) and isinstance(cls.__dict__.get("_fields"), tuple):
        return NAMED_TUPLE
    if attrs.has(cls):
        return ATTRS
    if dataclasses.is_dataclass(cls):
        return DATACLASS
    return None


def _field_names(cls: type, kind: str) -> tuple[str, ...]:
    """The names the constructor takes, in the order instances are written."""
    if kind == NAMED_TUPLE:
        return cls._fields  # type: ignore[attr-defined]  # a named tuple class's
    if kind == ATTRS:
        return tuple(field.alias for field in attrs.fields(cls) if field.init)
    if kind == DATACLASS:
        return tuple(field.name for field in dataclasses.fields(cls) if field.init)
    return ("value",)


def _attribute_names(cls: type, kind: str) -> tuple[str, ...]:
    """Where an instance keeps the values of `_field_names`."""
    if kind == ATTRS:
        return tuple(field.name for field in attrs.fields(cls) if field.init)
    return _field_names(cls, kind)


# --- writing -------------------------------------------------------------------------------


@attrs.frozen
class ArrayPieces:
    """An array too large to gather before it is written (a partition's settled edges, on
    disk): `length` items of `typecode`, given by `pieces()` as one-dimensional numpy arrays.
    It is written as the one `array.array` it would be, and reads back as one."""

    typecode: str
    length: int
    pieces: Callable[[], Iterable[np.ndarray]]


class _Writer:
    def __init__(self) -> None:
        # One growing buffer rather than a list of pieces: a piece is an object of 40 bytes or
        # more, so a list of them took twice the file's size while it was written.
        self.out = bytearray()
        # With a stream (`dump`), the buffer goes out a MiB at a time, hashed on the way.
        self.stream: BinaryIO | None = None
        self.digest = hashlib.sha256()
        self.size = 0
        # Tuples and instances already written, by identity, to their back-reference number.
        # Numbers are given after the children are written, as the reader builds them: every
        # tuple and instance gets the next one (`numbered`), remembered or not.
        self.written: dict[int, int] = {}
        self.numbered = 0
        self.classes: dict[type, int] = {}

    def value(self, value: object) -> None:
        if self.stream is not None and len(self.out) >= FLUSH_AT:
            self.flush()
        # The table of writers is the class's (see below the class): bound methods kept on the
        # instance would make a reference cycle, never freed while a search runs with the
        # cyclic garbage collector off.
        writer = _WRITERS.get(type(value))
        if writer is None:
            self._instance(value)
        else:
            writer(self, value)

    def flush(self) -> None:
        """Send the buffer to the stream, emptied in place (callers hold it as a local)."""
        self._emit(self.out)
        del self.out[:]

    def _emit(self, data) -> None:
        assert self.stream is not None  # (only with a stream)
        self.stream.write(data)
        self.digest.update(data)
        self.size += len(data)

    def _block(self, data) -> None:
        """A large block of raw bytes: straight to the stream when there is one, not copied
        into the buffer first."""
        if self.stream is not None and len(data) >= FLUSH_AT:
            self.flush()
            self._emit(data)
        else:
            self.out += data

    def _none(self, value) -> None:
        self.out += NONE

    def _bool(self, value) -> None:
        self.out += TRUE if value else FALSE

    def _int(self, value) -> None:
        if -(2**63) <= value < 2**63:
            self.out += INT + _I64.pack(value)
        else:
            size = (value.bit_length() + 8) // 8  # one more bit for the sign
            self.out += BIG_INT + _U64.pack(size) + value.to_bytes(size, "little", signed=True)

    def _float(self, value) -> None:
        self.out += FLOAT + _F64.pack(value)

    def _str(self, value) -> None:
        data = value.encode("utf-8", "surrogatepass")
        self.out += STR + _U64.pack(len(data)) + data

    def _bytes(self, value) -> None:
        self.out += BYTES + _U64.pack(len(value))
        self._block(value)

    def _bytearray(self, value) -> None:
        self.out += BYTEARRAY + _U64.pack(len(value))
        self._block(value)

    def _remember(self, value) -> None:
        if len(self.written) >= MEMO_LIMIT:  # forget them all: the parts in use come back soon
            self.written.clear()
        self.written[id(value)] = self.numbered
        self.numbered += 1

    def _referenced(self, value) -> bool:
        number = self.written.get(id(value))
        if number is None:
            return False
        self.out += BACK_REFERENCE + _U64.pack(number)
        return True

    def _items(self, tag: bytes, items) -> None:
        out = self.out
        out += tag + _U64.pack(len(items))
        pack = _TAGGED_I64.pack
        for item in items:
            if type(item) is int and -(2**63) <= item < 2**63:  # most items: inlined `_int`
                out += pack(INT, item)
            else:
                self.value(item)

    def _tuple(self, value) -> None:
        if not self._referenced(value):
            self._items(TUPLE, value)
            self._remember(value)

    def _frozenset(self, value) -> None:
        if not self._referenced(value):
            self._items(FROZENSET, value)
            self._remember(value)

    def _list(self, value) -> None:
        if len(value) >= _INT_LIST_MIN and set(map(type, value)) == {int} and self._int_list(value):
            return
        self._items(LIST, value)

    def _int_list(self, value: list[int]) -> bool:
        """A list of ints as one block of little-endian ints of a common width: 8-byte signed
        ones, or wider unsigned ones (packed state keys); False if it is neither."""
        low, high = min(value), max(value)
        if -(2**63) <= low and high < 2**63:
            block = array("q", value)
            if _BIG_ENDIAN:
                block.byteswap()
            width, data = 8, block.tobytes()
        elif low >= 0:
            width = (high.bit_length() + 7) // 8
            little: repeat[Literal["little"]] = repeat("little")
            data = b"".join(map(int.to_bytes, value, repeat(width), little))
        else:
            return False
        self.out += INT_LIST + _U64.pack(width) + _U64.pack(len(value))
        self._block(data)
        return True

    def _dict(self, value) -> None:
        self.out += DICT + _U64.pack(len(value))
        for key, item in value.items():
            self.value(key)
            self.value(item)

    def _array(self, value: array) -> None:
        if value.typecode not in _ARRAY_CODES:
            raise TypeError(f"cannot save an array of typecode {value.typecode!r}")
        if _BIG_ENDIAN:
            value = array(value.typecode, value)
            value.byteswap()
        data = value.tobytes()
        self._array_header(value.typecode, value.itemsize, len(data))
        self._block(data)

    def _ndarray(self, value: np.ndarray) -> None:
        """A one-dimensional numpy array of plain numbers, written as the `array.array` of its
        type would be (it reads back as one): the store's columns go out without a copy."""
        typecode = _NUMPY_CODES.get(value.dtype.str.lstrip("<=|>")) if value.ndim == 1 else None
        if typecode is None:
            raise TypeError(f"cannot save a numpy array of {value.ndim} dimensions and dtype {value.dtype}")
        self._array_header(typecode, value.itemsize, value.nbytes)
        self._little_endian_block(value)

    def _array_pieces(self, value: ArrayPieces) -> None:
        itemsize = array(value.typecode).itemsize
        self._array_header(value.typecode, itemsize, value.length * itemsize)
        written = 0
        for piece in value.pieces():
            written += self._little_endian_block(np.asarray(piece, dtype=value.typecode))
        if written != value.length * itemsize:  # (the header said otherwise: a broken file)
            raise ValueError(f"array pieces held {written} bytes, not the {value.length * itemsize} declared")

    def _array_header(self, typecode: str, itemsize: int, nbytes: int) -> None:
        """What opens an `array.array`: its typecode, item size and length in bytes."""
        self.out += ARRAY + struct.pack("<cBQ", typecode.encode(), itemsize, nbytes)

    def _little_endian_block(self, values: np.ndarray) -> int:
        """A numpy array's items as little-endian bytes, without a copy where they are so
        already; returns how many bytes."""
        data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
        self._block(data.data.cast("B") if data.nbytes else b"")
        return data.nbytes

    def _instance(self, value) -> None:
        if self._referenced(value):
            return
        cls = type(value)
        kind = plain_kind(cls)
        if kind is None:
            raise TypeError(f"cannot save a value of type {cls.__module__}.{cls.__qualname__}")
        number = self.classes.get(cls)
        if number is None:  # the class's first instance also names it
            number = self.classes[cls] = len(self.classes)
            self.out += INSTANCE + _U64.pack(number)
            self._str(cls.__module__)
            self._str(cls.__qualname__)
        else:
            self.out += INSTANCE + _U64.pack(number)
        if kind == NAMED_TUPLE:
            self._items(TUPLE, value)
        elif kind == ENUM:
            self._items(TUPLE, (value.value,))
        else:
            self._items(TUPLE, [getattr(value, name) for name in _attribute_names(cls, kind)])
        self._remember(value)


_WRITERS = {
    type(None): _Writer._none,
    bool: _Writer._bool,
    int: _Writer._int,
    float: _Writer._float,
    str: _Writer._str,
    bytes: _Writer._bytes,
    bytearray: _Writer._bytearray,
    tuple: _Writer._tuple,
    list: _Writer._list,
    dict: _Writer._dict,
    frozenset: _Writer._frozenset,
    array: _Writer._array,
    np.ndarray: _Writer._ndarray,
    ArrayPieces: _Writer._array_pieces,
}
# numpy's dtype (without its byte order) -> the typecode of the `array.array` it is saved as.
_NUMPY_CODES = {
    "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I", "i8": "q", "u8": "Q", "f8": "d"
}  # fmt: skip


def dump(value: object, stream: BinaryIO) -> tuple[int, str]:
    """Write `value` to the seekable binary `stream` as `dumps` gives it, a MiB at a time (a
    checkpoint's partition file is never held whole in memory): the header's place first,
    filled in at the end, when the body's length and digest are known. Returns the file's
    length (header included) and its body's SHA-256 in hex (`identity`)."""
    start = stream.tell()
    stream.write(bytes(HEADER.size))
    writer = _Writer()
    writer.stream = stream
    writer.value(value)
    writer.flush()
    end = stream.tell()
    stream.seek(start)
    digest = writer.digest.digest()
    stream.write(HEADER.pack(MAGIC, VERSION, writer.size, digest))
    stream.seek(end)
    return HEADER.size + writer.size, digest.hex()


def identity(data: bytes) -> tuple[int, str]:
    """A file's length and its body's SHA-256 in hex, as its header gives the latter: what a
    manifest records of each file it names (the body is checked against the header when the
    file is read, `loads`, so the header's digest stands for the whole file)."""
    if len(data) < HEADER.size:
        return len(data), ""
    return len(data), HEADER.unpack_from(data)[3].hex()


def dumps(value: object) -> bytes:
    """`value` as a file's bytes: header, then the tagged body (a bytearray, built in place)."""
    writer = _Writer()
    writer.out += bytes(HEADER.size)  # (the header's place, filled in once the body is written)
    writer.value(value)
    out = writer.out
    with memoryview(out) as view:  # (no copy of the body, however large)
        body = view[HEADER.size :]
        HEADER.pack_into(out, 0, MAGIC, VERSION, len(body), hashlib.sha256(body).digest())
        body.release()
    return out  # type: ignore[return-value]  # a bytearray: bytes-like, and no copy of it


# --- reading -------------------------------------------------------------------------------


class _Damaged(ValueError):
    """Raised inside the reader; `loads` turns it into a SnapshotError naming the file."""


def resolve_class(module_name: str, qualname: str) -> type:
    """The plain class `module_name.qualname`, found only among modules already imported."""
    module = sys.modules.get(module_name)
    if not isinstance(module, ModuleType):
        raise _Damaged(f"names class {qualname!r} of module {module_name!r}, which is not loaded")
    found: object = module
    for part in qualname.split("."):
        # vars(), not getattr(): a module's or class's __getattr__ could run code or import.
        try:
            found = vars(found).get(part)
        except TypeError:
            found = None
        if found is None:
            raise _Damaged(f"names class {module_name}.{qualname}, which does not exist")
    if not isinstance(found, type) or plain_kind(found) is None:
        raise _Damaged(f"names {module_name}.{qualname}, which is not a plain data class")
    return found


class _Reader:
    def __init__(self, body: memoryview) -> None:
        self.body = body
        self.end = len(body)
        self.position = 0
        self.built: list = []  # tuples and instances, for back-references
        self.classes: list[tuple[type, str, tuple[str, ...]]] = []

    def take(self, size: int) -> memoryview:
        start = self.position
        if size > self.end - start:
            raise _Damaged(f"ends early (at byte {self.end}, needed {start + size})")
        self.position = start + size
        return self.body[start : start + size]

    # The fixed-size reads below unpack in place; reading past the end raises struct.error,
    # which `loads` reports as a file that ends early.
    def u64(self) -> int:
        position = self.position
        self.position = position + 8
        return _U64.unpack_from(self.body, position)[0]

    def count(self, item_size: int = 1) -> int:
        """A length that must fit in what is left (each item takes at least `item_size`)."""
        count = self.u64()
        if count * item_size > self.end - self.position:
            raise _Damaged(f"claims {count:,} items at byte {self.position}, more than it holds")
        return count

    def value(self) -> object:
        position = self.position
        if position >= self.end:
            raise _Damaged(f"ends early (at byte {self.end})")
        tag = self.body[position]
        self.position = position + 1
        reader = _READERS.get(tag)  # the class's table, as for `_Writer`
        if reader is None:
            raise _Damaged(f"has an unknown tag {bytes([tag])!r} at byte {position}")
        return reader(self)

    def _none(self) -> None:
        return None

    def _true(self) -> bool:
        return True

    def _false(self) -> bool:
        return False

    def _int(self) -> int:
        position = self.position
        self.position = position + 8
        return _I64.unpack_from(self.body, position)[0]

    def _big_int(self) -> int:
        return int.from_bytes(self.take(self.count()), "little", signed=True)

    def _float(self) -> float:
        position = self.position
        self.position = position + 8
        return _F64.unpack_from(self.body, position)[0]

    def _str(self) -> str:
        data = self.take(self.count())
        try:
            return str(data, "utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise _Damaged(f"has a string that is not UTF-8 before byte {self.position}") from None

    def _bytes(self) -> bytes:
        return bytes(self.take(self.count()))

    def _bytearray(self) -> bytearray:
        return bytearray(self.take(self.count()))

    def _items(self) -> list:
        items = []
        body, unpack, value = self.body, _I64.unpack_from, self.value
        for _ in range(self.count()):
            position = self.position
            if position < self.end and body[position] == _INT_TAG:  # most items: inlined `_int`
                items.append(unpack(body, position + 1)[0])
                self.position = position + 9
            else:
                items.append(value())
        return items

    def _tuple(self) -> tuple:
        built = tuple(self._items())
        self.built.append(built)
        return built

    def _list(self) -> list:
        return self._items()

    def _frozenset(self) -> frozenset:
        built = frozenset(self._items())
        self.built.append(built)
        return built

    def _dict(self) -> dict:
        built = {}
        for _ in range(self.count(2)):
            key = self.value()
            built[key] = self.value()
        return built

    def _array(self) -> array:
        code, itemsize = struct.unpack("<cB", self.take(2))
        typecode = code.decode("latin-1")
        if typecode not in _ARRAY_CODES:
            raise _Damaged(f"has an array of unknown typecode {typecode!r}")
        built = array(typecode)
        if itemsize != built.itemsize:
            raise _Damaged(f"has an array of {itemsize}-byte items, {built.itemsize} here")
        data = self.take(self.count())
        if len(data) % itemsize:
            raise _Damaged(f"has an array of {len(data)} bytes, not a whole number of items")
        built.frombytes(data)
        if _BIG_ENDIAN:
            built.byteswap()
        return built

    def _int_list(self) -> list[int]:
        width = self.u64()
        if width < 8:
            raise _Damaged(f"has a list of {width}-byte ints (at least 8 are written)")
        data = self.take(self.count(width) * width)
        if width == 8:
            block = array("q")
            block.frombytes(data)
            if _BIG_ENDIAN:
                block.byteswap()
            return block.tolist()
        chunks = map(itemgetter(0), struct.iter_unpack(f"{width}s", data))
        little: repeat[Literal["little"]] = repeat("little")
        return list(map(int.from_bytes, chunks, little))

    def _back_reference(self) -> object:
        number = self.u64()
        if number >= len(self.built):
            raise _Damaged(f"refers to value {number:,}, of {len(self.built):,} so far")
        return self.built[number]

    def _instance(self) -> object:
        number = self.u64()
        if number == len(self.classes):  # the class's first instance: its name follows
            if self.take(1) != STR:
                raise _Damaged("names a class without a module name")
            module_name = self._str()
            if self.take(1) != STR:
                raise _Damaged("names a class without a qualified name")
            cls = resolve_class(module_name, self._str())
            kind = cast(str, plain_kind(cls))  # resolve_class returns only plain classes
            self.classes.append((cls, kind, _field_names(cls, kind)))
        elif number > len(self.classes):
            raise _Damaged(f"refers to class {number}, of {len(self.classes)} so far")
        cls, kind, names = self.classes[number]
        if self.take(1) != TUPLE:
            raise _Damaged(f"has an instance of {cls.__qualname__} without its fields")
        fields = self._items()
        if len(fields) != len(names):
            raise _Damaged(f"has a {cls.__qualname__} with {len(fields)} fields, not {len(names)}")
        built: object
        try:
            if kind == NAMED_TUPLE:
                built = tuple.__new__(cls, fields)
            elif kind == ENUM:
                built = cls(fields[0])
            else:
                built = cls(**dict(zip(names, fields)))
        except Exception as error:
            raise _Damaged(f"has a {cls.__qualname__} its class refuses: {error}") from None
        self.built.append(built)
        return built


_READERS = {
    NONE[0]: _Reader._none,
    TRUE[0]: _Reader._true,
    FALSE[0]: _Reader._false,
    INT[0]: _Reader._int,
    BIG_INT[0]: _Reader._big_int,
    FLOAT[0]: _Reader._float,
    STR[0]: _Reader._str,
    BYTES[0]: _Reader._bytes,
    BYTEARRAY[0]: _Reader._bytearray,
    TUPLE[0]: _Reader._tuple,
    LIST[0]: _Reader._list,
    DICT[0]: _Reader._dict,
    FROZENSET[0]: _Reader._frozenset,
    ARRAY[0]: _Reader._array,
    INT_LIST[0]: _Reader._int_list,
    INSTANCE[0]: _Reader._instance,
    BACK_REFERENCE[0]: _Reader._back_reference,
}


def declared_length(header: bytes, where: str) -> int:
    """The length of the whole file whose first bytes are `header`, as its header gives it;
    SnapshotError if they are no snapshot file's header (read before the rest of a file, so a
    file of zeros or any other is refused without reading it)."""
    if len(header) < HEADER.size:
        raise SnapshotError(f"{where}: too short ({len(header)} bytes) to be a snapshot file")
    magic, version, size, _checksum = HEADER.unpack_from(header)
    if magic != MAGIC:
        raise SnapshotError(f"{where}: not a snapshot file (it does not start with {MAGIC!r})")
    if version != VERSION:
        raise SnapshotError(f"{where}: snapshot file format {version}, this version reads {VERSION}")
    return HEADER.size + size


def loads(data: bytes, where: str) -> object:
    """The value a file's bytes hold; SnapshotError, naming `where`, if they are not one."""
    if len(data) < HEADER.size:
        raise SnapshotError(f"{where}: too short ({len(data)} bytes) to be a snapshot file")
    magic, version, size, checksum = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError(f"{where}: not a snapshot file (it does not start with {MAGIC!r})")
    if version != VERSION:
        raise SnapshotError(f"{where}: snapshot file format {version}, this version reads {VERSION}")
    body = memoryview(data)[HEADER.size :]
    if size != len(body):
        raise SnapshotError(f"{where}: truncated or extended ({len(body):,} bytes, header says {size:,})")
    if hashlib.sha256(body).digest() != checksum:
        raise SnapshotError(f"{where}: damaged (its SHA-256 does not match its header)")
    reader = _Reader(body)
    try:
        value = reader.value()
        if reader.position != reader.end:
            raise _Damaged(f"has {reader.end - reader.position:,} bytes after its value")
    except _Damaged as error:
        raise SnapshotError(f"{where}: {error}") from None
    except struct.error:
        raise SnapshotError(f"{where}: ends early (at byte {reader.end})") from None
    except RecursionError:
        raise SnapshotError(f"{where}: values nested too deeply") from None
    except TypeError as error:  # an unhashable dict key or set member
        raise SnapshotError(f"{where}: {error}") from None
    return value
