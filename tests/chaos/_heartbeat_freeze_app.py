"""Worker app for the heartbeat freeze test (run with ``azync-flow worker``).

``transfer`` is a non-idempotent activity declaring a 1 s ``heartbeat_timeout``;
it logs its entry in ``transfer_calls`` and then hangs without heartbeating,
so the test can freeze the whole worker process (SIGSTOP) mid-call.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import asyncpg

from azync_flow import WorkflowContext, activity, workflow
from azync_flow.activity import current_activity

DSN = os.environ.get("AZYNC_DSN", "")
SCHEMA = os.environ.get("AZYNC_SCHEMA", "public")
HEARTBEAT = timedelta(seconds=1)

CALLS_DDL = (
    "CREATE TABLE IF NOT EXISTS transfer_calls (id bigserial PRIMARY KEY, attempt int NOT NULL)"
)


@activity(name="transfer", idempotent=False, heartbeat_timeout=HEARTBEAT)
async def transfer(amount: int) -> str:
    info = current_activity()
    assert info is not None
    conn = await asyncpg.connect(DSN, server_settings={"search_path": SCHEMA})
    try:
        await conn.execute("INSERT INTO transfer_calls (attempt) VALUES ($1)", info.attempt)
    finally:
        await conn.close()
    await asyncio.sleep(60)  # the bank call hangs; no heartbeat
    return "sent"


@workflow(name="wire")
async def wire(ctx: WorkflowContext, amount: int) -> str:
    return await transfer(amount)


workflows = [wire]
activities = [transfer]
