"""Finding violations: `machine` is the Hypothesis state machine whose rules are the model's
client actions; `scenarios` the deterministic battery a profile runs first; `fuzz` runs
Hypothesis against one adapter (`run_fuzz`) and confirms each finding by replaying its repro;
`shrink` a last shrinking pass; `budget` the time limits of a run.

May import: `bridge.adapter`, `bridge.hosting`, `bridge.judging`, `bridge.repro` and
`pymc_resume.model`.
"""
