"""Benchmarks of the explorer (not shipped in the package; see bench/README.md)."""
