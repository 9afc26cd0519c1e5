"""A signal whose payload does not fit the type its wait asks for is dropped
with a warning, and the run goes on waiting: a sender's mistake through the
CLI cannot fail an execution (docs/workflows.md, ``ctx.wait_signal``)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from azync_flow.store.postgres import PostgresStore
from tests.e2e.test_cli_commands import Cmd

APP = """
from azync_flow import WorkflowContext, workflow


@workflow(name="typed_approval")
async def approval(ctx: WorkflowContext) -> str:
    decision = await ctx.wait_signal("approve", type=dict)
    return decision["by"]
"""


async def test_a_wrong_typed_signal_from_the_cli_is_dropped_and_the_next_one_is_taken(
    pg_dsn: str, store: PostgresStore, tmp_path: Path
) -> None:
    cmd = Cmd(pg_dsn, store.schema)
    (tmp_path / "approval_app.py").write_text(APP)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "approval_app",
        "--log-level", "WARNING", cwd=tmp_path, env=cmd.env,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        wid = (await cmd("workflows", "start", "typed_approval", "--json")).json["id"]
        bad = await cmd("workflows", "signal", wid, "approve", "--payload", '"not a dict"')
        assert bad.code == 0, bad.err
        waiting = await cmd("workflows", "result", wid, "--timeout", "3")
        assert waiting.code == 6, waiting.err  # still running: the bad signal failed nothing
        good = await cmd("workflows", "signal", wid, "approve", "--payload", '{"by": "ana"}')
        assert good.code == 0, good.err
        done = await cmd("workflows", "result", wid, "--timeout", "60", "--json")
        assert (done.code, done.json) == (0, "ana")
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.stderr is not None
        logged = (await asyncio.wait_for(worker.stderr.read(), 30)).decode()
        assert await asyncio.wait_for(worker.wait(), 30) == 0
    assert "dropped signal 'approve'" in logged
    assert "does not match dict" in logged
    history = await cmd("workflows", "history", wid, "--json")
    received = [line for line in history.out.splitlines() if "SignalReceived" in line]
    assert len(received) == 2  # both consumed, both kept in the history
