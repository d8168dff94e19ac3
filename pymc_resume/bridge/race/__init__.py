"""The concurrent-resume race: `race` runs k real processes that resume one parked interrupt at
once, cell by cell, on one host; `hosts` makes more hosts on this machine (network namespaces,
a throwaway PostgreSQL server) so that racers reach the store over a network.

May import: `bridge.adapter`, `bridge.hosting`, `bridge.judging` and `pymc_resume.model`.
"""
