"""Queue throughput: the full Worker against a bare asyncpg SKIP LOCKED loop.

    python bench/queue_drain.py [--jobs 20000] [--dsn postgresql://...]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else 127.0.0.1:5432/test when it answers,
else an embedded server. Every drain gets a fresh schema with the real
migrations, filled with N due no-op jobs in one INSERT (``store.enqueue``'s
own rate is measured separately at the end), and is drained by:

* ``bare 4x10 ack-each``: 4 coroutines, each on its own connection, leasing 10
  jobs per statement (``FOR UPDATE SKIP LOCKED``) and acking each job with its
  own UPDATE — the reference loop;
* ``bare 4x10 ack-batch``: the same, acking the 10 with one UPDATE (shown so
  the worker's ack batching is compared with its bare equivalent too);
* ``Worker x1`` / ``Worker x4``: 1 or 4 :class:`~azync_flow.worker.Worker`
  coroutines (concurrency 10, lease batches of 10) with a no-op handler, run
  to idle — decoding, retry bookkeeping, heartbeats, ack batching, wake-ups
  and leader maintenance included.

Scenarios run interleaved for ``--rounds`` rounds (default 3) and the table
shows the median, so a noisy neighbour skews every scenario alike. The ratio
column divides by the ``bare 4x10 ack-each`` median.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow.store import Config, EnqueueParams
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.worker import Worker

LOCAL = "postgresql://postgres@127.0.0.1:5432/test"
KIND = "noop"
REFERENCE = "bare 4x10 ack-each"

LEASE_SQL = """
UPDATE azync_jobs j
SET state = 'active', attempt = j.attempt + 1, lease_token = gen_random_uuid(),
    lease_until = now() + interval '30 seconds', started_at = now(), updated_at = now()
FROM (SELECT id FROM azync_jobs
      WHERE state = 'pending' AND source = 'queue' AND kind = $1 AND run_at <= now()
      ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) p
WHERE j.id = p.id
RETURNING j.id, j.lease_token, j.payload
"""
ACK_SQL = """
UPDATE azync_jobs SET state = 'succeeded', completed_at = now(), lease_until = NULL,
    updated_at = now()
WHERE id = $1 AND lease_token = $2 AND state = 'active'
"""
ACK_MANY_SQL = """
UPDATE azync_jobs j SET state = 'succeeded', completed_at = now(), lease_until = NULL,
    updated_at = now()
