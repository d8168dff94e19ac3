"""Profiles read back from their JSON: the HTML conformance report and the comparison of two
profiles (`pymc-resume report`, `pymc-resume diff`, `profile --html` and `--baseline`).

Everything here works on the JSON `profile --json` writes, so a profile made on another machine,
at another release, or by an older pymc-resume can be read without running anything:
`profiles` reads and checks the documents, `changes` says which cells got worse or better (the
one definition of "worse"), `sequence` draws a repro as a sequence diagram (inline SVG),
`page` writes the self-contained HTML page.

May import: `pymc_resume.model` (the ids, the verdict words, the marks of a checkpoint that
committed no stage) and the foundations (`pymc_resume.errors`, `pymc_resume.files`); never the
bridge, the checking engines, the CLI or a framework library (`tests/test_layers.py`).
"""
