"""A request that commits while a workflow task is being leased reaches that pass.

The lease statement takes its snapshot, then locks the due workflow task. A
signal (or update request: a signal of a reserved name) committed in between
merges its wake into that same task; the lease follows the row to its new
version and leases it, so the pass it carries is the only one that will run
for that wake. These tests hold the lease statement in exactly that window
(a session-local hold in the index expression the statement evaluates per
candidate row, released by an advisory lock the test owns) and check the
leased task's load sees what committed before the lock.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import SignalParams
from tests.store.workflow_helpers import LEASE, started

_HOLD_KEY = 424242

# The lease statement (and only it: it is the one with these CTEs) waits on
# the test's advisory lock each time it evaluates the due order of a row,
# i.e. after its snapshot and before its FOR UPDATE.
_HELD_DUE_ORDER = f"""
CREATE OR REPLACE FUNCTION azync_due_order(p_run_at timestamptz, p_priority int)
RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF current_query() LIKE '%%FROM azync_workflow_task_lease_load(%%' THEN
        PERFORM pg_advisory_lock_shared({_HOLD_KEY});
        PERFORM pg_advisory_unlock_shared({_HOLD_KEY});
    END IF;
    RETURN p_run_at - p_priority * interval '1 minute';
END $$
"""


async def _waiting_on_hold(conn: asyncpg.Connection) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_locks"
            " WHERE locktype = 'advisory' AND objid = $1 AND NOT granted",
            _HOLD_KEY,
        )
    )


async def _lease_with_request_in_window(
    store: PostgresStore, dsn: str, schema: str, wid: uuid.UUID, name: str
) -> list[str]:
    """Lease ``wid``'s due task while ``name`` is signalled inside the lease
    statement's window; returns the names of the signals its load holds."""
    holder: asyncpg.Connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await holder.execute(_HELD_DUE_ORDER)
        await holder.execute("SELECT pg_advisory_lock($1)", _HOLD_KEY)
        lease = asyncio.create_task(store.lease_workflow_tasks(10, LEASE))
        for _ in range(500):
            if await _waiting_on_hold(holder):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the lease statement never reached the hold")
        assert await store.signal_workflow(
            SignalParams(workflow_id=wid, name=name, payload=b'"x"', message_id="m1")
        )
        await holder.execute("SELECT pg_advisory_unlock($1)", _HOLD_KEY)
        tasks = await asyncio.wait_for(lease, 30)
    finally:
        await holder.close()
    mine = [t for t in tasks if t.job.run_id == wid]
    assert len(mine) == 1, tasks
    return [s.name for s in mine[0].state.signals]


async def test_a_signal_committed_while_its_task_is_leased_is_in_that_pass(
    store: PostgresStore, azync_dsn: str, schema: str
) -> None:
    wid = await started(store)
    names = await _lease_with_request_in_window(store, azync_dsn, schema, wid, "approve")
    assert names == ["approve"]


async def test_an_update_committed_while_its_task_is_leased_is_in_that_pass(
    store: PostgresStore, azync_dsn: str, schema: str
) -> None:
    wid = await started(store)
    names = await _lease_with_request_in_window(store, azync_dsn, schema, wid, "$update:add")
    assert names == ["$update:add"]
