"""Concurrent pass commits and operation completions never deadlock on the
daily counters, and the counters stay exact.

Before, each commit upserted a random stats shard on ack ($wft processed) and
another on scheduling (next $wft enqueued, $op enqueued), and an operation
completion did the same in the opposite kind order, so concurrent commits
locked stats rows in opposite orders: PostgreSQL aborted one with 40P01.
Counting is now an insert of delta rows (no shared row is locked at all).
No retries here: any deadlock fails the test.
"""

from __future__ import annotations

import asyncio
import uuid

from azync_flow.errors import ConflictError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, Source
from tests.store.workflow_helpers import LEASE, commit_workflow_task, op_params, started

RUNS = 12
ROUNDS = 6


async def _commit_round(s: PostgresStore, runs: list[uuid.UUID]) -> None:
    tasks = [t.job for t in await s.lease_workflow_tasks(len(runs), LEASE)]
    states = {t.run_id: await s.load_workflow_task(t.run_id) for t in tasks}  # type: ignore[arg-type]

    async def commit(t: object) -> None:
        run_id = t.run_id  # type: ignore[attr-defined]
        seq = states[run_id].next_seq
        try:
            await commit_workflow_task(
                s,
                t.id,  # type: ignore[attr-defined]
                t.lease_token,  # type: ignore[attr-defined]
                run_id,
                seq,
                events=[("Sched", b"{}")],
                operations=[op_params(run_id, seq)],
                next_task_at="now",
            )
        except ConflictError:  # an operation completion of the run won: the fence
            await s.abandon_workflow_task(t.id, t.lease_token)  # type: ignore[attr-defined]

    ops = await s.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=len(runs), lease=LEASE)
    )

    async def complete(op: object) -> None:
        await s.complete_operation(
            op.id,  # type: ignore[attr-defined]
            op.lease_token,  # type: ignore[attr-defined]
            op.run_id,  # type: ignore[attr-defined]
            "Done",
            b"1",
        )

    # Commits of one round race the completions of the previous round's operations.
    await asyncio.gather(*(commit(t) for t in tasks), *(complete(o) for o in ops))


async def test_concurrent_pass_commits_and_completions_do_not_deadlock_on_stats(
    store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    s = await open_store(pg_dsn, Config(schema=schema, max_pool_size=RUNS + 8), migrate=False)
    try:
        runs = [await started(s) for _ in range(RUNS)]
        for _ in range(ROUNDS):
            await _commit_round(s, runs)
        jobs = await s.pool.fetch(
            "SELECT kind, count(*) AS enq, count(*) FILTER (WHERE state = 'succeeded') AS proc"
            " FROM azync_jobs WHERE source = 'workflow' GROUP BY kind ORDER BY kind"
        )
        # the counters, read through the store's verb, match the jobs exactly
        assert await s.list_kinds(Source.WORKFLOW) == [r["kind"] for r in jobs]
        for r in jobs:
            _, daily = await s.stats(Source.WORKFLOW, r["kind"])
            counted = (sum(d.enqueued for d in daily), sum(d.processed for d in daily))
            assert counted == (r["enq"], r["proc"])
        assert {r["kind"] for r in jobs} == {"$wft", "$op:charge@1"}
        assert min(r["proc"] for r in jobs) >= RUNS
    finally:
        await s.close()
