"""Real SIGKILLs at every point of the hot path (local dispatch, completion folded
into the next pass, eager start): right after a commit that leased an activity
to the dying worker, between an activity's end and the commit of its outcome,
and right after a folded commit. A second worker process finishes the run:
each recorded result is in history exactly once, idempotent activities re-run
after their lease expired, non-idempotent ones are parked uncertain (never
re-run), the history replays cleanly. Both cache modes."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from azync_flow.client import Client
from azync_flow.replay import Replayer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState

from .test_workflow_kill import APP_MODULE, done_steps, event_types, lines, run_worker

ORDER = ["reserve-done", "charge-done", "ship-done"]


@pytest.fixture(autouse=True, params=["1000", "0"], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CACHE_SIZE", request.param)
    return str(request.param)


async def completed_seqs(handle: object) -> list[int]:
    history = await handle.history()  # type: ignore[attr-defined]
    return sorted(
        e.event.scheduled_seq for e in history if type(e.event).__name__ == "ActivityCompleted"
    )


async def assert_replays(store: PostgresStore, run_id: uuid.UUID) -> None:
    history = await Client(store).get_handle(run_id).recorded_history()
    report = Replayer(APP_MODULE.WORKFLOWS).replay(history)
    assert report.ok, report


async def test_sigkill_after_the_eager_start_commit_leaves_a_leased_activity_rerun(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """The start + first pass committed with reserve leased to the dying worker,
    which never ran it: the lease expires, another worker runs it once."""
    ledger = tmp_path / "ledger"
    run_id = uuid.uuid4()
    code = await run_worker(
        pg_dsn,
        schema,
        run_id,
        ledger,
        "after_pass:1",
        EAGER_START="killable_order:o-20",
    )
    assert code == -signal.SIGKILL
    handle = Client(store).get_handle(run_id)
    assert await event_types(handle) == ["ActivityScheduled"]
    reserve = await store.pool.fetchrow(
        "SELECT state, attempt FROM azync_jobs WHERE run_id = $1 AND kind = '$op:reserve@1'",
        run_id,
    )
    assert (reserve["state"], reserve["attempt"]) == ("active", 1)  # leased in the start's commit
    assert not ledger.exists() or lines(ledger) == []
    assert await run_worker(pg_dsn, schema, run_id, ledger) == 0
    assert await handle.result(timeout=10) == ORDER
    assert done_steps(ledger) == ["done:reserve:o-20", "done:charge:o-20", "done:ship:o-20"]
    assert await completed_seqs(handle) == [1, 3, 5]
    await assert_replays(store, run_id)


async def test_sigkill_after_a_pass_leased_an_activity_locally(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-21")
    assert await run_worker(pg_dsn, schema, handle.id, ledger, "after_pass:1") == -signal.SIGKILL
    states = await store.pool.fetch(
        "SELECT kind, state FROM azync_jobs WHERE run_id = $1 AND kind <> '$wft'", handle.id
    )
    assert [(r["kind"], r["state"]) for r in states] == [("$op:reserve@1", "active")]
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ORDER
    assert lines(ledger).count("start:reserve:o-21") == 1  # the dead worker never started it
    assert await completed_seqs(handle) == [1, 3, 5]
    await assert_replays(store, handle.id)


async def test_sigkill_between_an_activity_end_and_its_commit_reruns_an_idempotent_one(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-22")
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "before_settle:charge")
    assert code == -signal.SIGKILL
    assert done_steps(ledger) == ["done:reserve:o-22", "done:charge:o-22"]
    assert (await event_types(handle)).count("ActivityCompleted") == 1  # charge's not recorded
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ORDER
    # charge ran again after its lease expired; its outcome is recorded once
    assert lines(ledger).count("done:charge:o-22") == 2
    assert await completed_seqs(handle) == [1, 3, 5]
    await assert_replays(store, handle.id)


async def test_sigkill_between_a_non_idempotent_end_and_its_commit_parks_it_uncertain(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    client = Client(store)
    handle = await client.start(APP_MODULE.wire_order, "o-23")
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "before_settle:wire")
    assert code == -signal.SIGKILL
    assert await run_worker(pg_dsn, schema, handle.id, ledger, UNTIL="suspended") == 0
    assert lines(ledger) == ["start:wire:o-23", "done:wire:o-23"]  # never re-run
    [op] = await client.list_uncertain(handle.id)
    assert "lease" in op.reason
    await client.resolve_uncertain(op, "complete", result="wired", decided_by="ops")
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == "wired"
    assert lines(ledger) == ["start:wire:o-23", "done:wire:o-23"]


async def test_sigkill_right_after_a_folded_commit_loses_nothing(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Pass 2 (folded into reserve's completion on the sticky path) committed
    reserve's outcome and leased charge to the dying worker."""
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-24")
    assert await run_worker(pg_dsn, schema, handle.id, ledger, "after_pass:2") == -signal.SIGKILL
    assert await event_types(handle) == [
        "ActivityScheduled",
        "ActivityCompleted",
        "ActivityScheduled",
    ]
    assert (await handle.describe()).state == WorkflowState.RUNNING
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ORDER
    steps = done_steps(ledger)
    # charge was leased to the dying worker: an idempotent (thread) activity, it
    # may have run there before the kill landed, then again after its lease expired
    assert steps.count("done:charge:o-24") in (1, 2)
    assert [x for x in steps if x != "done:charge:o-24"] == ["done:reserve:o-24", "done:ship:o-24"]
    assert await completed_seqs(handle) == [1, 3, 5]
    await assert_replays(store, handle.id)
