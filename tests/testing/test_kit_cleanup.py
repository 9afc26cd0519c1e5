"""The testing kit leaves nothing behind: a pytest session run without
``AZYNC_TEST_DSN`` stops its embedded PostgreSQL and deletes its data
directory when it ends, and also when it is ended by SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from azync_flow.testing.pytest_plugin import DSN_VARIABLE

ROOT = Path(__file__).resolve().parents[2]

TINY = """
from pathlib import Path

async def test_uses_the_store(azync_store):
    assert await azync_store.pool.fetchval("SELECT 1") == 1
    marker = Path(__file__).with_name("started")
    marker.write_text("x")
    if Path(__file__).with_name("hold").exists():
        import asyncio
        await asyncio.sleep(120)
"""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """The subprocess's TMPDIR: short, since the server's socket path must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="azk-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def postgres_processes_under(path: Path) -> list[int]:
    """Pids of processes whose command line names ``path`` (the embedded server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "postgres" in cmd and str(path) in cmd:
            found.append(int(entry.name))
    return found


def leftovers(tmp: Path) -> list[Path]:
    return [p for p in tmp.rglob("*") if p.name in ("pgdata", "PG_VERSION")]


def start_pytest(tmp_path: Path, tmp: Path, *, hold: bool) -> tuple[subprocess.Popen[str], Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_tiny.py").write_text(TINY)
    if hold:
        (project / "hold").write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZYNC_")}
    env.pop(DSN_VARIABLE, None)
    env.update({"TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-W",
            "ignore",
            str(project / "test_tiny.py"),
        ],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, tmp


def test_a_session_stops_its_embedded_server_and_deletes_its_data_at_the_end(
    tmp_path: Path, short_tmp: Path
) -> None:
    proc, tmp = start_pytest(tmp_path, short_tmp, hold=False)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert (tmp_path / "project" / "started").exists()
    assert leftovers(tmp) == []
    assert postgres_processes_under(tmp) == []


def test_a_session_ended_by_sigterm_stops_its_embedded_server_and_deletes_its_data(
    tmp_path: Path, short_tmp: Path
) -> None:
    proc, tmp = start_pytest(tmp_path, short_tmp, hold=True)
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "project" / "started").exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the tiny test never started"
            time.sleep(0.1)
        assert postgres_processes_under(tmp) != []  # the server runs while the test holds
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while postgres_processes_under(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert postgres_processes_under(tmp) == []
    assert leftovers(tmp) == []


pytestmark = pytest.mark.slow


async def test_drop_schema_ends_a_session_still_holding_a_lock_in_it(pg_dsn: str) -> None:
    """A session left working in a test's schema (a killed worker's backend)
    does not keep the schema: the drop ends it and retries."""
    import asyncpg

    from azync_flow.testing import drop_schema, unique_schema

    schema = unique_schema()
    admin = await asyncpg.connect(pg_dsn)
    holder = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"; CREATE TABLE "{schema}".t (x int)')
        tx = holder.transaction()
        await tx.start()
        await holder.execute(f'LOCK TABLE "{schema}".t IN ACCESS SHARE MODE')
        await drop_schema(pg_dsn, schema)
        gone = await admin.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema)
        assert gone == 0
        assert holder.is_closed() or not await _alive(holder)
    finally:
        await admin.close()
        holder.terminate()


async def _alive(conn: object) -> bool:
    import asyncpg

    assert isinstance(conn, asyncpg.Connection)
    try:
        await conn.fetchval("SELECT 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError):
        return False
    return True
