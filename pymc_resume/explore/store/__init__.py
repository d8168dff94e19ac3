"""The visited store: how states are kept, keyed and counted.

States become keys (`codec`, derived for plain tuples by `plain`, hashed the same in every
process by `stable_hash`); a partition remembers the keys it has seen (`visited`) or only their
64-bit fingerprints (`fingerprints`), keeps its frontier in memory or on disk (`frontier`,
`persisted`), the edges into its states for reachability properties (`settled_edges`), and measures its
memory (`memory`) and the run's limits on states, time and memory (`limits`).

May import: `explore.protocol`, `explore.result`, `explore.temporal`, `explore.validate`,
`explore.model_names`.
"""
