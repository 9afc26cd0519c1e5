"""A schema holding executions in every state upgrades to the current one and
keeps them: the migrations after the storage baseline (``0031``) move existing
data, they do not assume an empty schema.

The rows are written with plain SQL against the baseline schema (what the
driver of that version wrote: an execution row and its workflow task job),
then the remaining migrations run, then a real worker of the current code
finishes the running executions and the others read back as they were.
"""

from __future__ import annotations

import hashlib
import uuid

import asyncpg

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.postgres._migrate import SNAPSHOT_TABLE, migrate, migration_files
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import unique_schema
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

BASELINE = 31


@workflow(name="upgrade_wait")
async def upgrade_wait(ctx: WorkflowContext, who: str) -> str:
    got = await ctx.wait_signal("go")
    return f"{who}:{got}"


async def _baseline_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Replay the migrations up to ``BASELINE`` as ``migrate`` records them."""
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.execute(
        f'CREATE TABLE "{schema}".{SNAPSHOT_TABLE} (version int PRIMARY KEY, name text NOT NULL,'
        " applied_at timestamptz NOT NULL DEFAULT now(), checksum text)"
    )
    async with conn.transaction():
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        for version, name, sql in migration_files():
            if version > BASELINE:
                break
            await conn.execute(sql)
            await conn.execute(
                f"INSERT INTO {SNAPSHOT_TABLE} (version, name, checksum) VALUES ($1, $2, $3)",
                version,
                name,
                hashlib.sha256(sql.encode()).hexdigest(),
            )


_EXECUTION = """
INSERT INTO azync_workflow_executions (id, name, version, state, input, result, failure_reason,
                                       suspend_reason, run_id, created_at, updated_at,
                                       completed_at)
VALUES ($1, 'upgrade_wait', '', $2, $3, $4, $5, $6, $1, now(), now(),
        CASE WHEN $2 IN ('running', 'suspended') THEN NULL ELSE now() END)
"""
_TASK = """
INSERT INTO azync_jobs (id, source, kind, state, run_at, run_id, task_key, enqueued_at,
                        updated_at, first_pass, workflow_name, task_queue)
VALUES (gen_random_uuid(), 'workflow', '$wft', 'pending', now(), $1, '$wft', now(), now(),
        true, 'upgrade_wait', 'default')
"""
_SIGNAL = """
INSERT INTO azync_workflow_signals (workflow_id, name, message_id, payload, created_at)
VALUES ($1, 'go', 'm1', '"early"', now())
"""


async def test_an_upgrade_keeps_executions_in_every_state_and_runs_the_live_ones(
    pg_dsn: str,
) -> None:
    schema = unique_schema("upg")
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _baseline_schema(conn, schema)
        await conn.execute(f'SET search_path TO "{schema}"')
        ids = {k: uuid.uuid4() for k in ("fresh", "signalled", "suspended", *_TERMINAL)}
        for key, wid in ids.items():
            state = "running" if key in ("fresh", "signalled") else key
            await conn.execute(
                _EXECUTION,
                wid,
                state,
                b'"' + key.encode() + b'"',
                b'"done"' if state == "succeeded" else None,
                "it broke" if state == "failed" else "",
                "operator hold" if state == "suspended" else "",
            )
        for key in ("fresh", "signalled"):
            await conn.execute(_TASK, ids[key])
        await conn.execute(_SIGNAL, ids["signalled"])

        applied = await migrate(conn, schema, SNAPSHOT_TABLE)
        assert applied
        assert min(applied) > BASELINE

        store = await open_store(pg_dsn, Config(schema=schema), migrate=False)
        try:
            client = Client(store)
            runtime = LocalRuntime(store, Registry([upgrade_wait], []))
            async with runtime.worker:
                await client.get_handle(ids["fresh"]).signal("go", "late")
                assert await client.get_handle(ids["fresh"]).result(timeout=30) == "fresh:late"
                got = await client.get_handle(ids["signalled"]).result(timeout=30)
                assert got == "signalled:early"
            views = {k: await client.get_handle(w).describe() for k, w in ids.items()}
        finally:
            await store.close()
        assert views["suspended"].state == WorkflowState.SUSPENDED
        assert views["suspended"].suspend_reason == "operator hold"
        for key in _TERMINAL:
            assert views[key].state == WorkflowState(key)
        assert views["succeeded"].result == b'"done"'
        assert views["failed"].failure_reason == "it broke"
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


_TERMINAL = ("succeeded", "failed", "cancelled", "terminated")
