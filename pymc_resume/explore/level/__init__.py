"""The level step: a partition expands its frontier (`partition`), placing each successor with
its owner (`pacing`); partitions that do not share memory exchange candidates and fingerprint
queries (`exchange`), gathered per destination (`outbound`) and sent as bytes (`batches`).

May import: `explore.store`, `explore.snapshots`, `explore.protocol`, `explore.result`,
`explore.temporal`, `explore.validate`, `explore.model_names`.
"""
