"""`bridge.kit.postgres`: a PostgreSQL example's schema of its own, dropped when the example
closes and swept by the next example when its bridge was killed.

The tests that need the server are marked `postgres` (and the framework's marker); the rest
check the names and URLs with no server.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pymc_resume.bridge.hosting.workdirs import PREFIX, default_workroot, sweep
from pymc_resume.bridge.kit import postgres
from pymc_resume.bridge.kit.postgres import (
    DEFAULT_POSTGRES_URL,
    NAME_LIMIT,
    POSTGRES_URL_VARIABLE,
    connect,
    create_schema,
    drop_schema,
    in_schema,
    postgres_url,
    schema_of,
    sqlalchemy_url,
    sweep_schemas,
)

ROOT = Path(default_workroot() or "/tmp")


def test_postgres_url_is_the_variable_else_the_local_server(monkeypatch):
    monkeypatch.setenv(POSTGRES_URL_VARIABLE, "postgresql://someone@db.example:6543/x")
    assert postgres_url() == "postgresql://someone@db.example:6543/x"
    monkeypatch.setenv(POSTGRES_URL_VARIABLE, "")
    assert postgres_url() == DEFAULT_POSTGRES_URL
    monkeypatch.delenv(POSTGRES_URL_VARIABLE)
    assert postgres_url() == DEFAULT_POSTGRES_URL


def test_a_schema_is_named_after_the_workdir_and_fits_an_identifier():
    workdir = Path(f"/dev/shm/{PREFIX}4194303-123456789012-abcdefgh")
    name = schema_of(workdir, "langgraph")
    assert name.startswith("pymc_resume_langgraph_") and name.endswith("_4194303_123456789012_abcdefgh")
    assert len(name) <= NAME_LIMIT
    assert schema_of(workdir, "dbos") != name  # one schema per adapter and example
    long = schema_of(Path("/x/" + "Odd-Name " * 20), "adk")
    assert len(long) == NAME_LIMIT and long.isidentifier()
    with pytest.raises(ValueError, match="schema tag"):
        schema_of(workdir, 'a"; DROP')


def test_urls_carry_the_schema_as_their_only_search_path():
    url = sqlalchemy_url("postgresql://u@h:5432/db?sslmode=disable&options=-c%20x%3D1", "pymc_resume_adk_s")
    assert url.startswith("postgresql+psycopg://u@h:5432/db?")
    assert "sslmode=disable" in url and "options=-c%20search_path%3Dpymc_resume_adk_s" in url
    assert "x%3D1" not in url
    assert sqlalchemy_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert "options='-c search_path=s1'" in in_schema("postgresql://u@h/db", "s1")


def _postgres_or_skip() -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    import psycopg

    try:
        connect(postgres_url()).close()
    except psycopg.Error as error:
        pytest.skip(f"no PostgreSQL server at {postgres_url()}: {error}")


def _schemas() -> set[str]:
    with connect(postgres_url()) as connection:
        rows = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (postgres.SCHEMA_PREFIX,)
        ).fetchall()
    return {name for (name,) in rows}


@pytest.mark.postgres
def test_the_sweep_drops_schemas_whose_workdir_is_gone_and_no_other(tmp_path, monkeypatch):
    _postgres_or_skip()
    url = postgres_url()
    alive = tmp_path / f"{PREFIX}1-2-alive"
    alive.mkdir()
    kept, gone = schema_of(alive, "dbos"), schema_of(tmp_path / f"{PREFIX}3-4-gone", "langgraph")
    monkeypatch.setattr(postgres, "_machine", lambda: "0ther0")
    elsewhere = schema_of(tmp_path / f"{PREFIX}5-6-elsewhere", "adk")  # another machine's
    monkeypatch.undo()
    try:
        for name in (kept, gone, elsewhere):
            create_schema(url, name)
        assert sweep_schemas(url, tmp_path) == [gone]
        assert {kept, elsewhere} <= _schemas() and gone not in _schemas()
    finally:
        for name in (kept, gone, elsewhere):
            drop_schema(url, name)


KILLED_EXAMPLE = textwrap.dedent(
    """
    import sys
    from pymc_resume.bridge.adapters.langgraph import LangGraphAdapter
    from pymc_resume.bridge.judging.session import Session
    from pymc_resume.model.bounds import load_bounds

    small = load_bounds("small")
    session = Session(LangGraphAdapter(store="postgres"), small.workflow, small.values, step_timeout=60)
    session.apply({"action": "start", "thread": 0, "crash": None})
    print(session.workdir, flush=True)
    sys.stdin.read()  # SIGKILLed here, with its example open
    """
)


@pytest.mark.postgres
@pytest.mark.langgraph
def test_a_killed_examples_schema_is_swept_by_the_next_run_which_leaves_nothing():
    pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed"
    )
    _postgres_or_skip()
    from pymc_resume.bridge.adapters.langgraph import SCHEMA_TAG, LangGraphAdapter
    from pymc_resume.bridge.judging.session import Session
    from pymc_resume.model.bounds import load_bounds

    before = _schemas()
    bridge = subprocess.Popen(
        [sys.executable, "-c", KILLED_EXAMPLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        workdir = Path(bridge.stdout.readline().strip())
        killed = schema_of(workdir, SCHEMA_TAG)
        assert killed in _schemas() - before  # LangGraph's tables are in the example's schema
        with connect(postgres_url()) as connection:
            tables = connection.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (killed,)
            ).fetchone()[0]
        assert tables >= 3
    finally:
        bridge.send_signal(signal.SIGKILL)
        bridge.communicate()
    assert bridge.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10  # its host process dies with it (PR_SET_PDEATHSIG)
    while workdir.exists() and workdir not in sweep() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not workdir.exists()

    small = load_bounds("small")
    session = Session(LangGraphAdapter(store="postgres"), small.workflow, small.values, step_timeout=60)
    try:
        assert killed not in _schemas()  # swept when the next example opened
        assert schema_of(session.workdir, SCHEMA_TAG) in _schemas()
        session.apply({"action": "start", "thread": 0, "crash": None})
    finally:
        session.close()
    assert _schemas() == before  # the next run left nothing either
