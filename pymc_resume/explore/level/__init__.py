"""The level step: a partition expands its frontier (`partition`, the facade the engines use),
placing each successor with its owner (`pacing`). Its collaborators, in the order a state meets
them: how a state becomes a key and who owns it (`keys`), admission to the visited store
(`admission`), the invariants and goals checked on each state expanded (`verdicts`), and what
it keeps about the other partitions (`peers`); `saved` is what a snapshot saves of them.
Partitions that do not share memory exchange candidates and fingerprint queries (`exchange`),
gathered per destination (`outbound`) and sent as bytes (`batches`).

May import: `explore.store`, `explore.snapshots`, `explore.protocol`, `explore.result`,
`explore.temporal`, `explore.validate`, `explore.model_names`.
"""
