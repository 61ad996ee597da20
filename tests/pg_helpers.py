"""A real PostgreSQL server for the tests of the index on PostgreSQL (``rar.store.index_pg``).

``pg_server`` (session scope) starts a private cluster: ``initdb`` into a temporary directory,
``postgres`` listening on a free loopback port only (no Unix socket), password authentication
(scram-sha-256; the password reaches clients through ``PGPASSWORD``, never a URL). As root,
both run as the unprivileged ``nobody`` (initdb refuses root), the data directory chowned to it.
``RAR_TEST_PG_URL=postgresql://user@host:port/db`` uses an existing server instead (its
password, if any, in ``PGPASSWORD``).

``pg_url`` (function scope) creates a fresh database on that server for one test and drops it
afterwards. Where neither the server binaries nor psycopg are installed, the tests skip saying
what to install; under CI (``CI=true``) they fail instead.

Import the fixtures into a test module: ``from pg_helpers import pg_server, pg_url``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_USER = "rar"
UNPRIVILEGED = 65534  # nobody / nogroup
TIMEOUT = 60


@dataclass(frozen=True)
class PgServer:
    url: str  # postgresql://user@127.0.0.1:port/postgres (no password)
    password: str | None  # given to clients as PGPASSWORD

    def env(self) -> dict[str, str]:
        """What a client process needs besides the URL."""
        return {"PGPASSWORD": self.password} if self.password else {}

    def database_url(self, name: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{name}"))


def missing(what: str) -> None:
    """Skip (fail under CI) because ``what`` is not installed."""
    message = (
        f"{what}; install it (Debian: apt-get install postgresql; pip install -e '.[postgres]'), "
        "or set RAR_TEST_PG_URL=postgresql://user@host:port/db to use an existing server"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI: {message}", pytrace=False)
    pytest.skip(message)


def pg_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres (the newest Debian version first)."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    return [
        "setpriv",
        f"--reuid={UNPRIVILEGED}",
        f"--regid={UNPRIVILEGED}",
        "--clear-groups",
        "--",
    ]


def _run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")


@contextlib.contextmanager
def private_cluster() -> Iterator[PgServer]:
    """A PostgreSQL cluster of its own, stopped and deleted on exit."""
    binaries = pg_binaries()
    if binaries is None:
        missing("the PostgreSQL server binaries (initdb, pg_ctl, postgres) are not installed")
    assert binaries is not None
    base = Path(tempfile.mkdtemp(prefix="rar-pg-"))
    data, log, pwfile = base / "data", base / "server.log", base / "pw"
    password = secrets.token_hex(12)
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        os.chown(base, UNPRIVILEGED, UNPRIVILEGED)
        os.chown(pwfile, UNPRIVILEGED, UNPRIVILEGED)
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    env.pop("PGPASSWORD", None)
    user = _as_server_user()
    port = _free_port()
    _run(
        [
            *user,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ],
        env,
    )
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60"
    )
    pg_ctl = [*user, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log)]
    try:
        _run([*pg_ctl, "-o", options, "-w", "-t", str(TIMEOUT), "start"], env)
        yield PgServer(f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres", password)
    finally:
        with contextlib.suppress(Exception):
            _run([*pg_ctl, "-m", "immediate", "-w", "stop"], env)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing("psycopg (the 'postgres' extra) is not installed")
    given = os.environ.get("RAR_TEST_PG_URL")
    if given:
        yield PgServer(given, os.environ.get("PGPASSWORD"))
        return
    with private_cluster() as server:
        yield server


def admin(server: PgServer, sql: str, database: str | None = None) -> list[tuple[object, ...]]:
    """Run ``sql`` on the server (autocommit) and return the rows it gives."""
    import psycopg

    url = server.database_url(database) if database else server.url
    with psycopg.connect(url, autocommit=True, password=server.password or None) as conn:
        cursor = conn.execute(sql.encode())
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def pg_url(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh, empty database on the server for one test; its password is in ``PGPASSWORD``
    for the test (and the processes it starts), as a user would give it."""
    if pg_server.password:
        monkeypatch.setenv("PGPASSWORD", pg_server.password)
    name = f"rar_test_{secrets.token_hex(4)}"
    admin(pg_server, f'CREATE DATABASE "{name}"')
    try:
        yield pg_server.database_url(name)
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
