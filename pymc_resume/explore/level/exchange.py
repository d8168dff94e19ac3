"""Workers that exchange fingerprints, not states: a state found by one worker stays with it.

Between several workers, the partitions of a plainly written model, or of one whose codec
fingerprints its keys (`exchanges_fingerprints`), run a level in two rounds, as TLC's
distributed mode does:

1. `expand`: a partition expands the states it holds, its own and the *foreign* ones it keeps
   for other owners. A successor it owns is stored at once. For another owner's it sends that
   owner a *query*, the state's fingerprint and its parent's global id (16 bytes), and keeps
   the key. A share of them (`ship_ratios`, which evens out the workers' frontiers) travels
   whole instead, as every successor did before: the owner admits it into its own frontier.
2. `answer`: the owner admits the shipped states, then stores each queried fingerprint; a new
   one gets an id in the owner's numbering (its parent stays there, for traces), and the answer
   says which. The asker keeps the states answered new as its foreign frontier for the next
   level (`receive_answers`).

A fingerprint must be the same in every process, so that owners, lookups and a recovery under
another PYTHONHASHSEED agree: an exchanging partition keys a plain tuple state by the tuple of
its fields' stable hashes (`HashKeys`), which one table lookup a field gives, like the plain
codec's ids, and whose Python hash is then the fingerprint (`fingerprint_of_state`). So a
successor costs what it costs on one worker plus 16 bytes and a table probe at its owner: no
second pass over its fields for an owner, no encoding for the wire, no pickling, no translation
into the owner's tables. Where keys leave the partition as states (shipped, handed over,
checkpointed) they are the plain codec's, as without the exchange. A model whose own codec
fingerprints its keys (the reference semantics) keeps the codec's keys, fingerprinted in the
same pass that encodes them (`CodecKeys`).

Where reachability properties are checked, each owner keeps the edges into its states and
their goal flags: every later sighting of a state in a level is a keyless query too (an edge),
and a partition that expands another owner's state reports the state's goal flags to it with
its next queries (`GoalReports`).

A checkpoint is taken as without the exchange: first every partition hands its foreign
frontier to the owners (`handover`, `take_handover`), who then hold every state of the next
level with its key, so a checkpoint is nothing but partitions, whichever way they ran.
"""

from __future__ import annotations

import functools
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import compress
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from pymc_resume.explore.level.batches import no_repeats, pack, unpack
from pymc_resume.explore.level.pacing import FINGERPRINT_CHUNK, PRIME, TICK_EVERY
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.store.codec import claim_hash
from pymc_resume.explore.store.fingerprints import FingerprintStore
from pymc_resume.explore.store.frontier import Frontier
from pymc_resume.explore.store.plain import fits_plain_codec, straight_line
from pymc_resume.explore.store.stable_hash import part_hash, stable_hash
from pymc_resume.explore.validate import ValidModel

if TYPE_CHECKING:  # the partition calls the exchange; the exchange only names its type
    from pymc_resume.explore.level.partition import Partition

Tick = Callable[[], bool] | None  # (a partition's `tick`: progress and limits; True to stop)

# A query's fingerprint decides whether it is shipped whole: its bits 40 to 63, against the
# ship ratio scaled to 24 bits (the owner uses the hash modulo a prime: independent bits).
SHIP_BITS = 24
_HEADER = struct.Struct("<QQQQ")  # bytes of the shipped batch; queries; goal reports; goals


def fingerprint_of_state(state) -> int:
    """A plainly written state's fingerprint between exchanging partitions, the same in every
    process: a plain tuple's from its fields' `part_hash`es (the hash of its key of hashes), any
    other state's `stable_hash` (the plain codec's `owner_hash` of its key)."""
    if type(state) is tuple:
        return hash(tuple(map(part_hash, state)))
    return stable_hash(state)


def state_fingerprint(model: ValidModel) -> Callable[[Any], int]:
    """The fingerprint of a (canonical) state of `model` between exchanging partitions: a
    fingerprinting codec's (`fingerprinting_codec`), else a plain state's."""
    if model.codec is not None:
        return model.codec().fingerprint_of_state
    return fingerprint_of_state


