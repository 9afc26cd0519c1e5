"""DAGStore clauses: CreateDAG(Tx), Signal, DeliverBufferedSignals, FindDAGByKey,
TaskResults, AckTaskResult, GetDAG (against real PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.dags import DAGSignalParams, DAGState
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from azync_flow.testing import MovableClock
from tests.store.dag_helpers import (
    create,
    kill,
    lease,
    params,
    signal,
    skip,
    sleep,
    states,
    succeed,
    task,
    tasks_by_key,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


async def test_create_sets_initial_states_by_deps_and_kind(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    p = params(
        [task("root"), task("child"), sleep("nap", 30), signal("ping"), sleep("late", 5)],
        [("child", "root"), ("late", "root")],
    )
    dag_id = await create(store, p)
    tasks = await tasks_by_key(store, dag_id)
    assert {k: t.state for k, t in tasks.items()} == {
        "root": JobState.PENDING,
        "child": JobState.BLOCKED,
        "nap": JobState.SCHEDULED,
        "ping": JobState.WAITING,
        "late": JobState.BLOCKED,
    }
    assert tasks["nap"].run_at == T0 + timedelta(seconds=30)
    assert tasks["root"].run_at == T0
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.RUNNING
    assert view.meta == {}  # never nil on reads
    assert view.on_failure == "cancel"
    assert view.created_at == T0
    assert view.completed_at is None
    assert await store.dag_deps(dag_id) == sorted(
        p.deps, key=lambda d: (d.task_key, d.depends_on_key)
    )


async def test_create_persists_task_fields_and_meta_byte_for_byte(store: PostgresStore) -> None:
    raw = '{"s":"a\\u0000b","e":"\U0001f600","n":[[[1]]]}'.encode()
    p = params(
        [
            task(
                "a",
                payload=raw,
                max_attempts=3,
                compensation_kind="undo:a",
                compensation_payload=b'{"undo":1}',
                deadline=timedelta(minutes=2),
                ignore_dead_deps=True,
            )
        ],
        meta={"tenant": "t1"},
    )
    dag_id = await create(store, p)
    (j,) = await store.dag_tasks(dag_id)
    assert j.payload == raw
    assert j.meta == {"tenant": "t1"}
    assert j.max_attempts == 3
    assert j.compensation_kind == "undo:a"
    assert j.snooze_budget == timedelta(minutes=2)
    assert j.deadline_at is None
    assert j.ignore_dead_deps is True
    assert j.dag_id == dag_id
    assert (await store.get_dag(dag_id)).meta == {"tenant": "t1"}


async def test_create_with_explicit_max_attempts_keeps_it_on_lease(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a", max_attempts=2), task("b")]))
    a = await lease(store, dag_id, "a")
    b = await lease(store, dag_id, "b")
    assert a.max_attempts == 2
    assert b.max_attempts == 25


async def test_create_rejects_duplicate_keys_and_unknown_edges_storing_nothing(
    store: PostgresStore,
) -> None:
    dup = params([task("a"), task("a")])
    with pytest.raises(ValueError, match="duplicate task key 'a'"):
        await store.create_dag(dup)
    bad = params([task("a")], [("a", "ghost")])
    with pytest.raises(ValueError, match="unknown task 'ghost'"):
        await store.create_dag(bad)
    _, total = await store.list_dags(filter=_all(), offset=0, limit=10)
    assert total == 0


def _all():
    from azync_flow.store.dags import DAGFilter

    return DAGFilter()


async def test_create_dedupes_live_idempotency_key_and_terminal_frees_it(
    store: PostgresStore,
) -> None:
    first = params([task("a")], key="order-1")
    assert await store.create_dag(first) == (True, None)
    again = params([task("a")], key="order-1")
    assert await store.create_dag(again) == (False, first.id)
    other_name = params([task("a")], key="order-1", name="other")
    assert (await store.create_dag(other_name))[0] is True
    no_key = [params([task("a")]) for _ in range(2)]
    assert all([(await store.create_dag(p))[0] for p in no_key])
    await store.pause_dag(first.id, "hold")
    assert await store.create_dag(params([task("a")], key="order-1")) == (False, first.id)
    await store.cancel_dag(first.id)
    fresh = params([task("a")], key="order-1")
    assert await store.create_dag(fresh) == (True, None)
    assert await store.find_dag_by_key("d", "order-1") == fresh.id


async def test_concurrent_creates_with_one_key_insert_exactly_once(store: PostgresStore) -> None:
    ps = [params([task("a"), task("b")], [("b", "a")], key="same") for _ in range(8)]
    results = await asyncio.gather(*(store.create_dag(p) for p in ps))
    winners = [p.id for p, (ins, _) in zip(ps, results, strict=True) if ins]
    assert len(winners) == 1
    assert {ex for ins, ex in results if not ins} == {winners[0]}
    _, total = await store.list_dags(_all(), 0, 10)
    assert total == 1


async def test_create_dag_tx_commits_and_rolls_back_with_the_caller(
    store: PostgresStore,
) -> None:
    committed = params([task("a")])
    rolled = params([task("a")])
    async with store.pool.acquire() as conn:
        async with conn.transaction():
            assert await store.create_dag_tx(conn, committed) == (True, None)
            await conn.execute("CREATE TEMP TABLE side_effect (x int)")
        tx = conn.transaction()
        await tx.start()
        assert await store.create_dag_tx(conn, rolled) == (True, None)
        await tx.rollback()
    assert (await store.get_dag(committed.id)).state == DAGState.RUNNING
    with pytest.raises(NotFoundError):
        await store.get_dag(rolled.id)
    with pytest.raises(NotFoundError):
        await store.dag_tasks(rolled.id)


async def test_create_wakes_workers_of_runnable_kinds_on_commit(
    store: PostgresStore, pg_dsn: str
) -> None:
    got: list[str] = []
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.add_listener(store.channel, lambda *a: got.append(a[3]))
        await create(store, params([task("root"), task("child")], [("child", "root")]))
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    assert "dag:k:root" in got
    assert "dag:k:child" not in got


# --- signals ---------------------------------------------------------------------


async def test_signal_completes_waiting_signal_task_with_payload_as_result(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([signal("ok")]))
    payload = b'{"w":"\\u0000"}'
    assert await store.signal(DAGSignalParams(dag_id=dag_id, name="ok", payload=payload)) == (
        1,
        False,
    )
    (j,) = await store.dag_tasks(dag_id)
    assert j.state == JobState.SUCCEEDED
    assert j.result == payload
    assert j.completed_at is not None
    assert (await store.task_results(dag_id, ["ok"]))["ok"].result == payload


async def test_signal_wakes_scheduled_sleep_early_and_sleep_then_completes(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([sleep("nap", 3600, signal="wake")]))
    assert await store.signal(DAGSignalParams(dag_id=dag_id, name="wake")) == (1, False)
    (j,) = await store.dag_tasks(dag_id)
    assert j.state == JobState.SCHEDULED
    assert j.run_at == T0
    assert await store.complete_due_sleeps() == 1
    assert (await states(store, dag_id))["nap"] == JobState.SUCCEEDED


async def test_signal_with_repeated_message_id_is_dropped(store: PostgresStore) -> None:
    dag_id = await create(store, params([signal("ok"), signal("ok2", "ok")]))
    first = DAGSignalParams(dag_id=dag_id, name="ok", message_id="evt-1", payload=b"1")
    assert await store.signal(first) == (1, False)
    assert await store.signal(first) == (0, True)
    # the second waiting task did not receive the duplicate
    assert (await states(store, dag_id)) == {"ok": JobState.SUCCEEDED, "ok2": JobState.WAITING}
    assert await store.deliver_buffered_signals() == 0
    second = DAGSignalParams(dag_id=dag_id, name="ok", message_id="evt-2", payload=b"2")
    assert await store.signal(second) == (1, False)
    assert (await tasks_by_key(store, dag_id))["ok2"].result == b"2"


async def test_signal_before_promotion_is_buffered_then_delivered(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a"), signal("ok")], [("ok", "a")]))
    assert await store.signal(DAGSignalParams(dag_id=dag_id, name="ok", payload=b'"early"')) == (
        0,
        False,
    )
    assert await store.deliver_buffered_signals() == 0
    await succeed(store, dag_id, "a")
    assert await store.promote_unblocked() == 1
    assert (await states(store, dag_id))["ok"] == JobState.WAITING
    assert await store.deliver_buffered_signals() == 1
    assert await store.deliver_buffered_signals() == 0
    ok = (await tasks_by_key(store, dag_id))["ok"]
    assert ok.state == JobState.SUCCEEDED
    assert ok.result == b'"early"'


async def test_signal_racing_promotion_is_never_lost(store: PostgresStore) -> None:
    """Signal's read sees the task blocked while promotion commits concurrently."""
    for _ in range(10):
        dag_id = await create(store, params([task("a"), signal("ok")], [("ok", "a")]))
        await succeed(store, dag_id, "a")
        sent = DAGSignalParams(dag_id=dag_id, name="ok", payload=b"1")
        (delivered, dup), promoted = await asyncio.gather(
            store.signal(sent), store.promote_unblocked()
        )
        assert not dup
        assert promoted >= 1
        got = delivered + await store.deliver_buffered_signals()
        assert got == 1
        assert (await states(store, dag_id))["ok"] == JobState.SUCCEEDED


