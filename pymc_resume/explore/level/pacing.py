"""How the level step places and paces its work: the prime that spreads states over partitions,
how often it reports, how many successors it hands the fingerprint store at once. (Their own
module so that the partition and the exchange, which both use them, need not import each other.)"""

# Owners come from the key's hash modulo a prime, then modulo the partition count: Python hashes
# small ints to themselves, so `hash(key) % count` alone would split packed-int states by their
# lowest bit. The prime is below 2**30 so every intermediate stays a one-digit int: this costs
# 40 ns a successor, where a 64-bit multiplicative mix (Fibonacci hashing) cost 200 ns, a third
# of the two-worker overhead on TwoPhase.
PRIME = 1_000_003

# How many expansions between calls of the `tick` callback (progress, limits).
TICK_EVERY = 4096
# Successors of this partition's own gathered before the fingerprint store takes them at once:
# large enough that numpy's per-call cost is a few ns a successor, small enough to stay in cache.
FINGERPRINT_CHUNK = 1 << 15
