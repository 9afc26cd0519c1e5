"""Task-queue limits seen from the outside (real worker, real PostgreSQL): set
with ``azync-flow limits set-queue``, an activity waiting for its task queue's
limit (held by an activity of another kind) shows in
``describe().blocked_reason`` and in ``azync-flow limits list``."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest

from azync_flow import ConcurrencyLimit, RateLimit, WorkflowContext, activity, workflow
from azync_flow.cli import main
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

GATE: asyncio.Event | None = None
STARTED: list[str] = []


async def _hold(what: str) -> str:
    STARTED.append(what)
    assert GATE is not None
    await GATE.wait()
    return what


@activity(name="gpu_render", task_queue="gpu")
async def gpu_render(item: str) -> str:
    return await _hold(f"render-{item}")


@activity(name="gpu_train", task_queue="gpu")
async def gpu_train(item: str) -> str:
    return await _hold(f"train-{item}")


@workflow(name="render_and_train")
async def render_and_train(ctx: WorkflowContext, item: str) -> list[str]:
    return list(await asyncio.gather(gpu_render(item), gpu_train(item)))


async def _until(check: Any, within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def _cli(pg_dsn: str, schema: str, *args: str) -> int:
    return await asyncio.to_thread(main, [*args, "--dsn", pg_dsn, "--schema", schema])


async def test_an_activity_waiting_for_its_task_queue_says_so_and_the_cli_counts_it(
    store: PostgresStore,
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    global GATE
    GATE = asyncio.Event()
    STARTED.clear()
    monkeypatch.delenv("COLUMNS", raising=False)
    assert await _cli(pg_dsn, store.schema, "limits", "set-queue", "gpu", "1") == 0
    assert "at most 1 in flight" in capsys.readouterr().out
    runtime = LocalRuntime(
        store, Registry([render_and_train], [gpu_render, gpu_train]), task_queues=("default", "gpu")
    )
    stop = asyncio.Event()
    running = asyncio.create_task(runtime.run(stop))
    try:
        handle = await Client(store).start(render_and_train, "x")

        async def one_waits() -> bool:
            view = await handle.describe()
            return "waits for" in view.blocked_reason and len(STARTED) == 1

        await _until(one_waits)
        view = await handle.describe()
        assert view.blocked_reason == "waits for concurrency limit 'gpu' of task queue 'gpu'"
        capsys.readouterr()
        assert await _cli(pg_dsn, store.schema, "limits", "list", "--json") == 0
        (item,) = json.loads(capsys.readouterr().out)["items"]
        assert item["spec"]["name"] == "gpu"
        assert (item["kinds"], item["task_queues"]) == ([], ["gpu"])
        assert (item["in_flight"], item["waiting"]) == (1, 1)
        assert await _cli(pg_dsn, store.schema, "limits", "list") == 0
        table = capsys.readouterr().out
        assert "TASK QUEUES" in table
        assert "1 in flight" in table
        GATE.set()
        assert await handle.result(timeout=30) == ["render-x", "train-x"]
        assert (await handle.describe()).blocked_reason == ""
        assert await _cli(pg_dsn, store.schema, "limits", "set-queue", "gpu", "--remove") == 0
        (usage,) = await Client(store).list_limits()
        assert (usage.task_queues, usage.in_flight) == ([], 0)
    finally:
        GATE.set()
        stop.set()
        await running


async def test_set_queue_refuses_a_missing_or_doubled_capacity(
    store: PostgresStore, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _cli(pg_dsn, store.schema, "limits", "set-queue", "gpu") == 2
    assert await _cli(pg_dsn, store.schema, "limits", "set-queue", "gpu", "2", "--remove") == 2
    assert await _cli(pg_dsn, store.schema, "limits", "set-queue", "gpu", "0") == 2
    assert await Client(store).list_limits() == []


async def test_task_queue_limits_are_checked_where_they_are_given(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="per key"):
        Worker(store, task_queue_limits={"gpu": ConcurrencyLimit("gpu", 2, per_key=True)})
    rate = RateLimit("gpu", 2, timedelta(seconds=1))
    with pytest.raises(TypeError):
        Worker(store, task_queue_limits={"gpu": rate})  # type: ignore[dict-item]
    two = {"a": ConcurrencyLimit("x", 1), "b": ConcurrencyLimit("x", 2)}
    with pytest.raises(ValueError, match="two settings"):
        Worker(store, task_queue_limits=two)
    shared = Worker(store, task_queue_limits={"gpu": ConcurrencyLimit("shared", 2)})
    with pytest.raises(ValueError, match="a name is one limit"):
        shared.register("k", _noop, limits=[ConcurrencyLimit("shared", 3)])
    shared.register("k2", _noop, limits=[ConcurrencyLimit("shared", 2)])  # the same limit: fine
    with pytest.raises(TypeError):
        await Client(store).set_task_queue_limit("gpu", 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per key"):
        await Client(store).set_task_queue_limit("gpu", ConcurrencyLimit("gpu", 2, per_key=True))
    assert await Client(store).list_limits() == []


async def _noop(payload: object) -> None:
    return None
