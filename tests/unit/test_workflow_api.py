"""The public workflow API: decorators, plain calls outside workflows, options, registry,
error tree, retry policy and the pinned export lists."""

from __future__ import annotations

import importlib
import pickle
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

import azync_flow
import azync_flow.replay as replay_pkg
from azync_flow import activity, errors, workflow
from azync_flow.activity import ActivityDefinition
from azync_flow.errors import (
    ActivityError,
    AzyncError,
    ForbiddenCallError,
    NonDeterminismError,
    UnknownWorkflowError,
    WorkflowAbort,
)
from azync_flow.replay import PassStatus, WorkflowInfo, run_pass
from azync_flow.retry import RetryPolicy
from azync_flow.workflow import ActivityOptions, Registry, WorkflowContext, WorkflowDefinition


class Item(msgspec.Struct):
    sku: str
    qty: int


@activity
def reserve(item: Item, warehouse: str = "main") -> dict[str, Any]:
    return {"sku": item.sku, "qty": item.qty, "warehouse": warehouse}


@activity(name="charge", version="2", retry=RetryPolicy(maximum_attempts=5), idempotent=False)
async def charge(amount: int) -> str:
    return f"charged {amount}"


INFO = WorkflowInfo(execution_id=uuid.UUID(int=7), name="w", version="1")


def test_activities_are_plain_calls_outside_workflows() -> None:
    assert reserve(Item("a", 2)) == {"sku": "a", "qty": 2, "warehouse": "main"}


async def test_async_activity_outside_a_workflow_is_an_ordinary_coroutine() -> None:
    assert await charge(5) == "charged 5"
    assert await charge.with_options(start_to_close=timedelta(seconds=3))(6) == "charged 6"


def test_decorators_record_names_versions_options_and_types() -> None:
    assert isinstance(reserve, ActivityDefinition)
    assert reserve.name == "reserve"
    assert reserve.kind == "$op:reserve@1"
    assert charge.kind == "$op:charge@2"
    assert charge.options.idempotent is False
    assert charge.options.retry.maximum_attempts == 5
    assert charge.is_async
    assert not reserve.is_async
    assert reserve.param_types == [Item, str]
    assert reserve.return_type == dict[str, Any]


def test_activity_args_encode_positionally_and_decode_to_annotations() -> None:
    data = reserve.encode_args((Item("a", 1),), {"warehouse": "w2"})
    assert data == b'[{"sku":"a","qty":1},"w2"]'
    args = reserve.decode_args(data)
    assert args == [Item("a", 1), "w2"]


async def test_activity_run_encodes_the_result_for_the_runtime() -> None:
    assert await charge.run(b"[3]") == b'"charged 3"'
    assert await reserve.run(b'[{"sku":"b","qty":4}]') == (
        b'{"sku":"b","qty":4,"warehouse":"main"}'
    )


def test_per_call_options_reach_the_schedule_command() -> None:
    @workflow(name="opts")
    async def wf(ctx: WorkflowContext, _: None) -> None:
        await charge.with_options(start_to_close=timedelta(seconds=9))(1)

    out = run_pass(wf, b"null", [], info=INFO)
    [command] = out.activities
    assert command.name == "charge"
    assert command.version == "2"
    assert command.input == b"[1]"
    assert isinstance(command.options, ActivityOptions)
    assert command.options.start_to_close == timedelta(seconds=9)
    assert command.options.retry.maximum_attempts == 5  # inherited


def test_workflow_input_decodes_to_the_annotated_type_and_no_input_form_works() -> None:
    @workflow
    async def typed(ctx: WorkflowContext, item: Item) -> int:
        assert isinstance(item, Item)
        return item.qty * 2

    @workflow(name="noinput", version="3")
    async def noinput(ctx: WorkflowContext) -> dict[str, Any]:
        return {"version": ctx.info.version, "id": str(ctx.info.execution_id)}

    assert isinstance(typed, WorkflowDefinition)
    assert typed.name.endswith("typed")
    out = run_pass(typed, b'{"sku":"x","qty":21}', [], info=INFO)
    assert msgspec.json.decode(out.result) == 42
    out = run_pass(noinput, b"null", [], info=INFO)
    assert msgspec.json.decode(out.result) == {"version": "1", "id": str(INFO.execution_id)}


