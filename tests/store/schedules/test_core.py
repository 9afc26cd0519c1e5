"""``ScheduleStore`` clauses against PostgreSQL: insert once per id, the
cursor never moves back, a final run outcome is never overwritten, requests
are idempotent, and ``next_due_at`` counts the next fire of unpaused schedules."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock
from tests.store.schedule_helpers import T0, record


@pytest.fixture
def clock(azync_clock: MovableClock) -> MovableClock:
    azync_clock.set(T0)
    return azync_clock


async def test_a_schedule_id_is_inserted_once_and_read_back_byte_for_byte(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    assert await azync_store.create_schedule(record("a", T0 + timedelta(hours=1)))
    assert not await azync_store.create_schedule(record("a", T0))
    got = await azync_store.get_schedule("a")
    assert got.spec == b'{"cron":["0 * * * *"]}'
    assert got.next_fire_at == T0 + timedelta(hours=1)
    assert got.created_at == T0
    assert await azync_store.current_time() == T0
    with pytest.raises(NotFoundError):
        await azync_store.get_schedule("b")
    with pytest.raises(NotFoundError):
        await azync_store.delete_schedule("b")


async def test_next_due_at_counts_the_next_fire_of_unpaused_schedules(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    assert await azync_store.next_due_at() is None
    await azync_store.create_schedule(record("a", T0 + timedelta(hours=2)))
    await azync_store.create_schedule(record("b", T0 + timedelta(hours=1)))
    assert await azync_store.next_due_at() == T0 + timedelta(hours=1)
    await azync_store.set_schedule_paused("b", True, "", T0, T0 + timedelta(hours=1))
    assert await azync_store.next_due_at() == T0 + timedelta(hours=2)
    clock.set(T0 + timedelta(hours=3))
    assert [s.id for s in await azync_store.due_schedules()] == ["a"]


async def test_the_cursor_never_moves_back(azync_store: PostgresStore, clock: MovableClock) -> None:
    await azync_store.create_schedule(record("a", T0))
    assert await azync_store.advance_schedule("a", T0 + timedelta(hours=2), None)
    assert not await azync_store.advance_schedule("a", T0 + timedelta(hours=1), T0)
    assert (await azync_store.get_schedule("a")).cursor_at == T0 + timedelta(hours=2)


async def test_a_final_run_outcome_is_never_overwritten_and_requests_are_idempotent(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    await azync_store.create_schedule(record("a", T0))
    one, two = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    run = uuid.uuid4()
    assert await azync_store.request_schedule_runs("a", [(one, one, run), (two, two, run)]) == 2
    assert await azync_store.request_schedule_runs("a", [(one, one, run)]) == 0
    assert [r.nominal_at for r in await azync_store.pending_schedule_runs("a")] == [one, two]
    assert await azync_store.record_schedule_run("a", one, one, run, "started") == "started"
    assert await azync_store.record_schedule_run("a", one, one, run, "skipped") is None
    assert await azync_store.request_schedule_runs("a", [(one, one, run)]) == 0
    got = await azync_store.schedule_run("a", one)
    assert got is not None
    assert got.outcome == "started"
    recent = await azync_store.recent_schedule_runs("a", 10, ["started"])
    assert [r.nominal_at for r in recent] == [one]
    assert [s.id for s in await azync_store.schedules_with_pending_runs()] == ["a"]
    await azync_store.delete_schedule("a")
    assert await azync_store.schedule_run("a", two) is None


async def test_schedules_are_listed_by_id_up_to_the_limit(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    assert await azync_store.list_schedules() == []
    for sid in ("c", "a", "b"):
        await azync_store.create_schedule(record(sid, T0))
    assert [s.id for s in await azync_store.list_schedules()] == ["a", "b", "c"]
    assert [s.id for s in await azync_store.list_schedules(limit=2)] == ["a", "b"]


async def test_an_update_replaces_the_values_moves_the_cursor_forward_and_is_recorded(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    await azync_store.create_schedule(record("a", T0 + timedelta(hours=1)))
    clock.set(T0 + timedelta(minutes=5))
    spec, action, policy = b'{"interval":60}', b'{"type":"job","kind":"k2"}', b'{"overlap":"skip"}'
    await azync_store.update_schedule(
        "a", spec, action, policy, T0 + timedelta(minutes=5), T0 + timedelta(minutes=6), "faster"
    )
    got = await azync_store.get_schedule("a")
    assert (got.spec, got.action, got.policy) == (spec, action, policy)
    assert (got.cursor_at, got.next_fire_at) == (
        T0 + timedelta(minutes=5),
        T0 + timedelta(minutes=6),
    )
    assert got.updated_at == T0 + timedelta(minutes=5)
    # a cursor behind the current one is not applied: the cursor never moves back
    await azync_store.update_schedule("a", spec, action, policy, T0, None)
    got = await azync_store.get_schedule("a")
    assert (got.cursor_at, got.next_fire_at) == (T0 + timedelta(minutes=5), None)
    first = (await azync_store.recent_schedule_changes("a", 10))[-1]
    assert (first.verb, first.at, first.note) == ("update", T0 + timedelta(minutes=5), "faster")
    assert (first.old_spec, first.new_spec) == (b'{"cron":["0 * * * *"]}', spec)
    assert (first.old_action, first.new_action) == (b'{"type":"job","kind":"k"}', action)
    assert (first.old_policy, first.new_policy) == (b"{}", policy)
    with pytest.raises(NotFoundError):
        await azync_store.update_schedule("b", spec, action, policy, T0, None)
    assert await azync_store.recent_schedule_changes("b", 10) == []


async def test_edits_are_listed_newest_first_up_to_the_limit(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    await azync_store.create_schedule(record("a", T0))
    await azync_store.create_schedule(record("other", T0))
    await azync_store.update_schedule("a", b"{}", b"{}", b"{}", T0, T0, "edit")
    await azync_store.set_schedule_paused("a", True, "maintenance", T0, T0)
    await azync_store.set_schedule_paused("a", False, "", T0, T0)
    await azync_store.set_schedule_paused("other", True, "", T0, T0)
    changes = await azync_store.recent_schedule_changes("a", 10)
    assert [(c.verb, c.note) for c in changes] == [
        ("unpause", ""),
        ("pause", "maintenance"),
        ("update", "edit"),
    ]
    assert (changes[0].old_spec, changes[0].new_spec) == (None, None)  # pause: no values
    assert [c.verb for c in await azync_store.recent_schedule_changes("a", 2)] == [
        "unpause",
        "pause",
    ]


async def test_a_missed_range_is_recorded_once_and_counted_on_the_schedule(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    await azync_store.create_schedule(record("a", T0))
    first, last = T0 - timedelta(hours=5), T0 - timedelta(hours=3)
    assert await azync_store.record_schedule_missed("a", first, last, 3, True, "catchup")
    assert not await azync_store.record_schedule_missed("a", first, last, 3, True, "catchup")
    later = T0 - timedelta(hours=1)
    assert await azync_store.record_schedule_missed("a", later, later, 1000, False, "paused")
    assert (await azync_store.get_schedule("a")).missed_count == 1003
    missed = await azync_store.recent_schedule_missed("a", 10)
    assert [
        (m.first_nominal_at, m.last_nominal_at, m.count, m.count_exact, m.reason) for m in missed
    ] == [
        (later, later, 1000, False, "paused"),
        (first, last, 3, True, "catchup"),
    ]
    assert missed[0].recorded_at == T0
    assert [m.first_nominal_at for m in await azync_store.recent_schedule_missed("a", 1)] == [later]
    assert await azync_store.recent_schedule_missed("b", 10) == []


async def test_the_last_started_run_is_the_last_in_start_order_not_nominal_order(
    azync_store: PostgresStore, clock: MovableClock
) -> None:
    await azync_store.create_schedule(record("a", T0))
    assert await azync_store.last_started_schedule_run("a") is None
    recent, old = T0 + timedelta(hours=2), T0 - timedelta(days=3)
    await azync_store.record_schedule_run("a", recent, recent, uuid.uuid4(), "started")
    backfilled = uuid.uuid4()  # a backfill of an old nominal time starts after it
    await azync_store.record_schedule_run("a", old, old, backfilled, "started")
    await azync_store.record_schedule_run("a", T0 + timedelta(days=1), T0, uuid.uuid4(), "skipped")
    last = await azync_store.last_started_schedule_run("a")
    assert last is not None
    assert (last.nominal_at, last.run_id, last.outcome) == (old, backfilled, "started")
    assert await azync_store.last_started_schedule_run("b") is None
