"""The daily counters stay exact under concurrent writer processes and a SIGKILL.

Four processes write at once: one enqueues, leases and settles queue jobs
(ack, skip, dead, retry), one publishes events (half in its own transactions,
some rolled back), one starts workflow executions, and one real worker runs
those workflows and the event subscribers and folds the counter deltas as the
stats leader. The queue writer is SIGKILLed mid-run. Afterwards the counters
read through the store's verbs equal the counts derived from the job rows
themselves, before and after a final fold.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_counters_writer_app.py")
# The queue writer, SIGKILLed 3 s after it is ready, starts last so that it is
# still writing then however long the others took to start.
MODES = ("worker", "events", "starts", "queue")


async def spawn(pg_dsn: str, schema: str, mode: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        mode,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SECONDS_": "10"},
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        assert (await proc.stdout.readline()).strip() == b"ready"
    return proc


async def derived(store: PostgresStore) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """(source, kind) -> (enqueued, processed, failed, reaped) from the job rows."""
    rows = await store.pool.fetch(
        "SELECT source, kind, count(*) AS enq,"
        " count(*) FILTER (WHERE state IN ('succeeded', 'skipped')) AS proc,"
        " count(*) FILTER (WHERE state = 'dead') AS failed, sum(reap_count) AS reaped"
        " FROM azync_jobs GROUP BY source, kind"
    )
    return {(r["source"], r["kind"]): (r["enq"], r["proc"], r["failed"], r["reaped"]) for r in rows}


async def counted(store: PostgresStore) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """The same, read through the store's stats verbs."""
    out = {}
    for source in Source:
        for kind in await store.list_kinds(source):
            _, daily = await store.stats(source, kind)
            out[(source.value, kind)] = (
                sum(d.enqueued for d in daily),
                sum(d.processed for d in daily),
                sum(d.failed for d in daily),
                sum(d.reaped for d in daily),
            )
    return out


async def gone(store: PostgresStore, app: str) -> bool:
    n = await store.pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app
    )
    return n == 0


async def test_counters_equal_the_rows_after_concurrent_writers_and_a_sigkill(
    store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    procs = {mode: await spawn(pg_dsn, schema, mode) for mode in MODES}
    await asyncio.sleep(3)
    procs["queue"].send_signal(signal.SIGKILL)
    async with asyncio.timeout(60):
        codes = {mode: await p.wait() for mode, p in procs.items()}
        while not await gone(store, f"{schema}-queue"):  # noqa: ASYNC110 - server state
            await asyncio.sleep(0.05)  # its open transaction is rolled back
    assert codes == {"worker": 0, "queue": -signal.SIGKILL, "events": 0, "starts": 0}

    rows = await derived(store)
    # every kind of writer did count, and the worker ran workflows and deliveries
    kinds = {k for k in rows}
    assert {("queue", "counted_q0"), ("event", "counted_sub_a"), ("workflow", "$wft")} <= kinds
    assert rows[("workflow", "$op:counted_act@1")][1] > 0
    assert rows[("event", "counted_sub_b")][1] > 0
    assert rows[("queue", "counted_q1")][2] > 0
    assert await counted(store) == rows  # whatever the worker folded meanwhile
    while await store.fold_stats(500):
        pass
    assert await counted(store) == rows
