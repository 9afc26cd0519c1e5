"""One encoder and one identifier check on every path: the CLI, uncertain
resolutions, DAG task results and activity results refuse NaN/±Inf, over-deep
nesting and identifiers that are not valid UTF-8 with the documented errors,
nothing stored as null; the CLI reads large inputs from ``@file`` or stdin;
``Client.start`` takes a workflow name."""

from __future__ import annotations

import io
import json
import math
import sys
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from azync_flow import ActivityError, RetryPolicy, Uncertain, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import PayloadEncodeError, PayloadError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from azync_flow.store.workflows import WorkflowState
from tests.cli_runner import Cli
from tests.e2e._uncertain_helpers import local_runtime
from tests.e2e.dag_util import runner, settle

NON_FINITE = "NaN or infinite"
DEEP_JSON = "[" * 5000 + "]" * 5000


@workflow(name="pp_echo")
async def pp_echo(ctx: WorkflowContext, x: Any) -> Any:
    return x


@activity(name="pp_wire", idempotent=False)
def pp_wire(amount: int) -> float:
    raise Uncertain("bank timed out")


@workflow(name="pp_payout")
async def pp_payout(ctx: WorkflowContext, amount: int) -> Any:
    return await pp_wire(amount)


@activity(name="pp_ratio")
def pp_ratio(x: int) -> float:
    return math.inf if x == 0 else 1 / x


@workflow(name="pp_divide")
async def pp_divide(ctx: WorkflowContext, x: int) -> str:
    try:
        return str(await pp_ratio(x))
    except ActivityError as err:
        return f"{err.error_type} after {err.attempts}: {err.message}"