@functools.lru_cache(maxsize=64)
def field_mapper(arity: int) -> Callable[[tuple, Any], tuple]:
    """`mapper(values, tables)` is `(tables[0][values[0]], tables[1][values[1]], ...)` for
    `arity` values, as straight-line code (see `plain.tuple_mapper`): one table a field. It
    raises KeyError for a value not in its table, IndexError for a field without a table, and
    ValueError for a tuple of another length."""
    if not 0 < arity <= 64:
        return functools.partial(_any_length, arity)
    return straight_line(arity, lambda position, field: f"table[{position}][{field}]")


def _hash_keys(p: Partition) -> HashKeys | CodecKeys:
    assert p.keys.hash_keys is not None, "an exchanging partition has its keys (HashKeys or CodecKeys)"
    return p.keys.hash_keys


def _any_length(arity: int, values: tuple, tables) -> tuple:
    """`field_mapper` for an arity it does not compile (none, or more than 64 fields)."""
    if len(values) != arity:
        raise ValueError("a tuple of another length")
    if len(tables) < arity:
        raise IndexError("a field without a table")
    return tuple(table[value] for table, value in zip(tables, values))


class HashKeys:
    """An exchanging partition's keys: a plain tuple state as the tuple of its fields'
    `part_hash`es, any other state as its plain codec key (which starts with a negative tag).
    A key's Python hash is then the state's fingerprint with no second pass over its fields.

    Each field position has its own tables: values that are equal but not alike, such as
    (0, 1) and (False, True), are one value to a hash and a dict, and a field of ints must not
    come back as bools because another field held them first. Two field values with one hash
    would be one value: that is refused, not guessed."""

    __slots__ = ("codec", "of_value", "value_of")

    def __init__(self, codec) -> None:
        self.codec = codec  # the partition's PlainCodec: for other states, and for the wire
        self.of_value: list[dict] = []  # per field: value -> its part hash
        self.value_of: list[dict] = []  # per field: part hash -> the value (one shared copy)

    def _intern(self, position: int, value) -> int:
        known_hash = self.of_value[position].get(value)
        if known_hash is not None:  # (most fields of a state with a new value are old ones)
            return known_hash
        found = part_hash(value)
        claim_hash(self.value_of[position], found, value, "field values")
        self.of_value[position][value] = found
        return found

    def key(self, state: Any) -> tuple:
        if type(state) is not tuple:
            return self.codec.encode(state)
        try:
            return field_mapper(len(state))(state, self.of_value)
        except (KeyError, IndexError):  # a field value never seen before, or a field
            return self.interned(state)

    def interned(self, state: tuple) -> tuple:
        """`key` of a plain tuple with a field value not seen before, interning it."""
        while len(self.of_value) < len(state):
            self.of_value.append({})
            self.value_of.append({})
        return tuple(map(self._intern, range(len(state)), state))

    def state(self, key: Any) -> Any:
        if key and key[0] < 0:
            return self.codec.decode(key)
        return field_mapper(len(key))(key, self.value_of)

    def fingerprint(self, key: Any) -> int:
        return self.codec.owner_hash(key) if key and key[0] < 0 else hash(key)

    def dense(self, key: Any) -> tuple:
        """The plain codec's key of the same state (for the wire and checkpoints)."""
        return key if key and key[0] < 0 else self.codec.encode(self.state(key))

    def from_dense(self, key: Any) -> tuple:
        return key if key and key[0] < 0 else self.key(self.codec.decode(key))


class CodecKeys:
    """An exchanging partition's keys where the model's codec fingerprints them: the codec's
    own keys (the wire's and checkpoints' too), each fingerprinted from its parts' stable
    hashes (`codec.PartHashes`)."""

    NEEDED = ("fingerprint_of_state", "fingerprint", "encode_fingerprinted")
    __slots__ = ("state", "fingerprint", "fingerprinted")

    def __init__(self, codec) -> None:
        self.state = codec.decode
        self.fingerprint = codec.fingerprint
        self.fingerprinted = codec.encode_fingerprinted  # (key, fingerprint) in one pass

    @staticmethod
    def dense(key: Any) -> Any:
        return key

    @staticmethod
    def from_dense(key: Any) -> Any:
        return key


