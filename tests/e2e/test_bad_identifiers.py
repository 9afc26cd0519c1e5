"""NUL in identifiers and over-long names are clear ValueErrors naming the field; no writes.

Payloads keep round-tripping NUL (JSON escapes it as ``\\u0000``).
"""

from __future__ import annotations

import uuid

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import EnqueueParams
from azync_flow.workflow import WorkflowContext

NUL = "must not contain NUL"


@workflow(name="bid_plain")
async def bid_plain(ctx: WorkflowContext, x: str) -> str:
    return x


def _dag(name: str = "bid_dag", kind_key: str = "a") -> DAG:
    d = DAG(name)

    async def a(ctx: TaskContext) -> None:
        return None

    d.task(a, key=kind_key)
    d.signal("go", after=[kind_key])
    return d


async def _rows(store: PostgresStore, table: str) -> int:
    return int(await store.pool.fetchval(f"SELECT count(*) FROM {table}"))


async def test_workflow_start_rejects_nul_in_name_key_and_meta(store: PostgresStore) -> None:
    client = Client(store)

    @workflow(name="bid\x00bad")
    async def bad(ctx: WorkflowContext, x: str) -> str:
        return x

    with pytest.raises(ValueError, match=f"workflow name {NUL}"):
        await client.start(bad, "x")
    long = workflow(name="w" * 256)(bid_plain.fn)
    with pytest.raises(ValueError, match="workflow name is 256 characters long; at most 255"):
        await client.start(long, "x")
    with pytest.raises(ValueError, match=f"^idempotency_key {NUL}"):
        await client.start(bid_plain, "x", idempotency_key="k\x00")
    with pytest.raises(ValueError, match=f"workflow meta key {NUL}"):
        await client.start(bid_plain, "x", meta={"a\x00": "v"})
    with pytest.raises(ValueError, match=rf"workflow meta\['k'\] {NUL}"):
        await client.start(bid_plain, "x", meta={"k": "\x00"})
    with pytest.raises(ValueError, match="workflow version is 400 characters long; at most 255"):
        await client.start(bid_plain, "x", version="v" * 400)
    assert await _rows(store, "azync_workflow_executions") == 0


async def test_workflow_input_and_signal_payload_round_trip_nul(store: PostgresStore) -> None:
    client = Client(store)
    handle = await client.start(bid_plain, "a\x00b")
    view = await store.get_workflow_execution(handle.id)
    assert b"\\u0000" in view.input
    assert await handle.signal("s", {"v": "\x00"}, message_id="m1")


async def test_workflow_signal_rejects_nul_name_and_message_id(store: PostgresStore) -> None:
    handle = await Client(store).start(bid_plain, "x")
    with pytest.raises(ValueError, match=f"signal name {NUL}"):
        await handle.signal("s\x00", 1)
    with pytest.raises(ValueError, match=f"signal message_id {NUL}"):
        await handle.signal("s", 1, message_id="\x00")
    with pytest.raises(ValueError, match="at most 255"):
        await handle.signal("s" * 256, 1)
    assert await _rows(store, "azync_workflow_signals") == 0


async def test_dag_run_and_signal_reject_nul_and_long_names(store: PostgresStore) -> None:
    client = DAGClient(store)
    with pytest.raises(ValueError, match=f"DAG idempotency_key {NUL}"):
        await client.run(_dag(), idempotency_key="\x00")
    with pytest.raises(ValueError, match=f"DAG meta key {NUL}"):
        await client.run(_dag(), meta={"\x00": "v"})
    with pytest.raises(ValueError, match="DAG name is 300 characters long; at most 255"):
        await client.run(_dag("d" * 300))
    assert await _rows(store, "azync_dags") == 0
    run = await client.run(_dag(), {"p": "\x00"})
    with pytest.raises(ValueError, match=f"DAG signal name {NUL}"):
        await client.signal(run.id, "go\x00", 1)
    with pytest.raises(ValueError, match=f"DAG signal message_id {NUL}"):
        await client.signal(run.id, "go", 1, message_id="m\x00")
    assert (await client.signal(run.id, "go", {"v": "\x00"})).deduplicated is False


async def test_enqueue_rejects_nul_and_over_long_kind_key_and_meta(store: PostgresStore) -> None:
    def p(**kw: object) -> EnqueueParams:
        kw.setdefault("kind", "k")
        return EnqueueParams(id=uuid.uuid4(), payload=b'"\\u0000"', **kw)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match=f"EnqueueParams.kind {NUL}"):
        await store.enqueue(p(kind="k\x00"))
    with pytest.raises(ValueError, match=r"EnqueueParams\.kind is 9000 characters long"):
        await store.enqueue(p(kind="k" * 9000))
    with pytest.raises(ValueError, match=f"EnqueueParams.idempotency_key {NUL}"):
        await store.enqueue(p(idempotency_key="\x00"))
    with pytest.raises(ValueError, match=rf"EnqueueParams.meta\['m'\] {NUL}"):
        await store.enqueue(p(meta={"m": "\x00"}))
    # a limit key is stored in an index row: bounded like a name
    with pytest.raises(ValueError, match=f"EnqueueParams.limit_key {NUL}"):
        await store.enqueue(p(limit_key="\x00"))
    with pytest.raises(ValueError, match=r"EnqueueParams\.limit_key is 840 characters long"):
        await store.enqueue(p(limit_key="鍵" * 840))
    with pytest.raises(TypeError, match=r"EnqueueParams\.limit_key must be a str"):
        await store.enqueue(p(limit_key=5))
    assert await _rows(store, "azync_jobs") == 0
    assert await store.enqueue(p(kind="k" * 255))
