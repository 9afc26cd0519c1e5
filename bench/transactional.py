"""Commits per step: a transactional step (``@transaction``) against a plain activity.

    python bench/transactional.py [-n 300] [--rounds 3] [--dsn ...]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else 127.0.0.1:5432/test. The bench creates a
database of its own on that server (``azb_<pid>_txn``, dropped at the end), so
``pg_stat_database.xact_commit`` of that database counts only this run's
commits. One in-process :class:`~azync_flow.worker.Worker` (sticky cache, local
dispatch, folded completion) runs N workflows of 3 sequential steps, started at
once, per variant:

* ``plain activity, no SQL``: the floor: each step's result is committed with
  the next pass (one commit per step);
* ``plain activity + own INSERT``: the step inserts its row into the
  application's table on its own connection (autocommit), the usual way to
  write from an activity: at-least-once, one more commit per step;
* ``@transaction + INSERT``: the step's INSERT and its result (with the next
  pass) in one transaction: exactly once, no extra commit.

Rows: commits per workflow (median over rounds; every committed transaction
of the database, read-only statements in autocommit included, minus the
worker's idle background rate measured just before over the same span, minus
the N starts), workflows/s, and the rows found in the application table (must
be 3N). Variants run interleaved per round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow import activity, attach_workflows, transaction, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

LOCAL = "postgresql://postgres@127.0.0.1:5432/test"
#: The application's pool for the ``plain activity + own INSERT`` variant.
APP_POOL: list[asyncpg.Pool] = []


@activity(name="bench_noop")
async def noop(order: int, step: int) -> int:
    return step


@activity(name="bench_insert")
async def insert(order: int, step: int) -> int:
    await APP_POOL[0].execute("INSERT INTO bookings VALUES ($1, $2)", order, step)
    return step


@transaction(name="bench_book")
async def book(conn: asyncpg.Connection, order: int, step: int) -> int:
    await conn.execute("INSERT INTO bookings VALUES ($1, $2)", order, step)
    return step


@workflow(name="bench_noop3")
async def noop3(ctx: WorkflowContext, order: int) -> int:
    return sum([await noop(order, s) for s in (1, 2, 3)])


@workflow(name="bench_insert3")
async def insert3(ctx: WorkflowContext, order: int) -> int:
    return sum([await insert(order, s) for s in (1, 2, 3)])


@workflow(name="bench_book3")
async def book3(ctx: WorkflowContext, order: int) -> int:
    return sum([await book(order, s) for s in (1, 2, 3)])


VARIANTS: dict[str, Any] = {
    "plain activity, no SQL": noop3,
    "plain activity + own INSERT": insert3,
    "@transaction + INSERT": book3,
}


async def commits(admin: asyncpg.Connection, db: str) -> int:
    # pg_stat_database is fed by each backend at most once a second (PG 15)
    await asyncio.sleep(1.2)
    n: int = await admin.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db)
    return n


async def run_variant(
    dsn: str, admin: asyncpg.Connection, db: str, wf: Any, n: int
) -> tuple[float, float, int]:
    schema = f"s_{uuid.uuid4().hex[:8]}"
    store = await open_store(dsn, Config(schema=schema))
    app = await asyncpg.create_pool(dsn, min_size=2, max_size=10)
    APP_POOL[:] = [app]
    await app.execute("DROP TABLE IF EXISTS bookings")
    await app.execute("CREATE TABLE bookings (order_no int, step int)")
    worker = Worker(store, poll_interval=timedelta(seconds=1), handle_signals=False)
    attach_workflows(worker, list(VARIANTS.values()), [noop, insert, book])
    client = Client(store)
    try:
        async with worker:
            await (await client.start(wf, 0)).result(timeout=60)  # warm-up
            idle0, i0 = await commits(admin, db), time.perf_counter()
            await asyncio.sleep(3)  # the worker idle: its background commits per second
            idle1, i1 = await commits(admin, db), time.perf_counter()
            background = (idle1 - idle0) / (i1 - i0)
            before = idle1
            t0 = time.perf_counter()
            handles = [await client.start(wf, i) for i in range(1, n + 1)]
            for h in handles:
                await h.result(timeout=120)
            elapsed = time.perf_counter() - t0
            after = await commits(admin, db)
            spent = time.perf_counter() - t0
        rows = int(await app.fetchval("SELECT count(*) FROM bookings WHERE order_no > 0"))
    finally:
        await app.close()
        await store.close()
    # minus the idle background over the same time; the starts are N commits of
    # the client, not the steps' cost
    return (after - before - background * spent - n) / n, n / elapsed, rows


async def main(args: argparse.Namespace) -> None:
    base = args.dsn or os.environ.get("AZYNC_DSN") or LOCAL
    db = f"azb_{os.getpid()}_txn"
    admin = await asyncpg.connect(base)
    await admin.execute(f"CREATE DATABASE {db}")
    dsn = base.rsplit("/", 1)[0] + f"/{db}"
    results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in VARIANTS}
    try:
        for _ in range(args.rounds):
            for name, wf in VARIANTS.items():
                results[name].append(await run_variant(dsn, admin, db, wf, args.n))
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        await admin.close()
    print(f"N={args.n} workflows x 3 steps, {args.rounds} rounds (medians)")
    print(f"{'variant':32} {'commits/workflow':>17} {'workflows/s':>12} {'rows':>6}")
    for name, runs in results.items():
        per_wf, rate, rows = (statistics.median(x[i] for x in runs) for i in range(3))
        print(f"{name:32} {per_wf:17.2f} {rate:12.0f} {int(rows):6d}")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("-n", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dsn", default=None)
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
