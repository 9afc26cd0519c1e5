"""Real SIGKILLs of worker processes during a non-idempotent charge.

Each iteration starts a ``pay`` run, runs ``azync-flow worker`` in a subprocess
that SIGKILLs itself at one point of the charge's first attempt (before the
provider call, inside the provider's open transaction, after the provider
committed but before the report), then a fresh worker process takes over: its
leader finds the lease expired for real, parks the charge as uncertain, and the
reconcile hook (or, without a hook, the test acting as operator after looking at
the provider) decides. Whatever the timing, the provider holds exactly one
charge per run and the run completes. An idempotent activity killed the same
way is simply run again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import drop_schema, unique_schema

from . import _uncertain_kill_app as app

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.chaos._uncertain_kill_app"
LEASE = "0.5"
POINTS = ["before", "mid", "after_write"]
REPEATS = 4  # 3 points x 2 modes x 4 = 24 kills of a non-idempotent call


async def _worker(dsn: str, schema: str, kill_at: str) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "AZYNC_DSN": dsn,
        "AZYNC_SCHEMA": schema,
        "KILL_AT": kill_at,
        "PYTHONPATH": str(ROOT),
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "azync_flow.cli",
        "worker",
        APP,
        "--lease",
        LEASE,
        "--log-level",
        "ERROR",
        env=env,
        cwd=str(ROOT),
    )


async def _stop(proc: asyncio.subprocess.Process) -> int:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(proc.wait(), 15)


async def _operator(store: PostgresStore, handle: Any) -> str:
    """Without a hook: wait for the charge to turn uncertain, check the provider, decide."""
    client = Client(store)
    while True:
        ops = await client.list_uncertain(workflow_id=handle.id)
        if ops:
            break
        state = (await handle.describe()).state
        if state not in (WorkflowState.RUNNING, WorkflowState.SUSPENDED):
            raise AssertionError(f"run ended ({state}) before the charge turned uncertain")
        await asyncio.sleep(0.05)
    (op,) = ops
    charged = await store.pool.fetchval(
        "SELECT order_id FROM provider_charges WHERE execution_key = $1", op.execution_key
    )
    if charged is None:
        await client.resolve_uncertain(op, "retry", note="no charge at provider", decided_by="t")
        return "retry"
    await client.resolve_uncertain(
        op, "complete", result=f"ch-{charged}", note="provider shows it", decided_by="t"
    )
    return "complete"


async def _iteration(dsn: str, kill_at: str, reconcile: bool, n: int) -> dict[str, Any]:
    schema = unique_schema("kill")
    store = await open_store(dsn, Config(schema=schema, min_pool_size=1, max_pool_size=3))
    try:
        await store.pool.execute(app.PROVIDER_DDL)
        order = app.Order(f"o{n}", 10 + n, reconcile=reconcile)
        handle = await Client(store).start(app.pay, order)
        first = await _worker(dsn, schema, kill_at)
        assert await asyncio.wait_for(first.wait(), 20) == -signal.SIGKILL, kill_at
        second = await _worker(dsn, schema, "")
        try:
            decided = "hook"
            if not reconcile:
                decided = await asyncio.wait_for(_operator(store, handle), 20)
            result = await handle.result(timeout=20)
        finally:
            assert await _stop(second) == 0  # graceful shutdown on SIGTERM
        charges = await store.pool.fetch("SELECT * FROM provider_charges")
        calls = await store.pool.fetch(
            "SELECT execution_key, attempt FROM provider_calls"
            " WHERE execution_key NOT LIKE 'reserve:%' ORDER BY id"
        )
        op = await store.pool.fetchrow(
            "SELECT * FROM azync_jobs WHERE run_id = $1 AND kind LIKE '$op:charge%'", handle.id
        )
        types = [type(e.event).__name__ for e in await handle.history()]
        return {
            "result": result,
            "order": order,
            "charges": [dict(r) for r in charges],
            "calls": [r["attempt"] for r in calls],
            "op": dict(op),
            "types": types,
            "decided": decided,
        }
    finally:
        await store.close()
        await drop_schema(dsn, schema)


def _check(kill_at: str, reconcile: bool, got: dict[str, Any]) -> None:
    order = got["order"]
    assert got["result"] == f"res-{order.id}+ch-{order.id}"
    assert len(got["charges"]) == 1, got  # never charged twice, never lost
    assert got["charges"][0]["amount"] == order.amount
    op = got["op"]
    assert op["state"] == "succeeded"
    if kill_at == "after_write":  # charged: decided complete, never re-run
        assert got["calls"] == [1], got
        assert op["decision"] == "complete"
        assert op["attempt"] == 1
    else:  # nothing charged: decided retry, the second attempt charges once
        assert got["calls"] == [1, 2], got
        assert op["decision"] == "retry"
        assert op["attempt"] == 2
    expected_by = "reconcile hook charge" if reconcile else "t"
    assert op["decision_by"] == expected_by
    assert got["types"].count("OperationUncertain") == 1
    assert got["types"].count("OperationResolved") == 1
    assert got["types"].count("ActivityCompleted") == 2  # reserve + charge, once each
    assert got["types"][-1] == "WorkflowCompleted"


@pytest.mark.timeout(300)  # 24 kills, 48 worker processes: slow on a loaded machine
async def test_a_non_idempotent_charge_is_never_executed_twice_under_any_kill_timing(
    pg_dsn: str,
) -> None:
    cases = [(p, r, i) for i in range(REPEATS) for p in POINTS for r in (True, False)]
    gate = asyncio.Semaphore(4)

    async def one(n: int, case: tuple[str, bool, int]) -> None:
        kill_at, reconcile, _ = case
        async with gate:
            got = await _iteration(pg_dsn, kill_at, reconcile, n)
        _check(kill_at, reconcile, got)

    started = time.monotonic()
    await asyncio.gather(*(one(n, c) for n, c in enumerate(cases)))
    assert len(cases) >= 20
    print(f"{len(cases)} kill iterations in {time.monotonic() - started:.1f}s")


async def test_an_idempotent_activity_killed_mid_call_is_simply_run_again(pg_dsn: str) -> None:
    schema = unique_schema("kill")
    store = await open_store(dsn := pg_dsn, Config(schema=schema, min_pool_size=1))
    try:
        await store.pool.execute(app.PROVIDER_DDL)
        handle = await Client(store).start(app.pay, app.Order(f"i{uuid.uuid4().hex[:4]}", 3))
        first = await _worker(dsn, schema, "reserve")
        assert await asyncio.wait_for(first.wait(), 20) == -signal.SIGKILL
        second = await _worker(dsn, schema, "")
        try:
            assert (await handle.result(timeout=20)).startswith("res-")
        finally:
            assert await _stop(second) == 0
        reserves = await store.pool.fetch(
            "SELECT attempt FROM provider_calls WHERE execution_key LIKE 'reserve:%' ORDER BY id"
        )
        # re-run after the reap, as attempt 2 (a lease expiry counts toward max_reaps)
        assert [r["attempt"] for r in reserves] == [1, 2]
        assert await Client(store).list_uncertain() == []
        types = [type(e.event).__name__ for e in await handle.history()]
        assert "OperationUncertain" not in types
    finally:
        await store.close()
        await drop_schema(dsn, schema)
