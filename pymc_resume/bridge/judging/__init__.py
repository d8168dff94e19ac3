"""Judging what an adapter shows: `session` applies client steps to a hosted adapter, observes
and judges after each one, then drains for liveness; `observe` turns observations into the
model's world so that `model.clauses` judge a live run; `clauses` runs those predicates;
`evidence` records what each session exercised, for the reasons a verdict gives.

May import: `bridge.adapter`, `bridge.hosting` and `pymc_resume.model`.
"""