async def test_buffered_signals_go_oldest_first_one_per_task(store: PostgresStore) -> None:
    dag_id = await create(
        store,
        params([task("a"), signal("s1", "go"), signal("s2", "go")], [("s1", "a"), ("s2", "a")]),
    )
    for n in (b"1", b"2", b"3"):
        await store.signal(DAGSignalParams(dag_id=dag_id, name="go", payload=n))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    assert await store.deliver_buffered_signals() == 2
    tasks = await tasks_by_key(store, dag_id)
    assert sorted([tasks["s1"].result, tasks["s2"].result]) == [b"1", b"2"]


async def test_signal_on_missing_or_terminal_dag_is_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.signal(DAGSignalParams(dag_id=uuid.uuid4(), name="x"))
    dag_id = await create(store, params([signal("ok")]))
    await store.cancel_dag(dag_id)
    with pytest.raises(NotFoundError):
        await store.signal(DAGSignalParams(dag_id=dag_id, name="ok"))


async def test_signal_to_paused_dag_buffers_until_resume(store: PostgresStore) -> None:
    dag_id = await create(store, params([signal("ok"), task("x")]))
    await store.pause_dag(dag_id, "maintenance")
    assert await store.signal(DAGSignalParams(dag_id=dag_id, name="ok", payload=b"7")) == (0, False)
    assert await store.deliver_buffered_signals() == 0
    await store.retry_dag(dag_id)
    assert await store.deliver_buffered_signals() == 1
    assert (await tasks_by_key(store, dag_id))["ok"].result == b"7"


