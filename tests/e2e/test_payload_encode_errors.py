"""Unencodable payloads raise PayloadEncodeError from every client entry point, nothing stored:
deep nesting, lone surrogates and NaN/±Inf floats (which JSON would turn into null)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.codec import encode_value
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import PayloadEncodeError
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import WorkflowContext


@workflow(name="pe_echo")
async def pe_echo(ctx: WorkflowContext, x: Any) -> Any:
    return x


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _dag() -> DAG:
    d = DAG("pe_dag")

    @d.task
    async def a(ctx: TaskContext) -> None:
        return None

    d.signal("go", after=[a])
    return d


BAD = [
    pytest.param(_deep(5000), "nested too deeply", id="deep"),
    pytest.param({"s": "\ud800"}, "surrogates not allowed", id="surrogate"),
    pytest.param({"v": [1.0, math.nan]}, "NaN or infinite", id="nan"),
    pytest.param({"v": math.inf}, "NaN or infinite", id="inf"),
    pytest.param([{"k": -math.inf}], "NaN or infinite", id="-inf"),
]


@pytest.mark.parametrize(("value", "message"), BAD)
async def test_workflow_start_and_signal_reject_unencodable_payloads(
    store: PostgresStore, value: Any, message: str
) -> None:
    client = Client(store)
    with pytest.raises(PayloadEncodeError, match=message):
        await client.start(pe_echo, value)
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_executions") == 0
    handle = await client.start(pe_echo, 1)
    with pytest.raises(PayloadEncodeError, match=message):
        await handle.signal("s", value)


@pytest.mark.parametrize(("value", "message"), BAD)
async def test_dag_run_and_signal_reject_unencodable_payloads(
    store: PostgresStore, value: Any, message: str
) -> None:
    client = DAGClient(store)
    with pytest.raises(PayloadEncodeError, match=message):
        await client.run(_dag(), value)
    with pytest.raises(PayloadEncodeError, match=message):
        await client.run(_dag(), 1, payloads={"a": value})
    assert await store.pool.fetchval("SELECT count(*) FROM azync_dags") == 0
    run = await client.run(_dag(), 1)
    with pytest.raises(PayloadEncodeError, match=message):
        await client.signal(run.id, "go", value)
    assert await store.pool.fetchval("SELECT count(*) FROM azync_dag_signals") == 0


def test_finite_floats_nulls_and_lookalike_bytes_still_encode() -> None:
    # A string/bytes holding the msgpack bytes of a NaN float must not be mistaken for one.
    value = {"n": None, "f": [1.5, -0.0, 1e308], "b": b"\xcb\x7f\xf8\x00", "s": "\xcb\x7f\xf8"}
    data = encode_value(value)
    assert data.startswith(b'{"n":null,"f":[1.5,-0.0,1e308]')
    assert encode_value(_deep(200)).count(b"[") == 201
