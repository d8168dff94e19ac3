"""pymc_resume: make the resume contract of durable workflow frameworks checkable.

`model` holds the reference semantics and the contract, `explore` an explicit-state
explorer that knows nothing of workflows, `bridge` the link to live frameworks.
"""

__version__ = "0.1.0"
