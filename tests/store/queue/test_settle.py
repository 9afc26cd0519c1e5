"""Contract clauses of the settle verbs: reschedule, dead, skip, release, snooze,
extend_lease — each fenced by the lease token."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Job, Source
from azync_flow.testing import MovableClock
from tests.store.helpers import enqueue_and_lease, job, lease, row, stat_sums

Settle = Callable[[PostgresStore, Job, uuid.UUID], Awaitable[object]]

SETTLE_VERBS: dict[str, Settle] = {
    "ack": lambda s, j, t: s.ack(j.id, t),
    "reschedule": lambda s, j, t: s.reschedule(j.id, t, timedelta(seconds=5), "err"),
    "dead": lambda s, j, t: s.dead(j.id, t, "err"),
    "skip": lambda s, j, t: s.skip(j.id, t, "why"),
    "release": lambda s, j, t: s.release(j.id, t),
    "snooze": lambda s, j, t: s.snooze(j.id, t, timedelta(seconds=5), "deadline"),
    "extend_lease": lambda s, j, t: s.extend_lease(j.id, t, timedelta(minutes=5)),
}


@pytest.mark.parametrize("verb", sorted(SETTLE_VERBS))
async def test_stale_token_settle_changes_nothing(store: PostgresStore, verb: str) -> None:
    """A foreign token, and the token of a lease that was reaped and re-leased
    , both get NotFoundError and leave the row untouched."""
    settle = SETTLE_VERBS[verb]
    j = await enqueue_and_lease(store, snooze_budget=timedelta(seconds=1))
    before = dict(await row(store, j.id))
    with pytest.raises(NotFoundError):
        await settle(store, j, uuid.uuid4())
    assert dict(await row(store, j.id)) == before

    # the lease expires, is reaped and re-leased: the first holder is fenced out
    await store.pool.execute("UPDATE azync_jobs SET lease_until = now() - interval '1s'")
    assert await store.reap_expired(Source.QUEUE, ["k"], 5) == (1, 0)
    (again,) = await lease(store)
    before = dict(await row(store, j.id))
    with pytest.raises(NotFoundError):
        await settle(store, j, j.lease_token)
    assert dict(await row(store, j.id)) == before
    assert await store.pool.fetchval("SELECT count(*) FROM azync_job_attempts") == 0
    await settle(store, again, again.lease_token)  # the current holder still can


async def test_reschedule_parks_scheduled_and_records_attempt(
    store: PostgresStore, clock: MovableClock
) -> None:
    j = await enqueue_and_lease(store)
    t = clock.advance(timedelta(seconds=1))
    await store.reschedule(j.id, j.lease_token, timedelta(minutes=2), "E1")
    r = await row(store, j.id)
    assert (r["state"], r["run_at"], r["last_error"], r["attempt"]) == (
        "scheduled",
        t + timedelta(minutes=2),
        "E1",
        1,
    )
    assert r["lease_until"] is None
    history = await store.job_attempts(Source.QUEUE, j.id)
    assert [(a.attempt, a.error, a.at) for a in history] == [(1, "E1", t)]


async def test_dead_dead_letters_and_records_final_attempt(store: PostgresStore) -> None:
    j = await enqueue_and_lease(store)
    await store.dead(j.id, j.lease_token, "fatal")
    r = await row(store, j.id)
    assert (r["state"], r["last_error"]) == ("dead", "fatal")
    assert r["failed_at"] is not None
    assert [(a.attempt, a.error) for a in await store.job_attempts(Source.QUEUE, j.id)] == [
        (1, "fatal")
    ]
    assert (await stat_sums(store, "k"))["failed"] == 1


async def test_skip_settles_skipped_and_counts_processed(store: PostgresStore) -> None:
    j = await enqueue_and_lease(store)
    await store.skip(j.id, j.lease_token, "nothing to do")
    r = await row(store, j.id)
    assert (r["state"], r["last_error"], r["result"]) == ("skipped", "nothing to do", None)
    assert r["completed_at"] is not None
    assert await store.job_attempts(Source.QUEUE, j.id) == []
    assert (await stat_sums(store, "k"))["processed"] == 1


async def test_release_returns_pending_and_gives_back_attempt(store: PostgresStore) -> None:
    j = await enqueue_and_lease(store)
    await store.release(j.id, j.lease_token)
    r = await row(store, j.id)
    assert (r["state"], r["attempt"], r["lease_until"]) == ("pending", 0, None)
    assert await store.job_attempts(Source.QUEUE, j.id) == []


async def test_extend_lease_renews_from_backend_now(
    store: PostgresStore, clock: MovableClock
) -> None:
    j = await enqueue_and_lease(store)
    t = clock.advance(timedelta(seconds=20))
    await store.extend_lease(j.id, j.lease_token, timedelta(minutes=5))
    assert (await row(store, j.id))["lease_until"] == t + timedelta(minutes=5)
    # a heartbeat keeps the reaper away past the original lease
    clock.advance(timedelta(minutes=1))
    assert await store.reap_expired(Source.QUEUE, None, 5) == (0, 0)


async def test_snooze_gives_back_attempt_and_records_none(
    store: PostgresStore, clock: MovableClock
) -> None:
    """ten snoozes never spend the 3-attempt budget."""
    await store.enqueue(job(max_attempts=3, max_attempts_explicit=True))
    for _ in range(10):
        (j,) = await lease(store)
        assert j.attempt == 1
        t = clock.advance(timedelta(seconds=1))
        assert await store.snooze(j.id, j.lease_token, timedelta(seconds=1), "dl") is False
        r = await row(store, j.id)
        assert (r["state"], r["attempt"], r["run_at"]) == ("scheduled", 0, t + timedelta(seconds=1))
        assert r["deadline_at"] is None  # no budget: never stamped
        clock.advance(timedelta(seconds=1))
        assert await store.promote_due(Source.QUEUE, ["k"]) == 1
    (j,) = await lease(store)
    await store.reschedule(j.id, j.lease_token, timedelta(0), "real failure")
    assert [a.attempt for a in await store.job_attempts(Source.QUEUE, j.id)] == [1]


async def test_snooze_first_stamps_deadline_from_budget(
    store: PostgresStore, clock: MovableClock
) -> None:
    j = await enqueue_and_lease(store, snooze_budget=timedelta(minutes=30))
    assert (await row(store, j.id))["deadline_at"] is None  # not stamped at enqueue/lease
    t1 = clock.advance(timedelta(hours=5))  # time before the first snooze does not count
    await store.snooze(j.id, j.lease_token, timedelta(minutes=1), "dl")
    assert (await row(store, j.id))["deadline_at"] == t1 + timedelta(minutes=30)
    clock.advance(timedelta(minutes=2))
    await store.promote_due(Source.QUEUE)
    (j,) = await lease(store)
    assert await store.snooze(j.id, j.lease_token, timedelta(minutes=1), "dl") is False
    assert (await row(store, j.id))["deadline_at"] == t1 + timedelta(minutes=30)  # not re-stamped


async def test_snooze_past_deadline_dead_letters(store: PostgresStore, clock: MovableClock) -> None:
    j = await enqueue_and_lease(store, snooze_budget=timedelta(seconds=30))
    await store.snooze(j.id, j.lease_token, timedelta(seconds=10), "snooze deadline exceeded")
    clock.advance(timedelta(seconds=31))
    await store.promote_due(Source.QUEUE)
    (j,) = await lease(store)
    deadlined = await store.snooze(
        j.id, j.lease_token, timedelta(seconds=10), "snooze deadline exceeded"
    )
    assert deadlined is True
    r = await row(store, j.id)
    assert (r["state"], r["last_error"], r["attempt"]) == ("dead", "snooze deadline exceeded", 1)
    assert [(a.attempt, a.error) for a in await store.job_attempts(Source.QUEUE, j.id)] == [
        (1, "snooze deadline exceeded")
    ]
    assert (await stat_sums(store, "k"))["failed"] == 1


async def test_settle_error_text_with_nul_and_surrogate_is_stored_escaped(
    store: PostgresStore,
) -> None:
    """recording a failure whose message holds NUL or a lone
    surrogate never fails, so the job is never left active."""
    j = await enqueue_and_lease(store)
    await store.reschedule(j.id, j.lease_token, timedelta(0), "bad \x00 byte \ud800")
    r = await row(store, j.id)
    assert r["state"] == "scheduled"
    assert r["last_error"] == "bad \\x00 byte \\ud800"
