"""A server that refuses the connection (unknown role, unknown database, wrong
password) is one product error, ``[login_refused]``, distinct from an
unreachable server's ``[store_unavailable]``: it names what was refused and how
to fix it, never shows the password, and the CLI exits 5 (docs/cli.md)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from azync_flow import StoreLoginRefusedError, StoreUnavailableError
from azync_flow.embedded import start_embedded, stop_embedded
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from tests.e2e.test_cli_commands import Cmd

SECRET = "s3cr3t-Pa55"


def _with(dsn: str, *, user: str | None = None, database: str | None = None) -> str:
    """``dsn`` with another user (and password) or database."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if user is not None:
        netloc = f"{user}@{netloc.rpartition('@')[2]}"
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


@pytest.fixture
def cmd(pg_dsn: str, store: PostgresStore) -> Cmd:
    return Cmd(pg_dsn, store.schema)


def _require_password(hba: Path, role: str) -> None:
    """Make ``role`` log in with a scram-sha-256 password (first matching line wins)."""
    rules = f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n"
    hba.write_text(rules + hba.read_text())


@pytest.fixture
async def password_server() -> AsyncIterator[str]:
    """A private embedded server whose role ``pw_role`` logs in with a password
    (scram-sha-256; every other role is trusted): its DSN as ``postgres``."""
    root = Path(tempfile.mkdtemp(prefix="azync-pw-"))
    data = root / "pgdata"
    try:
        dsn = start_embedded(data)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE ROLE pw_role LOGIN PASSWORD 'right-password'")
            _require_password(Path(await conn.fetchval("SHOW hba_file")), "pw_role")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        yield dsn
    finally:
        stop_embedded(data, force=True)
        shutil.rmtree(root, ignore_errors=True)


async def test_open_store_with_an_unknown_role_raises_login_refused_naming_the_role(
    pg_dsn: str,
) -> None:
    with pytest.raises(StoreLoginRefusedError) as raised:
        await open_store(_with(pg_dsn, user="no_such_role_az"), Config(schema="x"), migrate=False)
    err = raised.value
    assert (err.refused, err.name, err.retryable) == ("role", "no_such_role_az", False)
    assert not isinstance(err, StoreUnavailableError)
    assert str(err).startswith(
        '[login_refused] PostgreSQL refused the connection: role "no_such_role_az" does not exist;'
    )
    assert "CREATE ROLE no_such_role_az LOGIN" in str(err)
    assert isinstance(err.__cause__, asyncpg.PostgresError)


async def test_open_store_with_an_unknown_database_raises_login_refused_naming_it(
    pg_dsn: str,
) -> None:
    with pytest.raises(StoreLoginRefusedError) as raised:
        await open_store(_with(pg_dsn, database="no_such_db_az"), migrate=False)
    err = raised.value
    assert (err.refused, err.name) == ("database", "no_such_db_az")
    assert 'database "no_such_db_az" does not exist' in str(err)
    assert "createdb no_such_db_az" in str(err)


async def test_open_store_with_a_wrong_password_raises_login_refused_without_the_password(
    password_server: str,
) -> None:
    wrong = _with(password_server, user=f"pw_role:{SECRET}")
    with pytest.raises(StoreLoginRefusedError) as raised:
        await open_store(wrong, migrate=False)
    err = raised.value
    assert (err.refused, err.name) == ("password", "pw_role")
    assert 'password authentication failed for user "pw_role"' in str(err)
    assert SECRET not in str(err)
    right = await open_store(_with(password_server, user="pw_role:right-password"), migrate=False)
    await right.close()


async def test_the_cli_reports_a_refused_role_or_database_as_one_login_refused_line_exit_5(
    cmd: Cmd, pg_dsn: str
) -> None:
    for dsn, named in (
        (_with(pg_dsn, user=f"no_such_role_az:{SECRET}"), 'role "no_such_role_az"'),
        (_with(pg_dsn, database="no_such_db_az"), 'database "no_such_db_az"'),
    ):
        got = await cmd("workflows", "list", "--dsn", dsn)
        assert got.code == 5, got.err
        (line,) = got.err.strip().splitlines()
        assert line.startswith("azync-flow: error: [login_refused] PostgreSQL refused the conn")
        assert named in line
        assert SECRET not in line


async def test_the_cli_reports_a_wrong_password_as_login_refused_exit_5_not_showing_it(
    cmd: Cmd, password_server: str
) -> None:
    got = await cmd("stats", "--dsn", _with(password_server, user=f"pw_role:{SECRET}"))
    assert got.code == 5, got.err
    (line,) = got.err.strip().splitlines()
    assert line.startswith(
        "azync-flow: error: [login_refused] PostgreSQL refused the connection: "
        'password authentication failed for user "pw_role"; check the password'
    )
    assert SECRET not in got.err + got.out


async def test_a_store_whose_role_loses_login_raises_login_refused_on_its_next_connection(
    pg_dsn: str, schema: str
) -> None:
    role = f"az_refused_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
        store = await open_store(_with(pg_dsn, user=role), Config(schema=schema), migrate=False)
        try:
            await admin.execute(f"ALTER ROLE {role} NOLOGIN")
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
            )
            raised: BaseException | None = None
            for _ in range(5):  # the first call may meet the terminated session
                try:
                    await store.pool.fetchval("SELECT 1")
                except StoreUnavailableError:
                    continue
                except Exception as exc:
                    raised = exc
                break
            assert isinstance(raised, StoreLoginRefusedError), repr(raised)
            assert (raised.refused, raised.name) == ("role", role)
            assert f'role "{role}" is not permitted to log in' in str(raised)
        finally:
            store.pool.raw.terminate()
    finally:
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def test_open_store_without_connect_privilege_raises_login_refused_naming_the_database(
    pg_dsn: str,
) -> None:
    suffix = uuid.uuid4().hex[:10]
    role, database = f"az_noconn_{suffix}", f"az_noconn_db_{suffix}"
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        await admin.execute(f"CREATE DATABASE {database}")
        await admin.execute(f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC")
        with pytest.raises(StoreLoginRefusedError) as raised:
            await open_store(_with(pg_dsn, user=role, database=database), migrate=False)
        err = raised.value
        assert (err.refused, err.name, err.retryable) == ("database", database, False)
        assert f'permission denied for database "{database}"' in str(err)
        assert "grant the role CONNECT on the database" in str(err)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()
