"""Files from strangers never run code: repro files and checkpoint folders crafted to call
`os.system` or to unpickle a payload are refused in one line (exit 2), and the marker file the
payload would create does not exist. Run as a user runs it, in a real `pymc-resume` process,
with a deadline, together with the inputs that used to hang or crash the process.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_resume.model.bounds import load_bounds

START = {"action": "start", "thread": 0, "crash": None}
DEADLINE = 60.0


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        stdin=subprocess.DEVNULL,
    )


def assert_refused(run: subprocess.CompletedProcess) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, (run.returncode, run.stdout[-400:], run.stderr[-400:])
    assert len(lines) == 1 and lines[0].startswith("pymc-resume: error: "), run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr


class Payload:
    """Unpickling it runs `os.system(command)`."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def repro(**changes) -> dict:
    return {
        "format": "pymc-resume-repro/1",
        "adapter": "reference",
        "adapter_options": {},
        "bounds": load_bounds("small").as_json(),
        "clause": "checkpoint-validity",
        "steps": [START, {"action": "update", "thread": 0, "value": -1}],
        **changes,
    }


@pytest.mark.parametrize(
    "adapter, options",
    [
        ("os:system", {"command": "touch MARKER"}),
        ("subprocess:call", {"args": "touch MARKER", "shell": True}),
        ("shutil:rmtree", {"path": "victim"}),
        ("builtins:exec", {"source": "open('MARKER', 'w')"}),
        ("pymc_resume.bridge.repro.replay:write_repro", {"directory": "MARKER", "document": "x"}),
    ],
)
@pytest.mark.parametrize("extra", [[], ["--fault", "none"]])
def test_a_repro_naming_any_callable_runs_nothing(tmp_path, adapter, options, extra):
    (tmp_path / "victim").mkdir()
    (tmp_path / "repro.json").write_text(json.dumps(repro(adapter=adapter, adapter_options=options)))
    run = cli("replay", "repro.json", *extra, cwd=tmp_path)
    assert_refused(run)
    assert "--allow-adapter" in run.stderr
    assert not (tmp_path / "MARKER").exists() and (tmp_path / "victim").is_dir()


def test_an_allowed_adapter_that_is_no_adapter_class_still_runs_nothing(tmp_path):
    (tmp_path / "repro.json").write_text(
        json.dumps(repro(adapter="os:system", adapter_options={"command": "touch MARKER"}))
    )
    run = cli("replay", "repro.json", "--allow-adapter", "os:system", cwd=tmp_path)
    assert_refused(run)
    assert "not a class" in run.stderr and not (tmp_path / "MARKER").exists()


def test_a_crafted_checkpoint_folder_runs_nothing(tmp_path):
    """A real checkpoint folder whose files are replaced, one at a time, by a pickle that would
    run `touch MARKER`: every recovery refuses it in one line, and nothing runs."""
    made = cli(
        "check",
        "--bounds",
        "small",
        "--quiet",
        "--workers",
        "1",
        "--checkpoint-dir",
        "ck",
        "--checkpoint-every",
        "0",
        "--max-states",
        "3000",
        cwd=tmp_path,
    )
    assert made.returncode == 2, made.stderr  # stopped by the state limit: nothing proved
    files = [path for path in (tmp_path / "ck").rglob("*") if path.is_file()]
    assert files
    payload = pickle.dumps(Payload("touch MARKER"), protocol=2)
    for target in files:
        original = target.read_bytes()
        target.write_bytes(payload)
        try:
            run = cli("check", "--bounds", "small", "--recover", "ck", "--quiet", cwd=tmp_path)
            if target.name != "current":  # a pointer to a missing snapshot is refused too
                assert_refused(run)
            assert not (tmp_path / "MARKER").exists(), target
        finally:
            target.write_bytes(original)


