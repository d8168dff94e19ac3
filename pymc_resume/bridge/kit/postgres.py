"""A PostgreSQL example's schema of its own, on the server at `PYMC_RESUME_POSTGRES_URL`.

An adapter whose framework stores on PostgreSQL gives each example a schema of its own, named
after the example's work directory, and points the framework at it through the connection
string alone (`options=-c search_path=<schema>`, libpq's documented parameter) or through the
framework's own schema setting where it has one (DBOS's `dbos_system_schema`): the framework
creates and writes its tables there with its own calls, and nothing of ours writes them. The
adapter drops the schema when the example closes; a bridge killed by SIGKILL closes nothing,
so the next example to open on the same server (of any adapter) drops every schema of ours whose
work directory is gone (`bridge/hosting/workdirs.py` removes a killed run's directories).

A schema name carries this machine's tag, so a run on one machine never drops the schemas of a
run on another machine that shares the server (it cannot see that run's work directories).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

POSTGRES_URL_VARIABLE = "PYMC_RESUME_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA_PREFIX = "pymc_resume_"  # every example schema of every adapter starts so
WORKDIR_PREFIX = "pymc-resume-"  # `bridge.hosting.workdirs.PREFIX`, left out of the schema's name
NAME_LIMIT = 63  # PostgreSQL's identifier length (NAMEDATALEN - 1)
CONNECT_TIMEOUT = 10  # seconds: a server that does not answer is an error, not a hang


def postgres_url() -> str:
    """The server's URL: `PYMC_RESUME_POSTGRES_URL`, else the local server's database `test`."""
    return os.environ.get(POSTGRES_URL_VARIABLE) or DEFAULT_POSTGRES_URL


def _machine() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]


def _sanitized(name: str) -> str:
    if name.startswith(WORKDIR_PREFIX):
        name = name[len(WORKDIR_PREFIX) :]
    return re.sub(r"\W", "_", name.lower())


def schema_of(workdir: Path, tag: str) -> str:
    """The schema of the example whose work directory is `workdir`, for adapter `tag` (letters
    and digits): `pymc_resume_<tag>_<machine>_<the directory's name>`."""
    if not re.fullmatch(r"[a-z0-9]{1,12}", tag):
        raise ValueError(f"a schema tag is 1 to 12 lowercase letters or digits, not {tag!r}")
    name = f"{SCHEMA_PREFIX}{tag}_{_machine()}_{_sanitized(workdir.name)}"
    if len(name) > NAME_LIMIT:  # a long directory name: its end is the random part
        name = name[: NAME_LIMIT - 9] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def in_schema(url: str, schema: str) -> str:
    """`url` (a URL or a key=value connection string) with `schema` as its only search path."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, options=f"-c search_path={schema}")


def sqlalchemy_url(url: str, schema: str | None = None) -> str:
    """The server's URL as SQLAlchemy with psycopg 3 takes it, with `schema` (if given) as the
    only search path of its connections (`options`, which SQLAlchemy hands psycopg)."""
    url = re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)
    if schema is None:
        return url
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "options"]
    query.append(("options", f"-c search_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def connect(url: str):
    """An autocommit psycopg connection (a SQLAlchemy `postgresql+psycopg://` URL is taken too)."""
    import psycopg

    plain = re.sub(r"^postgres(ql)?\+psycopg://", "postgresql://", url)
    return psycopg.connect(plain, autocommit=True, connect_timeout=CONNECT_TIMEOUT)


def create_schema(url: str, schema: str) -> None:
    with connect(url) as connection:
        connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def drop_schema(url: str, schema: str) -> None:
    with connect(url) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def sweep_schemas(url: str, root: Path) -> list[str]:
    """Drop the example schemas made on this machine whose work directory is no longer in
    `root` (their example's bridge was killed); returns their names.

    The schemas are listed before the directories: an example makes its directory before its
    schema, so a schema listed here has its directory listed after it, unless it is gone."""
    dropped: list[str] = []
    with connect(url) as connection:
        rows = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (SCHEMA_PREFIX,)
        ).fetchall()
        try:
            directories = [path for path in root.iterdir() if path.is_dir()]
        except OSError:
            return dropped  # no way to tell which are alive: drop none
        alive: dict[str, set[str]] = {}  # tag -> the schemas of the directories in `root`
        for (name,) in rows:
            parts = name[len(SCHEMA_PREFIX) :].split("_", 2)
            if len(parts) < 3 or parts[1] != _machine() or not re.fullmatch(r"[a-z0-9]{1,12}", parts[0]):
                continue  # another machine's, or not an example schema
            tag = parts[0]
            if tag not in alive:
                alive[tag] = {schema_of(directory, tag) for directory in directories}
            if name not in alive[tag]:
                connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                dropped.append(name)
    return dropped
