"""Payload codecs end to end (real PostgreSQL, real workers): every kind of
payload goes through gzip + AES-GCM and is stored encrypted; old keys still
read after a rotation; a missing key is a clear PayloadCodecError in the
client, the CLI and the Replayer, and a worker without it leaves the run to
one that has it; plain payloads written before codecs stay readable."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import WorkflowContext, activity, attach_subscribers, workflow
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import (
    DAGIdempotencyConflictError,
    IdempotencyConflictError,
    PayloadCodecError,
)
from azync_flow.events import subscriber
from azync_flow.payload_codec import (
    MAGIC,
    UNDECODABLE_RETRY,
    AesGcmCodec,
    CodecChain,
    GzipCodec,
    describe_envelope,
    use_payload_codec,
)
from azync_flow.replay import Replayer
from azync_flow.schedules import ScheduleSpec, StartWorkflow
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.worker import Worker
from azync_flow.workflow import Registry
from tests.cli_runner import Cli
from tests.e2e.dag_util import runner, settle
from tests.local_runtime import LocalRuntime

SECRET = "sekrit-plaintext-7f3a"
K1, K2 = os.urandom(32), os.urandom(32)


def chain(*, keys: dict[str, bytes] | None = None, current: str = "k1") -> CodecChain:
    return CodecChain([GzipCodec(), AesGcmCodec(keys or {"k1": K1}, current)])


@activity(name="cd_charge")
async def cd_charge(card: dict[str, str]) -> dict[str, str]:
    return {"receipt": card["number"] + "-ok"}


@workflow(name="cd_child")
async def cd_child(ctx: WorkflowContext, note: str) -> str:
    return note.upper()


@workflow(name="cd_order")
async def cd_order(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    notes: list[str] = []

    @ctx.query()
    def seen(prefix: str) -> list[str]:
        return [prefix + n for n in notes]

    @ctx.update()
    def note(text: str) -> int:
        notes.append(text)
        return len(notes)

    receipt = await cd_charge({"number": order["card"]})
    token = ctx.side_effect(lambda: {"token": order["card"][::-1]}, dict)
    child = await ctx.execute_child(cd_child, order["card"])
    go = await ctx.wait_signal("go")
    return {"receipt": receipt, "token": token, "child": child, "go": go, "notes": notes}


@workflow(name="cd_wait")
async def cd_wait(ctx: WorkflowContext, x: dict[str, str]) -> dict[str, Any]:
    got = await ctx.wait_signal("go")
    return {"x": x, "got": got}


REGISTRY = Registry([cd_order, cd_child, cd_wait], [cd_charge])


async def plaintext_columns(store: PostgresStore, needle: str) -> list[str]:
    """Every bytea column of the schema holding ``needle`` in some row."""
    cols = await store.pool.fetch(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = $1 AND data_type = 'bytea'",
        store.schema,
    )
    found = []
    for c in cols:
        table, column = c["table_name"], c["column_name"]
        n = await store.pool.fetchval(
            f'SELECT count(*) FROM "{table}" WHERE position($1::bytea in "{column}") > 0',
            needle.encode(),
        )
        if n:
            found.append(f"{c['table_name']}.{c['column_name']}")
    return found


async def stored(store: PostgresStore, wid: uuid.UUID) -> tuple[bytes, bytes | None]:
    row = await store.pool.fetchrow(
        "SELECT input, result FROM azync_workflow_executions WHERE id = $1", wid
    )
    assert row is not None
    return bytes(row["input"]), None if row["result"] is None else bytes(row["result"])


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["sticky", "full-replay"])
async def test_every_workflow_payload_round_trips_through_gzip_and_aes_and_is_stored_encrypted(
    store: PostgresStore, cache_size: int
) -> None:
    with use_payload_codec(chain()):
        runtime = LocalRuntime(store, REGISTRY, cache_size=cache_size)
        client = Client(store)
        async with runtime.worker:
            handle = await client.start(cd_order, {"card": SECRET})
            assert await handle.update("note", SECRET + "-u", timeout=30) == 1
            assert await handle.query("seen", SECRET + ":", timeout=30) == [f"{SECRET}:{SECRET}-u"]
            await handle.signal("go", {"why": SECRET + "-s"})
            result = await handle.result(timeout=60)
    assert result == {
        "receipt": {"receipt": SECRET + "-ok"},
        "token": {"token": SECRET[::-1]},
        "child": SECRET.upper(),
        "go": {"why": SECRET + "-s"},
        "notes": [SECRET + "-u"],
    }
    for needle in (SECRET, SECRET[::-1], SECRET.upper()):
        assert await plaintext_columns(store, needle) == []
    input_, result_bytes = await stored(store, handle.id)
    assert input_.startswith(MAGIC)
    assert result_bytes is not None
    assert describe_envelope(result_bytes) == "gzip,aesgcm (key 'k1')"


async def test_queue_event_dag_and_schedule_payloads_round_trip_encrypted(
    store: PostgresStore,
) -> None:
    jobs: list[Any] = []
    events: list[Any] = []
    dag = DAG("cd_dag")

    @dag.task
    async def first(ctx: TaskContext) -> dict[str, str]:
        return {"made": SECRET + "-t"}

    @dag.task(after=[first], payload={"p": SECRET + "-p"})
    async def second(ctx: TaskContext) -> str:
        made = (await ctx.results(["first"]))["first"].value
        return f"{made['made']}!{ctx.payload}"

    @subscriber("cd.evt", name="cd_sub")
    async def on_evt(payload: dict[str, str]) -> None:
        events.append(payload)

    with use_payload_codec(chain()):
        worker = Worker(store, poll_interval=timedelta(milliseconds=50), handle_signals=False)

        @worker.register("cd_job")
        async def on_job(payload: dict[str, str]) -> None:
            jobs.append(payload)

        await attach_subscribers(worker, [on_evt]).register()
        client = Client(store)
        await client.enqueue("cd_job", {"s": SECRET + "-j"})
        await client.publish("cd.evt", {"s": SECRET + "-e"})
        await client.schedules.create(
            "cd_sched",
            ScheduleSpec(cron="0 3 * * *"),
            StartWorkflow.of("cd_wait", {"s": SECRET + "-a"}),
            paused=True,
        )
        run = await DAGClient(store).run(dag)
        view = await settle(store, runner(store, dag), run.id)
        async with asyncio.timeout(60):
            await worker.run_until_idle()
        action = (await client.schedules.describe("cd_sched")).action
        assert isinstance(action, StartWorkflow)
        tasks = {t.task_key: t for t in await store.dag_tasks(run.id)}
    assert jobs == [{"s": SECRET + "-j"}]
    assert events == [{"s": SECRET + "-e"}]
    assert view.state.value == "succeeded", view.failure_reason
    assert tasks["second"].state == JobState.SUCCEEDED
    assert bytes(action.input).startswith(MAGIC)
    with use_payload_codec(chain()):
        assert msgspec.json.decode(_open(tasks["second"].result)) == SECRET + "-t!" + str(
            {"p": SECRET + "-p"}
        )
    assert await plaintext_columns(store, SECRET) == []


def _open(data: bytes | None) -> bytes:
    from azync_flow.payload_codec import open_envelope

    assert data is not None
    return open_envelope(data)


async def test_payloads_written_with_the_old_key_stay_readable_after_a_rotation(
    store: PostgresStore,
) -> None:
    client = Client(store)
    with use_payload_codec(chain()):
        handle = await client.start(cd_wait, {"s": SECRET})
        await LocalRuntime(store, REGISTRY).run_until_idle()
    rotated = chain(keys={"k1": K1, "k2": K2}, current="k2")
    with use_payload_codec(rotated):
        await handle.signal("go", "after-rotation")
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert await handle.result(timeout=30) == {"x": {"s": SECRET}, "got": "after-rotation"}
    input_, result = await stored(store, handle.id)
    assert describe_envelope(input_) == "gzip,aesgcm (key 'k1')"
    assert result is not None
    assert describe_envelope(result) == "gzip,aesgcm (key 'k2')"


async def test_a_missing_key_is_a_clear_error_in_the_client_the_cli_and_the_replayer(
    store: PostgresStore, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with use_payload_codec(chain()):
        handle = await Client(store).start(cd_wait, {"s": SECRET})
        await handle.signal("go", 1)
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert (await handle.result(timeout=30))["got"] == 1
        recorded = await handle.recorded_history()
    only_k2 = chain(keys={"k2": K2}, current="k2")
    message = "encrypted with key 'k1' which is not configured"
    with use_payload_codec(only_k2):
        with pytest.raises(PayloadCodecError, match=message) as caught:
            await handle.result(timeout=5)
        assert caught.value.key_id == "k1"
        cli = Cli(pg_dsn, store.schema, capsys)
        code, out, _ = await cli("workflows", "show", str(handle.id))
        assert code == 0
        assert out["input"].startswith("<undecodable payload (gzip,aesgcm (key 'k1'))")
        assert message in out["input"]
        code, _, err = await cli("workflows", "result", str(handle.id))
        assert code == 2
        assert message in err
        with pytest.raises(PayloadCodecError, match=message):
            Replayer(REGISTRY).replay(recorded)
    with pytest.raises(PayloadCodecError, match=message):
        Replayer(REGISTRY, codec=only_k2).replay(recorded)


async def test_a_recorded_encrypted_history_replays_with_the_codec(store: PostgresStore) -> None:
    with use_payload_codec(chain()):
        runtime = LocalRuntime(store, REGISTRY)
        async with runtime.worker:
            handle = await Client(store).start(cd_order, {"card": SECRET})
            await handle.signal("go", SECRET)
            await handle.result(timeout=60)
        recorded = await handle.recorded_history()
    assert SECRET.encode() not in recorded.to_json()
    verdict = Replayer(REGISTRY, codec=chain()).replay(recorded)
    assert verdict.ok, verdict.error
    assert verdict.outcome.status.value == "completed"


async def test_a_worker_without_the_key_leaves_the_run_for_a_worker_that_has_it(
    store: PostgresStore,
) -> None:
    with use_payload_codec(chain()):
        handle = await Client(store).start(cd_wait, {"s": SECRET})
        await handle.signal("go", 2)
    with use_payload_codec(chain(keys={"k2": K2}, current="k2")):
        await LocalRuntime(store, REGISTRY).run_until_idle()
        view = await handle.describe()
    assert view.state == WorkflowState.RUNNING
    assert "cannot decode its input: PayloadCodecError" in view.blocked_reason
    assert "key 'k1'" in view.blocked_reason
    assert await _history_rows(store, handle.id) == 0  # nothing written by the keyless worker
    with use_payload_codec(chain()):
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert await handle.result(timeout=30) == {"x": {"s": SECRET}, "got": 2}


async def _history_rows(store: PostgresStore, wid: uuid.UUID) -> int:
    return int(
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_workflow_history WHERE workflow_id = $1", wid
        )
    )


async def test_plain_payloads_written_before_codecs_stay_readable_and_runs_continue(
    store: PostgresStore,
) -> None:
    with use_payload_codec(None):
        done = await Client(store).start(cd_wait, {"s": "plain"})
        await done.signal("go", "p")
        waiting = await Client(store).start(cd_wait, {"s": "plain2"})
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert (await stored(store, done.id))[0] == b'{"s":"plain"}'
    with use_payload_codec(chain()):
        assert await done.result(timeout=30) == {"x": {"s": "plain"}, "got": "p"}
        await waiting.signal("go", "sealed")
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert await waiting.result(timeout=30) == {"x": {"s": "plain2"}, "got": "sealed"}
        verdict = Replayer(REGISTRY).replay(await waiting.recorded_history())
        assert verdict.ok, verdict.error
    input_, result = await stored(store, waiting.id)
    assert input_ == b'{"s":"plain2"}'
    assert result is not None
    assert result.startswith(MAGIC)


async def test_repeated_idempotent_starts_of_one_input_match_although_each_encryption_differs(
    store: PostgresStore,
) -> None:
    dag = DAG("cd_idem")

    @dag.task
    async def only(ctx: TaskContext) -> None:
        return None

    with use_payload_codec(chain()):
        client, dags = Client(store), DAGClient(store)
        wid = uuid.uuid4()
        first = await client.start(cd_wait, {"s": SECRET}, id=wid)
        again = await client.start(cd_wait, {"s": SECRET}, id=wid)
        keyed = await client.start(cd_wait, {"s": SECRET}, idempotency_key="cd-k")
        keyed_again = await client.start(cd_wait, {"s": SECRET}, idempotency_key="cd-k")
        with pytest.raises(IdempotencyConflictError):
            await client.start(cd_wait, {"s": "other"}, id=wid)
        run = await dags.run(dag, idempotency_key="cd-d", payloads={"only": {"s": SECRET}})
        run_again = await dags.run(dag, idempotency_key="cd-d", payloads={"only": {"s": SECRET}})
        with pytest.raises(DAGIdempotencyConflictError):
            await dags.run(dag, idempotency_key="cd-d", payloads={"only": {"s": "other"}})
    assert again.id == first.id
    assert keyed_again.id == keyed.id
    assert (run_again.id, run_again.inserted) == (run.id, False)


async def test_a_job_whose_key_a_worker_lacks_is_left_for_a_worker_with_the_key(
    store: PostgresStore, clock: MovableClock
) -> None:
    seen: list[Any] = []
    with use_payload_codec(chain()):
        job_id = await Client(store).enqueue("cd_job2", {"s": SECRET})

    def worker() -> Worker:
        w = Worker(store, poll_interval=timedelta(milliseconds=50), handle_signals=False)

        @w.register("cd_job2")
        async def handle(payload: dict[str, str]) -> None:
            seen.append(payload)

        return w

    with use_payload_codec(chain(keys={"k2": K2}, current="k2")):
        async with asyncio.timeout(60):
            await worker().run_until_idle()
    job = await store.pool.fetchrow(
        "SELECT state, attempt, blocked_reason FROM azync_jobs WHERE id = $1", job_id
    )
    assert seen == []
    assert (job["state"], job["attempt"]) == ("scheduled", 0)  # no attempt spent
    assert "cannot decode its payload: PayloadCodecError" in job["blocked_reason"]
    assert "key 'k1' which is not configured" in job["blocked_reason"]
    clock.advance(UNDECODABLE_RETRY + timedelta(seconds=1))
    with use_payload_codec(chain()):
        async with asyncio.timeout(60):
            await worker().run_until_idle()
    assert seen == [{"s": SECRET}]


@workflow(name="cd_pay")
async def cd_pay(ctx: WorkflowContext, card: str) -> dict[str, str]:
    return await cd_charge({"number": card})


async def test_an_activity_whose_key_a_worker_lacks_is_left_for_a_worker_with_the_key(
    store: PostgresStore, clock: MovableClock
) -> None:
    with use_payload_codec(chain()):
        handle = await Client(store).start(cd_pay, SECRET)
        await LocalRuntime(store, Registry([cd_pay], [])).run_until_idle()
    with use_payload_codec(chain(keys={"k2": K2}, current="k2")):
        await LocalRuntime(store, Registry([], [cd_charge])).run_until_idle()
    op = await store.pool.fetchrow(
        "SELECT state, attempt, blocked_reason FROM azync_jobs WHERE kind LIKE '$op:cd_charge%'"
    )
    assert (op["state"], op["attempt"]) == ("scheduled", 0)
    assert "cannot decode its payload: PayloadCodecError" in op["blocked_reason"]
    assert (await handle.describe()).state == WorkflowState.RUNNING
    clock.advance(UNDECODABLE_RETRY + timedelta(seconds=1))
    with use_payload_codec(chain()):
        await LocalRuntime(store, Registry([cd_pay], [cd_charge])).run_until_idle()
        assert await handle.result(timeout=30) == {"receipt": SECRET + "-ok"}


async def test_the_cli_history_shows_payloads_through_the_codec_or_says_which_key_is_missing(
    store: PostgresStore,
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the table's DETAIL column whole
    with use_payload_codec(chain()):
        handle = await Client(store).start(cd_wait, {"s": SECRET})
        await handle.signal("go", "signal-secret-9b1")
        await LocalRuntime(store, REGISTRY).run_until_idle()
        assert (await handle.result(timeout=30))["got"] == "signal-secret-9b1"
        cli = Cli(pg_dsn, store.schema, capsys)
        for as_json in (True, False):
            code, out, _ = await cli("workflows", "history", str(handle.id), as_json=as_json)
            text = out if isinstance(out, str) else json.dumps(out)
            assert code == 0
            assert "signal-secret-9b1" in text  # the signal's payload, decoded
            assert SECRET in text  # inside the completion's result
            assert "azc1" not in text
    with use_payload_codec(chain(keys={"k2": K2}, current="k2")):
        for as_json in (True, False):
            code, out, _ = await cli("workflows", "history", str(handle.id), as_json=as_json)
            text = out if isinstance(out, str) else json.dumps(out)
            assert code == 0
            assert "<undecodable payload (gzip,aesgcm (key 'k1'))" in text
            assert "signal-secret-9b1" not in text
