"""Queue throughput: the full Worker against a bare asyncpg SKIP LOCKED loop.

    python bench/queue_drain.py [--jobs 20000] [--batch 1000] [--only enqueue] [--dsn ...]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else 127.0.0.1:5432/test when it answers,
else an embedded server. Every drain gets a fresh schema with the real
migrations, filled with N due no-op jobs in one INSERT, and is drained by:

* ``bare 4x10 ack-each``: 4 coroutines, each on its own connection, leasing 10
  jobs per statement (``FOR UPDATE SKIP LOCKED``) and acking each job with its
  own UPDATE — the reference loop;
* ``bare 4x10 ack-batch``: the same, acking the 10 with one UPDATE (shown so
  the worker's ack batching is compared with its bare equivalent too);
* ``Worker x1`` / ``Worker x4``: 1 or 4 :class:`~azync_flow.worker.Worker`
  coroutines (concurrency 10, lease batches of 10) with a no-op handler, run
  to idle — decoding, retry bookkeeping, heartbeats, ack batching, wake-ups
  and leader maintenance included.

A second table measures producing: ``--jobs`` jobs written by one producer
into a fresh schema, in batches of ``--batch`` (default 1,000) by

* ``bare INSERT unnest``: one prepared ``INSERT ... SELECT unnest(...)`` of the
  same rows per batch (no dedupe, stats or NOTIFY) — the floor;
* ``store.enqueue_many``: the store verb (keys, TTL windows, stats, NOTIFY);
* ``Client.enqueue_many``: the client verb (payload encoding, trace meta too);
* ``store.enqueue x1`` / ``x8``: one job per call from 1 or 8 concurrent
  producers (``--single-jobs`` jobs, default 2,000: it is slow).

Scenarios run interleaved for ``--rounds`` rounds (default 3) and the tables
show the median, so a noisy neighbour skews every scenario alike. The ratio
columns divide by the ``bare 4x10 ack-each`` and ``ack-batch`` medians
(drains), or by the ``bare INSERT unnest`` and ``store.enqueue x8`` medians
(producers).
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

from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import EnqueueParams
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.worker import Worker

LOCAL = "postgresql://postgres@127.0.0.1:5432/test"
KIND = "noop"
REFERENCE = "bare 4x10 ack-each"
ACK_BATCH = "bare 4x10 ack-batch"
BARE_PRODUCER = "bare INSERT unnest"

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


BARE_INSERT_SQL = """
INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, enqueued_at, updated_at)
SELECT u.id, 'queue', $2, 'pending', u.payload, '{}'::jsonb, now(), now(), now()
FROM unnest($1::uuid[], $3::bytea[]) AS u(id, payload)
"""

Producer = Callable[[PostgresStore, int, int], Awaitable[None]]


async def bare_insert(store: PostgresStore, n: int, batch: int) -> None:
    async with store.pool.acquire() as conn:
        stmt = await conn.prepare(BARE_INSERT_SQL)
        for start in range(0, n, batch):
            size = min(batch, n - start)
            await stmt.fetch([uuid.uuid4() for _ in range(size)], KIND, [b"{}"] * size)


async def store_many(store: PostgresStore, n: int, batch: int) -> None:
    for start in range(0, n, batch):
        size = min(batch, n - start)
        await store.enqueue_many(
            [EnqueueParams(id=uuid.uuid4(), kind=KIND, payload=b"{}") for _ in range(size)]
        )


async def client_many(store: PostgresStore, n: int, batch: int) -> None:
    client = Client(store)
    for start in range(0, n, batch):
        await client.enqueue_many(KIND, [{}] * min(batch, n - start))


def one_at_a_time(producers: int) -> Producer:
    async def run(store: PostgresStore, n: int, batch: int) -> None:
        async def produce(count: int) -> None:
            for _ in range(count):
                await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind=KIND, payload=b"{}"))

        per, extra = divmod(n, producers)
        await asyncio.gather(*(produce(per + (i < extra)) for i in range(producers)))

    return run


async def produce_rate(dsn: str, n: int, batch: int, producer: Producer) -> float:
    """Jobs/s of ``producer`` writing n jobs into a fresh schema."""
    schema = unique_schema("bench")
    store = await open_store(dsn, Config(schema=schema, max_pool_size=24))
    try:
        started = time.perf_counter()
        await producer(store, n, batch)
        seconds = time.perf_counter() - started
        got = await store.pool.fetchval("SELECT count(*) FROM azync_jobs")
        if got != n:
            raise SystemExit(f"only {got} of {n} jobs were written")
        return n / seconds
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


def table(rates: dict[str, list[float]], refs: list[tuple[str, str]], head: str) -> None:
    """Print medians with one ratio column per ``(scenario, column title)`` in ``refs``."""
    meds = {name: statistics.median(got) for name, got in rates.items() if got}
    print()
    titles = "".join(f" {title:>10} |" for _, title in refs)
    print(f"| {head:<22} | {'jobs/s (median)':>15} | {'min':>6} | {'max':>6} |{titles}")
    print(f"|{'-' * 24}|{'-' * 16}:|{'-' * 7}:|{'-' * 7}:|" + f"{'-' * 11}:|" * len(refs))
    for name, med in meds.items():
        got = rates[name]
        ratios = "".join(
            f" {med / meds[ref]:>9.2f}x |" if ref in meds else f" {'n/a':>10} |" for ref, _ in refs
        )
        print(f"| {name:<22} | {med:>15,.0f} | {min(got):>6,.0f} | {max(got):>6,.0f} |{ratios}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1_000, help="jobs per enqueue_many call")
    parser.add_argument("--single-jobs", type=int, default=2_000, help="jobs of one-by-one rows")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs; median shown")
    parser.add_argument("--only", default="", help="comma list of scenario name parts")
    args = parser.parse_args()
    dsn, where = await pick_dsn(args.dsn)
    print(f"PostgreSQL: {where}; {args.jobs} no-op jobs per drain; {os.cpu_count()} CPUs")
    drains: list[tuple[str, Callable[[PostgresStore], Awaitable[None]]]] = [
        (REFERENCE, lambda s: bare(s, 4, 10, ack_each=True)),
        (ACK_BATCH, lambda s: bare(s, 4, 10, ack_each=False)),
        ("Worker x1 (conc 10)", lambda s: workers(s, 1)),
        ("Worker x4 (conc 10)", lambda s: workers(s, 4)),
    ]
    producers: list[tuple[str, Producer, int]] = [
        (BARE_PRODUCER, bare_insert, args.jobs),
        ("store.enqueue_many", store_many, args.jobs),
        ("Client.enqueue_many", client_many, args.jobs),
        ("store.enqueue x1", one_at_a_time(1), args.single_jobs),
        ("store.enqueue x8", one_at_a_time(8), args.single_jobs),
    ]
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    drains = [(name, d) for name, d in drains if not only or any(o in name for o in only)]
    producers = [p for p in producers if not only or any(o in p[0] for o in only)]
    rates: dict[str, list[float]] = {name: [] for name, _ in drains}
    made: dict[str, list[float]] = {name: [] for name, _, _ in producers}
    for rnd in range(1, args.rounds + 1):
        for name, drain in drains:
            rate = await scenario(dsn, args.jobs, drain)
            rates[name].append(rate)
            print(f"  round {rnd}: {name:<22} {rate:>9,.0f} jobs/s", flush=True)
        for name, producer, n in producers:
            rate = await produce_rate(dsn, n, args.batch, producer)
            made[name].append(rate)
            print(f"  round {rnd}: {name:<22} {rate:>9,.0f} jobs/s", flush=True)
    if rates:
        table(rates, [(REFERENCE, "vs each"), (ACK_BATCH, "vs batch")], "drain")
    if made:
        table(
            made,
            [(BARE_PRODUCER, "vs bare"), ("store.enqueue x8", "vs x8")],
            f"produce (batch {args.batch})",
        )


if __name__ == "__main__":
    asyncio.run(main())
