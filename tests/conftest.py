"""Fixtures shared across test modules: explorations too slow to repeat in every test.

Every exhaustive exploration of the reference semantics is run at most once per test process
and shared by the tests that assert on it (`explored`). The tests that use one of the costly
session fixtures (`SHARED_ONCE`) are put in one `xdist_group` per fixture, so that
pytest-xdist (`--dist loadgroup`) runs them in one process and the fixture is paid once per
test run, not once per worker.

The plugins: `hygiene` (the run leaves nothing behind) and `services` (a PostgreSQL database
per test process; no skips where every service must be there).
"""

import re

import pytest

from pymc_resume.checking.matrix import compute_matrix
from pymc_resume.explore import explore
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

pytest_plugins = ["hygiene", "services"]

# Session fixtures that cost seconds to minutes: their tests share one xdist worker (one per
# parameter of a parametrized fixture, so that its parameters still run in parallel).
SHARED_ONCE = ("default_exploration", "small_matrix", "mini_matrix", "configuration_profile")


def _shared_group(item) -> str | None:
    for name in SHARED_ONCE:
        if name in item.fixturenames:
            params = getattr(item, "callspec", None)
            if params is None or name not in params.params:
                return name
            # No brackets: xdist takes a node id ending in "]" to have no group.
            return f"{name}:" + re.sub(r"[^\w/.+-]+", "-", str(params.params[name])).strip("-")
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the marks
def pytest_collection_modifyitems(items):
    # The longest first (the profiles, then the other slow tests): the workers then end
    # together instead of one waiting on a long test handed out last.
    items.sort(
        key=lambda item: (
            "configuration_profile" not in item.fixturenames,
            item.get_closest_marker("slow") is None,
        )
    )
    for item in items:
        group = _shared_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def explored():
    """`explored(bounds, mutant=None, *, workers=1, symmetry=True)`: the exploration of the
    reference semantics (or of a mutant) at bundled bounds, explored once per test process."""
    results = {}

    def exploration(bounds: str, mutant: str | None = None, *, workers: int = 1, symmetry: bool = True):
        key = (bounds, mutant, workers, symmetry)
        if key not in results:
            model = ResumeModel(load_bounds(bounds), mutant)
            results[key] = explore(model, canonical=model.canonical if symmetry else None, workers=workers)
        return results[key]

    return exploration


@pytest.fixture(scope="session")
def default_exploration(explored):
    """The reference semantics at `default` (434,197 states), explored once with two workers."""
    return explored("default", workers=2)


@pytest.fixture(scope="session")
def small_matrix():
    """The fault matrix at `small`: the reference and every mutant, explored once per session."""
    return compute_matrix(load_bounds("small"), workers=2)