# --- lookups and results -----------------------------------------------------------


async def test_find_dag_by_key_resolves_live_runs_only(store: PostgresStore) -> None:
    p = params([task("a")], key="biz-9")
    await create(store, p)
    assert await store.find_dag_by_key("d", "biz-9") == p.id
    await store.pause_dag(p.id, "paused runs still hold their key")
    assert await store.find_dag_by_key("d", "biz-9") == p.id
    with pytest.raises(NotFoundError):
        await store.find_dag_by_key("other", "biz-9")
    await store.cancel_dag(p.id)
    with pytest.raises(NotFoundError):
        await store.find_dag_by_key("d", "biz-9")


async def test_task_results_distinguish_skipped_from_succeeded_without_result(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store, params([task("with"), task("without"), task("skip"), task("open")])
    )
    await succeed(store, dag_id, "with", b'{"v":1}')
    await succeed(store, dag_id, "without", None)
    await skip(store, dag_id, "skip", "nothing to do")
    res = await store.task_results(dag_id, [])
    assert set(res) == {"with", "without", "skip"}
    assert res["with"].result == b'{"v":1}'
    assert not res["with"].skipped
    assert res["without"].result is None
    assert not res["without"].skipped
    assert res["skip"].skipped
    assert res["skip"].result is None
    assert set(await store.task_results(dag_id, ["with", "open"])) == {"with"}
    skipped = (await tasks_by_key(store, dag_id))["skip"]
    assert skipped.state == JobState.SKIPPED
    assert skipped.last_error == "nothing to do"


