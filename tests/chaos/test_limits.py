"""Limits under real worker processes (real PostgreSQL, real SIGKILLs): a
concurrency limit is never exceeded across four workers while one is killed,
keys are served round robin, a rate limit never admits more than its
limit in any window of its period, and a task queue's limit holds for two
activity kinds on it together. Every run records its own interval (the
database clock) in ``limit_runs``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore

from .test_workflow_kill import ROOT

APP = Path(__file__).with_name("_limits_app.py")
WORKFLOWS = 6
ITEMS = 8


async def _table(store: PostgresStore) -> None:
    await store.pool.execute(
        "CREATE TABLE limit_runs (id bigserial PRIMARY KEY, what text NOT NULL, key text NOT NULL,"
        " pid int NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz)"
    )


async def _spawn(
    pg_dsn: str, schema: str, mode: str, expected: int, **env: str
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        mode,
        str(expected),
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


async def _until(store: PostgresStore, sql: str, within: float = 90.0) -> None:
    async with asyncio.timeout(within):
        while not await store.pool.fetchval(sql):  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant (an end before a start at a tie)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    open_now = most = 0
    for _, step in points:
        open_now += step
        most = max(most, open_now)
    return most


async def test_a_concurrency_limit_holds_across_four_workers_and_a_sigkill(
    store: PostgresStore, schema: str, pg_dsn: str
) -> None:
    await _table(store)
    client = Client(store)
    handles = []
    for w in range(WORKFLOWS):
        items = [f"w{w}-i{i}" for i in range(ITEMS)]
        handles.append(await client.start("fan_out", items))
    procs = [await _spawn(pg_dsn, schema, "activities", WORKFLOWS) for _ in range(4)]
    victim = procs[0]
    # kill a worker while it runs an activity (its slot is held by a dead process)
    await _until(
        store,
        f"SELECT count(*) > 0 FROM limit_runs WHERE pid = {victim.pid} AND ended_at IS NULL",
    )
    victim.send_signal(signal.SIGKILL)
    assert await victim.wait() == -signal.SIGKILL
    killed_at = await store.pool.fetchval("SELECT clock_timestamp()")
    procs.append(await _spawn(pg_dsn, schema, "activities", WORKFLOWS))
    for p in procs[1:]:
        assert await asyncio.wait_for(p.wait(), 120) == 0
    for w, h in enumerate(handles):
        assert await h.result(timeout=10) == [f"w{w}-i{i}" for i in range(ITEMS)]
    rows = await store.pool.fetch("SELECT key, pid, started_at, ended_at FROM limit_runs")
    intervals = [(r["started_at"], r["ended_at"] or killed_at) for r in rows]
    assert all(r["ended_at"] is not None or r["pid"] == victim.pid for r in rows)
    assert _max_overlap(intervals) <= 3
    assert _max_overlap(intervals) == 3  # the limit was reached: the workers competed
    done = Counter(r["key"] for r in rows if r["ended_at"] is not None)
    assert set(done) == {f"w{w}-i{i}" for w in range(WORKFLOWS) for i in range(ITEMS)}
    # only an item whose attempt was cut by the kill may have run twice
    cut = {r["key"] for r in rows if r["pid"] == victim.pid}
    assert all(n == 1 or k in cut for k, n in done.items())
    assert [u.in_flight for u in await store.list_limits()] == [0]


async def test_backlogged_keys_share_the_first_admissions_equally(
    store: PostgresStore, schema: str, pg_dsn: str
) -> None:
    """Ten keys, every job of key 0 enqueued first, then key 1...: two workers
    of two slots (four in flight at most) against a per-key limit of 2."""
    await _table(store)
    client = Client(store)
    keys = [f"k{k}" for k in range(10)]
    for key in keys:
        for _ in range(15):
            await client.enqueue("fair", {"key": key}, limit_key=key)
    procs = [
        await _spawn(pg_dsn, schema, "fair", 150, CONCURRENCY="2", HOLD="0.05") for _ in range(2)
    ]
    for p in procs:
        assert await asyncio.wait_for(p.wait(), 180) == 0
    first = await store.pool.fetch(
        "SELECT limit_key FROM azync_jobs WHERE kind = 'fair' ORDER BY started_at, id LIMIT 100"
    )
    share = Counter(r["limit_key"] for r in first)
    assert set(share) == set(keys)
    assert all(8 <= n <= 12 for n in share.values()), share  # within 20% of 10


async def test_a_rate_limit_never_admits_more_than_its_limit_in_any_period(
    store: PostgresStore, schema: str, pg_dsn: str
) -> None:
    await _table(store)
    client = Client(store)
    for i in range(30):
        await client.enqueue("rated", {"key": str(i)})
    procs = [await _spawn(pg_dsn, schema, "rate", 30, CONCURRENCY="4", HOLD="0") for _ in range(3)]
    for p in procs:
        assert await asyncio.wait_for(p.wait(), 180) == 0
    starts = [
        r["started_at"]
        for r in await store.pool.fetch(
            "SELECT started_at FROM azync_jobs WHERE kind = 'rated' ORDER BY started_at"
        )
    ]
    assert len(starts) == 30
    period = timedelta(seconds=1)
    worst = max(sum(1 for t in starts if s <= t <= s + period) for s in starts)
    assert worst <= 5
    assert worst == 5  # the workers raced for every window


async def test_a_task_queue_limit_holds_for_two_activity_kinds_across_workers_and_a_sigkill(
    store: PostgresStore, schema: str, pg_dsn: str
) -> None:
    """``render`` and ``train`` have no limits of their own; the task queue
    ``gpu`` they run on allows 3 in flight, whatever the kind."""
    await _table(store)
    client = Client(store)
    handles = []
    for w in range(WORKFLOWS):
        items = [f"w{w}-i{i}" for i in range(ITEMS // 2)]
        handles.append((items, await client.start("gpu_work", items)))
    procs = [await _spawn(pg_dsn, schema, "gpu", WORKFLOWS) for _ in range(4)]
    victim = procs[0]
    await _until(
        store,
        f"SELECT count(*) > 0 FROM limit_runs WHERE pid = {victim.pid} AND ended_at IS NULL",
    )
    victim.send_signal(signal.SIGKILL)
    assert await victim.wait() == -signal.SIGKILL
    killed_at = await store.pool.fetchval("SELECT clock_timestamp()")
    procs.append(await _spawn(pg_dsn, schema, "gpu", WORKFLOWS))
    for p in procs[1:]:
        assert await asyncio.wait_for(p.wait(), 120) == 0
    for items, h in handles:
        assert await h.result(timeout=10) == [f"r-{i}" for i in items] + [f"t-{i}" for i in items]
    rows = await store.pool.fetch("SELECT what, key, pid, started_at, ended_at FROM limit_runs")
    intervals = [(r["started_at"], r["ended_at"] or killed_at) for r in rows]
    assert _max_overlap(intervals) <= 3
    assert _max_overlap(intervals) == 3  # the limit was reached: the workers competed
    kinds_at_once = {
        frozenset(r["what"] for r in rows if r["started_at"] <= s < (r["ended_at"] or killed_at))
        for s, _ in intervals
    }
    assert frozenset({"render", "train"}) in kinds_at_once  # both kinds shared the budget
    done = {(r["what"], r["key"]) for r in rows if r["ended_at"] is not None}
    assert done == {(w, k) for items, _ in handles for k in items for w in ("render", "train")}
    (usage,) = await store.list_limits()
    assert (usage.task_queues, usage.in_flight, usage.waiting) == (["gpu"], 0, 0)
