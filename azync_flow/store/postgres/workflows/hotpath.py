"""Hot-path verbs of the workflow store: an operation's completion committed
together with the next pass, and a start committed together with its first pass.

Both are one transaction with the same fences as the plain path — the
operations' lease tokens (or the execution's absence, for a start) and the
execution's ``next_seq`` — and write exactly what the plain path's separate
transactions would (``complete_operation`` then ``commit_pass``; ``start_workflow``
then ``commit_pass``), minus the workflow task that would have carried the pass:
the pass is committed by the same statement as ``commit_pass``'s.
"""

from __future__ import annotations

__all__ = [
    "WorkflowHotPathMixin",
]

import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta

from ...._text import clean_text
from ...validate import check_task_queue
from ...workflows import (
    LeasedTask,
    OperationSettle,
    PassCommitResult,
    PassWrite,
    StartCommitResult,
    WorkflowStartParams,
)
from .._base import encode_meta, job_from_row, lease_order
from .core import WORKFLOW_TASK, check_start, execution_from_row
from .runtime import WorkflowRuntimeMixin, task_state_from_row


class WorkflowHotPathMixin(WorkflowRuntimeMixin):
    async def lease_workflow_tasks(
        self,
        limit: int,
        lease: timedelta,
        kind: str = WORKFLOW_TASK,
        known: Mapping[uuid.UUID, int] | None = None,
        *,
        first_passes: bool = True,
        task_queues: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        exclude: Collection[uuid.UUID] = (),
    ) -> list[LeasedTask]:
        """Lease up to ``limit`` due workflow tasks and :meth:`load_workflow_task`
        each, in ONE statement (one round trip): tasks of executions in flight
        first, then (with ``first_passes``) first passes, each oldest first.

        Takes pending tasks and scheduled ones whose ``run_at`` has come (no
        separate promotion needed for timers), and never a task of an
        execution that already has an active workflow task, so passes of one
        execution never overlap. ``FOR UPDATE SKIP LOCKED``; attempt
        incremented and a fresh lease token minted, lease = backend now + ``lease``.
        Only tasks on ``task_queues`` of workflows in ``names`` (None: any).
        A task whose row a concurrent request (signal, update, cancel,
        completion) changed after the statement's snapshot is loaded again
        in a fresh one, so its pass sees that request.

        Args:
            limit: most tasks leased.
            lease: their lease, from the backend clock.
            kind: the workflow-task kind.
            known: seqs the caller has already seen per execution (its sticky
                cache); a leased task's history is read past that seq (else whole).
            first_passes: False leases only tasks of executions in flight, never
                the first pass of a new one (depth-first admission).
            task_queues / names: what the caller serves (None: any); see
                ``WorkflowRuntimeStore.lease_workflow_tasks``.
            exclude: executions whose tasks the caller leaves (it found it
                cannot run them).

        Returns:
            The leased tasks, oldest first, each with its load and whether the
            lease left due tasks behind (``LeasedTask.more_due``).
        """
        if limit <= 0:
            return []
        ids = list(known or {})
        rows = await self._fetch(
            "workflow_task_lease_load",
            kind,
            limit,
            lease,
            ids,
            [(known or {})[i] for i in ids],
            first_passes,
            None if task_queues is None else list(task_queues),
            None if names is None else list(names),
            list(exclude),
        )
        tasks = []
        for r in rows:
            after = int(r["after_seq"])
            if r["load_stale"]:
                # A request committed between the statement's snapshot and its
                # lock of the task: read the execution again, in a snapshot
                # that holds it (the pass must see what woke the task).
                state = await self.load_workflow_task(r["run_id"], after)
            else:
                state = task_state_from_row(r, execution_from_row(r, "e_"), "e_")
            tasks.append(
                LeasedTask(
                    job=job_from_row(r), state=state, after_seq=after, more_due=r["more_due"]
                )
            )
        tasks.sort(key=lambda t: lease_order(t.job))
        return tasks

    async def next_workflow_task_due(
        self,
        kind: str = WORKFLOW_TASK,
        *,
        task_queues: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
    ) -> float | None:
        """Seconds until the earliest scheduled workflow task (a durable timer's,
        a retry's) of ``task_queues`` x ``names`` (None: any) is due, on the
        backend clock; negative when one is overdue, None when none is scheduled.
        One statement, one index probe per served (queue, name) pair."""
        wait = await self._fetchval(
            "workflow_task_next_due",
            kind,
            None if task_queues is None else list(task_queues),
            None if names is None else list(names),
        )
        return None if wait is None else float(wait)

    async def commit_completions(
        self, run_id: uuid.UUID, settles: Sequence[OperationSettle], write: PassWrite
    ) -> PassCommitResult:
        """Settle finished operations, record their outcomes and commit the pass
        that consumed them, in ONE transaction.

        The operations are acked (or dead-lettered, ``dead``), their events
        appended at ``write.expected_next_seq``.. in the given order, then the
        pass's own events after them, its operations, timers, signals and
        outcome exactly as :meth:`commit_pass` writes them; the next workflow
        task is scheduled only for the earliest unfired timer or, when a
        buffered signal is still unconsumed, now (no workflow task carried
        this pass).

        Args:
            run_id: the execution.
            settles: the operations (of ``run_id``, active under their tokens).
            write: the pass, replayed with the settled outcomes as the events
                at ``expected_next_seq``..; ``write.events`` follow them.

        Returns:
            The new ``next_seq``, the operations leased to the caller, the clock.

        Raises:
            NotFoundError: an operation is not active under its token (reaped,
                re-leased, settled or parked uncertain).
            ConflictError: ``next_seq`` moved past ``expected_next_seq``, or the
                execution is not running, or a signal was already consumed.
                Nothing is written in any case; record the outcomes alone
                (``complete_operation``) and let a workflow task run the pass.
        """
        if not settles:
            raise ValueError("commit_completions needs at least one operation to settle")
        return await self._commit(
            run_id,
            [(s.job_id, s.lease_token) for s in settles],
            False,
            write,
            before=[(s.event_type, s.payload) for s in settles],
            errors=[clean_text(s.last_error) if s.dead else None for s in settles],
            signals_wake=True,
        )

    async def start_workflow_with_pass(
        self,
        p: WorkflowStartParams,
        write: PassWrite,
        *,
        trace_context: dict[str, str] | None = None,
    ) -> StartCommitResult:
        """Insert a running execution and commit its first pass, in ONE transaction.

        No workflow task is inserted: the pass ``write`` (replayed from an empty
        history, ``expected_next_seq`` 1) is written as :meth:`commit_pass`
        writes it, with its operations leased to the caller where
        ``write.local`` says so.

        A live execution with the same ``(name, business_idempotency_key)`` or
        any execution with the same id wins as in :meth:`start_workflow`:
        nothing is written and ``inserted`` is False with the existing id (the
        caller's pass is discarded).

        Raises:
            ValueError: as :meth:`start_workflow` (nothing written), or
                ``write.expected_next_seq`` is not 1.
        """
        check_start(p)
        if write.expected_next_seq != 1:
            raise ValueError("the first pass of an execution starts at seq 1")
        async with self._wtx() as conn:
            ex = await self._fetchrow(
                "workflow_start_bare",
                p.id,
                p.name,
                p.version,
                p.input,
                p.business_idempotency_key,
                check_task_queue(p.task_queue),
                encode_meta(p.meta),
                encode_meta(trace_context),
                p.priority,
                p.execution_timeout,
                p.run_timeout,
                conn=conn,
            )
            if ex is not None:
                commit = await self._commit(p.id, [], False, write, conn=conn)
                return StartCommitResult(inserted=True, id=p.id, commit=commit)
        # A conflict: the plain start finds the winner (and retries if it just finished).
        inserted, wid = await self.start_workflow(p, trace_context=trace_context)
        return StartCommitResult(inserted=inserted, id=wid)
