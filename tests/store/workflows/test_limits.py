"""Limits of activity operations in the workflow store (real PostgreSQL): an
operation carries its limit key; one a pass leases to its worker (local
dispatch) is leased only when its limits admit it, else inserted pending
for the limited lease; describe says which limit a run waits for."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, LimitSpec, Source
from azync_flow.store.workflows import OperationLease, PassWrite
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import LEASE, lease_task, op_params, started

PER_CUSTOMER = LimitSpec(name="per-customer", type="concurrency", capacity=1, per_key=True)


async def _pass(store: PostgresStore, seqs: list[int], key: str | None) -> tuple[uuid.UUID, list]:
    """A first pass scheduling one charge per seq, keyed ``key``, all claimed locally."""
    wid = await started(store)
    task = await lease_task(store, wid)
    ops = [msgspec.structs.replace(op_params(wid, s), limit_key=key) for s in seqs]
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}") for _ in seqs],
        operations=ops,
        local=OperationLease(
            keys=[o.execution_key for o in ops], lease=LEASE, default_max_attempts=3
        ),
    )
    assert task.lease_token is not None
    result = await store.commit_pass(task.id, task.lease_token, wid, write)
    return wid, result.leased


async def test_a_local_operation_is_leased_in_the_commit_only_when_its_limit_admits_it(
    store: PostgresStore,
) -> None:
    await store.declare_limits(Source.WORKFLOW, "$op:charge@1", [PER_CUSTOMER])
    wid, leased = await _pass(store, [1, 2], "acme")
    assert len(leased) == 1  # the second would exceed acme's limit of 1
    _, other = await _pass(store, [1], "globex")
    assert len(other) == 1  # another key has its own slot
    waiting = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=5, lease=LEASE)
    )
    assert waiting == []  # acme's slot is held by the local lease
    view = await store.get_workflow_execution(wid)
    assert "waits for concurrency limit 'per-customer' (key 'acme')" in view.blocked_reason
    assert leased[0].lease_token is not None
    await store.release(leased[0].id, leased[0].lease_token)
    again = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=5, lease=LEASE)
    )
    assert [j.limit_key for j in again] == ["acme"]


async def test_an_unlimited_operation_is_leased_locally_as_before(store: PostgresStore) -> None:
    _, leased = await _pass(store, [1, 2], None)
    assert len(leased) == 2


async def test_a_terminated_runs_active_call_holds_its_slot_until_its_lease_ends(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    await store.declare_limits(Source.WORKFLOW, "$op:charge@1", [PER_CUSTOMER])
    wid, leased = await _pass(store, [1], "acme")
    assert len(leased) == 1  # running on its worker
    await store.terminate_workflow(
        wid, "stop", "ops@host", ("WorkflowTerminated", b'{"type":"WorkflowTerminated"}')
    )
    _, waiting = await _pass(store, [1], "acme")
    assert waiting == []  # the terminated call may still be running: no second one
    dequeue = DequeueParams(kind="$op:charge@1", limit=5, lease=LEASE)
    assert await store.dequeue_batch(Source.WORKFLOW, dequeue) == []
    usage = {u.spec.name: u for u in await store.list_limits()}
    assert usage["per-customer"].in_flight == 1
    clock.advance(LEASE + timedelta(seconds=1))  # its worker would have noticed by now
    again = await store.dequeue_batch(Source.WORKFLOW, dequeue)
    assert [j.limit_key for j in again] == ["acme"]
