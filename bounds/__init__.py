"""The bound files `--bounds NAME` names, installed as the package data of `pymc_resume.bounds`
(read by `pymc_resume.model.bounds`). How to write one: bounds/README.md."""
