"""Bundled bound files for `pymc-resume check --bounds NAME` (see pymc_resume.model.bounds)."""
