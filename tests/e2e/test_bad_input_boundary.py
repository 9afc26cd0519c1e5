"""Bad input at the client and schedule client boundary: a wrong-typed or
malformed id, an empty or non-str name, a str where a spec or policy is
expected, a foreign cursor, a negative timeout. Each is a clear ValueError
or TypeError naming the argument (never a raw driver error) and writes nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import ScheduleSpecError
from azync_flow.schedules import EnqueueJob, Interval, ScheduleClient, SchedulePolicy, ScheduleSpec
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import WorkflowContext


@workflow(name="bib_echo")
async def bib_echo(ctx: WorkflowContext, x: str) -> str:
    return x


async def _rows(store: PostgresStore, table: str) -> int:
    return int(await store.pool.fetchval(f"SELECT count(*) FROM {table}"))


EVERY_5S = ScheduleSpec(intervals=(Interval(every=timedelta(seconds=5)),))


async def test_ids_must_be_a_uuid_or_its_str_on_every_client_verb(store: PostgresStore) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match=r"^id 'nope' is not a valid UUID$"):
        await client.start(bib_echo, "x", id="nope")
    with pytest.raises(TypeError, match=r"^id must be a UUID \(or its str\), got int 5$"):
        await client.start(bib_echo, "x", id=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^ids\[1\] 'nope' is not a valid UUID$"):
        await client.start_many(bib_echo, ["a", "b"], ids=[uuid.uuid4(), "nope"])
    with pytest.raises(ValueError, match=r"^id 'nope' is not a valid UUID$"):
        client.get_handle("nope", bib_echo)
    with pytest.raises(ValueError, match=r"^id 'nope' is not a valid UUID$"):
        await client.enqueue("bib_kind", {}, id="nope")
    with pytest.raises(TypeError, match=r"^id\[0\] must be a UUID"):
        await client.enqueue_many("bib_kind", [{}], ids=[7])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"^workflow_id 'x' is not a valid UUID$"):
        await client.list_uncertain("x")
    assert await _rows(store, "azync_workflow_executions") == 0
    assert await _rows(store, "azync_jobs") == 0
    # a str that is a UUID is that id
    wid = uuid.uuid4()
    handle = await client.start(bib_echo, "x", id=str(wid))
    assert handle.id == wid
    assert client.get_handle(str(wid)).id == wid
    job = await client.enqueue("bib_kind", {}, id=str(wid))
    assert job == wid


async def test_empty_or_non_str_names_and_keys_are_refused_before_any_write(
    store: PostgresStore,
) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match=r"^workflow name must not be empty$"):
        await client.start("", {})
    with pytest.raises(ValueError, match=r"^kind must not be empty$"):
        await client.enqueue("", {})
    with pytest.raises(ValueError, match=r"^kind must not be empty$"):
        await client.enqueue_many("", [{}])
    with pytest.raises(TypeError, match=r"^kind must be a str, got int 5$"):
        await client.enqueue(5, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^idempotency_key must be a str, got int 5$"):
        await client.start(bib_echo, "x", idempotency_key=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^idempotency_key must be a str, got int 5$"):
        await client.enqueue("bib_kind", {}, idempotency_key=5)
    with pytest.raises(TypeError, match=r"^key must be a str, got int 5$"):
        await client.publish("bib.event", {}, key=5)  # type: ignore[arg-type]
    assert await _rows(store, "azync_workflow_executions") == 0
    assert await _rows(store, "azync_jobs") == 0
    assert await _rows(store, "azync_events") == 0
    handle = await client.start(bib_echo, "x")
    with pytest.raises(ValueError, match=r"^signal name must not be empty$"):
        await handle.signal("", 1)
    with pytest.raises(TypeError, match=r"^signal name must be a str, got int 5$"):
        await handle.signal(5, 1)  # type: ignore[arg-type]
    assert await _rows(store, "azync_workflow_signals") == 0


async def test_list_refuses_a_foreign_cursor_and_result_a_negative_timeout(
    store: PostgresStore,
) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match=r"^cursor 'zzz' is not a next_cursor of a page"):
        await client.list(bib_echo, cursor="zzz")  # type: ignore[arg-type]
    handle = await client.start(bib_echo, "x")
    with pytest.raises(ValueError, match=r"^timeout must not be negative, got -1$"):
        await handle.result(timeout=-1)
    with pytest.raises(ValueError, match=r"^timeout must not be negative"):
        await handle.result(timeout=timedelta(seconds=-1))


async def test_schedule_verbs_refuse_bad_ids_types_and_empty_updates(store: PostgresStore) -> None:
    schedules = ScheduleClient(store)
    job = EnqueueJob.of("bib_kind", {})
    with pytest.raises(TypeError, match=r"^schedule id must be a str, got int 7$"):
        await schedules.create(7, EVERY_5S, job)  # type: ignore[arg-type]
    with pytest.raises(ScheduleSpecError, match=r"may contain only letters, digits and"):
        await schedules.create("a b/{x}", EVERY_5S, job)
    with pytest.raises(TypeError, match=r"^spec must be a ScheduleSpec \(e.g. ScheduleSpec"):
        await schedules.create("s1", "*/5 * * * *", job)  # type: ignore[arg-type]
    with pytest.raises(ScheduleSpecError, match=r"scheduled job kind must not be empty$"):
        await schedules.create("s1", EVERY_5S, EnqueueJob.of("", {}))
    assert await _rows(store, "azync_schedules") == 0

    await schedules.create("s1", EVERY_5S, job)
    with pytest.raises(TypeError, match=r"^schedule id must be a str, got int 5$"):
        await schedules.update(5, note="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^schedule id must be a str"):
        await schedules.describe(5)  # type: ignore[arg-type]
    with pytest.raises(ScheduleSpecError, match=r"schedule id must not contain NUL"):
        await schedules.pause("a\x00", note="x")
    with pytest.raises(TypeError, match=r"^spec must be a ScheduleSpec"):
        await schedules.update("s1", spec="every 5s")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^policy must be a SchedulePolicy"):
        await schedules.update("s1", policy="skip")  # type: ignore[arg-type]
    with pytest.raises(ScheduleSpecError, match=r"nothing to change in schedule 's1'"):
        await schedules.update("s1", note="x")
    assert await _rows(store, "azync_schedule_changes") == 0
    assert (await schedules.describe("s1")).policy == SchedulePolicy()


async def test_publish_and_dag_verbs_take_a_uuid_or_its_str_only(store: PostgresStore) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match=r"^id 'nope' is not a valid UUID$"):
        await client.publish("bib.event", {}, id="nope")
    assert await _rows(store, "azync_events") == 0
    dags = DAGClient(store)
    flow = DAG("bib_dag")

    async def step(ctx: TaskContext) -> None:
        return None

    flow.task(step, key="a")
    with pytest.raises(ValueError, match=r"^id 'nope' is not a valid UUID$"):
        await dags.run(flow, {}, id="nope")
    assert await _rows(store, "azync_dags") == 0
    with pytest.raises(ValueError, match=r"^run_id 'nope' is not a valid UUID$"):
        await dags.get("nope")
    with pytest.raises(TypeError, match=r"^run_id must be a UUID \(or its str\), got int 5$"):
        await dags.cancel(5)  # type: ignore[arg-type]
    run = await dags.run(flow, {})
    assert (await dags.get(str(run.id))).id == run.id
