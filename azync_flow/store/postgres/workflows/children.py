"""Child executions and continue-as-new in the workflow store (migration 0009).

A pass that starts children, signals them or continues as new writes them in
its own commit (``azync_workflow_pass_commit``, migration 0023), so each
happens exactly once with the history event that records it; a child id
another execution holds is answered there, in the parent's history. The
other direction — a child's outcome reaching its parent, the parent-close
policy reaching the children — runs inside the terminal transition itself
(``azync_workflow_finish``, wrapped in migration 0009).
"""

from __future__ import annotations

import uuid

from ....errors import NotFoundError
from ...workflows import HistoryEvent, WorkflowExecutionView, WorkflowRunView
from .._base import decode_meta
from .core import WorkflowCoreMixin, execution_from_row

__all__ = ["WorkflowChildrenMixin"]


class WorkflowChildrenMixin(WorkflowCoreMixin):
    # --- reads ------------------------------------------------------------------------

    async def list_workflow_runs(self, id: uuid.UUID) -> list[WorkflowRunView]:
        """Implements ``WorkflowAdmin.list_workflow_runs`` (documented there)."""
        view = await self.get_workflow_execution(id)
        rows = await self._fetch("workflow_runs", id)
        runs = [
            WorkflowRunView(
                run_no=r["run_no"],
                run_id=r["run_id"],
                input=bytes(r["input"]),
                started_at=r["started_at"],
                ended_at=r["ended_at"],
                events=r["events"],
                state=r["ended_as"],
                reset_seq=r["reset_seq"],
                reset_reason=r["reset_reason"],
                state_at_reset=r["state_at_reset"],
            )
            for r in rows
        ]
        events, _ = await self.workflow_history_size(id)
        runs.append(
            WorkflowRunView(
                run_no=view.run_no,
                run_id=view.run_id or id,
                input=view.input,
                started_at=view.run_started_at or view.created_at,
                # The final run ends with the execution, whatever way it ended.
                ended_at=view.completed_at,
                events=events,
                current=True,
                state=view.state,
            )
        )
        return runs

    async def list_run_history(self, id: uuid.UUID, run_no: int) -> list[HistoryEvent]:
        """The history of run ``run_no`` of an execution (the current run's comes
        from ``list_history``).

        Raises:
            NotFoundError: the execution has no such earlier run.
        """
        rows = await self._fetch("workflow_run_history", id, run_no)
        if not rows:
            raise NotFoundError(f"workflow execution {id} has no earlier run {run_no}")
        return [
            HistoryEvent(
                workflow_id=r["workflow_id"],
                seq=r["seq"],
                type=r["type"],
                payload=bytes(r["payload"]),
                created_at=r["created_at"],
            )
            for r in rows
        ]

    async def workflow_history_size(self, id: uuid.UUID) -> tuple[int, int]:
        """Implements ``WorkflowAdmin.workflow_history_size`` (documented there)."""
        row = await self._fetchrow("workflow_history_size", id)
        assert row is not None  # an aggregate always returns its row
        return int(row["events"]), int(row["bytes"])

    async def list_closed_children(
        self, parent_id: uuid.UUID, parent_run_id: uuid.UUID
    ) -> list[tuple[WorkflowExecutionView, dict[str, str]]]:
        """The executions terminated by the parent-close policy when run
        ``parent_run_id`` of ``parent_id`` ended (its children, recursively
        theirs), each with its trace context: their run spans are exported by
        the process that ended the run."""
        rows = await self._fetch("workflow_children_closed", parent_id, parent_run_id)
        return [(execution_from_row(r), decode_meta(r["trace_context"])) for r in rows]

    async def list_child_workflows(self, parent_id: uuid.UUID) -> list[WorkflowExecutionView]:
        """The child executions started by ``parent_id`` (any run), oldest first."""
        rows = await self._fetch("workflow_children", parent_id)
        return [execution_from_row(r) for r in rows]