def keys_for(codec, model: ValidModel) -> HashKeys | CodecKeys:
    """An exchanging partition's keys: its model's codec's, or a plain state's key of hashes."""
    return CodecKeys(codec) if model.codec is not None else HashKeys(codec)


class DenseKeys:
    """A frontier of `HashKeys` keys read as the plain codec's (what a checkpoint saves)."""

    def __init__(self, keys: Frontier, hash_keys: HashKeys) -> None:
        self.keys, self.hash_keys = keys, hash_keys

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator:
        return map(self.hash_keys.dense, self.keys)


def fingerprinting_codec(model: ValidModel) -> bool:
    """Whether `model`'s own codec gives its keys fingerprints that are the same in every
    process (`CodecKeys`): `fingerprint_of_state`, `fingerprint` and `encode_fingerprinted`."""
    if model.codec is None:
        return False
    codec = model.codec()
    return all(callable(getattr(codec, name, None)) for name in CodecKeys.NEEDED)


def exchanges_fingerprints(model: ValidModel, count: int, exact: bool) -> bool:
    """Whether `count` partitions of `model` exchange fingerprints: several of them, a
    fingerprint store, and a model whose states have a fingerprint the same in every process:
    a plainly written one (the derived plain codec gives it) or one whose codec gives it
    (`fingerprinting_codec`). Reachability properties' edges and goal flags travel with the
    queries (`expand`, `answer`)."""
    if count <= 1 or exact or model.partition_key is not None:
        return False
    if model.codec is None:
        return fits_plain_codec(model.model)
    return fingerprinting_codec(model)


def ship_ratios(sizes: list[int]) -> list[float]:
    """Per worker, the share of its queries to ship whole next level: 0 for the smallest
    frontier, and for a larger one what brings it down to the smallest (with one worker
    holding everything, as after a single initial state, all of them: then every state goes to
    its owner, as without the exchange)."""
    low = min(sizes)
    return [0.0 if size == 0 else 1.0 - low / size for size in sizes]


def pack_outbound(
    batch: tuple, fingerprints: list[np.ndarray], parents: list[np.ndarray], reports: GoalReports | None
) -> bytes:
    """One partition's level for one owner, as bytes: the shipped batch, the queries, and the
    goal flags of the owner's states expanded here (`GoalReports`)."""
    shipped = pack(batch)
    prints = np.concatenate(fingerprints) if fingerprints else np.empty(0, np.uint64)
    sources = np.concatenate(parents) if parents else np.empty(0, np.int64)
    reports = reports or GoalReports(0)
    gids, flags, goals = reports.gids, reports.flags, reports.goals
    header = _HEADER.pack(len(shipped), len(prints), len(gids), goals)
    return header + shipped + prints.tobytes() + sources.tobytes() + gids.tobytes() + bytes(flags)


def unpack_outbound(data: bytes) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(shipped batch, query fingerprints (uint64), their parents' gids (int64), the gids of
    the states whose goal flags are reported (int64), and those flags (uint8, a row each))."""
    size, count, reported, goals = _HEADER.unpack_from(data)
    view = memoryview(data)[_HEADER.size :]
    batch = unpack(bytes(view[:size]))
    at = size
    prints = np.frombuffer(view[at : at + 8 * count], dtype=np.uint64)
    at += 8 * count
    parents = np.frombuffer(view[at : at + 8 * count], dtype=np.int64)
    at += 8 * count
    gids = np.frombuffer(view[at : at + 8 * reported], dtype=np.int64)
    at += 8 * reported
    flags = np.frombuffer(view[at : at + reported * goals], dtype=np.uint8).reshape(reported, goals)
    return batch, prints, parents, gids, flags


class GoalReports:
    """The goal flags of another partition's states that this partition expanded (its foreign
    frontier's), for their owner, which keeps every flag of its states (`reachability`)."""

    __slots__ = ("gids", "flags", "goals")

    def __init__(self, goals: int) -> None:
        self.gids = array("q")
        self.flags = bytearray()  # `goals` bytes a state, in the order of `gids`
        self.goals = goals


