"""A pytest plugin for the services tests need: a PostgreSQL database of each test process's own,
and a way to forbid skips where every service must be there (CI).

Each test process (each pytest-xdist worker, or the one process without xdist) creates a
database of its own on the server at `PYMC_RESUME_POSTGRES_URL` (default: the machine's
server, database `test`) and points that variable at it, so that the tests, the adapters and
their child processes all use it and no two parallel tests share tables. The database is
dropped when the process ends; the controller checks that none of this run's is left.

`PYMC_RESUME_NO_SKIPS=1` (set by .ci/run) turns every skipped test into a failed run: a skip
for a missing server or framework would otherwise read as green.
"""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
from hygiene import RunCheck, is_controller

from pymc_resume.bridge.race.race import POSTGRES_URL_VARIABLE as URL_VARIABLE
from pymc_resume.bridge.race.race import postgres_url

DATABASE_PREFIX = "pymc_resume_test_"
NO_SKIPS_VARIABLE = "PYMC_RESUME_NO_SKIPS"


def with_database(url: str, name: str) -> str:
    """`url` with its database replaced by `name`."""
    if "://" in url:
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path=f"/{name}"))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=name)


def _admin(url: str):
    """An autocommit connection to the server at `url`, or None when there is none to use."""
    try:
        import psycopg
    except ImportError:
        return None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        return None


def _run_id(config: pytest.Config) -> str:
    """One id for the whole test run, shared by the controller and its xdist workers: xdist's
    test run id, which the controller sets here when it is not given (`--testrunuid`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return workerinput["testrunuid"][:10]
    if getattr(config.option, "testrunuid", None) is None:
        config.option.testrunuid = uuid.uuid4().hex  # xdist hands this one to its workers
    return config.option.testrunuid[:10]


def _run_prefix(config: pytest.Config) -> str:
    return f"{DATABASE_PREFIX}{_run_id(config)}_"


def run_databases(url: str, prefix: str) -> list[str]:
    """The databases on the server whose names start with `prefix`."""
    connection = _admin(url)
    if connection is None:
        return []
    with connection:
        rows = connection.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY datname", (prefix,)
        ).fetchall()
    return [name for (name,) in rows]


def _drop(url: str, names: list[str]) -> None:
    connection = _admin(url) if names else None
    if connection is not None:
        with connection:
            for name in names:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class OwnDatabase:
    """This test process's database: created at configure, dropped when the session ends."""

    def __init__(self, config: pytest.Config) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.base_url = postgres_url()
        self.name = f"{_run_prefix(config)}{worker}"
        self.created = False
        connection = _admin(self.base_url)
        if connection is None:
            return  # no server: the postgres tests skip (or, with no skips allowed, fail)
        with connection:
            connection.execute(f'CREATE DATABASE "{self.name}"')
        self.created = True
        os.environ[URL_VARIABLE] = with_database(self.base_url, self.name)

    @pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
    def pytest_sessionfinish(self) -> None:
        self.drop()

    def drop(self) -> None:
        if not self.created:
            return
        os.environ[URL_VARIABLE] = self.base_url
        _drop(self.base_url, [self.name])
        self.created = False


class NoSkips(RunCheck):
    """Counts skipped tests; with skips forbidden, any of them fails the run."""

    title = f"skipped, which {NO_SKIPS_VARIABLE}=1 forbids"

    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.found.append(f"{report.nodeid}: {reason}")

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        yield
        self.fail_on_findings(session)


class LeftDatabases(RunCheck):
    """The controller's check that no database of this run is left on the server."""

    title = "PostgreSQL databases left behind by the test run"

    def __init__(self, config: pytest.Config) -> None:
        super().__init__()
        self.url, self.prefix = postgres_url(), _run_prefix(config)

    @pytest.hookimpl(wrapper=True, trylast=True)  # after every process dropped its database
    def pytest_sessionfinish(self, session: pytest.Session):
        yield
        self.found = run_databases(self.url, self.prefix)
        _drop(self.url, self.found)  # listed in the summary, and gone from the server
        self.fail_on_findings(session)


def pytest_configure(config: pytest.Config) -> None:
    controller = is_controller(config)
    if controller:
        config.pluginmanager.register(LeftDatabases(config), "pymc-resume-left-databases")
        if os.environ.get(NO_SKIPS_VARIABLE) == "1":
            config.pluginmanager.register(NoSkips(), "pymc-resume-no-skips")
    if not controller or config.pluginmanager.get_plugin("dsession") is None:
        # A process that runs tests (an xdist worker, or the only process): its own database.
        database = OwnDatabase(config)
        config.pluginmanager.register(database, "pymc-resume-own-database")
        config.add_cleanup(database.drop)  # also when the session never started
