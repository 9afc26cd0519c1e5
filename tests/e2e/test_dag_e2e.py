"""DAG runs end to end: real handlers executed by the runner, the scheduler tick
driving them, against real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import NotFoundError, NotReady, Skip
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from tests.e2e.dag_util import runner, settle, task_states


def _saga(log: list[str], *, fail: set[str], policy: str = "cancel") -> DAG:
    d = DAG("saga", on_failure=policy)

    async def undo(ctx: TaskContext) -> None:
        log.append(
            f"undo:{ctx.compensates}:{ctx.payload}:{ctx.task_results[ctx.compensates].value}"
        )

    def make(key: str):
        async def h(ctx: TaskContext) -> dict[str, str]:
            log.append(key)
            if key in fail:
                raise RuntimeError(f"{key} broke")
            return {"done": key}

        return h

    d.task(make("reserve"), key="reserve", compensate=undo, compensation_payload="release")
    d.task(make("charge"), key="charge", after=["reserve"], compensate=undo, max_attempts=2)
    d.signal("warehouse", after=["charge"])
    d.task(make("ship"), key="ship", after=["warehouse"], max_attempts=1)
    return d


async def test_happy_path_flows_results_signals_and_sleeps(store: PostgresStore) -> None:
    d = DAG("flow")
    seen: dict[str, object] = {}

    @d.task
    async def a(ctx: TaskContext) -> int:
        seen["a.payload"] = ctx.payload
        seen["a.meta"] = dict(ctx.meta)
        return 41

    @d.task(after=[a])
    async def b(ctx: TaskContext) -> None:
        seen["b.from_a"] = ctx.task_results["a"].value
        seen["b.run_id"] = ctx.run_id

    d.signal("go", after=[b])
    d.sleep("nap", timedelta(milliseconds=200), after=["go"])

    @d.task(after=["nap", "go", b])
    async def c(ctx: TaskContext) -> str:
        r = ctx.task_results
        seen["c.b"] = (r["b"].has_result, r["b"].skipped)
        seen["c.go"] = r["go"].value
        return "end"

    client = DAGClient(store)
    run = await client.run(d, {"x": 1}, meta={"tenant": "t"})
    assert (await client.signal(run.id, "go", {"ok": True}, message_id="m1")).delivered == 0
    dup = await client.signal(run.id, "go", {"ok": False}, message_id="m1")
    assert (dup.delivered, dup.deduplicated) == (0, True)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.SUCCEEDED
    assert seen == {
        "a.payload": {"x": 1},
        "a.meta": {"tenant": "t"},
        "b.from_a": 41,
        "b.run_id": run.id,
        "c.b": (False, False),
        "c.go": {"ok": True},
    }
    assert (await client.results(run.id, ["c"]))["c"].value == "end"
    with pytest.raises(NotFoundError):
        await client.signal(run.id, "go", {"late": True})
    counts = await client.task_counts([run.id])
    assert counts[run.id] == {JobState.SUCCEEDED: 5}


async def test_cancel_policy_runs_compensations_in_reverse_and_fails(store: PostgresStore) -> None:
    log: list[str] = []
    d = _saga(log, fail={"ship"})
    client = DAGClient(store)
    run = await client.run(d, "order-1")
    await client.signal(run.id, "warehouse", "packed")
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert "ship" in view.failure_reason
    assert log == [
        "reserve",
        "charge",
        "ship",
        "undo:charge:order-1:{'done': 'charge'}",
        "undo:reserve:release:{'done': 'reserve'}",
    ]
    s = await task_states(store, run.id)
    assert s["ship"] == JobState.DEAD
    assert s["comp:charge"] == JobState.SUCCEEDED


async def test_suspend_policy_parks_and_retry_resumes_to_success(store: PostgresStore) -> None:
    log: list[str] = []
    fail = {"charge"}
    d = _saga(log, fail=fail, policy="suspend")
    client = DAGClient(store)
    run = await client.run(d, "o")
    r = runner(store, d)
    view = await settle(store, r, run.id)
    assert view.state == DAGState.SUSPENDED
    assert log == ["reserve", "charge", "charge"]  # max_attempts=2
    s = await task_states(store, run.id)
    assert (s["charge"], s["warehouse"], s["ship"]) == (
        JobState.DEAD,
        JobState.BLOCKED,
        JobState.BLOCKED,
    )
    fail.clear()
    await client.retry(run.id)
    await client.signal(run.id, "warehouse", "packed")
    view = await settle(store, r, run.id)
    assert view.state == DAGState.SUCCEEDED
    assert log[-2:] == ["charge", "ship"]


async def test_tolerated_dead_dependency_lets_branch_finish_then_run_fails(
    store: PostgresStore,
) -> None:
    d = DAG("tol")
    ran: list[str] = []

    @d.task(max_attempts=1)
    async def flaky(ctx: TaskContext) -> None:
        raise RuntimeError("down")

    @d.task(after=[flaky], ignore_dead_deps=True)
    async def fallback(ctx: TaskContext) -> None:
        ran.append("fallback" if "flaky" not in ctx.task_results else "?")

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert ran == ["fallback"]
    assert view.state == DAGState.FAILED
    assert view.failure_reason == "dead tasks: flaky [tolerated]: RuntimeError: down"
    assert not any(j.task_key.startswith("comp:") for j in await store.dag_tasks(run.id))


async def test_failure_reason_names_every_dead_task_with_its_error_root_cause_first(
    store: PostgresStore,
) -> None:
    """The cleanup that tolerated a death dies too: the reason names both, the
    tolerated root cause first, each with its error (not only the last death)."""
    d = DAG("tol_cleanup")

    @d.task(max_attempts=1)
    async def charge(ctx: TaskContext) -> None:
        raise RuntimeError("card declined")

    @d.task(after=[charge], ignore_dead_deps=True, max_attempts=1)
    async def cleanup(ctx: TaskContext) -> None:
        raise OSError("disk full")

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert view.failure_reason == (
        "dead tasks: charge [tolerated]: RuntimeError: card declined; cleanup: OSError: disk full"
    )


async def test_non_tolerated_dead_dependency_triggers_policy(store: PostgresStore) -> None:
    d = DAG("intol")
    ran: list[str] = []

    async def undo(ctx: TaskContext) -> None:
        ran.append("undo")

    @d.task(compensate=undo)
    async def first(ctx: TaskContext) -> None:
        ran.append("first")

    @d.task(after=[first], max_attempts=1)
    async def flaky(ctx: TaskContext) -> None:
        raise RuntimeError("down")

    @d.task(after=[flaky], ignore_dead_deps=True)
    async def tolerant(ctx: TaskContext) -> None:
        ran.append("tolerant")

    @d.task(after=[flaky])
    async def strict(ctx: TaskContext) -> None:
        ran.append("strict")

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert "strict" not in ran
    assert ran[-1] == "undo"
    s = await task_states(store, run.id)
    assert s["strict"] == JobState.CANCELLED


async def test_dead_leaf_triggers_even_when_declared_tolerant(store: PostgresStore) -> None:
    d = DAG("leaf")
    ran: list[str] = []

    async def undo(ctx: TaskContext) -> None:
        ran.append("undo")

    @d.task(compensate=undo)
    async def first(ctx: TaskContext) -> None:
        ran.append("first")

    @d.task(after=[first], max_attempts=1, ignore_dead_deps=True)
    async def leaf(ctx: TaskContext) -> None:
        raise RuntimeError("x")

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert ran == ["first", "undo"]


async def test_dead_compensation_suspends_and_retry_resumes(store: PostgresStore) -> None:
    d = DAG("deadcomp")
    broken = {"yes"}
    ran: list[str] = []

    async def undo(ctx: TaskContext) -> None:
        ran.append("undo")
        if broken:
            raise RuntimeError("undo failed")

    @d.task(compensate=undo)
    async def a(ctx: TaskContext) -> None:
        ran.append("a")

    @d.task(after=[a], max_attempts=1)
    async def b(ctx: TaskContext) -> None:
        raise RuntimeError("b")

    # compensations get the runner default budget: keep it small
    r = runner(store, d, default_max_attempts=2)
    run = await DAGClient(store).run(d)
    view = await settle(store, r, run.id)
    assert view.state == DAGState.SUSPENDED
    assert "comp:a" in view.failure_reason
    assert ran == ["a", "undo", "undo"]
    broken.clear()
    await DAGClient(store).retry(run.id)
    assert (await store.get_dag(run.id)).state == DAGState.COMPENSATING
    view = await settle(store, r, run.id)
    assert view.state == DAGState.FAILED
    assert ran == ["a", "undo", "undo", "undo"]
    assert (await task_states(store, run.id))["b"] == JobState.DEAD


async def test_cancel_during_compensation_lands_cancelled(store: PostgresStore) -> None:
    d = DAG("cancelcomp")
    started = asyncio.Event()
    proceed = asyncio.Event()

    async def undo(ctx: TaskContext) -> None:
        started.set()
        await proceed.wait()

    @d.task(compensate=undo)
    async def a(ctx: TaskContext) -> None:
        return None

    @d.task(after=[a], max_attempts=1)
    async def b(ctx: TaskContext) -> None:
        raise RuntimeError("b")

    client = DAGClient(store)
    run = await client.run(d)
    driver = asyncio.create_task(
        settle(
            store, runner(store, d), run.id, until=frozenset({DAGState.CANCELLED, DAGState.FAILED})
        )
    )
    await asyncio.wait_for(started.wait(), 10)
    await client.cancel(run.id)
    assert (await client.get(run.id)).state == DAGState.COMPENSATING
    proceed.set()
    view = await asyncio.wait_for(driver, 20)
    assert view.state == DAGState.CANCELLED
    assert (await task_states(store, run.id))["comp:a"] == JobState.SUCCEEDED


async def test_not_ready_snoozes_until_deadline_then_dies_and_compensates(
    store: PostgresStore,
) -> None:
    d = DAG("deadline")
    polls: list[int] = []
    ran: list[str] = []

    async def undo(ctx: TaskContext) -> None:
        ran.append("undo")

    @d.task(compensate=undo)
    async def book(ctx: TaskContext) -> None:
        return None

    @d.task(after=[book], max_attempts=2, deadline=timedelta(milliseconds=300))
    async def wait_for_stock(ctx: TaskContext) -> None:
        polls.append(ctx.attempt)
        raise NotReady(timedelta(milliseconds=50), "no stock yet")

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.FAILED
    assert ran == ["undo"]
    assert len(polls) >= 3  # snoozed several times, more than max_attempts
    assert set(polls) == {1}  # a snooze never spends an attempt
    j = {t.task_key: t for t in await store.dag_tasks(run.id)}["wait_for_stock"]
    assert j.state == JobState.DEAD
    assert "no stock yet" in j.last_error


async def test_skip_satisfies_dependents_and_propagates_when_asked(store: PostgresStore) -> None:
    d = DAG("skips")
    seen: dict[str, object] = {}

    @d.task
    async def gate(ctx: TaskContext) -> None:
        raise Skip("feature off")

    @d.task(after=[gate])
    async def plain(ctx: TaskContext) -> None:
        seen["plain"] = ctx.task_results["gate"].skipped

    @d.task(after=[gate], skip_when_upstream_skipped=True)
    async def propagated(ctx: TaskContext) -> None:
        seen["propagated"] = "ran"

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.SUCCEEDED
    assert seen == {"plain": True}
    s = await task_states(store, run.id)
    assert s == {
        "gate": JobState.SKIPPED,
        "plain": JobState.SUCCEEDED,
        "propagated": JobState.SKIPPED,
    }


async def test_exception_retries_then_succeeds_with_nul_safe_payloads(store: PostgresStore) -> None:
    d = DAG("retry")
    attempts: list[int] = []

    @d.task(max_attempts=3)
    async def flaky(ctx: TaskContext) -> dict[str, str]:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ValueError("bad \x00 byte \ud800")
        return {"s": "a\x00b\U0001f600"}

    run = await DAGClient(store).run(d)
    view = await settle(store, runner(store, d), run.id)
    assert view.state == DAGState.SUCCEEDED
    assert attempts == [1, 2, 3]
    assert (await DAGClient(store).results(run.id))["flaky"].value == {"s": "a\x00b\U0001f600"}
    async with store.pool.acquire() as conn:
        errors = await conn.fetch("SELECT error FROM azync_job_attempts ORDER BY id")
    assert [e["error"] for e in errors] == ["ValueError: bad \\x00 byte \\ud800"] * 2


async def test_unknown_kind_dies_instead_of_looping(store: PostgresStore) -> None:
    d = DAG("known")

    @d.task(max_attempts=1)
    async def a(ctx: TaskContext) -> None:
        return None

    other = DAG("known2")
    other.task(a, key="a")
    run = await DAGClient(store).run(d)
    from azync_flow.dag import DAGRunner

    r = DAGRunner(store, [other])
    (job,) = await store.dag_dequeue(["known/a"], 1, timedelta(seconds=30))
    assert (await r.run_task(job)).value == "dead"
    assert (await task_states(store, run.id))["a"] == JobState.DEAD


async def test_pause_freezes_a_run_and_retry_resumes_it(store: PostgresStore) -> None:
    d = DAG("pausing")
    ran: list[str] = []

    @d.task
    async def a(ctx: TaskContext) -> None:
        ran.append("a")

    @d.task(after=[a])
    async def b(ctx: TaskContext) -> None:
        ran.append("b")

    client = DAGClient(store)
    run = await client.run(d)
    await client.pause(run.id, "deploy")
    r = runner(store, d)
    view = await settle(store, r, run.id)
    assert view.state == DAGState.PAUSED
    assert ran == []
    await client.retry(run.id)
    view = await settle(store, r, run.id)
    assert view.state == DAGState.SUCCEEDED
    assert ran == ["a", "b"]


async def test_client_run_dedupes_by_key_and_run_tx_follows_the_caller(
    store: PostgresStore,
) -> None:
    d = DAG("keyed")

    @d.task
    async def a(ctx: TaskContext) -> None:
        return None

    client = DAGClient(store)
    first = await client.run(d, idempotency_key="biz")
    second = await client.run(d, idempotency_key="biz")
    assert first.inserted
    assert (second.inserted, second.id) == (False, first.id)
    assert await client.find_by_key(d, "biz") == first.id
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        gone = await client.run_tx(conn, d, idempotency_key="other")
        await tx.rollback()
    views, total = await client.list(dag=d)
    assert total == 1
    assert gone.id not in [v.id for v in views]
    assert await client.name_state_counts() == {"keyed": {DAGState.RUNNING: 1}}
    await client.cancel(first.id)
    assert await client.vacuum(timedelta(0)) == 0
    assert [x.task_key for x in await client.tasks(first.id)] == ["a"]
    assert await client.deps(first.id) == []