class Queries:
    """A partition's queries of one level, per owner: fingerprints and parents as numpy
    pieces (sent after the level), and the keys of the first sighting of each fingerprint,
    kept until the answers come. Where edges are kept (reachability), every later sighting is
    a query too, keyless (`keyed`), so that its owner records its edge."""

    __slots__ = ("fingerprints", "parents", "keys", "keyed", "reports")

    def __init__(self, count: int, goals: int = 0) -> None:
        self.fingerprints: list[list[np.ndarray]] = [[] for _ in range(count)]
        self.parents: list[list[np.ndarray]] = [[] for _ in range(count)]
        self.keys: list[list] = [[] for _ in range(count)]
        self.keyed: list[list[np.ndarray]] = [[] for _ in range(count)]  # which queries hold a key
        self.reports = [GoalReports(goals) for _ in range(count)] if goals else None


def frontier(
    first: int, own: Iterable, foreign: Frontier, foreign_gids: array, count: int, index: int
) -> Iterator[tuple[int, object]]:
    """The level's states as (global id, key): this partition's own (ids on from `first`),
    then the foreign ones it keeps (their owners' ids)."""
    gid = first * count + index
    for key in own:
        yield gid, key
        gid += count
    yield from zip(foreign_gids, foreign)


def step(p: Partition, answers: list, level: int, tick: Tick) -> list[list]:
    """The first round of an exchanging partition's level: keep the states its last queries
    were answered new for (its foreign frontier), admit its carry (a seed's, or a snapshot's),
    then expand this level's states, its own and the foreign ones (`expand`). Returns the
    shipped (key, parent) pairs per owner; the queries are left in `p.peers.queries`."""
    admission, peers = p.admission, p.peers
    receive_answers(p, answers)
    admission.settle_edges()
    admission.start_levels(level)
    first = admission.level_starts[level - 1]
    from_dense = _hash_keys(p).from_dense
    for candidates, repeats, _tables in admission.carry:  # a seed's, or a snapshot's
        candidates = [(from_dense(key), parent) for key, parent in candidates]
        admission.admit_batch(candidates, repeats, [], encoded=True)
    admission.carry = []
    fresh, admission.ahead = admission.ahead, Frontier()
    admission.level_starts.append(len(admission.store))  # the next level's: stored as found
    foreign, gids = peers.foreign, peers.foreign_gids
    peers.foreign, peers.foreign_gids = Frontier(), array("q")
    shipped = expand(p, frontier(first, fresh, foreign, gids, p.count, p.index), level, tick)
    for done in (fresh, foreign):
        if type(done) is Frontier:
            done.close()
    return shipped


