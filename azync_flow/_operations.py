"""The operation job of one activity call: its payload, persisted with the job
(written by the workflow runtime; read by the activity runtime, the reaper and
the client's view of uncertain operations), and its execution key."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from azync_flow._result_type import ResultType
from azync_flow.replay.outcome import ScheduleActivity
from azync_flow.retry import RetryPolicy
from azync_flow.store.queue import DEFAULT_TASK_QUEUE
from azync_flow.store.workflows import ScheduleOperationParams

__all__ = [
    "OperationPayload",
    "decode_operation",
    "operation_params",
    "seq_of_execution_key",
    "with_result_type",
]


class OperationPayload(msgspec.Struct, kw_only=True):
    """What an activity attempt needs, stored in the operation job's payload.

    The retry policy travels with the job so every attempt, on any worker,
    decides with the policy in force when the call was made. ``result_type``
    is the activity's result type when the call was made (None: not
    checkable, or an operation scheduled before it was recorded); decisions
    are checked against it.
    """

    seq: int
    activity: str
    version: str
    input: msgspec.Raw
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    start_to_close: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    idempotent: bool = True
    result_type: ResultType | None = None


_DECODER = msgspec.json.Decoder(OperationPayload)


def decode_operation(payload: bytes) -> OperationPayload:
    """Decode an operation job payload."""
    return _DECODER.decode(payload)


def with_result_type(payload: bytes, result_type: ResultType) -> bytes:
    """An operation payload recording ``result_type`` instead of the one it
    carries (what the next decision on the operation is checked against);
    ``payload`` unchanged when it is not an operation payload."""
    try:
        op = decode_operation(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return payload
    op.result_type = result_type
    return msgspec.json.encode(op)


def seq_of_execution_key(execution_key: str) -> int:
    """The history seq in an operation's execution key ``<workflow_id>/<seq>``."""
    return int(execution_key.rsplit("/", 1)[1])


def operation_params(
    workflow_id: object,
    workflow_name: str,
    command: ScheduleActivity,
    carrier: dict[str, str] | None = None,
    task_queue: str = DEFAULT_TASK_QUEUE,
    priority: int = 0,
) -> ScheduleOperationParams:
    """Build the operation a pass schedules (``PassWrite.operations``) for one
    ScheduleActivity command.

    ``carrier`` (the run's W3C trace context) travels in the job's meta so each
    attempt's span joins the run's trace without another read. The operation
    goes to the call's ``task_queue`` option, else to ``task_queue`` (the
    workflow's), with the call's ``priority`` option, else ``priority``."""
    options = command.options
    payload = OperationPayload(
        seq=command.seq,
        activity=command.name,
        version=command.version,
        input=msgspec.Raw(command.input),
        retry=options.retry if options is not None else RetryPolicy(maximum_attempts=3),
        start_to_close=getattr(options, "start_to_close", None),
        heartbeat_timeout=getattr(options, "heartbeat_timeout", None),
        idempotent=getattr(options, "idempotent", True),
        result_type=command.result_type,
    )
    return ScheduleOperationParams(
        workflow_id=workflow_id,  # type: ignore[arg-type]
        kind=f"$op:{command.name}@{command.version}",
        payload=msgspec.json.encode(payload),
        execution_key=f"{workflow_id}/{command.seq}",
        meta={
            **(carrier or {}),
            "workflow_name": workflow_name,
            "activity": command.name,
            "idempotent": "true" if payload.idempotent else "false",
        },
        max_attempts=payload.retry.maximum_attempts,
        task_queue=getattr(options, "task_queue", None) or task_queue,
        priority=_given(getattr(options, "priority", None), priority),
        schedule_to_start=getattr(options, "schedule_to_start", None),
        schedule_to_close=getattr(options, "schedule_to_close", None),
        limit_key=_limit_key(options),
    )


def _limit_key(options: object) -> str | None:
    """The operation's limit key: None for an activity without limits (its
    kind's plain lease), else the key the call resolved (``""`` when none)."""
    if not getattr(options, "limits", ()):
        return None
    key = getattr(options, "limit_key", None)
    return key if isinstance(key, str) else ""


def _given(value: int | None, default: int) -> int:
    return default if value is None else value
