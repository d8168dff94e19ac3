"""Where adapter code runs, and how it is found: `host` builds an adapter in a child process
that the bridge can always SIGKILL, with a deadline on every call; `template` forks hosts from a
process that imported the framework once; `loading` names adapters without importing them (the
command never does: only hosts, templates and `child`'s one-question processes do); `registry`
resolves adapters by name (built in, installed, `module:Class`) and lists the framework families
a profile runs; `jobs` runs independent runs side by side, results in a fixed order; `stats`
counts hosts and calls; `workdirs` gives each example a fresh folder and sweeps what a killed run
left.

May import: `pymc_resume.errors` only (it knows nothing of the contract: it runs code).
"""
