"""DAG definitions: decorators, validation (no database), and their DAGParams."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow.dag import DAG, TaskContext
from azync_flow.errors import DAGValidationError
from azync_flow.store.dags import KIND_SIGNAL, KIND_SLEEP, DAGDep, OnFailurePolicy


async def _noop(ctx: TaskContext) -> None:
    return None


def _saga() -> DAG:
    d = DAG("order", on_failure="suspend")

    @d.task(compensate=_noop, compensation_payload={"undo": "stock"})
    async def reserve(ctx: TaskContext) -> dict[str, int]:
        return {"n": 1}

    @d.task(after=[reserve], max_attempts=3, deadline=timedelta(minutes=5), compensate=_noop)
    async def charge(ctx: TaskContext) -> None:
        return None

    d.signal("warehouse", after=[charge], name="wh-ok")
    d.sleep("cool", timedelta(seconds=30), after=["warehouse"], wake_on="hurry")

    @d.task(after=["cool"], ignore_dead_deps=True, payload={"fixed": True})
    async def ship(ctx: TaskContext) -> None:
        return None

    return d


def test_params_encode_tasks_edges_kinds_and_payloads() -> None:
    d = _saga()
    run_id = uuid.uuid4()
    p = d.params({"order": 7}, id=run_id, idempotency_key="o-7", meta={"m": "1"})
    assert p.id == run_id
    assert p.name == "order"
    assert p.on_failure == OnFailurePolicy.SUSPEND
    assert p.idempotency_key == "o-7"
    assert p.meta == {"m": "1"}
    t = {x.key: x for x in p.tasks}
    assert t["reserve"].kind == "order/reserve"
    assert t["reserve"].payload == b'{"order":7}'
    assert t["reserve"].compensation_kind == "order/comp:reserve"
    assert t["reserve"].compensation_payload == b'{"undo":"stock"}'
    assert t["charge"].compensation_payload == b'{"order":7}'  # default: run input
    assert t["charge"].max_attempts == 3
    assert t["charge"].deadline == timedelta(minutes=5)
    assert t["warehouse"].kind == KIND_SIGNAL
    assert t["warehouse"].signal_name == "wh-ok"
    assert t["cool"].kind == KIND_SLEEP
    assert t["cool"].sleep_for == timedelta(seconds=30)
    assert t["cool"].signal_name == "hurry"
    assert t["ship"].ignore_dead_deps
    assert t["ship"].payload == b'{"fixed":true}'
    assert set(p.deps) == {
        DAGDep(task_key="charge", depends_on_key="reserve"),
        DAGDep(task_key="warehouse", depends_on_key="charge"),
        DAGDep(task_key="cool", depends_on_key="warehouse"),
        DAGDep(task_key="ship", depends_on_key="cool"),
    }
    assert msgspec.json.decode(d.params(payloads={"ship": [1]}).tasks[-1].payload) == [1]


def test_handlers_map_kinds_to_tasks_and_compensations() -> None:
    h = _saga().handlers()
    assert set(h) == {
        "order/reserve",
        "order/comp:reserve",
        "order/charge",
        "order/comp:charge",
        "order/ship",
    }
    assert h["order/comp:reserve"][2] is True
    assert h["order/reserve"][2] is False


def test_decorated_handler_is_returned_unchanged() -> None:
    d = DAG("x")

    async def f(ctx: TaskContext) -> int:
        return 1

    assert d.task(f) is f


@pytest.mark.parametrize("bad", ["$x", "comp:x"])
def test_reserved_keys_are_rejected_naming_the_task(bad: str) -> None:
    d = DAG("x")
    with pytest.raises(DAGValidationError, match=re.escape(f"task '{bad}'")):
        d.task(_noop, key=bad)
    with pytest.raises(DAGValidationError, match="reserved"):
        d.signal(bad)


def test_empty_key_is_rejected() -> None:
    with pytest.raises(DAGValidationError, match="must not be empty"):
        DAG("x").signal("")


def test_duplicate_key_is_rejected_naming_it() -> None:
    d = DAG("x")
    d.task(_noop, key="a")
    with pytest.raises(DAGValidationError, match="'a': duplicate task key"):
        d.sleep("a", timedelta(seconds=1))


def test_unknown_dependency_is_rejected_before_anything_is_stored() -> None:
    d = DAG("x")
    d.task(_noop, key="a", after=["ghost"])
    with pytest.raises(DAGValidationError, match="'a': depends on unknown task 'ghost'"):
        d.params()


def test_dependency_on_foreign_handler_is_rejected() -> None:
    d = DAG("x")

    async def elsewhere(ctx: TaskContext) -> None:
        return None

    with pytest.raises(DAGValidationError, match="not a task of this DAG"):
        d.task(_noop, key="a", after=[elsewhere])


def test_cycle_is_rejected_naming_its_tasks() -> None:
    d = DAG("x")
    d.task(_noop, key="a", after=["c"])
    d.task(_noop, key="b", after=["a"])
    d.task(_noop, key="c", after=["b"])
    d.task(_noop, key="free")
    with pytest.raises(DAGValidationError, match="cycle among tasks a, b, c") as e:
        d.validate()
    assert e.value.task == "a"
    assert e.value.dag == "x"


def test_self_dependency_is_a_cycle() -> None:
    d = DAG("x")
    with pytest.raises(DAGValidationError, match="cycle"):
        d.task(_noop, key="a", after=["a"])


def test_empty_dag_and_bad_names_are_rejected() -> None:
    with pytest.raises(DAGValidationError, match="no tasks"):
        DAG("x").validate()
    with pytest.raises(DAGValidationError):
        DAG("$internal")
    with pytest.raises(ValueError, match="explode"):
        DAG("x", on_failure="explode")


def test_payload_for_unknown_task_is_rejected() -> None:
    d = DAG("x")
    d.task(_noop, key="a")
    with pytest.raises(DAGValidationError, match="'nope'"):
        d.params(payloads={"nope": 1})


def test_exports_are_pinned() -> None:
    import azync_flow.dag as m

    assert set(m.__all__) == {
        "DAG",
        "DAG_LEADERSHIP",
        "RESERVED_PREFIXES",
        "DAGClient",
        "DAGEvent",
        "DAGRun",
        "DAGRunner",
        "DAGScheduler",
        "DAGWorkerBinding",
        "RetryPolicy",
        "SignalReceipt",
        "TaskContext",
        "TaskOutcome",
        "TaskSpec",
        "TickStats",
        "run_until_settled",
    }


def test_top_level_re_exports_the_dag_api_and_worker() -> None:
    import azync_flow
    import azync_flow.dag as dag_pkg
    import azync_flow.errors as errors
    import azync_flow.worker as worker_pkg

    # sorted isort-style (ruff RUF022): constants, then classes, then functions
    assert azync_flow.__all__ == [
        "DAG",
        "ActivityError",
        "ActivityOptions",
        "ActivityTimeoutError",
        "AzyncError",
        "ChildWorkflowError",
        "ChildWorkflowTimeoutError",
        "Client",
        "ConcurrencyLimit",
        "Config",
        "DAGClient",
        "DAGValidationError",
        "EventContext",
        "NonDeterminismError",
        "NotReady",
        "QueryFailedError",
        "QueryNotFoundError",
        "QueryTimeoutError",
        "RateLimit",
        "Reconciled",
        "Registry",
        "Replayer",
        "RetryPolicy",
        "ScheduleSpec",
        "SchemaNotMigratedError",
        "Skip",
        "StartWorkflow",
        "StoreDsnError",
        "StoreLoginRefusedError",
        "StoreUnavailableError",
        "TaskContext",
        "Uncertain",
        "UpdateFailedError",
        "UpdateRejectedError",
        "Worker",
        "WorkflowCancelledError",
        "WorkflowContext",
        "WorkflowFailedError",
        "WorkflowTerminatedError",
        "WorkflowTimeoutError",
        "activity",
        "attach_dags",
        "attach_schedules",
        "attach_subscribers",
        "attach_workflows",
        "current_activity",
        "open_store",
        "subscriber",
        "transaction",
        "workflow",
    ]
    for name in ("DAG", "DAGClient", "TaskContext"):
        assert getattr(azync_flow, name) is getattr(dag_pkg, name)
    for name in ("DAGValidationError", "NotReady", "Skip"):
        assert getattr(azync_flow, name) is getattr(errors, name)
    import azync_flow.app as app

    for name in ("attach_dags", "attach_schedules", "attach_subscribers", "attach_workflows"):
        assert getattr(azync_flow, name) is getattr(app, name)
    assert azync_flow.Worker is worker_pkg.Worker
    from azync_flow.activity import current_activity

    assert azync_flow.current_activity is current_activity
