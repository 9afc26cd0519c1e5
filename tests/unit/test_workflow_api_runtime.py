"""Runtime helpers that need no database: transient-error retry, operation payloads."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow._decisions import resolution_events
from azync_flow._operations import decode_operation, operation_params, seq_of_execution_key
from azync_flow._transient import is_transient, retry_transient
from azync_flow.replay import ScheduleActivity
from azync_flow.retry import RetryPolicy
from azync_flow.workflow import ActivityOptions


class FakeDbError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


async def test_transient_errors_are_retried_and_others_raised() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise FakeDbError("40P01")  # deadlock_detected
        return "committed"

    assert await retry_transient(flaky) == "committed"
    assert len(calls) == 3

    async def broken() -> None:
        raise FakeDbError("23505")  # unique_violation: not transient

    with pytest.raises(FakeDbError):
        await retry_transient(broken)
    wrapped = RuntimeError("store failed")
    wrapped.__cause__ = FakeDbError("40001")
    assert is_transient(wrapped)


def test_operation_payload_carries_input_and_policy_byte_for_byte() -> None:
    wid = uuid.uuid4()
    policy = RetryPolicy(maximum_attempts=4, initial_interval=timedelta(seconds=2))
    options = ActivityOptions(retry=policy, start_to_close=timedelta(seconds=9), idempotent=False)
    command = ScheduleActivity(7, "charge", "2", b'[{"s":"a\\u0000b"}]', options)
    params = operation_params(wid, "order", command)
    assert params.kind == "$op:charge@2"
    assert params.execution_key == f"{wid}/7"
    assert params.max_attempts == 4
    assert params.meta == {"workflow_name": "order", "activity": "charge", "idempotent": "false"}
    op = decode_operation(params.payload)
    assert bytes(op.input) == b'[{"s":"a\\u0000b"}]'
    assert op.retry == policy
    assert op.start_to_close == timedelta(seconds=9)
    assert seq_of_execution_key(params.execution_key) == 7


def test_resolution_events_match_the_decision() -> None:
    resolved, outcome = resolution_events(3, "complete", result=b'"ok"', decided_by="ann")
    assert resolved[0] == "OperationResolved"
    assert outcome is not None
    assert outcome[0] == "ActivityCompleted"
    assert msgspec.json.decode(outcome[1])["result"] == "ok"
    _, failed = resolution_events(3, "fail", error="bank says no")
    assert failed is not None
    assert failed[0] == "ActivityFailed"
    assert resolution_events(3, "retry")[1] is None
    with pytest.raises(ValueError, match="needs the operation's result"):
        resolution_events(3, "complete")
    with pytest.raises(ValueError, match="unknown decision"):
        resolution_events(3, "maybe")