async def test_ack_task_result_is_fenced_by_lease_token(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    with pytest.raises(NotFoundError):
        await store.ack_task_result(j.id, uuid.uuid4(), b"1")
    await store.ack_task_result(j.id, j.lease_token, b"2")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        await store.ack_task_result(j.id, j.lease_token, b"3")  # type: ignore[arg-type]
    done = (await tasks_by_key(store, dag_id))["a"]
    assert done.result == b"2"
    assert done.state == JobState.SUCCEEDED
    assert done.lease_until is None


async def test_get_dag_unknown_id_is_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.get_dag(uuid.uuid4())


async def test_dead_task_results_are_absent(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a")]))
    await kill(store, dag_id, "a")
    assert await store.task_results(dag_id, []) == {}


async def test_signal_during_uncommitted_promotion_buffers_then_delivers(
    store: PostgresStore,
) -> None:
    """Forced interleaving: promotion has moved the task but not committed when the
    signal arrives, so the signal sees it blocked and buffers; the next
    DeliverBufferedSignals hands it over."""
    dag_id = await create(store, params([task("a"), signal("ok")], [("ok", "a")]))
    await succeed(store, dag_id, "a")
    async with store.transaction() as conn:
        promoted = await store._fetchrow("dag_promote_unblocked", store.channel, None, conn=conn)
        assert promoted is not None
        assert promoted["promoted"] == 1
        sent = DAGSignalParams(dag_id=dag_id, name="ok", payload=b'"raced"')
        assert await asyncio.wait_for(store.signal(sent), 5) == (0, False)
    assert (await states(store, dag_id))["ok"] == JobState.WAITING
    assert await store.deliver_buffered_signals() == 1
    ok = (await tasks_by_key(store, dag_id))["ok"]
    assert (ok.state, ok.result) == (JobState.SUCCEEDED, b'"raced"')


async def test_trace_context_goes_to_the_header_and_every_task_and_survives_dedupe(
    store: PostgresStore,
) -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    p = params([task("a"), task("b")], [("b", "a")], key="k", meta={"tenant": "t1"})
    assert await store.create_dag(p, trace_context=carrier) == (True, None)
    assert await store.dag_trace_context(p.id) == carrier
    assert (await store.get_dag(p.id)).meta == {"tenant": "t1"}  # the header keeps user meta
    for j in await store.dag_tasks(p.id):
        assert j.meta == {"tenant": "t1", **carrier}
    # a deduplicated start leaves the live run's carrier alone
    other = {"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}
    again = params([task("a")], key="k")
    assert await store.create_dag(again, trace_context=other) == (False, p.id)
    assert await store.dag_trace_context(p.id) == carrier
    # without a carrier nothing is stored
    plain = params([task("a")])
    await store.create_dag(plain)
    assert await store.dag_trace_context(plain.id) == {}
    with pytest.raises(NotFoundError):
        await store.dag_trace_context(uuid.uuid4())
