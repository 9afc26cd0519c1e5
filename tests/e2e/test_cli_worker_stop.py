"""``azync-flow worker`` stopped by SIGTERM or SIGINT: a real CLI process logs
one last INFO line saying it stopped and what became of its in-flight jobs,
and exits with status 0 (docs/cli.md)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from azync_flow.store.postgres import PostgresStore
from tests.e2e.test_cli_commands import Cmd

SLOW = """
import asyncio
import sys

from azync_flow import WorkflowContext, activity, workflow


@activity(name="stop_slow_step")
async def slow_step(n: int) -> int:
    print("stop_slow_step started", file=sys.stderr, flush=True)
    await asyncio.sleep(1.5)
    return n


@workflow(name="stop_slow")
async def slow(ctx: WorkflowContext, n: int) -> int:
    return await slow_step(n)
"""


@pytest.fixture
def cmd(pg_dsn: str, store: PostgresStore) -> Cmd:
    return Cmd(pg_dsn, store.schema)


async def _start_worker(cmd: Cmd, cwd: Path) -> asyncio.subprocess.Process:
    """The CLI worker on ``slow_flows``, once it logged what it serves."""
    await cmd("migrate")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "slow_flows",
        cwd=cwd, env=cmd.env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    await _wait_for_line(proc, b"worker runs workflow kinds")
    return proc


async def _wait_for_line(proc: asyncio.subprocess.Process, text: bytes) -> None:
    assert proc.stderr is not None
    async with asyncio.timeout(30):
        while text not in await proc.stderr.readline():
            pass


async def _stop(proc: asyncio.subprocess.Process, sig: signal.Signals) -> tuple[int, list[str]]:
    """Send ``sig``; the exit status and the rest of the log, line by line."""
    proc.send_signal(sig)
    assert proc.stderr is not None
    rest = await asyncio.wait_for(proc.stderr.read(), 30)
    code = await asyncio.wait_for(proc.wait(), 30)
    return code, rest.decode().strip().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_an_idle_cli_worker_logs_that_it_stopped_last_and_exits_0(
    cmd: Cmd, tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "slow_flows.py").write_text(SLOW)
    worker = await _start_worker(cmd, tmp_path)
    code, lines = await _stop(worker, sig)
    assert code == 0, lines
    assert "Traceback" not in "\n".join(lines)
    last = lines[-1]
    assert f"INFO azync_flow.worker: worker stopped ({sig.name}): no jobs were in flight" in last


async def test_a_cli_worker_stopped_mid_job_says_it_drained_the_job_before_exiting_0(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "slow_flows.py").write_text(SLOW)
    worker = await _start_worker(cmd, tmp_path)
    try:
        await cmd("workflows", "start", "stop_slow", "--input", "7")
        await _wait_for_line(worker, b"stop_slow_step started")
    except BaseException:
        worker.kill()
        raise
    code, lines = await _stop(worker, signal.SIGTERM)
    assert code == 0, lines
    assert (
        "worker stopped (SIGTERM): drained 1 of 1 in-flight job(s) within the 30s grace"
        in (lines[-1])
    )
