"""A caller's transaction held open after counting work (publish with ``conn=``,
``enqueue_tx``, ``create_dag_tx``) delays only its own work: 1,000 others of the
same type, counted into the same daily counters, are published or enqueued on
other connections and handled by a real worker meanwhile, each exactly once at
attempt 1, and no backend of the test ever waits on a lock. Counting inserts
delta rows; before, every count upserted a shared daily row and held its lock
until commit, so the held transaction blocked the others."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
from asyncpg.transaction import Transaction

from azync_flow import attach_subscribers
from azync_flow.client import Client
from azync_flow.events import EventContext, subscriber
from azync_flow.store import Config
from azync_flow.store.dags import DAGParams, DAGTask
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import EnqueueParams, Source
from azync_flow.worker import JobContext, Worker

#: Work items committed by other connections while the caller's transaction is open.
OTHERS = 1000
#: How long the held transaction waits for the others at most.
BOUND = 60.0
FAST: dict[str, Any] = {
    "concurrency": 16,
    "poll_interval": timedelta(milliseconds=100),
    "maintenance_interval": timedelta(milliseconds=100),
    "handle_signals": False,
}


def app_dsn(pg_dsn: str, schema: str) -> str:
    """The DSN tagged with an application name, so this test's backends can be
    told apart in ``pg_stat_activity`` on a shared server."""
    return f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}application_name={schema}"


@asynccontextmanager
async def tagged_store(pg_dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    store = await open_store(
        app_dsn(pg_dsn, schema), Config(schema=schema, max_pool_size=24), migrate=False
    )
    try:
        yield store
    finally:
        await store.close()


class LockWatch:
    """Samples ``pg_stat_activity`` for backends of the test waiting on a lock.

    Two waits are not on a row, and never on an open transaction: PostgreSQL
    serialises the commits of transactions that sent a NOTIFY (the wake-ups)
    on a lock of the database object, held only while one commits; and a
    backend growing a table's file holds its extension lock for that moment.
    Those are counted apart (``brief_waits``). Any other wait, or any wait
    blocked by the held transaction, is recorded in ``waiting``.
    """

    def __init__(self, observer: asyncpg.Connection, app: str, held_pid: int) -> None:
        self.observer = observer
        self.app = app
        self.held_pid = held_pid
        self.samples = 0
        self.brief_waits = 0
        self.waiting: list[tuple[str, str, list[int]]] = []

    async def sample(self) -> None:
        rows = await self.observer.fetch(
            "SELECT l.locktype, l.locktype = 'extend' OR (l.locktype = 'object'"
            " AND l.classid = 'pg_database'::regclass AND l.objid = 0) AS brief,"
            " pg_blocking_pids(a.pid) AS blockers, a.query"
            " FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted"
            " WHERE a.application_name = $1 AND a.wait_event_type = 'Lock'",
            self.app,
        )
        self.samples += 1
        for r in rows:
            if r["brief"]:
                self.brief_waits += 1
            if not r["brief"] or self.held_pid in r["blockers"]:
                self.waiting.append((r["locktype"], r["query"], r["blockers"]))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sample()
            try:
                async with asyncio.timeout(0.05):
                    await stop.wait()
            except TimeoutError:
                pass


async def hold_while(
    pg_dsn: str,
    schema: str,
    held: asyncpg.Connection,
    tx: Transaction,
    others: Callable[[], Awaitable[None]],
) -> LockWatch:
    """Run ``others`` to completion (bounded) while sampling lock waits; when
    they do not complete, roll the held transaction ``tx`` back (so nothing
    waits on it at teardown) and raise."""
    observer = await asyncpg.connect(pg_dsn)
    watch = LockWatch(observer, schema, held.get_server_pid())
    stop = asyncio.Event()
    sampler = asyncio.create_task(watch.run(stop))
    try:
        async with asyncio.timeout(BOUND):
            await others()
    except BaseException:
        await tx.rollback()
        raise
    finally:
        stop.set()
        await sampler
        await observer.close()
    return watch


async def in_parallel(n: int, one: Callable[[int], Awaitable[object]], lanes: int = 8) -> None:
    async def lane(k: int) -> None:
        for i in range(k, n, lanes):
            await one(i)

    await asyncio.gather(*(lane(k) for k in range(lanes)))


async def delivery_rows(store: PostgresStore, source: Source, kind: str) -> list[tuple[str, int]]:
    rows = await store.pool.fetch(
        "SELECT state, attempt FROM azync_jobs WHERE source = $1 AND kind = $2",
        source.value,
        kind,
    )
    return [(r["state"], r["attempt"]) for r in rows]


def assert_once_at_attempt_one(seen: list[tuple[int, int]], worker: Worker) -> None:
    assert sorted(i for i, _ in seen) == list(range(-1, OTHERS))
    assert {attempt for _, attempt in seen} == {1}
    assert sum(lp.stats.lost for lp in worker.loops.values()) == 0  # no stale ack


async def test_an_open_publishing_transaction_delays_only_its_own_event(
    pg_dsn: str, schema: str, store: PostgresStore
) -> None:
    seen: list[tuple[int, int]] = []
    others_done = asyncio.Event()
    held_done = asyncio.Event()

    @subscriber("counted.placed", name="counted_sub")
    async def handle(payload: dict[str, int], ctx: EventContext) -> None:
        seen.append((payload["i"], ctx.attempt))
        if payload["i"] < 0:
            held_done.set()
        elif sum(1 for i, _ in seen if i >= 0) == OTHERS:
            others_done.set()

    async with tagged_store(pg_dsn, schema) as tagged:
        worker = Worker(tagged, **FAST)
        await attach_subscribers(worker, [handle]).register()
        client = Client(tagged)
        own = await asyncpg.connect(app_dsn(pg_dsn, schema))  # the caller's own connection
        try:
            tx = own.transaction()
            await tx.start()
            await client.publish("counted.placed", {"i": -1}, conn=own)
            async with worker:

                async def others() -> None:
                    await in_parallel(OTHERS, lambda i: client.publish("counted.placed", {"i": i}))
                    await others_done.wait()

                watch = await hold_while(pg_dsn, schema, own, tx, others)
                assert not held_done.is_set()  # the held event is not visible yet
                await tx.commit()
                async with asyncio.timeout(BOUND):
                    await held_done.wait()
        finally:
            await own.close()
    assert watch.samples >= 3
    assert watch.waiting == []
    assert_once_at_attempt_one(seen, worker)
    rows = await delivery_rows(store, Source.EVENT, "counted_sub")
    assert rows == [("succeeded", 1)] * (OTHERS + 1)


async def test_an_open_enqueuing_transaction_delays_only_its_own_job(
    pg_dsn: str, schema: str, store: PostgresStore
) -> None:
    seen: list[tuple[int, int]] = []
    others_done = asyncio.Event()
    held_done = asyncio.Event()

    async with tagged_store(pg_dsn, schema) as tagged:
        worker = Worker(tagged, **FAST)

        @worker.register("counted_job")
        async def handle(payload: dict[str, int], ctx: JobContext) -> None:
            seen.append((payload["i"], ctx.attempt))
            if payload["i"] < 0:
                held_done.set()
            elif sum(1 for i, _ in seen if i >= 0) == OTHERS:
                others_done.set()

        client = Client(tagged)
        async with tagged.pool.acquire() as own:
            tx = own.transaction()
            await tx.start()
            held = EnqueueParams(id=uuid.uuid4(), kind="counted_job", payload=b'{"i": -1}')
            assert await tagged.enqueue_tx(own, held)
            async with worker:

                async def others() -> None:
                    await in_parallel(OTHERS, lambda i: client.enqueue("counted_job", {"i": i}))
                    await others_done.wait()

                watch = await hold_while(pg_dsn, schema, own, tx, others)
                assert not held_done.is_set()
                await tx.commit()
                async with asyncio.timeout(BOUND):
                    await held_done.wait()
    assert watch.samples >= 3
    assert watch.waiting == []
    assert_once_at_attempt_one(seen, worker)
    rows = await delivery_rows(store, Source.QUEUE, "counted_job")
    assert rows == [("succeeded", 1)] * (OTHERS + 1)


def dag(i: int) -> DAGParams:
    return DAGParams(
        id=uuid.uuid4(),
        name="counted_dag",
        tasks=[DAGTask(key="a", kind="counted_a"), DAGTask(key="b", kind="counted_b")],
        meta={"i": str(i)},
    )


async def test_an_open_dag_creating_transaction_delays_no_other_creation(
    pg_dsn: str, schema: str, store: PostgresStore
) -> None:
    """No client verb starts a workflow in the caller's transaction; a DAG run can
    be (``create_dag_tx``), counting its tasks' enqueues like a start does."""
    async with tagged_store(pg_dsn, schema) as tagged:
        async with tagged.pool.acquire() as own:
            tx = own.transaction()
            await tx.start()
            assert (await tagged.create_dag_tx(own, dag(-1)))[0]

            async def others() -> None:
                await in_parallel(OTHERS, lambda i: tagged.create_dag(dag(i)))

            watch = await hold_while(pg_dsn, schema, own, tx, others)
            await tx.commit()
        counted = {}
        for kind in ("counted_a", "counted_b"):
            _, daily = await tagged.stats(Source.DAG, kind)
            counted[kind] = sum(d.enqueued for d in daily)
    assert watch.samples >= 3
    assert watch.waiting == []
    assert counted == {"counted_a": OTHERS + 1, "counted_b": OTHERS + 1}
    assert await store.pool.fetchval("SELECT count(*) FROM azync_dags") == OTHERS + 1
