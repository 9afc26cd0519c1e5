"""Decisions on uncertain operations: the history events of a decision and
the audited verb that applies it (``Client.resolve_uncertain``, the CLI, and
the reconcile hooks the workflow runtime calls), and the client's view of an
operation waiting for one. See docs/uncertain.md."""

from __future__ import annotations

import getpass
import socket
import uuid
from typing import Any, NamedTuple

import msgspec

from azync_flow._operations import decode_operation, seq_of_execution_key
from azync_flow._result_type import ResultType, check_result
from azync_flow._text import clean_text
from azync_flow.codec import encode_value
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    OperationResolved,
    encode_event,
)
from azync_flow.store.queue import Source
from azync_flow.store.validate import check_reason
from azync_flow.store.workflows import UncertainStore

__all__ = [
    "NOTE_PREFIXES",
    "RECONCILE_PREFIX",
    "Decided",
    "UncertainOperationView",
    "default_decider",
    "reconcile_verdict",
    "recorded_result_type",
    "resolution_events",
    "resolve_operation",
]


#: How the reconcile hook's verdict starts in an operation's attempt log.
RECONCILE_PREFIX = "reconcile: "

#: Attempt-log rows that note something about an attempt rather than record
#: one: the hook's verdict, a refused late report, an operator's decision.
NOTE_PREFIXES = (RECONCILE_PREFIX, "late outcome ignored: ", "resolved ")


async def reconcile_verdict(store: Any, operation_id: uuid.UUID, attempt: int) -> str:
    """The last verdict the reconcile hook recorded on ``attempt`` (the current
    uncertain attempt) of an operation, without the log's prefix (``unknown: …``,
    ``error: hook raised …``); ``""`` when no hook recorded one.

    Args:
        store: any store with ``job_attempts`` (the attempt log's read).
        operation_id: the operation's job id.
        attempt: the attempt number asked about.
    """
    attempts = await store.job_attempts(Source.WORKFLOW, operation_id)
    found = [
        a.error for a in attempts if a.attempt == attempt and a.error.startswith(RECONCILE_PREFIX)
    ]
    return found[-1].removeprefix(RECONCILE_PREFIX) if found else ""


def resolution_events(
    seq: int,
    decision: str,
    *,
    result: bytes | None = None,
    error: str | None = None,
    decided_by: str = "",
    note: str = "",
) -> tuple[tuple[str, bytes], tuple[str, bytes] | None]:
    """``(resolved_event, outcome_event)`` for ``store.resolve_uncertain``.

    ``complete`` needs ``result`` (JSON bytes) and yields an ActivityCompleted;
    ``fail`` yields an ActivityFailed of type ``"Uncertain"`` with ``error``;
    ``retry`` yields no outcome (a new attempt will produce it).

    Raises:
        ValueError: unknown decision, or ``complete`` without a result.
    """
    resolved = encode_event(
        OperationResolved(scheduled_seq=seq, decision=decision, decided_by=decided_by, note=note)
    )
    outcome: Any
    if decision == "complete":
        if result is None:
            raise ValueError("a complete decision needs the operation's result (JSON bytes)")
        outcome = ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(result), attempts=0)
    elif decision == "fail":
        outcome = ActivityFailed(
            scheduled_seq=seq, error_type="Uncertain", message=clean_text(error or "")
        )
    elif decision == "retry":
        return resolved, None
    else:
        raise ValueError(f"unknown decision {decision!r}")
    return resolved, encode_event(outcome)


