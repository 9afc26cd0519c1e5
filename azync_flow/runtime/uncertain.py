"""History events for uncertain operations (issue 5): marking and resolving.

The store verbs take ready-made ``(type, payload)`` events so history stays
opaque to it; these helpers build them from the replay event types.
"""

from __future__ import annotations

from typing import Any

import msgspec

from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    OperationResolved,
    OperationUncertain,
    encode_event,
)
from azync_flow.replay.outcome import sanitize_text
from azync_flow.runtime._operations import decode_operation
from azync_flow.store.types import Job

__all__ = ["resolution_events", "seq_of_execution_key", "uncertain_event"]


def seq_of_execution_key(execution_key: str) -> int:
    """The history seq in an operation's execution key ``<workflow_id>/<seq>``."""
    return int(execution_key.rsplit("/", 1)[1])


def uncertain_event(job: Job, reason: str) -> tuple[str, bytes]:
    """``(type, payload)`` of the OperationUncertain event for ``job``.

    Usable as the ``encode`` callback of ``store.reap_uncertain_operations``.
    """
    if job.payload is not None:
        seq = decode_operation(job.payload).seq
    else:
        seq = seq_of_execution_key(job.task_key)
    return encode_event(OperationUncertain(scheduled_seq=seq, reason=sanitize_text(reason)))


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
            scheduled_seq=seq, error_type="Uncertain", message=sanitize_text(error or "")
        )
    elif decision == "retry":
        return resolved, None
    else:
        raise ValueError(f"unknown decision {decision!r}")
    return resolved, encode_event(outcome)
