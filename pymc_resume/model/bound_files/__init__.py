"""The bound files `--bounds NAME` names (read by `pymc_resume.model.bounds`)."""
