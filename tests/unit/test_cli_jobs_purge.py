"""`azync-flow jobs purge`: deletes one kind's jobs in one state, only with --yes."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, EnqueueParams, JobState, Source
from tests.cli_runner import Cli


async def _enqueue(store: PostgresStore, kind: str) -> uuid.UUID:
    id = uuid.uuid4()
    assert await store.enqueue(EnqueueParams(id=id, kind=kind, payload=b"{}"))
    return id


async def _states(store: PostgresStore) -> list[tuple[str, str]]:
    rows = await store.pool.fetch("SELECT kind, state FROM azync_jobs ORDER BY kind, state")
    return [(r["kind"], r["state"]) for r in rows]


async def test_purge_without_yes_counts_and_deletes_nothing(cli: Cli, store: PostgresStore) -> None:
    for kind in ("email", "email", "sms"):
        await _enqueue(store, kind)
    code, out, _ = await cli("jobs", "purge", "--kind", "email", "--state", "pending")
    assert (code, out["would_delete"], out["deleted"]) == (0, 2, 0)
    code, text, _ = await cli(
        "jobs", "purge", "--kind", "email", "--state", "pending", as_json=False
    )
    assert code == 0
    assert "would delete 2 pending queue job(s)" in text
    assert "--yes" in text
    assert len(await _states(store)) == 3


async def test_purge_with_yes_deletes_that_kind_in_that_state(
    cli: Cli, store: PostgresStore
) -> None:
    for kind in ("email", "email", "sms"):
        await _enqueue(store, kind)
    leased = await _enqueue(store, "other")
    (job,) = await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind="other", limit=1, lease=timedelta(seconds=30))
    )
    assert job.id == leased
    code, out, _ = await cli("jobs", "purge", "--kind", "email", "--state", "pending", "--yes")
    assert (code, out["deleted"]) == (0, 2)
    assert await _states(store) == [("other", "active"), ("sms", "pending")]


async def test_purge_refuses_in_flight_states_owned_sources_and_bad_kinds(
    cli: Cli, store: PostgresStore
) -> None:
    await _enqueue(store, "email")
    for state in (JobState.ACTIVE, JobState.UNCERTAIN):
        code, _, err = await cli("jobs", "purge", "--kind", "email", "--state", state, "--yes")
        assert code == 2
        assert "invalid choice" in err
    for source, hint in (("workflow", "workflows terminate"), ("dag", "dags cancel")):
        code, _, err = await cli(
            "jobs", "purge", "--kind", "k", "--state", "pending", "--source", source, "--yes"
        )
        assert code == 2
        assert "cannot be purged" in err
        assert hint in err
    code, _, err = await cli("jobs", "purge", "--kind", "", "--state", "pending", "--yes")
    assert code == 2
    assert "--kind must not be empty" in err
    code, _, err = await cli("jobs", "purge", "--state", "pending", "--yes")
    assert code == 2
    assert "--kind" in err
    assert await _states(store) == [("email", "pending")]
