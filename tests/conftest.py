"""Fixtures shared across test modules: explorations too slow to repeat in every test."""

import pytest

from pymc_resume.matrix import compute_matrix
from pymc_resume.model.bounds import load_bounds


@pytest.fixture(scope="session")
def small_matrix():
    """The fault matrix at `small`: the reference and every mutant, explored once per session."""
    return compute_matrix(load_bounds("small"), workers=2)
