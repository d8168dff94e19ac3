"""Properties beyond invariants: which reachability goals were met (`reachability`), and
temporal properties under fairness decided on the state graph after the search (`liveness`,
over `state_graph` and its edges, `adjacency`).

May import: `explore.store`, `explore.protocol`, `explore.result`, `explore.temporal`,
`explore.validate`, `explore.model_names`.
"""
