"""What `pip install .` ships: every package under pymc_resume/, and the bound files.

An editable install finds every folder, so a package missing from pyproject.toml's list passes
every other test and breaks only a wheel (issue 43's `explore/` subpackages once did)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _configured() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_in_the_wheel():
    folders = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "pymc_resume").rglob("__init__.py")
    }
    listed = set(_configured()["packages"])
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - folders == {"pymc_resume.bounds"}


def test_the_bound_files_ship_as_pymc_resume_bounds():
    setuptools = _configured()
    assert setuptools["package-dir"] == {"pymc_resume.bounds": "bounds"}
    assert list((ROOT / "bounds").glob("*.toml")) and (ROOT / "bounds" / "__init__.py").exists()
    assert "*.toml" in setuptools["package-data"]["pymc_resume.bounds"]
