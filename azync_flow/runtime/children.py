"""Child executions on the runtime side: the store parameters of a child start
(where the child's run joins the trace) and the run spans of the children a
parent run's end terminated."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace

from azync_flow.replay.outcome import StartChild
from azync_flow.store.queue import DEFAULT_TASK_QUEUE
from azync_flow.store.workflows import ChildStartParams, WorkflowRuntimeStore
from azync_flow.telemetry import RunKind, RunTracer, context_from_carrier, end_finished_run

__all__ = ["child_params", "end_closed_children_spans"]

log = logging.getLogger("azync_flow.telemetry")


def child_params(
    tracer: RunTracer,
    parent_carrier: Mapping[str, str] | None,
    command: StartChild,
    task_queue: str = DEFAULT_TASK_QUEUE,
    priority: int = 0,
) -> ChildStartParams:
    """The :class:`ChildStartParams` of a StartChild command (on the task queue
    and with the priority of its options, else ``task_queue`` and ``priority``:
    the parent's).

    The child's run span is reserved like a client start's, with the parent's
    active span as the caller: the span of the workflow task that starts the
    child (or, when none is active, the parent's run span from its stored
    ``parent_carrier``). The child's run therefore joins the parent's trace,
    linked to that span.
    """
    current = otel_context.get_current()
    if not trace.get_current_span(current).get_span_context().is_valid:
        current = context_from_carrier(parent_carrier)
    token = otel_context.attach(current)
    try:
        carrier = tracer.start_run_span(RunKind.WORKFLOW, command.name, command.workflow_id)
    finally:
        otel_context.detach(token)
    return ChildStartParams(
        seq=command.seq,
        id=command.workflow_id,
        name=command.name,
        version=command.version,
        input=command.input,
        parent_close_policy=command.parent_close_policy,
        trace_context=carrier,
        task_queue=getattr(command.options, "task_queue", None) or task_queue,
        priority=_given(getattr(command.options, "priority", None), priority),
        execution_timeout=getattr(command.options, "execution_timeout", None),
        run_timeout=getattr(command.options, "run_timeout", None),
    )


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


async def end_closed_children_spans(
    tracer: RunTracer, store: WorkflowRuntimeStore, parent_id: uuid.UUID, run_id: uuid.UUID
) -> int:
    """Export the run spans of the executions that the end of run ``run_id`` of
    ``parent_id`` terminated by parent-close policy (in the SQL of that commit,
    where no span can be ended). Call it once, in the process whose commit
    ended the run. Never raises; returns the number exported."""
    try:
        closed = await store.list_closed_children(parent_id, run_id)
    except Exception:  # telemetry never breaks a finished run
        log.exception("could not read the children closed with %s", parent_id)
        return 0
    return sum(
        end_finished_run(
            tracer,
            RunKind.WORKFLOW,
            view.name,
            view.id,
            carrier,
            view.created_at,
            view.state,
            view.failure_reason,
        )
        for view, carrier in closed
    )
