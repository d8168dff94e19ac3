"""Bound files: the bundled ones load; bad ones fail with a message naming file and key."""

import pytest

from pymc_resume.model.bounds import BoundsError, bundled_names, load_bounds, parse_bounds

GOOD = """
nodes = ["step", "gated"]
values = 2
processes = 2
resumes = 1
crashes = 1
forks = 0
invalid_updates = 0
"""


def test_bundled_bounds_load_by_name():
    assert {"small", "default", "paper"} <= set(bundled_names())
    for name in bundled_names():
        assert load_bounds(name).name == name


def test_a_path_loads_too(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    bounds = load_bounds(str(path))
    assert bounds.name == "mine" and bounds.nodes == ("step", "gated")


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD.replace("values = 2", "values = 9"), "'values' is 9, must be between 1 and 4"),
        (GOOD.replace('"gated"', '"teleport"'), "nodes[1] is 'teleport'"),
        (GOOD + "colour = 1\n", "unknown key 'colour'"),
        (GOOD.replace("forks = 0", ""), "missing key 'forks'"),
        (GOOD.replace("crashes = 1", 'crashes = "one"'), "'crashes' must be an integer"),
        ("nodes = [", "not valid TOML"),
    ],
)
def test_bad_bounds_say_what_and_where(text, expected):
    with pytest.raises(BoundsError) as error:
        parse_bounds(text, "x", "bounds/x.toml")
    assert "bounds/x.toml" in str(error.value) and expected in str(error.value)


def test_unknown_name_lists_the_bundled_ones():
    with pytest.raises(BoundsError, match="no bounds named 'nosuch'.*small"):
        load_bounds("nosuch")