def expand(p: Partition, states: Iterator, level: int, tick: Callable[[], bool] | None) -> list[list]:
    """The hot loop of an exchanging partition: expand `states` ((gid, key) pairs), storing its
    own successors and querying (or shipping) the others' a chunk at a time (`_route`). Returns
    the shipped (key, parent) pairs per owner; the queries are left in `p.peers.queries`."""
    if type(p.keys.hash_keys) is CodecKeys:
        return _expand_encoded(p, p.keys.hash_keys, states, level, tick)
    hash_keys = cast(HashKeys, p.keys.hash_keys)
    tick_every, chunk = TICK_EVERY, FINGERPRINT_CHUNK
    outbound: list[list] = [[] for _ in range(p.count)]
    sent = FingerprintStore()  # other partitions' fingerprints met this level
    keys: list = []  # successors of the chunk, and their parents' gids
    parents: list[int] = []
    # Whether the chunk holds a key of another shape than a plain tuple's (its fingerprint is
    # `HashKeys.fingerprint`, not the key's hash): rare, so a plain chunk is hashed in C.
    odd = False
    of_value, value_of = hash_keys.of_value, hash_keys.value_of  # (extended in place)
    key_of, state_of, fingerprint_of = hash_keys.key, hash_keys.state, hash_keys.fingerprint
    interned = hash_keys.interned
    verdicts = p.verdicts
    check, check_outside, inside = verdicts.check, verdicts.check_outside, p._inside
    first_bad, deadlocked = verdicts.first_bad, verdicts.deadlocked
    successors, canonical = p.model.successors, p.canonical
    constrained = p.model.constraint is not None or p.model.action_constraint is not None
    check_deadlock = p.model.deadlock_is_error
    plain_map = None
    generated = expanded = 0
    for gid, key in states:
        if verdicts.stopped or (tick is not None and expanded % tick_every == tick_every - 1 and tick()):
            verdicts.stopped = True
            break
        expanded += 1
        if plain_map is None:  # straight-line code for the first key's length (`field_mapper`)
            plain_map = field_mapper(len(key) if type(key) is tuple else 0)
        try:  # `HashKeys.state` of a plain tuple's key, inlined
            state = plain_map(key, value_of)
        except (KeyError, IndexError, ValueError):  # another shape's key (a negative tag), or length
            state = state_of(key)
        check(state, gid, level)
        before = generated
        for action, successor in successors(state):
            generated += 1
            if constrained and not inside(state, action, successor):
                check_outside(successor, level + 1, gid, generated - before - 1)
                continue
            world = canonical(successor) if canonical else successor
            try:  # `HashKeys.key` of a plain tuple, inlined
                if type(world) is not tuple:
                    raise ValueError
                key = plain_map(world, of_value)
            except KeyError:  # a field value not seen before (a tuple of this length)
                key = interned(world)  # type: ignore[arg-type]  # (a tuple: see the test above)
            except (IndexError, ValueError):  # another shape or length
                key = key_of(world)
                odd = odd or type(world) is not tuple
            keys.append(key)
            parents.append(gid)
        if check_deadlock and generated == before and DEADLOCK not in first_bad:
            deadlocked(level, gid)
        if len(keys) >= chunk:
            _route(p, keys, map(fingerprint_of if odd else hash, keys), parents, outbound, sent)
            keys, parents, odd = [], [], False
    if keys:
        _route(p, keys, map(fingerprint_of if odd else hash, keys), parents, outbound, sent)
    p.generated += generated
    p.level_size = expanded
    return outbound


def _expand_encoded(
    p: Partition, codec_keys: CodecKeys, states: Iterator, level: int, tick: Tick
) -> list[list]:
    """`expand` for a model whose codec fingerprints its keys (`CodecKeys`): the same loop,
    with each successor encoded and fingerprinted in one pass. (A loop of its own, not a
    branch per successor in `expand`, which inlines a plain tuple's key lookups and hashes a
    chunk's keys in C: each hot loop keeps only its own work.)"""
    tick_every, chunk = TICK_EVERY, FINGERPRINT_CHUNK
    outbound: list[list] = [[] for _ in range(p.count)]
    sent = FingerprintStore()  # other partitions' fingerprints met this level
    keys: list = []  # successors of the chunk, their fingerprints and their parents' gids
    prints: list[int] = []
    parents: list[int] = []
    decode, fingerprinted = codec_keys.state, codec_keys.fingerprinted
    verdicts = p.verdicts
    check, check_outside, inside = verdicts.check, verdicts.check_outside, p._inside
    first_bad, deadlocked = verdicts.first_bad, verdicts.deadlocked
    successors, canonical = p.model.successors, p.canonical
    constrained = p.model.constraint is not None or p.model.action_constraint is not None
    check_deadlock = p.model.deadlock_is_error
    generated = expanded = 0
    for gid, key in states:
        if verdicts.stopped or (tick is not None and expanded % tick_every == tick_every - 1 and tick()):
            verdicts.stopped = True
            break
        expanded += 1
        state = decode(key)
        check(state, gid, level)
        before = generated
        for action, successor in successors(state):
            generated += 1
            if constrained and not inside(state, action, successor):
                check_outside(successor, level + 1, gid, generated - before - 1)
                continue
            key, fingerprint = fingerprinted(canonical(successor) if canonical else successor)
            keys.append(key)
            prints.append(fingerprint)
            parents.append(gid)
        if check_deadlock and generated == before and DEADLOCK not in first_bad:
            deadlocked(level, gid)
        if len(keys) >= chunk:
            _route(p, keys, iter(prints), parents, outbound, sent)
            keys, prints, parents = [], [], []
    if keys:
        _route(p, keys, iter(prints), parents, outbound, sent)
    p.generated += generated
    p.level_size = expanded
    return outbound