FROM unnest($1::uuid[], $2::uuid[]) AS s(id, token)
WHERE j.id = s.id AND j.lease_token = s.token AND j.state = 'active'
"""


async def pick_dsn(explicit: str | None) -> tuple[str, str]:
    if explicit:
        return explicit, "--dsn"
    if env := os.environ.get("AZYNC_DSN"):
        return env, "$AZYNC_DSN"
    try:
        conn = await asyncpg.connect(LOCAL, timeout=2)
        await conn.close()
        return LOCAL, "local 127.0.0.1:5432/test"
    except (OSError, asyncpg.PostgresError, TimeoutError):
        from azync_flow.embedded import start_embedded

        return start_embedded(), "embedded PostgreSQL"


FILL_SQL = """
INSERT INTO azync_jobs (id, source, kind, state, payload, run_at, enqueued_at, updated_at)
SELECT gen_random_uuid(), 'queue', $1, 'pending', '{}'::bytea, now(), now(), now()
FROM generate_series(1, $2)
"""


async def fill(store: PostgresStore, n: int) -> None:
    """Insert n due no-op jobs in one statement (the rows ``enqueue`` would write)."""
    await store.pool.execute(FILL_SQL, KIND, n)
    await store.pool.execute("VACUUM ANALYZE azync_jobs")


async def enqueue_rate(dsn: str, n: int) -> float:
    """Jobs/s of ``store.enqueue`` with 8 concurrent producers (NOTIFY and stats included)."""
    schema = unique_schema("bench")
    store = await open_store(dsn, Config(schema=schema, max_pool_size=24))
    try:
        started = time.perf_counter()

        async def produce(count: int) -> None:
            for _ in range(count):
                await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind=KIND, payload=b"{}"))

        per, extra = divmod(n, 8)
        await asyncio.gather(*(produce(per + (i < extra)) for i in range(8)))
        return n / (time.perf_counter() - started)
    finally:
        await store.close()
        await drop_schema(dsn, schema)


async def bare(store: PostgresStore, coroutines: int, batch: int, ack_each: bool) -> None:
    async def one() -> None:
        conn = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema})
        try:
            lease = await conn.prepare(LEASE_SQL)
            while rows := await lease.fetch(KIND, batch):
                if ack_each:
                    for r in rows:
                        await conn.execute(ACK_SQL, r["id"], r["lease_token"])
                else:
                    await conn.execute(
                        ACK_MANY_SQL, [r["id"] for r in rows], [r["lease_token"] for r in rows]
                    )
        finally:
            await conn.close()

    await asyncio.gather(*(one() for _ in range(coroutines)))


async def workers(store: PostgresStore, count: int) -> None:
    def make() -> Worker:
        w = Worker(store, concurrency=10, batch_size=10, handle_signals=False)

        @w.register(KIND)
        async def noop(payload: Any) -> None:
            return None

        return w

    await asyncio.gather(*(make().run_until_idle() for _ in range(count)))


async def scenario(dsn: str, n: int, drain: Callable[[PostgresStore], Awaitable[None]]) -> float:
    """Fill a fresh schema with n jobs, drain it, return jobs/s."""
    schema = unique_schema("bench")
    store = await open_store(dsn, Config(schema=schema, max_pool_size=24))
    try:
        await fill(store, n)
        started = time.perf_counter()
        await drain(store)
        seconds = time.perf_counter() - started
        done = await store.pool.fetchval(
            "SELECT count(*) FROM azync_jobs WHERE state = 'succeeded'"
        )
        if done != n:
            raise SystemExit(f"only {done} of {n} jobs succeeded")
        return n / seconds
    finally:
        await store.close()
        await drop_schema(dsn, schema)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs; median shown")
    parser.add_argument("--only", default="", help="comma list of scenario name parts")
    args = parser.parse_args()
    dsn, where = await pick_dsn(args.dsn)
    print(f"PostgreSQL: {where}; {args.jobs} no-op jobs per drain; {os.cpu_count()} CPUs")
    plan: list[tuple[str, Callable[[PostgresStore], Awaitable[None]]]] = [
        (REFERENCE, lambda s: bare(s, 4, 10, ack_each=True)),
        ("bare 4x10 ack-batch", lambda s: bare(s, 4, 10, ack_each=False)),
        ("Worker x1 (conc 10)", lambda s: workers(s, 1)),
        ("Worker x4 (conc 10)", lambda s: workers(s, 4)),
    ]
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    plan = [(name, d) for name, d in plan if not only or any(o in name for o in only)]
    rates: dict[str, list[float]] = {name: [] for name, _ in plan}
    for rnd in range(1, args.rounds + 1):
        for name, drain in plan:
            rate = await scenario(dsn, args.jobs, drain)
            rates[name].append(rate)
            print(f"  round {rnd}: {name:<22} {rate:>9,.0f} jobs/s", flush=True)
    enq = await enqueue_rate(dsn, min(args.jobs, 5_000))
    ref = statistics.median(rates[REFERENCE]) if REFERENCE in rates else None
    print()
    head = ("scenario", "jobs/s (median)", "min", "max", "vs bare")
    print(f"| {head[0]:<22} | {head[1]:>15} | {head[2]:>6} | {head[3]:>6} | {head[4]:>7} |")
    print(f"|{'-' * 24}|{'-' * 16}:|{'-' * 7}:|{'-' * 7}:|{'-' * 8}:|")
    for name, got in rates.items():
        med = statistics.median(got)
        ratio = f"{med / ref:.2f}x" if ref else "n/a"
        print(
            f"| {name:<22} | {med:>15,.0f} | {min(got):>6,.0f} | {max(got):>6,.0f} | {ratio:>7} |"
        )
    print(f"\nstore.enqueue, 8 producers: {enq:,.0f} jobs/s")


if __name__ == "__main__":
    asyncio.run(main())
