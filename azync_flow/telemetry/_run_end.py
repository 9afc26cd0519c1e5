"""The run span of a finished run: the one call every path that ends a run makes.

A workflow execution or DAG run ends in exactly one committed transaction (a
pass's completion, a cancellation, a termination, the DAG scheduler's
settlement). The process whose commit won calls :func:`end_finished_run` right
after it, so the run span is exported once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime

from azync_flow import _metrics
from azync_flow.telemetry._names import RunKind
from azync_flow.telemetry._tracer import RunTracer

__all__ = ["end_finished_run"]

log = logging.getLogger("azync_flow.telemetry")

#: Terminal states whose run span has status ERROR (with the reason).
_ERROR_STATES = frozenset({"failed", "terminated"})


def end_finished_run(
    tracer: RunTracer,
    kind: RunKind,
    name: str,
    run_id: uuid.UUID,
    carrier: Mapping[str, str] | None,
    started_at: datetime,
    state: str,
    reason: str = "",
) -> bool:
    """Export the run span of a workflow execution or DAG run that just finished.

    Call it after the transaction that made the run terminal committed, in
    the process that committed it, and after that step's own attempt span
    ended (the run span ends now, after every attempt).

    Args:
        tracer: The runtime's or client's tracer.
        kind: Workflow or DAG.
        name: The workflow or DAG name.
        run_id: The execution or DAG id.
        carrier: The run's stored ``trace_context``.
        started_at: When the run started (the run row's ``created_at``).
        state: The terminal state (``succeeded``, ``failed``, ``cancelled``,
            ``terminated``, ...).
        reason: The failure, cancellation or termination reason; a ``failed``
            or ``terminated`` run gets status ERROR with it.

    It also counts the run's end (``azync_flow.workflow.completed``,
    ``.failed``, ``.cancelled``; ``azync_flow.dag.finished``).

    Returns:
        True when exported (see :meth:`RunTracer.end_run_span`). Never raises:
        a telemetry failure is logged, the finished run is not affected.
    """
    try:
        if kind is RunKind.WORKFLOW:
            _metrics.workflow_finished(name, str(state))
        else:
            _metrics.dag_finished(name, str(state))
        return tracer.end_run_span(
            kind,
            name,
            run_id,
            carrier=carrier,
            started_at=started_at,
            state=str(state),
            error=(reason or str(state)) if str(state) in _ERROR_STATES else None,
        )
    except Exception:  # telemetry never breaks a finished run
        log.exception("could not export the run span of %s %s", kind.value, run_id)
        return False
