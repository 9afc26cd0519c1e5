"""Schedules end to end on a real store and real workers: racing schedulers,
downtime and catch-up, overlap policies, the client verbs, DAG and job
actions, the ``@workflow(schedule=...)`` shorthand and ``ctx.sleep_until``."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest

from azync_flow import (
    DAG,
    TaskContext,
    WorkflowContext,
    attach_schedules,
    attach_workflows,
    workflow,
)
from azync_flow.errors import NotFoundError, ScheduleError, ScheduleSpecError, WorkflowFailedError
from azync_flow.schedules import (
    EnqueueJob,
    Interval,
    Overlap,
    SchedulePolicy,
    ScheduleSpec,
    StartDAG,
    StartWorkflow,
)
from azync_flow.schedules._model import run_key
from azync_flow.store.dags import DAGState
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock, WorkflowEnvironment
from azync_flow.worker import Worker


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


@workflow(name="tick")
async def tick(ctx: WorkflowContext) -> str:
    return "ticked"


@workflow(name="held")
async def held(ctx: WorkflowContext) -> str:
    await ctx.wait_signal("go")
    return "released"


HOURLY = ScheduleSpec(intervals=(Interval(every=timedelta(hours=1)),))
DAILY_9 = ScheduleSpec(cron=("0 9 * * *",))


async def executions(env: WorkflowEnvironment, name: str) -> list[Any]:
    page = await env.client.list(name, limit=500)
    return sorted(page.executions, key=lambda e: e.created_at)


async def test_two_schedulers_racing_start_each_nominal_time_once(
    azync_store: Any, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = WorkflowEnvironment(azync_store, azync_clock)
    await env.client.schedules.create(
        "race",
        HOURLY,
        StartWorkflow.of(tick),
        policy=SchedulePolicy(overlap=Overlap.ALLOW_ALL, catchup_window=timedelta(days=1)),
    )
    azync_clock.set(utc(2024, 6, 1, 5, 30))
    one, two = Worker(azync_store, handle_signals=False), Worker(azync_store, handle_signals=False)
    first, second = attach_schedules(one), attach_schedules(two)
    # both pass the election by calling the step directly: only the run ids keep it once
    started = await asyncio.gather(first.run_once(), second.run_once())
    assert sum(started) == 5
    assert len(await executions(env, "tick")) == 5
    # and two real workers leading in turn never add one
    attach_workflows(one, [tick])
    attach_workflows(two, [tick])
    azync_clock.set(utc(2024, 6, 1, 8, 30))
    await asyncio.gather(one.run_until_idle(), two.run_until_idle())
    runs = await executions(env, "tick")
    assert len(runs) == 8
    assert sorted(e.meta["schedule_nominal_at"] for e in runs) == [
        utc(2024, 6, 1, h).isoformat() for h in range(1, 9)
    ]
    assert {e.state for e in runs} == {WorkflowState.SUCCEEDED}
    await env.close()


@pytest.mark.parametrize(
    ("window", "days"),
    [(None, [4]), (timedelta(days=7), [2, 3, 4]), (timedelta(hours=1), [])],
    ids=["latest-only", "window-7d", "window-1h"],
)
async def test_three_days_down_runs_missed_times_per_catch_up_window(
    azync_store: Any, azync_clock: MovableClock, window: timedelta | None, days: list[int]
) -> None:
    azync_clock.set(utc(2024, 5, 1, 12))
    env = await WorkflowEnvironment(azync_store, azync_clock).start(workflows=[tick])
    # allow_all: the caught-up runs start in one tick, before the first ends
    policy = SchedulePolicy(overlap=Overlap.ALLOW_ALL, catchup_window=window)
    await env.client.schedules.create("daily", DAILY_9, StartWorkflow.of(tick), policy=policy)
    await env.close()  # every worker down for three days
    azync_clock.set(utc(2024, 5, 4, 20))
    env = await WorkflowEnvironment(azync_store, azync_clock).start(workflows=[tick])
    await env.settle()
    nominal = sorted(e.meta["schedule_nominal_at"] for e in await executions(env, "tick"))
    assert nominal == [utc(2024, 5, d, 9).isoformat() for d in days]
    # back on schedule afterwards
    await env.sleep(timedelta(days=1))
    assert len(await executions(env, "tick")) == len(days) + 1
    await env.close()


@pytest.mark.parametrize("overlap", list(Overlap))
async def test_overlap_policy_decides_fires_while_the_previous_run_goes_on(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock, overlap: Overlap
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = await workflow_env.start(workflows=[held])
    # a buffered start may wait up to the catch-up window
    policy = SchedulePolicy(overlap=overlap, catchup_window=timedelta(days=1))
    await env.client.schedules.create("held", HOURLY, StartWorkflow.of(held), policy=policy)
    await env.sleep(timedelta(hours=3))  # fires at 01:00, 02:00, 03:00 while the first waits
    runs = await executions(env, "held")
    states = [e.state for e in runs]
    outcomes = [
        r.outcome for r in reversed((await env.client.schedules.describe("held")).recent_runs)
    ]
    if overlap is Overlap.SKIP:
        assert states == [WorkflowState.RUNNING]
        assert outcomes == ["started", "skipped", "skipped"]
    elif overlap is Overlap.BUFFER_ONE:
        assert states == [WorkflowState.RUNNING]
        assert outcomes == ["started", "buffered", "skipped"]
        await env.client.get_handle(runs[0].id).signal("go")
        await env.settle()
        runs = await executions(env, "held")
        assert [e.state for e in runs] == [WorkflowState.SUCCEEDED, WorkflowState.RUNNING]
        assert runs[1].meta["schedule_nominal_at"] == utc(2024, 6, 1, 2).isoformat()
    elif overlap is Overlap.BUFFER_ALL:
        assert outcomes == ["started", "buffered", "buffered"]
        await env.client.get_handle(runs[0].id).signal("go")
        await env.settle()
        runs = await executions(env, "held")
        assert [e.state for e in runs] == [WorkflowState.SUCCEEDED, WorkflowState.RUNNING]
        assert runs[1].meta["schedule_nominal_at"] == utc(2024, 6, 1, 2).isoformat()
        await env.client.get_handle(runs[1].id).signal("go")
        await env.settle()
        # the frozen clock gives the buffered runs one created_at: find the new run by state
        running = [e for e in await executions(env, "held") if e.state is WorkflowState.RUNNING]
        assert [e.meta["schedule_nominal_at"] for e in running] == [utc(2024, 6, 1, 3).isoformat()]
    elif overlap is Overlap.ALLOW_ALL:
        assert states == [WorkflowState.RUNNING] * 3
        assert outcomes == ["started"] * 3
    else:
        assert states == [WorkflowState.CANCELLED, WorkflowState.CANCELLED, WorkflowState.RUNNING]
        assert outcomes == ["started"] * 3


async def test_describe_trigger_pause_unpause_backfill_and_delete(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 10, 25, 12))
    env = await workflow_env.start(workflows=[tick])
    spec = ScheduleSpec(cron=("30 1 * * *",), tz="Europe/London")
    await env.client.schedules.create("report", spec, StartWorkflow.of(tick), note="nightly")
    described = await env.client.schedules.describe("report")
    assert [f.nominal_at for f in described.next_fires] == [
        utc(2024, 10, 26, 0, 30),
        utc(2024, 10, 27, 0, 30),
        utc(2024, 10, 28, 1, 30),
        utc(2024, 10, 29, 1, 30),
        utc(2024, 10, 30, 1, 30),
    ]
    assert {f.local.strftime("%H:%M") for f in described.next_fires} == {"01:30"}
    assert described.next_fires[0].local.tzinfo == ZoneInfo("Europe/London")

    run_id = await env.client.schedules.trigger("report")
    await env.settle()
    assert (await env.client.get_handle(run_id).describe()).state is WorkflowState.SUCCEEDED

    await env.client.schedules.pause("report", note="maintenance")
    await env.sleep(timedelta(days=2))
    assert len(await executions(env, "tick")) == 1
    assert (await env.client.schedules.list())[0].paused

    await env.client.schedules.unpause("report")
    assert await env.client.schedules.backfill("report", utc(2024, 10, 26), utc(2024, 10, 28)) == 2
    assert await env.client.schedules.backfill("report", utc(2024, 10, 26), utc(2024, 10, 28)) == 0
    await env.settle()
    await env.sleep(timedelta(days=1))
    described = await env.client.schedules.describe("report")
    assert [(r.nominal_at, r.outcome, r.state) for r in described.recent_runs[:3]] == [
        (utc(2024, 10, 28, 1, 30), "started", "succeeded"),
        (utc(2024, 10, 27, 0, 30), "started", "succeeded"),
        (utc(2024, 10, 26, 0, 30), "started", "succeeded"),
    ]
    assert len(await executions(env, "tick")) == 4

    await env.client.schedules.delete("report")
    assert await env.client.schedules.list() == []
    with pytest.raises(NotFoundError):
        await env.client.schedules.describe("report")


async def test_bad_schedule_input_raises_product_errors_and_stores_nothing(
    workflow_env: WorkflowEnvironment,
) -> None:
    schedules = workflow_env.client.schedules
    with pytest.raises(ScheduleSpecError, match="invalid cron"):
        await schedules.create("x", ScheduleSpec(cron=("every day",)), StartWorkflow.of(tick))
    with pytest.raises(ScheduleSpecError, match="not jobs"):
        await schedules.create(
            "x", HOURLY, EnqueueJob.of("k"), policy=SchedulePolicy(overlap=Overlap.CANCEL_OTHER)
        )
    assert await schedules.list() == []
    await schedules.create("x", HOURLY, StartWorkflow.of(tick))
    with pytest.raises(ScheduleError, match="exists"):
        await schedules.create("x", DAILY_9, StartWorkflow.of(tick))
    with pytest.raises(ScheduleSpecError, match="naive"):
        await schedules.backfill("x", datetime(2024, 1, 1), datetime(2024, 1, 2))  # noqa: DTZ001
    with pytest.raises(NotFoundError):
        await schedules.pause("missing")


report = DAG("scheduled_report")
REPORTS: list[str] = []


@report.task
async def build(ctx: TaskContext) -> str:
    REPORTS.append("built")
    return "built"


async def test_schedules_start_dags_and_enqueue_jobs(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    pinged: list[str] = []

    @workflow_env.worker.register("ping")
    async def ping(payload: str) -> None:
        pinged.append(payload)

    # the worker runs the DAG: its schedules may start it, nothing else to say
    env = await workflow_env.start(workflows=[tick], dags=[report])
    REPORTS.clear()
    await env.client.schedules.create("dag", HOURLY, StartDAG.of(report))
    await env.client.schedules.create("job", HOURLY, EnqueueJob.of("ping", "pong"))
    await env.sleep(timedelta(hours=2))
    assert pinged == ["pong", "pong"]
    assert REPORTS == ["built", "built"]
    runs = (await env.client.schedules.describe("dag")).recent_runs
    assert [r.state for r in runs] == [DAGState.SUCCEEDED, DAGState.SUCCEEDED]
    jobs = (await env.client.schedules.describe("job")).recent_runs
    assert [r.state for r in jobs] == ["succeeded", "succeeded"]


async def test_a_scheduler_starts_the_dags_given_to_it_and_refuses_others(
    azync_store: Any, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = WorkflowEnvironment(azync_store, azync_clock)
    await env.client.schedules.create("given", HOURLY, StartDAG.of(report))
    await env.client.schedules.create("unknown", HOURLY, StartDAG.of("nobody_has_it"))
    azync_clock.set(utc(2024, 6, 1, 1, 0, 5))
    # this worker does not run the DAG; its schedules start runs other workers execute
    scheduler = attach_schedules(Worker(azync_store, handle_signals=False), dags=[report])
    assert await scheduler.run_once() == 1
    [run] = (await env.client.schedules.describe("given")).recent_runs
    assert (await env.dags.get(run.run_id)).name == "scheduled_report"
    assert (await env.client.schedules.describe("unknown")).recent_runs == []
    with pytest.raises(ScheduleError, match="no DAG named 'nobody_has_it'"):
        await scheduler.actions.start(StartDAG.of("nobody_has_it"), uuid.uuid4(), "k", {})


@workflow(name="declared_nightly", schedule="30 1 * * *", tz="Europe/London")
async def declared_nightly(ctx: WorkflowContext) -> str:
    return "declared"


async def test_workflow_declared_with_a_schedule_fires_once_attached_to_a_worker(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 10, 26, 12))
    env = await workflow_env.start(workflows=[declared_nightly])
    await env.sleep(timedelta(days=2))
    runs = await executions(env, "declared_nightly")
    assert sorted(e.meta["schedule_nominal_at"] for e in runs) == [
        utc(2024, 10, 27, 0, 30).isoformat(),
        utc(2024, 10, 28, 1, 30).isoformat(),
    ]
    assert [s.id for s in await env.client.schedules.list()] == ["workflow:declared_nightly"]


@workflow(name="nominal_reader", schedule="0 3 * * *", tz="UTC")
async def nominal_reader(ctx: WorkflowContext) -> str | None:
    await ctx.sleep(timedelta(minutes=5))  # read again after a replay of the pass
    when = ctx.info.scheduled_time
    return None if when is None else when.isoformat()


async def test_workflow_code_reads_the_nominal_time_its_schedule_fired_it_for(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 3, 1, 12))
    env = await workflow_env.start(workflows=[nominal_reader])
    await env.sleep(timedelta(days=1))
    [run] = await executions(env, "nominal_reader")
    result = await env.client.get_handle(run.id).result(timeout=10)
    assert result == utc(2024, 3, 2, 3).isoformat()
    manual = await env.client.start(nominal_reader)  # not started by the schedule
    await env.sleep(timedelta(minutes=10))
    assert await manual.result(timeout=10) is None


LONDON = ZoneInfo("Europe/London")


@workflow(name="wake_at_nine")
async def wake_at_nine(ctx: WorkflowContext, when: str) -> list[str]:
    start = ctx.now()
    await ctx.sleep_until(datetime.fromisoformat(when).replace(tzinfo=LONDON))
    woke = ctx.now()
    await ctx.sleep(timedelta(hours=24))  # elapsed time: not shifted by DST
    return [start.isoformat(), woke.isoformat(), ctx.now().isoformat()]


@workflow(name="naive_sleeper")
async def naive_sleeper(ctx: WorkflowContext) -> None:
    await ctx.sleep_until(datetime(2030, 1, 1))  # noqa: DTZ001


async def test_sleep_until_across_a_transition_wakes_at_the_local_instant(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 10, 26, 12))  # 13:00 BST; clocks go back that night
    env = await workflow_env.start(workflows=[wake_at_nine, naive_sleeper], cache_size=0)
    handle = await env.client.start(wake_at_nine, "2024-10-27T09:00")
    start, woke, after = (datetime.fromisoformat(v) for v in await handle.result())
    assert utc(2024, 10, 27, 9) <= woke < utc(2024, 10, 27, 9, 1)  # 09:00 GMT
    assert timedelta(hours=24) <= after - woke < timedelta(hours=24, minutes=1)
    assert start < utc(2024, 10, 26, 12, 1)

    bad = await env.client.start(naive_sleeper)
    with pytest.raises(WorkflowFailedError, match="timezone-aware"):
        await bad.result()


async def test_a_run_started_before_a_crash_is_not_started_again(
    azync_store: Any, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = WorkflowEnvironment(azync_store, azync_clock)
    action = StartWorkflow.of(tick)
    await env.client.schedules.create("crash", HOURLY, action)
    azync_clock.set(utc(2024, 6, 1, 1, 0, 5))
    scheduler = attach_schedules(Worker(azync_store, handle_signals=False))
    # the previous scheduler started the 01:00 run, then died before its ledger
    # row and cursor move were written
    fire = next(
        (await env.client.schedules.describe("crash", fires=1)).spec.fires_after(
            utc(2024, 6, 1, 0, 59), seed="crash"
        )
    )
    key, run_id = run_key(action, "crash", fire)
    assert await scheduler.actions.start(action, run_id, key, {})
    assert await scheduler.run_once() == 0
    runs = await executions(env, "tick")
    assert [e.id for e in runs] == [run_id]
    recent = (await env.client.schedules.describe("crash")).recent_runs
    assert [(r.nominal_at, r.outcome) for r in recent] == [(utc(2024, 6, 1, 1), "started")]
    await env.close()


EVERY_SECOND = ScheduleSpec(intervals=(Interval(every=timedelta(seconds=1)),))


async def ledger_rows(store: Any, table: str, sid: str) -> int:
    async with store.pool.acquire() as conn:
        value: int = await conn.fetchval(
            f"SELECT count(*) FROM {table} WHERE schedule_id = $1", sid
        )
    return value


async def missed_events(store: Any) -> list[Any]:
    async with store.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT payload FROM azync_events WHERE type = 'azync.schedule.missed'"
        )
    return [msgspec.json.decode(bytes(r["payload"])) for r in rows]


@pytest.mark.parametrize("days", [1, 30])
async def test_an_outage_is_decided_in_one_tick_and_the_next_fire_is_on_time(
    azync_store: Any, azync_clock: MovableClock, days: int
) -> None:
    t0 = utc(2024, 6, 1)
    azync_clock.set(t0)
    env = WorkflowEnvironment(azync_store, azync_clock)
    policy = SchedulePolicy(overlap=Overlap.ALLOW_ALL)
    await env.client.schedules.create("sec", EVERY_SECOND, EnqueueJob.of("beat"), policy=policy)
    scheduler = attach_schedules(Worker(azync_store, handle_signals=False))
    back = t0 + timedelta(days=days, milliseconds=500)
    azync_clock.set(back)
    # one tick decides the whole outage: the grace minute runs, the rest is one range
    assert await scheduler.run_once() == 60
    rows = await ledger_rows(azync_store, "azync_schedule_runs", "sec")
    assert rows == 60  # the same for 1 and 30 days: no row per missed time
    assert await ledger_rows(azync_store, "azync_schedule_missed", "sec") == 1
    described = await env.client.schedules.describe("sec")
    assert described.counts.missed == days * 86400 - 60
    assert described.counts.started == 60
    assert described.recent_missed[0].count == days * 86400 - 60
    assert described.recent_missed[0].reason == "catchup"
    assert described.next_fires[0].nominal_at == t0 + timedelta(days=days, seconds=1)
    assert [e["count"] for e in await missed_events(azync_store)] == [days * 86400 - 60]
    # the next regular fire happens at its time
    azync_clock.set(t0 + timedelta(days=days, seconds=1))
    assert await scheduler.run_once() == 1
    recent = (await env.client.schedules.describe("sec", runs=1)).recent_runs
    assert [(r.nominal_at, r.outcome) for r in recent] == [
        (t0 + timedelta(days=days, seconds=1), "started")
    ]


async def test_a_late_tick_after_a_restart_drops_no_regular_fire(
    azync_store: Any, azync_clock: MovableClock
) -> None:
    t0 = utc(2024, 6, 1)
    azync_clock.set(t0)
    env = WorkflowEnvironment(azync_store, azync_clock)
    await env.client.schedules.create("sec", EVERY_SECOND, EnqueueJob.of("beat"))
    first = attach_schedules(Worker(azync_store, handle_signals=False))
    azync_clock.set(t0 + timedelta(seconds=1))
    assert await first.run_once() == 1
    # the leader dies; its successor's first tick comes 11 s later (TTL + tick)
    azync_clock.set(t0 + timedelta(seconds=12, milliseconds=300))
    second = attach_schedules(Worker(azync_store, handle_signals=False))
    await second.run_once()
    described = await env.client.schedules.describe("sec", runs=20)
    fates = {r.nominal_at: r.outcome for r in described.recent_runs}
    # every nominal time ends started or skipped (overlap: the job still waits); none missed
    assert sorted(fates) == [t0 + timedelta(seconds=s) for s in range(1, 13)]
    assert set(fates.values()) <= {"started", "skipped"}
    assert described.counts.missed == 0
    assert described.recent_missed == []
    assert described.counts.started + described.counts.skipped == 12


async def test_a_buffered_start_later_than_the_window_is_missed_and_recorded(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = await workflow_env.start(workflows=[held])
    policy = SchedulePolicy(overlap=Overlap.BUFFER_ONE, catchup_window=timedelta(minutes=30))
    await env.client.schedules.create("held", HOURLY, StartWorkflow.of(held), policy=policy)
    await env.sleep(timedelta(hours=1, minutes=45))  # 01:00 starts, 02:00 buffered
    await env.sleep(timedelta(minutes=30))  # the 02:00 start would now be 45 min late
    runs = await executions(env, "held")
    await env.client.get_handle(runs[0].id).signal("go")
    await env.settle()
    assert len(await executions(env, "held")) == 1
    described = await env.client.schedules.describe("held")
    outcomes = {r.nominal_at: r.outcome for r in described.recent_runs}
    assert outcomes == {utc(2024, 6, 1, 1): "started", utc(2024, 6, 1, 2): "missed"}
    assert described.counts.missed == 1
    assert [(e["first_nominal_at"], e["reason"]) for e in await missed_events(env.store)] == [
        (utc(2024, 6, 1, 2).isoformat(), "buffer")
    ]


@pytest.mark.parametrize("override", [None, Overlap.ALLOW_ALL])
async def test_backfill_honours_the_overlap_policy_unless_overridden(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock, override: Overlap | None
) -> None:
    azync_clock.set(utc(2024, 6, 1, 5, 30))
    env = await workflow_env.start(workflows=[held])
    await env.client.schedules.create("held", HOURLY, StartWorkflow.of(held))
    await env.client.schedules.trigger("held")  # a live run
    await env.settle()
    await env.client.schedules.backfill(
        "held", utc(2024, 6, 1, 1), utc(2024, 6, 1, 3), overlap=override
    )
    await env.settle()
    live = [e for e in await executions(env, "held") if e.state is WorkflowState.RUNNING]
    if override is Overlap.ALLOW_ALL:
        assert len(live) == 4
        return
    assert len(live) == 1  # the backfill waits behind the live run
    for expected in (1, 2, 3):
        await env.client.get_handle(live[0].id).signal("go")
        await env.settle()
        live = [e for e in await executions(env, "held") if e.state is WorkflowState.RUNNING]
        assert [e.meta["schedule_nominal_at"] for e in live] == [
            utc(2024, 6, 1, expected).isoformat()
        ]


async def test_update_fires_nothing_from_before_it_and_is_recorded(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = await workflow_env.start(workflows=[tick])
    await env.client.schedules.create("edit", DAILY_9, StartWorkflow.of(tick))
    azync_clock.set(utc(2024, 6, 1, 12))  # 09:00 passed unhandled (no tick yet)
    hourly = ScheduleSpec(cron=("0 * * * *",))
    await env.client.schedules.update("edit", spec=hourly, note="hourly now")
    described = await env.client.schedules.describe("edit")
    assert described.next_fires[0].nominal_at == utc(2024, 6, 1, 13)
    assert [(c.verb, c.old_spec, c.new_spec, c.note) for c in described.recent_changes] == [
        ("update", DAILY_9, hourly, "hourly now")
    ]
    assert [(m.first_nominal_at, m.count, m.reason) for m in described.recent_missed] == [
        (utc(2024, 6, 1, 9), 1, "update")
    ]
    await env.sleep(timedelta(hours=1, minutes=30))
    nominal = [e.meta["schedule_nominal_at"] for e in await executions(env, "tick")]
    assert nominal == [utc(2024, 6, 1, 13).isoformat()]


async def test_a_due_fire_whose_jittered_start_is_ahead_survives_pause_and_unpause(
    workflow_env: WorkflowEnvironment, azync_clock: MovableClock
) -> None:
    azync_clock.set(utc(2024, 6, 1, 0, 30))
    env = await workflow_env.start(workflows=[tick])
    spec = ScheduleSpec(
        intervals=(Interval(every=timedelta(hours=1)),), jitter=timedelta(minutes=50)
    )
    await env.client.schedules.create("jit", spec, StartWorkflow.of(tick))
    fire = (await env.client.schedules.describe("jit")).next_fires[0]
    assert fire.nominal_at == utc(2024, 6, 1, 1)
    assert fire.fire_at > fire.nominal_at
    azync_clock.set(fire.nominal_at + (fire.fire_at - fire.nominal_at) / 2)
    await env.client.schedules.pause("jit")
    await env.client.schedules.unpause("jit")
    described = await env.client.schedules.describe("jit")
    assert described.next_fires[0] == fire  # due, jittered start ahead: listed
    assert [c.verb for c in described.recent_changes] == ["unpause", "pause"]
    azync_clock.set(fire.fire_at)
    await env.settle()
    runs = await executions(env, "tick")
    assert [e.meta["schedule_nominal_at"] for e in runs] == [fire.nominal_at.isoformat()]
