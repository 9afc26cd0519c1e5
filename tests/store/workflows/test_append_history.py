"""Contract clauses of ``WorkflowAdmin.append_history`` (``AppendHistory``): one
event at the execution's next seq, its seq returned, fenced with pass commits
(seqs unique and gapless), an unknown execution refused."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.postgres import PostgresStore
from tests.store.workflow_helpers import (
    commit,
    commit_workflow_task,
    finish,
    lease_task,
    runnable_tasks,
    started,
)

NOTE = ("OperatorNote", b'{"type":"OperatorNote","message":"checked"}')


async def next_seq(store: PostgresStore, wid: uuid.UUID) -> int:
    return (await store.load_workflow_task(wid)).next_seq


async def seqs(store: PostgresStore, wid: uuid.UUID) -> list[tuple[int, str]]:
    return [(e.seq, e.type) for e in await store.list_history(wid)]


async def test_append_history_writes_at_the_next_seq_and_returns_it(store: PostgresStore) -> None:
    wid = await started(store)
    assert await store.append_history(wid, *NOTE) == 1
    assert await commit(store, wid, events=[("TimerStarted", b"{}")]) == 3  # the pass follows it
    assert await store.append_history(wid, *NOTE) == 3
    (*_, last) = await store.list_history(wid)
    assert (last.seq, last.type, last.payload) == (3, NOTE[0], NOTE[1])  # stored verbatim
    assert await next_seq(store, wid) == 4


async def test_concurrent_appends_get_unique_gapless_seqs(store: PostgresStore) -> None:
    wid = await started(store)
    got = await asyncio.gather(*(store.append_history(wid, *NOTE) for _ in range(20)))
    assert sorted(got) == list(range(1, 21))
    assert [s for s, _ in await seqs(store, wid)] == list(range(1, 21))


async def test_a_pass_that_loaded_before_an_append_loses_its_commit(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    loaded = await store.load_workflow_task(wid)
    assert await store.append_history(wid, *NOTE) == loaded.next_seq
    with pytest.raises(ConflictError, match="the pass expected 1"):
        await commit_workflow_task(
            store,
            task.id,
            task.lease_token,  # type: ignore[arg-type]
            wid,
            loaded.next_seq,
            events=[("TimerStarted", b"{}")],
        )
    assert await seqs(store, wid) == [(1, "OperatorNote")]  # the pass wrote nothing


async def test_append_history_wakes_nothing(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.release(task.id, task.lease_token)  # type: ignore[arg-type]
    before = await runnable_tasks(store, wid)
    await store.append_history(wid, *NOTE)
    assert await runnable_tasks(store, wid) == before


async def test_append_history_to_a_finished_execution(store: PostgresStore) -> None:
    wid = await started(store)
    await finish(store, wid, ("complete", b"1"))
    end = await next_seq(store, wid)
    assert await store.append_history(wid, *NOTE) == end
    assert (await store.get_workflow_execution(wid)).state == "succeeded"


async def test_append_history_to_an_unknown_execution_is_not_found(store: PostgresStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match=f"workflow execution {missing} does not exist"):
        await store.append_history(missing, *NOTE)


@pytest.mark.parametrize(
    ("type", "payload", "error", "message"),
    [
        ("", b"{}", ValueError, "type must not be empty"),
        ("a\x00b", b"{}", ValueError, "must not contain NUL"),
        ("OperatorNote", b"{not json", ValueError, "payload is not JSON"),
        ("OperatorNote", "{}", TypeError, "payload must be bytes"),
    ],
)
async def test_append_history_refuses_a_malformed_event_and_writes_nothing(
    store: PostgresStore, type: str, payload: object, error: type[Exception], message: str
) -> None:
    wid = await started(store)
    with pytest.raises(error, match=message):
        await store.append_history(wid, type, payload)  # type: ignore[arg-type]
    assert await seqs(store, wid) == []
    assert await next_seq(store, wid) == 1
