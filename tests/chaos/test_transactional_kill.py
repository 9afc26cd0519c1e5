"""Transactional steps and subscribers under real SIGKILLs.

Workflows: 200 workflows of three ``@transaction`` steps each, run by three
worker processes that kill themselves at every point of a step (before its
SQL, after its SQL inside the transaction, before the outcome is written,
after the commit) and are restarted. Afterwards the application table holds
exactly one row per completed step and none for a rolled-back one, and each
step's result is in history exactly once.

Subscribers: a transactional subscriber writing a projection row per event,
three processes killed at every point of a delivery while events keep being
published: exactly one projection row per event."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore

from . import _transactional_kill_app as app

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_transactional_kill_app.py")
PROJECTOR_APP = Path(__file__).with_name("_transactional_projector_app.py")
ORDERS = 200
WORKERS = 3
#: Each point twice, at different step counts: 8 kills in all.
KILLS = [
    (point, after)
    for after in (2, 6)
    for point in ("before_sql", "after_sql", "before_commit", "after_commit")
]


class Fleet:
    """Worker processes of the app, restarted after each kill."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        table: str,
        log_dir: Path,
        app: Path = APP,
        kills: list[tuple[str, int]] = KILLS,
    ) -> None:
        self.dsn, self.schema, self.table, self.log_dir = dsn, schema, table, log_dir
        self.app = app
        self.procs: list[asyncio.subprocess.Process] = []
        self.kills = list(kills)
        self.killed: list[str] = []
        self.modes: dict[int, str] = {}
        self.started = 0

    async def start(self) -> None:
        point, after = self.kills.pop(0) if self.kills else ("", 0)
        self.started += 1
        log = (self.log_dir / f"worker-{self.started}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(self.app),
            self.dsn,
            self.schema,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "TABLE": self.table,
                "KILL_POINT": point,
                "KILL_AFTER": str(after),
            },
            stdin=asyncio.subprocess.PIPE,  # closed when this process ends: the app exits
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"ready", (self.log_dir / f"worker-{self.started}.log").read_text()
        self.modes[proc.pid] = point
        self.procs.append(proc)

    async def replace_the_dead(self) -> None:
        for proc in list(self.procs):
            if proc.returncode is None:
                continue
            assert proc.returncode == -signal.SIGKILL, f"worker exited with {proc.returncode}"
            self.killed.append(self.modes[proc.pid])
            self.procs.remove(proc)
            await self.start()

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


@pytest.fixture
async def table(store: PostgresStore) -> AsyncIterator[str]:
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.bookings (order_no int, step int)")
    yield f"{name}.bookings"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.mark.timeout(600)  # 8 kills, 11 worker processes, 600 steps: slow on a loaded machine
async def test_sigkill_at_every_point_of_a_transactional_step_leaves_both_or_neither(
    store: PostgresStore, schema: str, pg_dsn: str, table: str, tmp_path: Path
) -> None:
    client = Client(store)
    handles = [await client.start(app.txn_order, i) for i in range(1, ORDERS + 1)]
    fleet = Fleet(pg_dsn, schema, table, tmp_path)
    try:
        for _ in range(WORKERS):
            await fleet.start()
        deadline = time.monotonic() + 500
        while await store.pool.fetchval(
            "SELECT count(*) FROM azync_workflow_executions WHERE state IN ('running', 'suspended')"
        ):
            assert time.monotonic() < deadline, "the runs did not finish"
            await fleet.replace_the_dead()
            await asyncio.sleep(0.2)
        await fleet.replace_the_dead()
    finally:
        await fleet.stop()
    # every kill point was reached (a process that never reached its count is not a kill)
    assert sorted(set(fleet.killed)) == ["after_commit", "after_sql", "before_commit", "before_sql"]

    refused = {i for i in range(1, ORDERS + 1) if i % 20 == 0}
    for i, handle in enumerate(handles, start=1):
        expected = [f"{i}/1", f"{i}/2", "refused" if i in refused else f"{i}/3"]
        assert await handle.result(timeout=5) == expected
    rows = await store.pool.fetch(
        f"SELECT order_no, step, count(*) AS n FROM {table} GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert [r for r in rows if r["n"] != 1] == []  # never twice
    booked = {(r["order_no"], r["step"]) for r in rows}
    assert booked == {
        (i, s) for i in range(1, ORDERS + 1) for s in (1, 2, 3) if not (s == 3 and i in refused)
    }
    # each step's outcome recorded once in its run's history
    outcomes = await store.pool.fetch(
        "SELECT workflow_id, type, count(*) AS n FROM azync_workflow_history"
        " WHERE type IN ('ActivityCompleted', 'ActivityFailed') GROUP BY 1, 2"
    )
    per_run = {(r["workflow_id"], r["type"]): r["n"] for r in outcomes}
    for i, handle in enumerate(handles, start=1):
        if i in refused:
            assert per_run[(handle.id, "ActivityCompleted")] == 2
            assert per_run[(handle.id, "ActivityFailed")] == 1
        else:
            assert per_run[(handle.id, "ActivityCompleted")] == 3
            assert (handle.id, "ActivityFailed") not in per_run


#: The subscriber's kill points, each twice: 6 kills in all.
PROJECTOR_KILLS = [
    (point, after) for after in (3, 9) for point in ("before_sql", "after_sql", "after_commit")
]
EVENTS = 600


@pytest.mark.timeout(600)  # 6 kills, 9 worker processes, 600 events: slow on a loaded machine
async def test_sigkill_at_every_point_of_a_transactional_delivery_projects_each_event_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    table = f"{name}.projection"
    await store.pool.execute(f"CREATE TABLE {table} (event_id uuid, n int)")
    client = Client(store)
    fleet = Fleet(pg_dsn, schema, table, tmp_path, PROJECTOR_APP, PROJECTOR_KILLS)
    published: list[uuid.UUID] = []
    try:
        for _ in range(WORKERS):
            await fleet.start()  # each registers the subscriber before "ready"
        deadline = time.monotonic() + 500
        for n in range(EVENTS):  # events keep flowing while processes die
            published.append(await client.publish("order.placed", {"n": n}))
            if n % 20 == 19:
                await fleet.replace_the_dead()
        while await store.pool.fetchval(
            "SELECT count(*) FROM azync_jobs WHERE kind = 'projector' AND state <> 'succeeded'"
        ):
            assert time.monotonic() < deadline, "the deliveries did not finish"
            await fleet.replace_the_dead()
            await asyncio.sleep(0.2)
        await fleet.replace_the_dead()
    finally:
        await fleet.stop()
        rows = await store.pool.fetch(f"SELECT event_id, count(*) AS n FROM {table} GROUP BY 1")
        await store.pool.execute(f"DROP SCHEMA {name} CASCADE")
    assert sorted(set(fleet.killed)) == ["after_commit", "after_sql", "before_sql"]
    assert [r for r in rows if r["n"] != 1] == []  # never twice
    assert {r["event_id"] for r in rows} == set(published)  # never lost
