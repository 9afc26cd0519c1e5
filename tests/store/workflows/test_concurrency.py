"""Mixed concurrent traffic on a few executions from separate connections:
passes, signals, operation completions and retries never break the
one-runnable / one-active workflow task rule, deadlock, or lose a signal."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from datetime import timedelta

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.store.workflows import SignalParams
from tests.store.workflow_helpers import LEASE, commit_workflow_task, op_params, started

ROUNDS = 40


async def _pass_worker(s: PostgresStore, rng: random.Random, errors: list[BaseException]) -> int:
    passes = 0
    for _ in range(ROUNDS):
        for task in [t.job for t in await s.lease_workflow_tasks(2, LEASE)]:
            assert task.run_id is not None
            assert task.lease_token is not None
            state = await s.load_workflow_task(task.run_id)
            try:
                if rng.random() < 0.2:  # a pass that crashed: retry with backoff
                    await s.reschedule(task.id, task.lease_token, timedelta(0), "crash")
                    continue
                seq = state.next_seq
                consumed = [(sig.signal_id, seq + i) for i, sig in enumerate(state.signals)]
                await commit_workflow_task(
                    s,
                    task.id,
                    task.lease_token,
                    task.run_id,
                    seq,
                    events=[("SignalReceived", b"{}")] * len(consumed) + [("Sched", b"{}")],
                    operations=[op_params(task.run_id, seq + len(consumed))],
                    consumed_signals=consumed,
                )
                passes += 1
            except ConflictError:
                with contextlib.suppress(NotFoundError):
                    await s.abandon_workflow_task(task.id, task.lease_token)
            except BaseException as err:
                errors.append(err)
                raise
        await asyncio.sleep(0)
    return passes


async def _op_worker(s: PostgresStore) -> None:
    for _ in range(ROUNDS):
        ops = await s.dequeue_batch(
            Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=3, lease=LEASE)
        )
        for op in ops:
            assert op.run_id is not None
            assert op.lease_token is not None
            await s.complete_operation(op.id, op.lease_token, op.run_id, "Done", b"1")
        await asyncio.sleep(0)


async def _signaler(s: PostgresStore, runs: list[uuid.UUID], rng: random.Random) -> int:
    sent = 0
    for i in range(ROUNDS):
        wid = rng.choice(runs)
        await s.signal_workflow(SignalParams(workflow_id=wid, name="s", message_id=f"m{i}"))
        sent += 1
        await asyncio.sleep(0)
    return sent


async def test_mixed_concurrent_traffic_keeps_the_task_rules_and_every_signal(
    store: PostgresStore, pg_dsn: str
) -> None:
    runs = [await started(store) for _ in range(4)]
    stores = [
        await open_store(pg_dsn, Config(schema=store.schema, max_pool_size=3), migrate=False)
        for _ in range(5)
    ]
    errors: list[BaseException] = []
    try:
        rng = random.Random(7)
        results = await asyncio.gather(
            _pass_worker(stores[0], random.Random(1), errors),
            _pass_worker(stores[1], random.Random(2), errors),
            _op_worker(stores[2]),
            _op_worker(stores[3]),
            _signaler(stores[4], runs, rng),
        )
    finally:
        for s in stores:
            await s.close()
    assert errors == []
    assert results[0] + results[1] > 0
    sent = results[4]
    # The rules held throughout (the unique index would have raised) and hold now.
    worst = await store.pool.fetchval(
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) n FROM azync_jobs WHERE task_key = '$wft'"
        " AND state IN ('pending', 'scheduled') GROUP BY run_id) c"
    )
    assert worst <= 1
    active = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE task_key = '$wft' AND state = 'active'"
    )
    assert active == 0
    signals = await store.pool.fetchval("SELECT count(*) FROM azync_workflow_signals")
    assert signals == sent
    # Every consumed signal has its SignalReceived event at the recorded seq.
    orphans = await store.pool.fetchval(
        "SELECT count(*) FROM azync_workflow_signals s LEFT JOIN azync_workflow_history h"
        " ON h.workflow_id = s.workflow_id AND h.seq = s.consumed_seq"
        " WHERE s.consumed_seq IS NOT NULL AND h.type IS DISTINCT FROM 'SignalReceived'"
    )
    assert orphans == 0
    # History seqs are gapless per execution.
    gaps = await store.pool.fetchval(
        "SELECT count(*) FROM (SELECT workflow_id, max(seq) m, count(*) c"
        " FROM azync_workflow_history GROUP BY workflow_id) h WHERE m <> c"
    )
    assert gaps == 0
