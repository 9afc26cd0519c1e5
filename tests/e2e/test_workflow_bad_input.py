"""Bad input gets a clear error and loses nothing (real Worker, real PostgreSQL):
unknown workflow / activity names, values that are not JSON-encodable, values over
a configured size limit, signals to finished runs, malformed DSNs.

Payload limit: none by default (PostgreSQL's 1 GiB ``bytea`` bound applies; a
10 MiB value round-trips, see test_workflow_e2e); ``max_payload_bytes`` sets one.
"""

from __future__ import annotations

from typing import Any

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import ActivityError, NotFoundError, PayloadEncodeError, StoreError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@activity(name="bi_known")
def bi_known(x: int) -> int:
    return x + 1


@activity(name="bi_elsewhere")
def bi_elsewhere(x: int) -> int:
    return x * 10


@activity(name="bi_weird")
def bi_weird(kind: str) -> Any:
    return object() if kind == "object" else "x" * 2048


@workflow(name="bi_unregistered")
async def bi_unregistered(ctx: WorkflowContext, x: int) -> int:
    return await bi_known(x)


@workflow(name="bi_needs_elsewhere")
async def bi_needs_elsewhere(ctx: WorkflowContext, x: int) -> int:
    return await bi_elsewhere(x)


@workflow(name="bi_weird_wf")
async def bi_weird_wf(ctx: WorkflowContext, kind: str) -> str:
    try:
        return str(await bi_weird(kind))
    except ActivityError as err:
        return f"{err.error_type}: {err}"


@workflow(name="bi_bad_result")
async def bi_bad_result(ctx: WorkflowContext, x: int) -> Any:
    return object() if x else x  # not JSON-encodable


@workflow(name="bi_done")
async def bi_done(ctx: WorkflowContext, x: int) -> int:
    return x


async def _task_row(store: PostgresStore, run_id: Any) -> Any:
    return await store.pool.fetchrow(
        "SELECT state, last_error, attempt FROM azync_jobs WHERE run_id = $1 AND kind = '$wft'"
        " ORDER BY enqueued_at DESC LIMIT 1",
        run_id,
    )


async def test_unknown_workflow_waits_with_a_clear_reason_and_runs_once_registered(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(bi_unregistered, 1)
    await LocalRuntime(store, Registry([bi_done], [bi_known])).run_until_idle()
    row = await _task_row(store, handle.id)
    assert (row["state"], row["attempt"]) == ("pending", 0)  # never leased: not lost
    view = await handle.describe()
    assert view.state == WorkflowState.RUNNING
    assert view.blocked_reason == (
        "no live worker serves workflow 'bi_unregistered' on task queue 'default'"
    )
    assert await handle.history() == []  # the execution is untouched
    await LocalRuntime(store, Registry([bi_unregistered], [bi_known])).run_until_idle()
    assert await handle.result(timeout=5) == 2


async def test_operation_of_an_unregistered_activity_waits_for_a_worker_that_has_it(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    handle = await Client(store).start(bi_needs_elsewhere, 3)
    with caplog.at_level("WARNING", logger="azync_flow.workflow"):
        await LocalRuntime(store, Registry([bi_needs_elsewhere], [bi_known])).run_until_idle()
    assert "'bi_elsewhere'" in caplog.text
    assert "not registered on this worker" in caplog.text
    state = await store.pool.fetchval(
        "SELECT state FROM azync_jobs WHERE run_id = $1 AND kind = '$op:bi_elsewhere@1'",
        handle.id,
    )
    assert state == "pending"
    assert (await handle.describe()).state == WorkflowState.RUNNING
    await LocalRuntime(store, Registry([bi_needs_elsewhere], [bi_elsewhere])).run_until_idle()
    assert await handle.result(timeout=5) == 30


async def test_non_json_activity_result_fails_the_step_at_once_with_a_clear_error(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(bi_weird_wf, "object")
    await LocalRuntime(store, Registry([bi_weird_wf], [bi_weird])).run_until_idle()
    result = await handle.result(timeout=5)
    assert result.startswith("PayloadEncodeError")
    assert "bi_weird" in result
    attempts = await store.pool.fetchval(
        "SELECT attempt FROM azync_jobs WHERE run_id = $1 AND kind = '$op:bi_weird@1'", handle.id
    )
    assert attempts == 1  # non-retryable: not retried


async def test_non_json_workflow_input_and_result_are_clear_errors(store: PostgresStore) -> None:
    with pytest.raises(PayloadEncodeError):
        await Client(store).start(bi_done, object())
    handle = await Client(store).start(bi_bad_result, 1)
    await LocalRuntime(store, Registry([bi_bad_result], [])).run_until_idle()
    view = await handle.describe()
    assert view.state == WorkflowState.FAILED
    assert "encod" in view.failure_reason.lower()


async def test_result_over_the_configured_payload_limit_fails_the_step(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(bi_weird_wf, "big")
    runtime = LocalRuntime(store, Registry([bi_weird_wf], [bi_weird]), max_payload_bytes=1024)
    await runtime.run_until_idle()
    result = await handle.result(timeout=5)
    assert result.startswith("PayloadError")
    assert "over the limit of 1024" in result


async def test_signal_to_a_finished_run_is_a_clear_error(store: PostgresStore) -> None:
    handle = await Client(store).start(bi_done, 5)
    await LocalRuntime(store, Registry([bi_done], [])).run_until_idle()
    assert await handle.result(timeout=5) == 5
    with pytest.raises(NotFoundError, match=r"succeeded \(finished\); signal 'late' not accepted"):
        await handle.signal("late", 1)
    with pytest.raises(NotFoundError, match="finished"):
        await handle.cancel()


@pytest.mark.parametrize(
    ("dsn", "needle"),
    [
        ("not a dsn", "invalid DSN"),
        ("mysql://u@h/db", "invalid DSN"),
        ("postgresql://postgres@127.0.0.1:5432/test?sslmode=bogus", "sslmode"),
    ],
)
async def test_malformed_dsn_is_a_clear_store_error(dsn: str, needle: str) -> None:
    with pytest.raises(StoreError, match=needle) as info:
        await open_store(dsn, Config(schema="never_created"), migrate=False)
    assert "AZYNC_DSN" in str(info.value)
