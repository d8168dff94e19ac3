"""Minimal repros: `format` says what a repro file may contain and checks it before anything in
it is used; `replay` builds a repro's JSON and pytest files and replays their steps without
Hypothesis. Generated pytest repros import `KEEP` and `replay_repro` from here.

May import: `bridge.adapter`, `bridge.hosting`, `bridge.judging`, `pymc_resume.model` and
`pymc_resume.files`.
"""

from pymc_resume.bridge.repro.replay import KEEP, replay_repro

__all__ = ["KEEP", "replay_repro"]