async def _executions(store: PostgresStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM azync_workflow_executions"))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
async def test_cli_start_refuses_non_finite_input_instead_of_storing_null(
    cli: Cli, store: PostgresStore, literal: str
) -> None:
    code, _, err = await cli("workflows", "start", "pp_echo", "--input", f'{{"v": [{literal}]}}')
    assert code == 2
    assert NON_FINITE in err
    assert await _executions(store) == 0


async def test_cli_start_refuses_over_deep_input_with_a_usage_error(
    cli: Cli, store: PostgresStore
) -> None:
    code, _, err = await cli("workflows", "start", "pp_echo", "--input", DEEP_JSON)
    assert code == 2
    assert "nested too deeply" in err
    assert await _executions(store) == 0


async def test_cli_start_reads_input_from_a_file_or_stdin(
    cli: Cli, store: PostgresStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {"rows": [{"i": i, "s": "x" * 50} for i in range(4000)]}  # ~250 kB
    path = tmp_path / "input.json"
    path.write_text(json.dumps(big))
    code, out, _ = await cli("workflows", "start", "pp_echo", "--input", f"@{path}")
    assert code == 0
    view = await Client(store).get_handle(uuid.UUID(out["id"])).describe()
    assert json.loads(view.input) == big

    monkeypatch.setattr(sys, "stdin", io.StringIO('{"from": "stdin"}'))
    code, out, _ = await cli("workflows", "start", "pp_echo", "--input", "-")
    assert code == 0
    view = await Client(store).get_handle(uuid.UUID(out["id"])).describe()
    assert view.input == b'{"from":"stdin"}'

    code, _, err = await cli("workflows", "start", "pp_echo", "--input", f"@{tmp_path}/missing")
    assert code == 2
    assert "--input: cannot read" in err
    assert await _executions(store) == 2


async def test_identifiers_that_are_not_utf8_are_value_errors_on_client_and_cli(
    cli: Cli, store: PostgresStore
) -> None:
    # an undecodable argv byte (b"\xff") reaches Python as the lone surrogate "\udcff"
    code, _, err = await cli("workflows", "start", "pp_\udcff", "--input", "1")
    assert code == 2
    assert "workflow name is not valid UTF-8" in err
    code, _, err = await cli("workflows", "list", "--name", "pp_\udcff")
    assert code == 2
    assert "workflow name is not valid UTF-8" in err
    client = Client(store)
    with pytest.raises(ValueError, match="workflow name is not valid UTF-8"):
        await client.start("pp_\udcff", 1)
    handle = await client.start(pp_echo, 1)
    with pytest.raises(ValueError, match="signal name is not valid UTF-8"):
        await handle.signal("go\ud800", 1)
    code, _, err = await cli("workflows", "signal", str(handle.id), "go\udcff")
    assert code == 2
    assert "signal name is not valid UTF-8" in err
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_signals") == 0


async def test_uncertain_resolution_refuses_non_finite_and_deep_results(
    cli: Cli, store: PostgresStore
) -> None:
    client = Client(store)
    await client.start(pp_payout, 5)
    await local_runtime(store, [pp_payout], [pp_wire]).run_until_idle()
    (op,) = await client.list_uncertain()
    for bad in (math.nan, {"v": -math.inf}):
        with pytest.raises(PayloadEncodeError, match=NON_FINITE):
            await client.resolve_uncertain(op, "complete", result=bad, note="n", decided_by="b")
    resolve = ["uncertain", "resolve", str(op.operation_id), "--decision", "complete"]
    for result, message in (("NaN", NON_FINITE), ("[Infinity]", NON_FINITE), (DEEP_JSON, "deep")):
        code, _, err = await cli(*resolve, "--result", result, "--note", "n", "--by", "b")
        assert code == 2
        assert message in err
    (still,) = await client.list_uncertain()
    assert still.operation_id == op.operation_id


async def test_an_activity_result_that_is_not_finite_fails_the_step_once_and_is_recorded(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(pp_divide, 0)
    await local_runtime(store, [pp_divide], [pp_ratio]).run_until_idle()
    assert await handle.result(timeout=5) == (
        "PayloadEncodeError after 1: result of activity 'pp_ratio' is not "
        "JSON-encodable: it contains a NaN or infinite float, which JSON cannot represent "
        "(it would be stored as null)"
    )
    types = [type(e.event).__name__ for e in await handle.history()]
    assert "ActivityFailed" in types


async def test_a_dag_task_result_that_is_not_finite_kills_the_task_without_retries(
    store: PostgresStore,
) -> None:
    dag = DAG("pp_dag")

    @dag.task
    async def measure(ctx: TaskContext) -> dict[str, float]:
        return {"ratio": math.nan}

    run = await DAGClient(store).run(dag)
    view = await settle(store, runner(store, dag), run.id)
    (task,) = await store.dag_tasks(run.id)
    assert (task.state, task.attempt) == (JobState.DEAD, 1)
    assert "PayloadEncodeError" in (task.last_error or "")
    assert NON_FINITE in (task.last_error or "")
    assert task.result is None
    assert "measure" in view.failure_reason


async def test_client_start_takes_a_workflow_name_and_refuses_other_things(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handle = await client.start("pp_echo", {"a": [1, 2]}, version="7")
    await local_runtime(store, [pp_echo], []).run_until_idle()
    assert await handle.result(timeout=5) == {"a": [1, 2]}
    view = await handle.describe()
    assert (view.name, view.version, view.state) == ("pp_echo", "7", WorkflowState.SUCCEEDED)
    with pytest.raises(PayloadEncodeError, match=NON_FINITE):
        await client.start("pp_echo", math.nan)
    with pytest.raises(TypeError, match="decorate it with @workflow"):
        await client.start(pp_echo.fn, 1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="a @workflow definition or a workflow name"):
        await client.start(None, 1)  # type: ignore[call-overload]
    assert await _executions(store) == 1


class PpOrder(msgspec.Struct):
    sku: str
    qty: int


@workflow(name="pp_order")
async def pp_order(ctx: WorkflowContext, order: PpOrder) -> int:
    return order.qty


async def test_client_start_refuses_input_of_the_wrong_shape_and_creates_nothing(
    store: PostgresStore,
) -> None:
    client = Client(store)
    for wrong in ("just a string", {"foo": 1}, {"sku": "a", "qty": "two"}):
        with pytest.raises(PayloadError, match="input of workflow 'pp_order' does not match"):
            await client.start(pp_order, wrong)
    assert await _executions(store) == 0
    handle = await client.start(pp_order, {"sku": "a", "qty": 2})  # JSON of the right shape
    await local_runtime(store, [pp_order], []).run_until_idle()
    assert await handle.result(timeout=5) == 2


@pytest.mark.parametrize("coefficient", [math.nan, math.inf])
def test_a_retry_policy_refuses_a_backoff_coefficient_json_cannot_store(
    coefficient: float,
) -> None:
    with pytest.raises(ValueError, match="backoff_coefficient must be a finite number"):
        RetryPolicy(backoff_coefficient=coefficient)
