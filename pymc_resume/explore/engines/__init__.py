"""The engines that run the level steps: in the search's own process (`inprocess`), in worker
processes (`workers`, each serving its partition through `service`, its errors sent back by
`raised`) or on a Ray cluster (`ray_engine`); random walks instead of a search (`simulate`);
progress lines (`progress`).

May import: `explore.level`, `explore.snapshots`, `explore.properties`, `explore.store`,
`explore.protocol`, `explore.result`, `explore.temporal`, `explore.validate`,
`explore.model_names`, `explore.target`.
"""
