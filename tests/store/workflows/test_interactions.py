"""Store verbs of queries and update outcomes (``WorkflowInteractionStore``)
against the real schema: claiming, answering, withdrawing, deadlines, and the
first-outcome-wins rule of updates."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store import Config, Subscription
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import (
    DONE_RESET,
    PassWrite,
    QueryAnswer,
    QueryRequest,
    SignalParams,
    UpdateOutcome,
)
from azync_flow.testing import MovableClock, drop_schema, unique_schema
from tests.store.workflow_helpers import commit, finish, lease_task, start_params, started


def request(wid: uuid.UUID, timeout: float = 10.0) -> QueryRequest:
    return QueryRequest(
        id=uuid.uuid4(),
        workflow_id=wid,
        name="status",
        args=b"[1]",
        timeout=timedelta(seconds=timeout),
    )


async def test_a_query_of_a_missing_execution_is_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        await store.request_workflow_query(request(uuid.uuid4()))


async def test_each_query_is_claimed_once_and_only_by_a_worker_of_its_workflow(
    store: PostgresStore,
) -> None:
    wid = await started(store, name="order")
    q = request(wid)
    assert await store.request_workflow_query(q) == "order"
    assert await store.claim_workflow_queries(["invoice"], 10) == []
    first, second = await asyncio.gather(
        store.claim_workflow_queries(["order"], 10), store.claim_workflow_queries(["order"], 10)
    )
    claims = first + second
    assert [(c.id, c.workflow_id, c.name, c.args) for c in claims] == [
        (q.id, wid, "status", b"[1]")
    ]
    assert await store.take_workflow_query(q.id) is None  # not answered yet
    answer = QueryAnswer(state="answered", answer=b'"ok"')
    assert await store.answer_workflow_query(q.id, answer)
    assert await store.take_workflow_query(q.id) == answer
    assert await store.take_workflow_query(q.id) is None  # taken: deleted


async def test_a_withdrawn_query_cannot_be_answered(store: PostgresStore) -> None:
    wid = await started(store)
    q = request(wid)
    await store.request_workflow_query(q)
    assert len(await store.claim_workflow_queries(["order"], 10)) == 1
    withdrawn = await store.take_workflow_query(q.id, withdraw=True)
    assert withdrawn is not None
    assert withdrawn.state == "claimed"
    assert not await store.answer_workflow_query(q.id, QueryAnswer(state="answered"))


async def test_a_query_past_its_deadline_is_not_claimed_and_is_dropped_later(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid = await started(store)
    q = request(wid, timeout=1.0)
    await store.request_workflow_query(q)
    clock.advance(timedelta(seconds=2))
    assert await store.claim_workflow_queries(["order"], 10) == []
    clock.advance(timedelta(minutes=2))
    await store.claim_workflow_queries(["order"], 10)
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_queries") == 0


async def test_update_outcomes_ride_on_the_pass_commit_and_the_first_one_wins(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    assert await store.get_workflow_update(wid, "u1") is None
    done = UpdateOutcome(update_id="u1", name="add", state="completed", result=b"3")
    job = await lease_task(store, wid)
    assert job.lease_token is not None
    await store.commit_pass(
        job.id, job.lease_token, wid, PassWrite(expected_next_seq=1, updates=[done])
    )
    assert await store.get_workflow_update(wid, "u1") == done
    # a later pass deciding the same id again (it cannot, the engine refuses a
    # reused id; the store keeps the first outcome anyway)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="poke", payload=b"null"))
    job = await lease_task(store, wid)
    assert job.lease_token is not None
    other = UpdateOutcome(update_id="u1", name="add", state="rejected", error_type="ValueError")
    write = PassWrite(expected_next_seq=1, updates=[other])
    await store.commit_pass(job.id, job.lease_token, wid, write)
    assert await store.get_workflow_update(wid, "u1") == done


async def _next_done(sub: Subscription[uuid.UUID]) -> uuid.UUID:
    async with asyncio.timeout(10):
        return await anext(sub)


async def test_done_events_name_executions_that_end_answer_a_query_or_decide_an_update(
    store: PostgresStore,
) -> None:
    sub = await store.workflow_done_events()
    assert sub is not None
    async with sub:
        running, ended = await started(store), await started(store)
        await commit(store, running, events=[("E", b"")])  # a pass that ends nothing
        await finish(store, ended, ("complete", b"1"))
        assert await _next_done(sub) == ended  # nothing came before it
        asked = await started(store, name="order")
        q = request(asked)
        await store.request_workflow_query(q)
        await store.claim_workflow_queries(["order"], 10)
        assert await store.answer_workflow_query(q.id, QueryAnswer(state="answered", answer=b"1"))
        assert await _next_done(sub) == asked
        updated = await started(store)
        decided = UpdateOutcome(update_id="u1", name="set", state="completed", result=b"1")
        await commit(store, updated, updates=[decided])
        assert await _next_done(sub) == updated


async def test_done_events_reset_after_a_reconnect_and_are_none_when_poll_only(
    store: PostgresStore, pg_dsn: str
) -> None:
    sub = await store.workflow_done_events()
    assert sub is not None
    async with sub:
        listener = await store.pool.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE query = $1", f'LISTEN "{store.channel}"'
        )
        assert listener is not None
        assert await store.pool.fetchval("SELECT pg_terminate_backend($1)", listener)
        assert await _next_done(sub) == DONE_RESET  # hints may have been missed: re-read
        wid = await started(store)
        await finish(store, wid, ("fail", "x"))
        assert await _next_done(sub) == wid  # the new session listens
    schema = unique_schema()
    poll_only = await open_store(pg_dsn, Config(schema=schema, poll_only=True))
    try:
        assert await poll_only.workflow_done_events() is None
    finally:
        await poll_only.close()
        await drop_schema(pg_dsn, schema)


async def test_workflow_trace_context_is_the_carrier_recorded_at_start(
    store: PostgresStore,
) -> None:
    traced = start_params()
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    await store.start_workflow(traced, trace_context=carrier)
    assert await store.workflow_trace_context(traced.id) == carrier
    assert await store.workflow_trace_context(await started(store)) == {}
    with pytest.raises(NotFoundError, match="does not exist"):
        await store.workflow_trace_context(uuid.uuid4())
