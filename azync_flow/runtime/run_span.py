"""The run span of a finished run: the one call every path that ends a run makes.

A workflow execution or DAG run ends in exactly one committed transaction (a
pass's completion, a cancellation, a termination, the DAG scheduler's
settlement). The process whose commit won calls :func:`end_workflow_run_span`
or :func:`end_dag_run_span` right after it, so the run span is exported once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from azync_flow.errors import NotFoundError
from azync_flow.store.workflows import WorkflowExecutionView
from azync_flow.telemetry import RunKind, RunTracer

__all__ = ["end_dag_run_span", "end_finished_workflow_run_span", "end_workflow_run_span"]

log = logging.getLogger("azync_flow.telemetry")

#: Terminal states whose run span has status ERROR (with the reason).
_ERROR_STATES = frozenset({"failed", "terminated"})


def end_workflow_run_span(
    tracer: RunTracer,
    execution: WorkflowExecutionView,
    carrier: Mapping[str, str] | None,
    state: str,
    reason: str = "",
) -> bool:
    """Export the run span of a workflow execution that just finished.

    Call it after the transaction that made the execution terminal committed,
    in the process that committed it, and after that step's own attempt span
    ended (the run span ends now, after every attempt).

    Args:
        tracer: The runtime's or client's tracer.
        execution: The execution (its ``id``, ``name`` and ``created_at`` are used;
            a view read before the final commit is fine).
        carrier: The execution's stored ``trace_context``.
        state: The terminal state (``succeeded``, ``failed``, ``cancelled``, or
            another terminal state such as ``terminated``).
        reason: The failure or cancellation reason; a ``failed`` or
            ``terminated`` run gets status ERROR with it.

    Returns:
        True when exported (see :meth:`RunTracer.end_run_span`). Never raises:
        a telemetry failure is logged, the finished run is not affected.
    """
    return _end(
        tracer,
        RunKind.WORKFLOW,
        execution.name,
        execution.id,
        carrier,
        execution.created_at,
        state,
        reason,
    )


async def end_finished_workflow_run_span(tracer: RunTracer, store: Any, run_id: uuid.UUID) -> bool:
    """Export the run span of a workflow execution that a verb (not a pass) just ended.

    For paths that end a run without a pass (cancel of a suspended run, a
    terminate verb): call it after the commit, in the process that made it.
    It reads the execution's row (state, failure reason, start, trace
    context) from ``store`` (``load_workflow_task``) and calls
    :func:`end_workflow_run_span`.

    Args:
        tracer: The client's tracer.
        store: The store (``PostgresStore``).
        run_id: The execution that just finished.

    Returns:
        True when exported. Never raises for telemetry; the execution vanished
        meanwhile (vacuumed) gives False.
    """
    try:
        state = await store.load_workflow_task(run_id, after_seq=2**31 - 1)  # the row only
    except NotFoundError:
        return False
    execution = state.execution
    return end_workflow_run_span(
        tracer, execution, state.trace_context, execution.state, execution.failure_reason
    )


def end_dag_run_span(
    tracer: RunTracer,
    name: str,
    run_id: uuid.UUID,
    carrier: Mapping[str, str] | None,
    created_at: datetime,
    state: str,
    reason: str = "",
) -> bool:
    """Export the run span of a DAG run that just settled (as :func:`end_workflow_run_span`).

    Args:
        tracer: The scheduler's or client's tracer.
        name: The DAG name.
        run_id: The DAG id.
        carrier: The run's stored ``trace_context``.
        created_at: When the run started (the header's ``created_at``).
        state: The terminal state.
        reason: The run's failure reason (status ERROR for a failed run).

    Returns:
        True when exported. Never raises.
    """
    return _end(tracer, RunKind.DAG, name, run_id, carrier, created_at, state, reason)


def _end(
    tracer: RunTracer,
    kind: RunKind,
    name: str,
    run_id: uuid.UUID,
    carrier: Mapping[str, str] | None,
    created_at: datetime,
    state: str,
    reason: str,
) -> bool:
    try:
        return tracer.end_run_span(
            kind,
            name,
            run_id,
            carrier=carrier,
            started_at=created_at,
            state=str(state),
            error=(reason or str(state)) if str(state) in _ERROR_STATES else None,
        )
    except Exception:  # telemetry never breaks a finished run
        log.exception("could not export the run span of %s %s", kind.value, run_id)
        return False
