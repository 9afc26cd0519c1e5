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
