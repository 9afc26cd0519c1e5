"""DAG runs on the real Worker runtime (azync_flow.worker): per-kind lease loops,
leader-only scheduler tick, NOTIFY wake-ups, two workers sharing the work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow import attach_dags
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.store import Config
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import JobState
from azync_flow.testing import MovableClock
from azync_flow.worker import Worker
from tests.e2e.dag_util import FAST, eventually, task_states


def _saga(log: list[str], fail: bool) -> DAG:
    d = DAG("wsaga")

    def undo(name: str):
        async def h(ctx: TaskContext) -> None:
            log.append(name)

        return h

    @d.task(compensate=undo("C1"))
    async def t1(ctx: TaskContext) -> int:
        return 1

    @d.task(after=[t1], compensate=undo("C2"))
    async def t2(ctx: TaskContext) -> int:
        return ctx.task_results["t1"].value + 1

    d.signal("approve", after=[t2], compensate=undo("C3"))

    @d.task(after=["approve"], max_attempts=2)
    async def t4(ctx: TaskContext) -> None:
        log.append("t4")
        if fail:
            raise RuntimeError("t4 broke")

    return d


@pytest.fixture
async def other_store(
    pg_dsn: str, schema: str, clock: MovableClock
) -> AsyncIterator[PostgresStore]:
    """Another worker's store on the same schema and clock."""
    s = await open_store(pg_dsn, Config(schema=schema), migrate=False, clock=clock)
    try:
        yield s
    finally:
        await s.close()


def _worker(store: PostgresStore, **kw: object) -> Worker:
    return Worker(store, handle_signals=False, maintain=(), **kw)  # type: ignore[arg-type]


async def test_worker_runs_saga_and_compensates_in_reverse(store: PostgresStore) -> None:
    log: list[str] = []
    d = _saga(log, fail=True)
    w = _worker(store)
    attach_dags(w, [d], retry=FAST)
    client = DAGClient(store)
    run = await client.run(d)
    await client.signal(run.id, "approve", True)
    async with asyncio.timeout(30):
        await w.run_until_idle()
    view = await client.get(run.id)
    assert view.state == DAGState.FAILED
    assert log == ["t4", "t4", "C3", "C2", "C1"]


async def test_two_workers_share_runs_with_one_scheduler_leader(store: PostgresStore) -> None:
    log: list[str] = []
    d = _saga(log, fail=False)
    workers = [_worker(store, maintenance_interval=timedelta(milliseconds=200)) for _ in range(2)]
    bindings = [attach_dags(w, [d], retry=FAST) for w in workers]
    client = DAGClient(store)
    ids = [(await client.run(d)).id for _ in range(20)]
    async with workers[0], workers[1]:
        for i in ids:
            await client.signal(i, "approve", True, message_id=f"m-{i}")

        async def all_done() -> bool:
            counts = await client.name_state_counts()
            return counts.get("wsaga", {}).get(DAGState.SUCCEEDED) == 20

        await eventually(all_done, 30)
        # read while both run: a worker stopping first hands its leadership
        # to the other, which may then tick before it stops too
        ticked = sorted(b.scheduler.ticks > 0 for b in bindings)
    assert ticked == [False, True]
    assert log.count("t4") == 20
    for i in ids:
        assert set((await task_states(store, i)).values()) == {JobState.SUCCEEDED}


async def test_notify_wakes_the_leader_tick_long_before_the_polling_interval(
    store: PostgresStore,
) -> None:
    d = DAG("wchain")

    async def step(ctx: TaskContext) -> None:
        return None

    prev: list[str] = []
    for i in range(6):
        d.task(step, key=f"s{i}", after=prev)
        prev = [f"s{i}"]
    w = _worker(store, maintenance_interval=timedelta(milliseconds=100))
    attach_dags(w, [d], tick_interval=timedelta(seconds=30))
    async with w:
        await asyncio.sleep(0.5)  # the worker takes the DAG leadership
        assert w.maintenance.is_leader("azync_flow.dag")
        run = await DAGClient(store).run(d)

        async def done() -> bool:
            return (await store.get_dag(run.id)).state == DAGState.SUCCEEDED

        took = await eventually(done, 20)
    assert took < 10  # six promotions, each well under the 30 s polling period


async def test_wake_driven_tick_of_a_leader_whose_term_was_taken_over_writes_nothing(
    store: PostgresStore, other_store: PostgresStore, clock: MovableClock
) -> None:
    """A leader that has not yet noticed it lost the DAG leadership still gets
    wake-ups; the ticks they trigger are fenced by its old term and refused."""
    d = DAG("wfenced")
    ran: list[str] = []

    async def step(ctx: TaskContext) -> None:
        ran.append(ctx.key)

    d.task(step, key="s0")
    d.task(step, key="s1", after=["s0"])
    # its own maintenance tick (30 s) will not run during the test
    w = _worker(store, maintenance_interval=timedelta(seconds=30))
    attach_dags(w, [d], tick_interval=timedelta(seconds=30), retry=FAST)
    async with w:

        async def leads() -> bool:
            return w.maintenance.is_leader("azync_flow.dag")

        await eventually(leads, 10)
        await asyncio.sleep(0.5)  # its first maintenance tick is over
        clock.advance(w.maintenance.leader_ttl)  # its lease lapsed on the database clock
        taken = await other_store.acquire_leadership_lease("azync_flow.dag", timedelta(hours=1))
        assert taken is not None
        assert w.maintenance.is_leader("azync_flow.dag")  # it has not noticed yet
        run = await DAGClient(store).run(d)

        async def s0_done() -> bool:
            return (await task_states(store, run.id)).get("s0") == JobState.SUCCEEDED

        await eventually(s0_done, 20)
        await asyncio.sleep(1.0)  # the '$settled' wake reached the stale leader
        assert ran == ["s0"]
        assert (await task_states(store, run.id))["s1"] != JobState.SUCCEEDED
    with taken.fenced():  # the new leader's tick promotes it
        assert await other_store.promote_unblocked() == 1
