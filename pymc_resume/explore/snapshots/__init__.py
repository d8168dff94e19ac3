"""Snapshots of a run: each partition's store and frontier written to a folder between levels,
and read back by `--recover` (`snapshot`), each after the first only what is new since the one
before (`increments`), in a chain compacted now and then (`chain`).

May import: `explore.store`, `explore.protocol`, `explore.result`, `explore.temporal`,
`explore.validate`, `explore.model_names`.
"""
