"""DAG sagas end to end: a join decided only once every upstream finished,
compensation order (and a crash during a compensation), parallel failures
compensating once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import textwrap
import uuid
from collections import Counter
from datetime import timedelta

import msgspec
import pytest

from azync_flow.dag import DAG, DAGClient, DAGEvent, DAGRunner, DAGScheduler, TaskContext
from azync_flow.errors import Skip
from azync_flow.store.dags import DAGFailure, DAGState
from azync_flow.store.events import EventFilter, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, JobState, Source
from tests.e2e.dag_util import runner, settle, task_states

# --- a join is decided only once every upstream finished ------------------------


def _c22(b_outcome: str, c_outcome: str, release_b: asyncio.Event, ran: list[str]) -> DAG:
    d = DAG("c22")

    async def outcome(key: str, how: str) -> None:
        ran.append(key)
        if how == "skip":
            raise Skip(f"{key} branch not taken")
        if how == "fail":
            raise RuntimeError(f"{key} failed")

    @d.task
    async def s(ctx: TaskContext) -> None:
        ran.append("s")

    @d.task(after=[s], max_attempts=1)
    async def b(ctx: TaskContext) -> None:
        await release_b.wait()
        await outcome("b", b_outcome)

    @d.task(after=[s], max_attempts=1)
    async def c(ctx: TaskContext) -> None:
        await outcome("c", c_outcome)

    @d.task(after=[b, c], skip_when_upstream_skipped=True)
    async def j(ctx: TaskContext) -> None:
        ran.append("j")

    @d.task(after=[j], skip_when_upstream_skipped=True)
    async def after_j(ctx: TaskContext) -> None:
        ran.append("after_j")

    return d


async def _c22_run(
    store: PostgresStore, b_outcome: str, c_outcome: str
) -> tuple[DAGState, dict[str, JobState], list[str]]:
    release = asyncio.Event()
    ran: list[str] = []
    d = _c22(b_outcome, c_outcome, release, ran)
    run = await DAGClient(store).run(d)
    driver = asyncio.create_task(settle(store, runner(store, d), run.id))
    for _ in range(500):
        s = await task_states(store, run.id)
        if s["c"] in (JobState.SKIPPED, JobState.DEAD) and s["b"] == JobState.ACTIVE:
            break
        await asyncio.sleep(0.01)
    if c_outcome == "skip":  # a skip never decides the join early
        await asyncio.sleep(0.1)
        assert (await task_states(store, run.id))["j"] == JobState.BLOCKED
    release.set()
    view = await asyncio.wait_for(driver, 20)
    return view.state, await task_states(store, run.id), ran


async def test_c22_join_waits_for_slow_upstream_and_runs(store: PostgresStore) -> None:
    state, s, ran = await _c22_run(store, "ok", "skip")
    assert state == DAGState.SUCCEEDED
    assert s["j"] == JobState.SUCCEEDED
    assert ran.index("b") < ran.index("j")
    assert s["after_j"] == JobState.SUCCEEDED


async def test_c22_both_upstreams_skipped_skips_join_and_downstream(store: PostgresStore) -> None:
    state, s, ran = await _c22_run(store, "skip", "skip")
    assert state == DAGState.SUCCEEDED
    assert (s["j"], s["after_j"]) == (JobState.SKIPPED, JobState.SKIPPED)
    assert "j" not in ran


@pytest.mark.parametrize(("b", "c"), [("fail", "skip"), ("ok", "fail")])
async def test_c22_failed_upstream_cancels_join_and_fails_dag(
    store: PostgresStore, b: str, c: str
) -> None:
    state, s, ran = await _c22_run(store, b, c)
    assert state == DAGState.FAILED
    assert s["j"] == JobState.CANCELLED
    assert "j" not in ran


async def test_c22_same_decision_after_scheduler_and_worker_restart(store: PostgresStore) -> None:
    release = asyncio.Event()
    release.set()
    ran: list[str] = []
    d = _c22("ok", "skip", release, ran)
    run = await DAGClient(store).run(d)
    # first scheduler/worker pair cannot run b: the join must stay undecided
    partial = DAGRunner(store, [d])
    partial._handlers.pop("c22/b")
    first = DAGScheduler(store)
    for _ in range(5):
        await first.tick()
        await partial.run_batch()
    s = await task_states(store, run.id)
    assert (s["c"], s["b"], s["j"]) == (JobState.SKIPPED, JobState.PENDING, JobState.BLOCKED)
    # a fresh scheduler and worker (a restart) finish from the stored state
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.SUCCEEDED
    assert (await task_states(store, run.id))["j"] == JobState.SUCCEEDED


# --- compensations run last-in first-out --------------------------------------


def _chain(name: str, log: list[str], *, fail: str, with_comp: bool = True) -> DAG:
    d = DAG(name)

    def comp(key: str):
        async def undo(ctx: TaskContext) -> None:
            if key == "t2":  # C2 is itself two steps
                log.append("C2.step1")
                await asyncio.sleep(0.01)
                log.append("C2.step2")
            else:
                log.append("C" + key[1:])

        return undo

    prev: list[str] = []
    for key in ("t1", "t2", "t3", "t4"):

        async def h(ctx: TaskContext, key: str = key) -> None:
            if key == fail:
                raise RuntimeError(f"{key} failed")

        d.task(h, key=key, after=prev, compensate=comp(key) if with_comp else None, max_attempts=1)
        prev = [key]
    return d


async def test_c24_compensations_run_in_reverse_order_and_not_for_the_failed_step(
    store: PostgresStore,
) -> None:
    log: list[str] = []
    d = _chain("c24", log, fail="t4")
    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert log == ["C3", "C2.step1", "C2.step2", "C1"]
    assert "comp:t4" not in await task_states(store, run.id)


async def test_c24_parallel_branches_compensate_in_reverse_completion_order(
    store: PostgresStore,
) -> None:
    log: list[str] = []
    b_done = asyncio.Event()
    d = DAG("c24par")

    def undo(name: str):
        async def h(ctx: TaskContext) -> None:
            log.append(name)

        return h

    @d.task(compensate=undo("C1"))
    async def t1(ctx: TaskContext) -> None:
        return None

    @d.task(after=[t1], compensate=undo("C2a"))
    async def t2a(ctx: TaskContext) -> None:
        await b_done.wait()  # t2b finishes first

    @d.task(after=[t1], compensate=undo("C2b"))
    async def t2b(ctx: TaskContext) -> None:
        return None

    @d.task(after=[t2a, t2b], max_attempts=1)
    async def t3(ctx: TaskContext) -> None:
        raise RuntimeError("t3")

    run = await DAGClient(store).run(d)
    r = runner(store, d)
    driver = asyncio.create_task(settle(store, r, run.id))
    for _ in range(500):
        if (await task_states(store, run.id))["t2b"] == JobState.SUCCEEDED:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.01)  # completion timestamps strictly ordered
    b_done.set()
    view = await asyncio.wait_for(driver, 20)
    assert view.state == DAGState.FAILED
    tasks = {j.task_key: j for j in await store.dag_tasks(run.id)}
    assert tasks["t2b"].completed_at < tasks["t2a"].completed_at  # type: ignore[operator]
    assert log == ["C2a", "C2b", "C1"]


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import timedelta
    from azync_flow.dag import DAG, DAGRunner
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store

    async def main(dsn, schema):
        store = await open_store(dsn, Config(schema=schema), migrate=False)
        async def hang(ctx):
            print("C3 started", flush=True)
            await asyncio.sleep(3600)
        d = DAG("c24crash")
        d.task(hang, key="t3", compensate=hang)
        r = DAGRunner(store, [d])
        (job,) = await store.dag_dequeue(["c24crash/comp:t3"], 1, timedelta(seconds=1))
        await r.run_task(job, None)  # no heartbeat: the lease lapses once killed

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_c24_worker_killed_during_compensation_recovers_each_once_in_order(
    store: PostgresStore, pg_dsn: str
) -> None:
    log: list[str] = []
    d = _chain("c24crash", log, fail="t4")
    run = await DAGClient(store).run(d)
    # phase 1: a worker without compensation handlers runs the saga into compensating
    no_comp = _chain("c24crash", [], fail="t4", with_comp=False)
    await settle(store, runner(store, no_comp), run.id, until=frozenset({DAGState.COMPENSATING}))
    assert (await task_states(store, run.id))["comp:t3"] == JobState.PENDING
    # phase 2: a separate worker process leases C3 and is killed mid-handler
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, pg_dsn, store.schema, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 30)
    assert line.strip() == b"C3 started"
    child.kill()
    await child.wait()
    assert (await task_states(store, run.id))["comp:t3"] == JobState.ACTIVE
    # phase 3: recovery; the reaper frees C3 after its lease lapses
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert log == ["C3", "C2.step1", "C2.step2", "C1"]
    c3 = {j.task_key: j for j in await store.dag_tasks(run.id)}["comp:t3"]
    assert c3.reap_count == 1
    assert c3.state == JobState.SUCCEEDED


# --- parallel failures compensate exactly once ---------------------------------


async def test_c25_parallel_failures_compensate_once_with_two_schedulers(
    store: PostgresStore,
) -> None:
    comp_runs: Counter[uuid.UUID] = Counter()
    gate = asyncio.Barrier(2)
    d = DAG("c25", on_failure="cancel")

    async def c0(ctx: TaskContext) -> None:
        comp_runs[ctx.run_id] += 1

    @d.task(compensate=c0)
    async def t0(ctx: TaskContext) -> None:
        return None

    async def fail(ctx: TaskContext) -> None:
        with contextlib.suppress(TimeoutError, asyncio.BrokenBarrierError):
            await asyncio.wait_for(gate.wait(), 0.05)  # fail together when leased together
        raise RuntimeError(f"{ctx.key} failed")

    d.task(fail, key="p1", after=[t0], max_attempts=1)
    d.task(fail, key="p2", after=[t0], max_attempts=1)
    for t in (DAGEvent.FAILED, DAGEvent.COMPENSATION_STARTED, DAGEvent.SETTLED):
        await store.register_subscriber(Subscriber(name="c25-ops", event_type=t))
    client = DAGClient(store)
    ids = [(await client.run(d)).id for _ in range(50)]
    failures: list[DAGFailure] = []

    async def worker() -> None:
        sched = DAGScheduler(store)
        r = runner(store, d)
        while True:
            stats = await sched.tick()
            failures.extend(stats.failures)
            ran = await r.run_batch(16)
            counts = await store.dag_name_state_counts()
            if counts.get("c25", {}).get(DAGState.FAILED, 0) == 50:
                return
            if not ran and not stats.changed:
                await asyncio.sleep(0.005)

    await asyncio.wait_for(asyncio.gather(worker(), worker()), 60)
    assert comp_runs == Counter({i: 1 for i in ids})
    assert Counter(f.dag_id for f in failures) == Counter({i: 1 for i in ids})
    for f in failures:
        assert set(f.dead_tasks) <= {"p1", "p2"}
        assert f.dead_tasks
    for i in ids:
        tasks = await store.dag_tasks(i)
        assert [t.task_key for t in tasks if t.task_key.startswith("comp:")] == ["comp:t0"]
        view = await store.get_dag(i)
        assert view.failure_reason.startswith("dead tasks: ")
    await _c25_assert_one_event_of_each_per_run(store, ids, failures)


async def _c25_assert_one_event_of_each_per_run(
    store: PostgresStore, ids: list[uuid.UUID], failures: list[DAGFailure]
) -> None:
    """Ledger subscribers saw one "saga failed", one "compensation started" and one
    terminal event per run, the failure naming its causes."""
    rows, total = await store.list_events(EventFilter(), 0, 10_000)
    assert total == 3 * len(ids)
    by_type: dict[str, dict[uuid.UUID, dict[str, object]]] = {}
    for r in rows:
        assert r.aggregate_type == "dag"
        assert r.deliveries == 1  # the subscriber's delivery job was fanned out with it
        per_run = by_type.setdefault(r.type, {})
        run_id = uuid.UUID(r.aggregate_id)
        assert run_id not in per_run, f"second {r.type} event for run {run_id}"
        per_run[run_id] = msgspec.json.decode(r.payload)
    assert set(by_type) == {DAGEvent.FAILED, DAGEvent.COMPENSATION_STARTED, DAGEvent.SETTLED}
    for per_run in by_type.values():
        assert set(per_run) == set(ids)
    causes = {f.dag_id: f.dead_tasks for f in failures}
    for i in ids:
        failed = by_type[DAGEvent.FAILED][i]
        assert failed["triggered_by"] == causes[i]
        # every task dead when the state changed: a sibling dying between the
        # policy's candidate scan and its update is named too
        assert set(causes[i]) <= set(failed["dead_tasks"]) <= {"p1", "p2"}  # type: ignore[arg-type]
        assert (failed["name"], failed["policy"]) == ("c25", "cancel")
        assert by_type[DAGEvent.COMPENSATION_STARTED][i]["compensations"] == ["comp:t0"]
        settled = by_type[DAGEvent.SETTLED][i]
        dead = sorted(k for k, s in (await task_states(store, i)).items() if s == JobState.DEAD)
        assert settled["state"] == "failed"
        assert settled["dead_tasks"] == dead  # every cause, including a late sibling's death
        assert set(causes[i]) <= set(dead)
    # and the subscriber can lease exactly those deliveries
    jobs = await store.dequeue_batch(
        Source.EVENT, DequeueParams(kind="c25-ops", limit=1000, lease=timedelta(seconds=30))
    )
    assert Counter((j.event.type, j.event.aggregate_id) for j in jobs if j.event) == Counter(
        {(t, str(i)): 1 for t in by_type for i in ids}
    )
