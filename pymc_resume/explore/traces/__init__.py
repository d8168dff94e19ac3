"""Traces a person reads or a program replays: shortest traces rebuilt from parents (`trace`),
the path to a state where the model raised (`model_fault`), what changed at each step
(`changes`), states as JSON (`state_json`), replay of a saved trace (`trace_replay`; a lasso's
cycle and fairness in `lasso_replay`), and the state graph as DOT (`graph_dump`).

May import: `explore.properties`, `explore.store`, `explore.protocol`, `explore.result`,
`explore.temporal`, `explore.validate`, `explore.model_names`, `explore.target`.
"""