def _route(p: Partition, keys: list, prints: Iterator[int], parents: list, outbound: list, sent) -> None:
    """Place a chunk of successors (`prints`: their fingerprints, computed as they are read):
    store this partition's, and for each other owner, once a level, ship the state or keep it
    and query its fingerprint. Where edges are kept, every later sighting is a keyless query,
    after the first's, so that the owner records its edge."""
    fingerprints = np.fromiter(prints, dtype=np.int64, count=len(keys))
    parent_ids = np.array(parents, dtype=np.int64)
    owners = fingerprints % PRIME % p.count  # (numpy's % of a negative int is Python's)
    unsigned = fingerprints.view(np.uint64)
    mine = owners == p.index
    keep_edges = p.admission.edge_sources is not None
    if mine.any():
        own_keys = list(compress(keys, mine.tolist()))
        p.admission.store_own(own_keys, parent_ids[mine], keep_edges, (unsigned[mine], False))
    others = np.flatnonzero(~mine)
    if not others.size:
        return
    _ids, first = sent.add(unsigned[others], parent_ids[others], hashed=True)
    going = others[first]
    later = others[~first] if keep_edges else others[:0]  # (sightings after the first: edges)
    threshold = int(p.peers.ship_ratio * (1 << SHIP_BITS))
    shipped = (unsigned[going] >> np.uint64(64 - SHIP_BITS)) < np.uint64(threshold)
    going_owners, later_owners = owners[going], owners[later]
    queries = p.peers.queries
    for owner in range(p.count):
        if owner == p.index:
            continue
        to_owner = going_owners == owner
        if threshold:
            for i in going[to_owner & shipped].tolist():
                outbound[owner].append((keys[i], parents[i]))
            to_owner &= ~shipped
        asked = going[to_owner]
        edges = later[later_owners == owner]
        if asked.size or edges.size:
            both = np.concatenate([asked, edges])
            queries.fingerprints[owner].append(unsigned[both])
            queries.parents[owner].append(parent_ids[both])
            queries.keyed[owner].append(np.arange(len(both)) < len(asked))
            queries.keys[owner].extend(map(keys.__getitem__, asked.tolist()))


