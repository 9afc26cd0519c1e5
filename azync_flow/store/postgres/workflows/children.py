"""Child executions and continue-as-new in the workflow store (migration 0009).

A pass that starts children, signals them or continues as new writes them in
its own commit (:meth:`WorkflowChildrenMixin._pass_family_writes` and the
``continue`` outcome), so each happens exactly once with the history event
that records it. The other direction — a child's outcome reaching its parent,
the parent-close policy reaching the children — runs inside the terminal
transition itself (``azync_workflow_finish``, wrapped in migration 0009).
"""

from __future__ import annotations

import uuid

import asyncpg
import msgspec

from ...errors import NotFoundError
from ...workflows import HistoryEvent, PassWrite, WorkflowExecutionView, WorkflowRunView
from .._base import decode_meta, encode_meta
from .core import ENQUEUED, WORKFLOW_TASK, WorkflowCoreMixin, execution_from_row

__all__ = ["WorkflowChildrenMixin", "ends_execution"]

#: ``error_type`` of the ChildFailed event of a child whose id another execution holds.
CHILD_ID_TAKEN = "WorkflowAlreadyStarted"


def ends_execution(write: PassWrite) -> bool:
    """True when the pass ends its run (complete, fail, cancelled, continue as new)."""
    return write.outcome is not None and write.outcome[0] != "suspend"


class WorkflowChildrenMixin(WorkflowCoreMixin):
    async def _pass_family_writes(
        self, conn: asyncpg.Connection, run_id: uuid.UUID, write: PassWrite
    ) -> int:
        """Create the pass's children, buffer its signals to children and record
        its cancel requests on children, inside the pass's transaction (after
        its events are written).

        A child id held by another execution (an id given by the code) gets a
        ``ChildFailed`` event appended to this execution's history right away,
        for its code to see; when this pass ends the execution (the code has
        returned) they are listed instead in one ``ChildrenNotStarted`` record
        after the terminal event, as unconsumed signals are.

        Returns:
            The number of events appended that way (the caller schedules a
            workflow task now when it is not 0).
        """
        appended = 0
        if write.children:
            kids = write.children
            rows = await self._fetch(
                "workflow_children_start",
                run_id,
                write.run_id or run_id,
                [c.seq for c in kids],
                [c.id for c in kids],
                [c.name for c in kids],
                [c.version for c in kids],
                [c.input for c in kids],
                [c.parent_close_policy for c in kids],
                [encode_meta(c.trace_context) for c in kids],
                self.channel,
                conn=conn,
            )
            if rows:
                self._count(conn, WORKFLOW_TASK, ENQUEUED, int(rows[0]["tasks"]))
            taken = [
                {
                    "started_seq": row["seq"],
                    "workflow_id": str(row["id"]),
                    "error_type": CHILD_ID_TAKEN,
                    "message": f"workflow id {row['id']} is already used by another execution",
                }
                for row in rows
                if not (row["inserted"] or row["ours"])
            ]
            if taken and ends_execution(write):
                # The code has returned: it never sees these outcomes. Recorded
                # after the terminal event as a record replay ignores.
                payload = msgspec.json.encode({"type": "ChildrenNotStarted", "children": taken})
                await self._fetchval(
                    "workflow_history_append", run_id, "ChildrenNotStarted", payload, conn=conn
                )
                appended += 1
            for child in [] if ends_execution(write) else taken:
                payload = msgspec.json.encode({"type": "ChildFailed", "state": "failed", **child})
                await self._fetchval(
                    "workflow_history_append", run_id, "ChildFailed", payload, conn=conn
                )
                appended += 1
        if write.child_signals:
            sigs = write.child_signals
            await self._fetchrow(
                "workflow_children_signal",
                [s.workflow_id for s in sigs],
                [s.name for s in sigs],
                [s.payload for s in sigs],
                [s.message_id for s in sigs],
                self.channel,
                conn=conn,
            )
        if write.child_cancels:
            await self._fetchrow(
                "workflow_children_cancel", list(write.child_cancels), self.channel, conn=conn
            )
        return appended

    async def _continue_as_new(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        new_input: bytes,
        new_run: uuid.UUID,
        cancel_seen: bool,
    ) -> None:
        """End the current run of ``run_id`` and start the next one in place
        (``azync_workflow_continue``): the caller then schedules its first task."""
        await self._fetchval(
            "workflow_continue", run_id, new_input, new_run, cancel_seen, self.channel, conn=conn
        )

    # --- reads ------------------------------------------------------------------------

    async def list_workflow_runs(self, id: uuid.UUID) -> list[WorkflowRunView]:
        """Every run of an execution, oldest first; the last is the current (or
        final) one.

        Raises:
            NotFoundError: no such execution.
        """
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
        """``(events, payload bytes)`` of the current run's history."""
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