def test_a_fifo_is_refused_instead_of_read(tmp_path):
    os.mkfifo(tmp_path / "repro.json")
    assert_refused(cli("replay", "repro.json", cwd=tmp_path))
    os.mkfifo(tmp_path / "bounds.toml")
    assert_refused(cli("check", "--bounds", "bounds.toml", cwd=tmp_path))


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "repro.json", "--step-timeout", "nan"],
        ["replay", "repro.json", "--step-timeout", "inf"],
        ["fuzz", "reference", "--step-timeout", "nan"],
        ["fuzz", ".x:Y"],
        ["fuzz", "raises.py:Adapter"],
        ["fuzz", "exits.py:Adapter"],
        ["fuzz", "sleeps.py:Adapter", "--step-timeout", "3"],  # import has the step's deadline
        ["fuzz", "exits0.py:Adapter"],  # os._exit(0) at import: a failure, never exit 0
        ["check", "--bounds", "latin1.toml"],
        ["replay", "latin1.json"],
        ["check", "--bounds", "small", "--json", "/proc/out.json"],
        ["fuzz", "reference", "--examples", "1", "--json", "/proc/out.json"],
    ],
)
def test_inputs_that_used_to_crash_the_process_give_one_line(tmp_path, args):
    (tmp_path / "repro.json").write_text(json.dumps(repro()))
    (tmp_path / "raises.py").write_text("raise RuntimeError('broken at import')\n")
    (tmp_path / "exits.py").write_text("raise SystemExit(0)\n")
    (tmp_path / "sleeps.py").write_text("import time\ntime.sleep(3600)\n")
    (tmp_path / "exits0.py").write_text("import os\nos._exit(0)\n")
    (tmp_path / "latin1.toml").write_bytes("description = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "latin1.json").write_bytes(b'{"format": "caf\xe9"}')
    run = cli(*args, cwd=tmp_path)
    assert_refused(run)
    assert run.stdout == ""


def test_a_repro_naming_a_built_in_adapter_by_its_old_module_path_still_replays(tmp_path):
    """The built-in adapters moved to `bridge/adapters/`; repros written before name them by
    their old paths, which resolve to the same classes and nothing else."""
    from pymc_resume.bridge.adapters.reference import ReferenceAdapter
    from pymc_resume.bridge.hosting.registry import resolve

    assert (
        resolve("pymc_resume.bridge.reference_adapter:ReferenceAdapter", allowed=()).load()
        is ReferenceAdapter
    )
    (tmp_path / "repro.json").write_text(
        json.dumps(repro(adapter="pymc_resume.bridge.reference_adapter:ReferenceAdapter", adapter_options={}))
    )
    run = cli("replay", "repro.json", cwd=tmp_path)
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr


def _crafted_package(folder: Path) -> None:
    """A `*.dist-info` offering entry point `crafted`, whose module creates MARKER at import."""
    from pymc_resume.bridge.hosting.registry import ENTRY_POINT_GROUP

    (folder / "crafted_adapter.py").write_text(
        "open('MARKER', 'w').close()\n"
        "from pymc_resume.bridge.adapters.reference import ReferenceAdapter as Adapter\n"
    )
    info = folder / "crafted_adapter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crafted-adapter\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ncrafted = crafted_adapter:Adapter\n")


def test_a_repro_naming_an_entry_point_of_the_current_directory_runs_nothing(tmp_path):
    """`python -m pymc_resume` puts the current directory on sys.path, so a crafted dist-info
    there offers entry points: they are not trusted, and a repro names one only with
    --allow-adapter."""
    _crafted_package(tmp_path)
    (tmp_path / "repro.json").write_text(json.dumps(repro(adapter="crafted")))
    run = cli("replay", "repro.json", cwd=tmp_path)
    assert_refused(run)
    assert "under the current directory" in run.stderr and "--allow-adapter crafted" in run.stderr
    assert not (tmp_path / "MARKER").exists()


def test_entry_points_are_trusted_only_outside_the_current_directory(tmp_path, monkeypatch):
    from pymc_resume.bridge.adapters.reference import ReferenceAdapter
    from pymc_resume.bridge.hosting.registry import (
        AdapterSpecError,
        all_families,
        installed_adapters,
        local_adapters,
        resolve,
    )

    package = tmp_path / "here"
    package.mkdir()
    _crafted_package(package)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(package)
    assert "crafted" not in installed_adapters() and local_adapters()["crafted"] == package.resolve()
    with pytest.raises(AdapterSpecError, match=r"not trusted .*--allow-adapter crafted"):
        resolve("crafted", allowed=())
    with pytest.raises(AdapterSpecError):
        resolve("crafted_adapter:Adapter", allowed=())  # nor by its module path
    assert not (package / "MARKER").exists()
    _, skipped = all_families()
    assert [s["adapter"] for s in skipped if "not trusted" in s["reason"]] == ["crafted"]
    assert not (package / "MARKER").exists()  # naming it imports nothing, trusted or not
    assert resolve("crafted", allowed={"crafted"}).load() is ReferenceAdapter  # --allow-adapter crafted
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # from another folder, the same package is installed code
    assert installed_adapters()["crafted"] == "crafted_adapter:Adapter" and "crafted" not in local_adapters()
    (package / "below").mkdir()
    monkeypatch.chdir(package / "below")  # from a folder below it: a parent of the current directory
    assert "crafted" in local_adapters()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("PYTHONPATH", str(package))  # a folder PYTHONPATH names: `PYTHONPATH=..`
    assert "crafted" in local_adapters() and "crafted" not in installed_adapters()