def answer(p: Partition, inbound: list[tuple | None]) -> list[np.ndarray]:
    """Admit the states shipped to `p`, then store the fingerprints queried, then take the
    goal flags reported for `p`'s states: per sender, the global id given to each new one, -1
    for one stored before. Where edges are kept, each shipped state and each query is one."""
    admission = p.admission
    admission.start_levels(1)  # (after the seed: the first level is being filled)
    keep_edges = admission.edge_sources is not None
    for item in inbound:  # shipped first: their ids follow p's own states
        if item is None:
            continue
        candidates, _repeats, tables = item[0]
        if tables is not None:
            candidates = p.peers.received(candidates, tables)
        from_dense = _hash_keys(p).from_dense
        parents = [parent for _, parent in candidates]
        stored = admission.store_own([from_dense(key) for key, _ in candidates], parents, False)
        if keep_edges:  # (an initial state has no parent, and no edge into it)
            admission.record_edges(np.array(parents, dtype=np.int64), stored, no_repeats())
    answers = []
    for item in inbound:
        if item is None or not len(item[1]):
            answers.append(np.empty(0, dtype=np.int64))
            continue
        _batch, prints, parents, _gids, _flags = item
        ids, new = cast(FingerprintStore, admission.store).add(prints, parents, hashed=True)
        if keep_edges:
            cast(array, admission.edge_sources).frombytes(parents.astype(np.int32).tobytes())
            cast(array, admission.edge_targets).frombytes(ids.astype(np.int32).tobytes())
        answers.append(np.where(new, ids * p.count + p.index, -1))
    for item in inbound:
        if item is not None and len(item[3]):
            _set_goal_flags(p, item[3] // p.count, item[4])
    return answers


def _set_goal_flags(p: Partition, local_ids: np.ndarray, flags: np.ndarray) -> None:
    """Set the goal flags another partition reported for `p`'s states (a row per state)."""
    end = int(local_ids.max()) + 1
    for goal, kept in enumerate(p.verdicts.goal_flags):
        if len(kept) < end:
            kept.extend(bytes(end - len(kept)))
        column = np.frombuffer(kept, dtype=np.uint8)  # (a view: writes go to `kept`)
        column[local_ids] = flags[:, goal]
        del column  # (a bytearray with a view on it cannot grow)


def receive_answers(p: Partition, answers: list[np.ndarray | None]) -> None:
    """Keep, as the foreign frontier, the queried states their owners answered new."""
    peers = p.peers
    for owner, gids in enumerate(answers):
        keys = peers.queries.keys[owner]
        if gids is None or not len(gids):
            continue
        keyed = peers.queries.keyed[owner]
        has_key = np.concatenate(keyed) if keyed else np.empty(0, dtype=bool)
        if len(gids) != len(has_key) or int(has_key.sum()) != len(keys):
            raise ValueError(f"partition {owner} answered {len(gids)} queries of {len(has_key)}")
        new = gids >= 0
        if (new & ~has_key).any():
            raise ValueError(f"partition {owner} answered a keyless query (an edge) new")
        peers.foreign.extend(compress(keys, new[has_key].tolist()))
        peers.foreign_gids.frombytes(gids[new].tobytes())
    peers.queries = Queries(p.count, len(p.verdicts.goals))


def handover(p: Partition) -> list[list]:
    """The foreign frontier as (key, gid) pairs per owner, given up: before a checkpoint."""
    peers = p.peers
    outbound: list[list] = [[] for _ in range(p.count)]
    for gid, key in zip(peers.foreign_gids, peers.foreign):
        outbound[gid % p.count].append((key, gid))  # (`batches_of` makes the keys dense)
    peers.foreign.close()
    peers.foreign, peers.foreign_gids = Frontier(), array("q")
    return outbound


def take_handover(p: Partition, inbound: list[tuple]) -> None:
    """Take the keys of the states queried here that other partitions held (`handover`): they
    complete this partition's next level, in id order."""
    pairs: list = []
    for candidates, _repeats, tables in inbound:
        if tables is not None:
            candidates = p.peers.received(candidates, tables)
        pairs.extend(candidates)
    pairs.sort(key=lambda pair: pair[1])
    admission = p.admission
    start = admission.level_starts[-1] + len(admission.ahead) if admission.level_starts else 0
    expected = [(start + offset) * p.count + p.index for offset in range(len(pairs))]
    if [gid for _key, gid in pairs] != expected or start + len(pairs) != len(admission.store):
        raise ValueError(f"partition {p.index}: the handed-over states do not fill its next level")
    admission.ahead.extend(_hash_keys(p).from_dense(key) for key, _gid in pairs)


def batches_of(p: Partition, outbound: list[list]) -> list[tuple]:
    """Shipped (key, parent) pairs as batches of the plain codec's keys, with the table
    entries each owner has not seen."""
    dense = _hash_keys(p).dense
    batches = [([(dense(key), parent) for key, parent in pairs], no_repeats(), None) for pairs in outbound]
    return p.peers.with_tables(cast(list, batches))