def default_decider() -> str:
    """``user@host`` of this process: who decided, when the caller does not say."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class Decided(NamedTuple):
    """What :func:`resolve_operation` returns: the decided operation's execution
    and activity name."""

    workflow_id: uuid.UUID
    workflow_name: str
    activity: str


async def resolve_operation(
    store: UncertainStore,
    operation_id: uuid.UUID | str,
    decision: str,
    *,
    result: Any = None,
    error: str | None = None,
    note: str | None = None,
    decided_by: str | None = None,
    expected_attempt: int | None = None,
) -> Decided:
    """Apply a decision to an uncertain operation (the client, CLI and reconciler path).

    Builds the history events (``OperationResolved`` then ``ActivityCompleted`` /
    ``ActivityFailed``) and calls ``store.resolve_uncertain``, which records the
    decision on the operation, appends them, resumes the execution and schedules
    its workflow task in one transaction.

    Args:
        operation_id: the operation job id.
        decision: "complete", "fail" or "retry".
        result: for complete: the value the activity would have returned
            (checked against the result type the operation recorded).
        error: for fail: the message the workflow's ActivityError carries
            (None: ``"resolved as failed by WHO"``).
        note: why (kept in history and on the operation).
        decided_by: who (default: ``user@host``). NUL and lone surrogates in
            either are recorded escaped, like every reason.
        expected_attempt: refuse (ConflictError) when the operation turned
            uncertain again at another attempt meanwhile.

    Returns:
        The execution (id, workflow name) and the activity decided.

    Raises:
        ValueError: unknown decision, or a ``note`` or ``error`` that is empty
            or only whitespace (omit it instead); nothing is written.
        DecisionError: for complete: ``result`` does not fit the activity's
            result type recorded with the operation (the workflow could not
            decode it); nothing is written.
        NotFoundError: no such operation, or it is not uncertain.
        ConflictError: already resolved (by a concurrent resolver, too).
        PayloadEncodeError: ``result`` is not JSON-encodable.
    """
    if decision not in ("complete", "fail", "retry"):
        raise ValueError(f"unknown decision {decision!r}; use complete, fail or retry")
    op_id = operation_id if isinstance(operation_id, uuid.UUID) else uuid.UUID(str(operation_id))
    op = await store.get_operation(op_id)
    # free text, escaped like every recorded reason (NUL, lone surrogates)
    by = clean_text(decided_by if decided_by is not None else default_decider())
    note = clean_text(check_reason(note, "note")) if note is not None else None
    data = encode_value(result, "uncertain operation result") if decision == "complete" else None
    if data is not None and op.state == "uncertain":  # otherwise the store says why not
        expected = recorded_result_type(op.input)
        if expected is not None:
            check_result(data, expected)
    if error is not None and not (isinstance(error, str) and error.strip()):
        raise ValueError(
            "error must not be empty: give the message the workflow's ActivityError "
            "carries, or omit it (the message is then 'resolved as failed by WHO')"
        )
    if decision == "fail" and error is None:
        error = f"resolved as failed by {by or 'an unnamed resolver'}"
    resolved, outcome = resolution_events(
        seq_of_execution_key(op.execution_key),
        decision,
        result=data,
        error=error,
        decided_by=by,
        note=note or "",
    )
    done = await store.resolve_uncertain(
        op_id,
        decision,
        data,
        error,
        note,
        by,
        resolved_event=resolved,
        outcome_event=outcome,
        expected_attempt=expected_attempt,
    )
    return Decided(done.workflow_id, done.workflow_name, op.activity)


def recorded_result_type(payload: bytes) -> ResultType | None:
    """The result type an operation payload recorded; None when it recorded
    none (or the payload is not an operation's)."""
    try:
        return decode_operation(payload).result_type
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class UncertainOperationView(msgspec.Struct, kw_only=True):
    """An operation waiting for a decision, as the client lists it.

    Attributes:
        operation_id: what ``resolve_uncertain`` takes.
        workflow_id / workflow_name: its execution.
        activity: activity name; ``kind`` is ``$op:<name>@<version>``.
        execution_key: ``<workflow_id>/<seq>``, the idempotency key to ask a provider with.
        input: the activity's arguments as a JSON array (bytes, as recorded).
        attempt: attempts made so far (the uncertain one included).
        since / reason: when and why it turned uncertain.
    """

    operation_id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_name: str
    activity: str
    kind: str
    execution_key: str
    input: bytes
    attempt: int
    since: Any
    reason: str

    @classmethod
    def from_store(cls, op: Any) -> UncertainOperationView:
        """Build from the store's ``UncertainOperation`` (decodes the job payload)."""
        try:
            data = bytes(decode_operation(op.input).input)
        except (msgspec.DecodeError, msgspec.ValidationError):
            data = bytes(op.input)
        return cls(
            operation_id=op.job_id,
            workflow_id=op.workflow_id,
            workflow_name=op.workflow_name,
            activity=op.activity,
            kind=op.kind,
            execution_key=op.execution_key,
            input=data,
            attempt=op.attempt,
            since=op.since,
            reason=op.reason,
        )