def test_bad_workflow_input_fails_the_execution_with_a_payload_error() -> None:
    @workflow(name="strict")
    async def wf(ctx: WorkflowContext, item: Item) -> int:
        return item.qty

    out = run_pass(wf, b'{"sku": 1}', [], info=INFO)
    assert out.status is PassStatus.FAILED
    assert out.error.error_type == "PayloadError"


def test_workflow_decorator_rejects_sync_functions() -> None:
    with pytest.raises(TypeError, match="async def"):
        workflow(lambda ctx, x: x)


def test_registry_looks_up_by_name_and_kind_and_rejects_duplicates() -> None:
    @workflow(name="reg")
    async def wf(ctx: WorkflowContext) -> None:
        return None

    registry = Registry(workflows=[wf], activities=[reserve, charge])
    assert registry.workflow("reg") is wf
    assert registry.activity("$op:charge@2") is charge
    with pytest.raises(UnknownWorkflowError):
        registry.workflow("nope")
    with pytest.raises(UnknownWorkflowError):
        registry.activity("$op:charge@1")

    @workflow(name="reg")
    async def other(ctx: WorkflowContext) -> None:
        return None

    with pytest.raises(ValueError, match="two workflows"):
        registry.add_workflow(other)
    registry.add_workflow(wf)  # same object again is fine


def test_error_tree_codes_and_pickling() -> None:
    for cls in (ActivityError, NonDeterminismError, ForbiddenCallError, UnknownWorkflowError):
        assert issubclass(cls, AzyncError)
    assert issubclass(WorkflowAbort, BaseException)
    assert not issubclass(WorkflowAbort, Exception)
    err = NonDeterminismError(4, "ActivityScheduled(A)", "TimerStarted(1s)")
    assert str(err).startswith("[nondeterminism] at seq 4")
    back = pickle.loads(pickle.dumps(err))
    assert (back.seq, back.recorded, back.new) == (4, "ActivityScheduled(A)", "TimerStarted(1s)")
    act = pickle.loads(pickle.dumps(ActivityError("charge", "KeyError", "x", 3, 5)))
    assert (act.activity, act.error_type, act.attempts, act.seq) == ("charge", "KeyError", 3, 5)
    forbidden = pickle.loads(pickle.dumps(ForbiddenCallError("time.time()")))
    assert forbidden.call == "time.time()"


def test_activities_default_to_a_three_attempt_retry_budget() -> None:
    assert reserve.options.retry.maximum_attempts == 3
    assert ActivityOptions().retry.maximum_attempts == 3
    assert charge.options.retry.maximum_attempts == 5


def test_export_lists_are_pinned() -> None:
    # the top-level ``workflow`` and ``activity`` are the user modules, which decorate
    workflow_mod = importlib.import_module("azync_flow.workflow")
    activity_mod = importlib.import_module("azync_flow.activity")
    assert azync_flow.workflow is workflow is workflow_mod
    assert azync_flow.activity is activity is activity_mod
    assert azync_flow.WorkflowContext is WorkflowContext
    assert workflow_mod.__all__ == [
        "ActivityOptions",
        "ChildHandle",
        "HistoryLimit",
        "ParentClosePolicy",
        "Registry",
        "WorkflowContext",
        "WorkflowDefinition",
    ]
    assert activity_mod.__all__ == [
        "ActivityDefinition",
        "ActivityInfo",
        "Reconciled",
        "TransactionDefinition",
        "current_activity",
        "transaction",
    ]
    # sorted isort-style (ruff RUF022): constants, then classes, then functions
    kinds = [(0 if n.isupper() else 1 if n[0].isupper() else 2, n) for n in replay_pkg.__all__]
    assert sorted(kinds) == kinds
    assert "run_pass" in replay_pkg.__all__
    assert "Replayer" in replay_pkg.__all__
    assert sorted(errors.__all__) == errors.__all__
