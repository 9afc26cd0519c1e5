"""Workflow-as-code verbs of the contract :mod:`azync_flow.store.workflows` (executions, history,
signals, workflow tasks, operations).

Job conventions: every job has
``source='workflow'`` and ``run_id`` = the execution id; a workflow task has
``task_key='$wft'`` (kind ``"$wft"``), an operation ``kind="$op:<name>@<ver>"``
and ``task_key`` = its execution key. At most one runnable (pending/scheduled)
workflow task exists per execution (migration 0002).

Locking rule: a verb that creates a runnable workflow task first locks the
execution row ``FOR NO KEY UPDATE``, so the one-runnable-task index never
races and writers of one execution serialise. History payloads are opaque bytes.
"""

from __future__ import annotations

__all__ = [
    "ENQUEUED",
    "FAILED",
    "LIVE_WORKFLOW_STATES",
    "PROCESSED",
    "WORKFLOW_TASK",
    "WorkflowCoreMixin",
    "check_start",
    "child_route",
    "execution_from_row",
    "history_from_row",
    "op_meta",
    "op_route",
]

import builtins
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ...._text import clean_text
from ....errors import ConflictError, NotFoundError
from ....search import decode_search_attributes, encode_search_attributes
from ...validate import (
    check_max_attempts,
    check_meta,
    check_name,
    check_priority,
    check_reason,
    check_same_start,
    check_task_queue,
    check_text,
    check_timeout,
)
from ...workflows import (
    ChildStartParams,
    HistoryEvent,
    ScheduleOperationParams,
    SignalParams,
    StalledScan,
    StalledWorkflow,
    WorkflowExecutionView,
    WorkflowStartParams,
    WorkflowState,
)
from .._base import PgBase, decode_meta, encode_meta, stale_lease
from .._guard import translate
from .._wake import split_wakes

#: Kind and task key of a workflow task (one task queue for now).
WORKFLOW_TASK = "$wft"
LIVE_WORKFLOW_STATES = ("running", "suspended")

#: How the suspend reason of an operator's ``suspend_workflow`` starts.
SUSPENDED_BY_OPERATOR = "suspended by an operator"

#: Columns of a pending stats delta (see ``WorkflowCoreMixin._wtx``).
ENQUEUED, PROCESSED, FAILED = 0, 1, 2


class WorkflowCoreMixin(PgBase):
    """Execution, history, signal and task verbs (the base of the other workflow mixins)."""

    # --- transactions and stats -------------------------------------------------

    @asynccontextmanager
    async def _wtx(self) -> AsyncIterator[asyncpg.Connection]:
        """A workflow transaction whose counter deltas are recorded LAST, in one
        statement (``workflow_stats_bump``).

        The scheduling and settling statements used inside do not count
        themselves; they gather deltas with :meth:`_count`, so the transaction
        inserts one delta row per kind (an insert: it waits on no other
        transaction's counters).
        """
        registry: dict[int, dict[str, list[int]]] = self.__dict__.setdefault("_wf_tx_stats", {})
        async with self.transaction() as conn:
            stats: dict[str, list[int]] = {}
            registry[id(conn)] = stats
            try:
                yield conn
                if stats:
                    kinds = sorted(stats)
                    await self._fetch(
                        "workflow_stats_bump",
                        kinds,
                        [stats[k][ENQUEUED] for k in kinds],
                        [stats[k][PROCESSED] for k in kinds],
                        [stats[k][FAILED] for k in kinds],
                        conn=conn,
                    )
            finally:
                del registry[id(conn)]

    def _count(self, conn: asyncpg.Connection, kind: str, column: int, n: int = 1) -> None:
        """Record a stats delta for the enclosing :meth:`_wtx` transaction."""
        if n:
            self.__dict__["_wf_tx_stats"][id(conn)].setdefault(kind, [0, 0, 0])[column] += n

    async def _lost(self, conn: asyncpg.Connection, row: asyncpg.Record, error: str | None) -> None:
        """Count a reclaimed lease as reaped and, with ``error``, keep the lost
        attempt in the job's failure history (``jobs show``)."""
        await self._fetchrow(
            "workflow_job_lost", row["id"], row["attempt"], row["kind"], error, conn=conn
        )

    async def _settle_job(
        self,
        conn: asyncpg.Connection,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        *,
        dead: bool = False,
        last_error: str = "",
    ) -> None:
        """Ack (or dead-letter) an active workflow job under ``lease_token`` inside
        :meth:`_wtx`. Raises NotFoundError when it is not active under the token."""
        if dead:
            kind = await self._fetchval(
                "workflow_job_dead", job_id, lease_token, clean_text(last_error), conn=conn
            )
        else:
            kind = await self._fetchval("workflow_job_ack", job_id, lease_token, conn=conn)
        if kind is None:
            raise NotFoundError(stale_lease(job_id))
        self._count(conn, kind, FAILED if dead else PROCESSED)

    # --- executions ---------------------------------------------------------------

    async def start_workflow(
        self, p: WorkflowStartParams, *, trace_context: dict[str, str] | None = None
    ) -> tuple[bool, uuid.UUID]:
        """Insert a running execution and its first workflow task, in one transaction.

        Contract ``WorkflowStore.StartWorkflow``. A live (running or suspended)
        execution with the same ``(name, business_idempotency_key)``, or any
        execution with the same id, wins: nothing is written and its id is
        returned. A terminal execution frees its key.

        Args:
            p: the execution to start; ``input`` is stored byte for byte.
            trace_context: W3C trace context of the caller (``traceparent`` ...),
                stored with the execution.

        Returns:
            ``(inserted, id)`` — ``(True, p.id)``, or ``(False, existing id)``.

        Raises:
            ValueError: ``name``, ``version``, ``task_queue``, the idempotency key
                or ``meta`` contain NUL, or a name is too long (nothing written).
        """
        check_start(p)
        for _ in range(5):
            # One statement = one implicit transaction (one round trip) when it
            # inserts; under READ COMMITTED the lookup of the winner took its own
            # snapshot inside the old explicit transaction too.
            # One statement serves one start and a batch (workflow_start_many).
            inserted = await self._fetch(
                "workflow_start_many",
                [p.id],
                [p.name],
                [p.version],
                [p.input],
                [p.business_idempotency_key],
                [check_task_queue(p.task_queue)],
                [encode_meta(p.meta)],
                [encode_meta(trace_context)],
                self.channel,
                [p.priority],
                [p.execution_timeout],
                [p.run_timeout],
                [_search_json(p)],
            )
            if inserted:
                await self._wake_after(split_wakes(inserted[0]["wakes"]), None)
                return True, p.id
            existing = await self._fetchval(
                "workflow_existing", p.id, p.name, p.business_idempotency_key
            )
            if existing is not None:
                return False, existing
            # The conflicting execution finished between the two reads: try again.
        raise ConflictError(f"start of workflow {p.name!r} ({p.id}) kept conflicting; retry")

    async def start_workflows(
        self,
        ps: Sequence[WorkflowStartParams],
        *,
        trace_contexts: Sequence[Mapping[str, str]] | None = None,
    ) -> list[tuple[bool, uuid.UUID]]:
        """Start many executions, each with its first workflow task, in one transaction.

        Contract ``WorkflowStore.StartWorkflows``: each item is started as
        :meth:`start_workflow` would, in order, so an item whose id, or live
        ``(name, business_idempotency_key)``, an execution or an earlier item
        of the batch holds writes nothing and returns that execution's id.
        Every item is checked before anything is sent.

        Args:
            ps: the executions; ``input`` is stored byte for byte.
            trace_contexts: per item, the caller's W3C trace context (or None).

        Returns:
            Per item, in order: ``(True, p.id)``, or ``(False, existing id)``.

        Raises:
            IdempotencyConflictError: an item's id or key is held by an
                execution of another workflow name or input (nothing written).
            ValueError: as :meth:`start_workflow`, or ``trace_contexts`` is
                not one per item (nothing written).
        """
        if not ps:
            return []
        async with self.transaction() as conn:
            return await self.start_workflows_tx(conn, ps, trace_contexts=trace_contexts)

    async def start_workflows_tx(
        self,
        tx: asyncpg.Connection,
        ps: Sequence[WorkflowStartParams],
        *,
        trace_contexts: Sequence[Mapping[str, str]] | None = None,
    ) -> list[tuple[bool, uuid.UUID]]:
        """Contract ``TxStore.StartWorkflowsTx``: :meth:`start_workflows` on the
        caller's connection ``tx`` (inside its open transaction: the executions
        and their wakes commit or roll back with it).

        Raises:
            IdempotencyConflictError, ValueError: as :meth:`start_workflows`.
        """
        for p in ps:
            check_start(p)
        if trace_contexts is not None and len(trace_contexts) != len(ps):
            raise ValueError(
                f"trace_contexts has {len(trace_contexts)} items for {len(ps)} executions"
            )
        results: list[tuple[bool, uuid.UUID] | None] = [None] * len(ps)
        todo = list(range(len(ps)))
        try:
            for _ in range(5):
                todo = await self._start_some(tx, ps, trace_contexts, todo, results)
                if not todo:
                    return [r for r in results if r is not None]
        except Exception as exc:  # the caller's connection is not guarded by our pool
            if (err := translate(exc, self.schema)) is None:
                raise
            raise err from exc
        raise ConflictError(f"start of {len(todo)} workflow executions kept conflicting; retry")

    async def _start_some(
        self,
        tx: asyncpg.Connection,
        ps: Sequence[WorkflowStartParams],
        trace_contexts: Sequence[Mapping[str, str]] | None,
        todo: list[int],
        results: list[tuple[bool, uuid.UUID] | None],
    ) -> list[int]:
        """Insert the items ``todo`` (indexes of ``ps``), fill ``results`` and
        return the items whose conflicting execution finished meanwhile."""
        items = [ps[i] for i in todo]
        rows = await self._fetch(
            "workflow_start_many",
            [p.id for p in items],
            [p.name for p in items],
            [p.version for p in items],
            [p.input for p in items],
            [p.business_idempotency_key for p in items],
            [check_task_queue(p.task_queue) for p in items],
            [encode_meta(p.meta) for p in items],
            [encode_meta(dict(trace_contexts[i])) if trace_contexts else "{}" for i in todo],
            self.channel,
            [p.priority for p in items],
            [p.execution_timeout for p in items],
            [p.run_timeout for p in items],
            [_search_json(p) for p in items],
            conn=tx,
        )
        if rows:
            await self._wake_after(split_wakes(rows[0]["wakes"]), tx)
        inserted = {r["id"] for r in rows}
        lost: list[int] = []
        for i in todo:  # the first item of an id inserted it; a repeat lost to it
            if ps[i].id in inserted:
                inserted.discard(ps[i].id)
                results[i] = (True, ps[i].id)
            else:
                lost.append(i)
        if not lost:
            return []
        found = await self._fetch(
            "workflow_existing_many",
            [ps[i].id for i in lost],
            [ps[i].name for i in lost],
            [ps[i].business_idempotency_key for i in lost],
            conn=tx,
        )
        again: list[int] = []
        for i, row in zip(lost, found, strict=True):
            if row["id"] is None:  # it finished between the two statements
                again.append(i)
                continue
            check_same_start(row["id"], row["name"], bytes(row["input"]), ps[i])
            results[i] = (False, row["id"])
        return again

    async def get_workflow_execution(self, id: uuid.UUID) -> WorkflowExecutionView:
        """Contract ``GetWorkflowExecution``, plus ``blocked_reason``: when the
        running execution's workflow task has failed (e.g. no worker registers
        the workflow), its last error and the failed attempts.

        Raises NotFoundError when absent.
        """
        row = await self._fetchrow("workflow_describe", id)
        if row is None:
            raise NotFoundError(f"workflow execution {id} does not exist")
        return execution_from_row(row)

    async def workflow_trace_context(self, id: uuid.UUID) -> dict[str, str]:
        """Implements ``WorkflowAdmin.workflow_trace_context`` (documented there)."""
        row = await self._fetchrow("workflow_trace_context", id)
        if row is None:
            raise NotFoundError(f"workflow execution {id} does not exist")
        return decode_meta(row["trace_context"])

    async def cancel_workflow_execution(self, id: uuid.UUID) -> WorkflowState:
        """Contract ``CancelWorkflowExecution``: request cancellation.

        A running execution gets ``cancel_requested`` and a workflow task; the
        workflow sees ``CancelledError`` at its current await and may run
        cleanup code before it ends cancelled.

        A suspended execution (non-determinism, a forbidden call, an uncertain
        operation) cannot run code, so it is settled here in one transaction
        WITHOUT running cleanup code: state ``cancelled`` with the reason
        recorded, ``completed_at`` set, its pending/scheduled workflow task
        and operations cancelled, and the terminal NOTIFY sent. Its uncertain
        operations are cancelled too: nobody can decide them any more (their
        code will never read a decision), and a left-over uncertain job would
        keep an idempotency slot and show up in ``list_uncertain`` forever. An
        operator who needs the external effect reconciled does that from the
        job's ``uncertain_reason`` and ``last_error``. No outcome event is
        appended (history records what the code did, and it did not run);
        signals it never consumed get the ``SignalsUndelivered`` record.

        Returns ``running`` when cancellation was requested (a pass ends the
        execution), ``cancelled`` when this call ended it.

        Raises NotFoundError when the execution is missing or terminal.
        """
        async with self._wtx() as conn:
            state = await self._lock_live(conn, id, "cancel")
            await self._fetchval("workflow_cancel_request", id, conn=conn)
            if state == WorkflowState.RUNNING:
                await self._schedule_task(conn, id, WORKFLOW_TASK, None)
                return WorkflowState.RUNNING
            await self._fetch("workflow_cancel_uncertain_ops", id, conn=conn)
            await self._finish(
                conn,
                id,
                WorkflowState.CANCELLED,
                None,
                "ended while suspended; no cleanup code ran",
            )
        return WorkflowState.CANCELLED

    async def suspend_workflow(self, id: uuid.UUID, reason: str) -> None:
        """Contract ``SuspendWorkflow`` (documented at
        :meth:`~azync_flow.store.workflows.WorkflowStore.suspend_workflow`)."""
        check_reason(reason)
        check_text(reason, "reason")
        async with self._wtx() as conn:
            state = await self._lock_live(conn, id, "suspend")
            if state != WorkflowState.RUNNING:
                raise NotFoundError(f"workflow execution {id} is {state}; cannot suspend")
            # Drop the waiting task first: this waits for a worker leasing it
            # right now, so the check below sees that lease.
            await self._fetch("workflow_suspend_drop_task", id, conn=conn)
            if await self._fetchrow("workflow_active_task", id, conn=conn) is not None:
                raise ConflictError(
                    f"workflow execution {id} is running a workflow task now; "
                    "not suspended, try again in a moment"
                )
            await self._suspend(conn, id, f"{SUSPENDED_BY_OPERATOR}: {reason}")

    async def resume_workflow(self, id: uuid.UUID) -> None:
        """Contract ``ResumeWorkflow``: suspended -> running, and schedule a workflow task.

        Raises:
            NotFoundError: the execution is missing or not suspended.
            ConflictError: an operation of the execution is still uncertain
                (resolve it with ``resolve_uncertain``, which resumes).
        """
        async with self._wtx() as conn:
            await self._lock_live(conn, id, "resume")
            ops = await self._fetch("workflow_uncertain_ops", id, conn=conn)
            if ops:
                raise ConflictError(
                    f"workflow execution {id} has uncertain operation(s) "
                    + ", ".join(f"{r['id']} ({r['kind']} {r['task_key']})" for r in ops)
                    + "; decide each (azync-flow uncertain resolve, Client.resolve_uncertain),"
                    " which resumes the execution; not resumed"
                )
            if await self._fetchrow("workflow_resume", id, conn=conn) is None:
                raise NotFoundError(await self._state_message(conn, id, "resume", "suspended"))
            await self._schedule_task(conn, id, WORKFLOW_TASK, None)

    # --- history and signals ----------------------------------------------------

    async def append_history(self, workflow_id: uuid.UUID, type: str, payload: bytes) -> int:
        """Implements ``WorkflowAdmin.append_history`` (documented there)."""
        check_name(type, "type")
        if not isinstance(payload, bytes):
            raise TypeError(f"payload must be bytes, got {builtins.type(payload).__name__}")
        try:
            msgspec.json.decode(payload)
        except msgspec.DecodeError as exc:
            raise ValueError(f"payload is not JSON: {exc}") from None
        seq = await self._fetchval("workflow_history_append", workflow_id, type, payload)
        if seq is None:
            raise NotFoundError(f"workflow execution {workflow_id} does not exist")
        return int(seq)

    async def list_history(
        self, workflow_id: uuid.UUID, after_seq: int = 0, limit: int | None = None
    ) -> list[HistoryEvent]:
        """Contract ``ListHistory``: events in seq order.

        Args:
            workflow_id: the execution.
            after_seq: only events with a greater seq (page through a long
                history with the last seq seen).
            limit: at most this many events (None = all).

        Raises:
            NotFoundError: the execution is missing.
        """
        rows = await self._fetch("workflow_history_list", workflow_id, after_seq, limit)
        if not rows and await self._fetchrow("workflow_get", workflow_id) is None:
            raise NotFoundError(f"workflow execution {workflow_id} does not exist")
        return [history_from_row(r) for r in rows]

    async def signal_workflow(self, p: SignalParams) -> bool:
        """Contract ``SignalWorkflow``: buffer a signal and schedule a workflow task.

        A repeated ``(name, message_id)`` is dropped and reported (False) — even
        after the execution finished, so a retried send gets the same answer.
        The signal stays buffered until a pass consumes it; a suspended
        execution buffers it and is woken by its resume. The execution row is
        locked before the state check and the insert, so a signal racing the
        terminal transition (:meth:`_finish`, which locks that row first)
        either commits before it — and is recorded undelivered if no pass
        consumed it — or waits and is refused as finished.

        Raises:
            NotFoundError: no such execution, or it is terminal (nothing written).
            ValueError: the signal name or ``message_id`` contain NUL, or the name
                is too long (nothing written).
        """
        check_name(p.name, "signal name")
        check_text(p.message_id, "signal message_id")
        async with self._wtx() as conn:
            if p.message_id and await self._fetchval(
                "workflow_signal_duplicate", p.workflow_id, p.name, p.message_id, conn=conn
            ):
                return False
            row = await self._fetchrow("workflow_lock", p.workflow_id, conn=conn)
            if row is None:
                raise NotFoundError(
                    f"workflow execution {p.workflow_id} does not exist; "
                    f"signal {p.name!r} not accepted"
                )
            if row["state"] not in LIVE_WORKFLOW_STATES:
                raise NotFoundError(
                    f"workflow execution {p.workflow_id} is {row['state']} (finished); "
                    f"signal {p.name!r} not accepted"
                )
            sid = await self._fetchval(
                "workflow_signal_insert", p.workflow_id, p.name, p.message_id, p.payload, conn=conn
            )
            if sid is None:
                return False
            if row["state"] == WorkflowState.RUNNING:
                await self._schedule_task(conn, p.workflow_id, WORKFLOW_TASK, None)
            return True

    # --- jobs ---------------------------------------------------------------------

    async def schedule_task(
        self, workflow_id: uuid.UUID, kind: str = WORKFLOW_TASK, run_at: datetime | None = None
    ) -> None:
        """Contract ``ScheduleTask``: make sure a workflow task runs at ``run_at`` (None = now).

        When a runnable task already exists its ``run_at`` moves to
        ``least(existing, run_at)`` instead of a second one being inserted.
        Raises NotFoundError when the execution is missing.
        """
        async with self._wtx() as conn:
            if await self._fetchrow("workflow_lock", workflow_id, conn=conn) is None:
                raise NotFoundError(f"workflow execution {workflow_id} does not exist")
            await self._schedule_task(conn, workflow_id, kind, run_at)

    async def schedule_operation(self, p: ScheduleOperationParams) -> uuid.UUID:
        """Implements ``WorkflowAdmin.schedule_operation`` (documented there)."""
        check_name(p.kind, "operation kind")
        check_name(p.execution_key, "operation execution_key")
        check_meta(p.meta, "operation meta")
        if p.max_attempts:
            check_max_attempts(p.max_attempts, "operation max_attempts")
        meta, route = op_meta(p), op_route(p)
        async with self._wtx() as conn:
            ex = await self._fetchrow("workflow_lock", p.workflow_id, conn=conn)
            if ex is None:
                raise NotFoundError(f"workflow execution {p.workflow_id} does not exist")
            if ex["state"] not in LIVE_WORKFLOW_STATES:
                raise NotFoundError(
                    f"workflow execution {p.workflow_id} is {ex['state']} (finished); "
                    f"operation {p.execution_key!r} not scheduled"
                )
            row = await self._fetchrow(
                "workflow_op_schedule",
                p.workflow_id,
                p.kind,
                p.payload,
                meta,
                p.execution_key,
                p.run_at,
                p.max_attempts,
                route,
                self.channel,
                conn=conn,
            )
            assert row is not None
            if row["inserted"]:
                self._count(conn, p.kind, ENQUEUED)
            job_id: uuid.UUID = row["id"]
            return job_id

    async def list_unserved_workflows(self) -> list[tuple[str, str]]:
        """Implements ``WorkflowMaintenance.list_unserved_workflows`` (documented there)."""
        rows = await self._fetch("workflow_unserved")
        return [(r["task_queue"], r["workflow_name"]) for r in rows]

    async def promote_workflow_jobs(self, kinds: list[str] | None = None) -> int:
        """Implements ``WorkflowMaintenance.promote_workflow_jobs`` (documented there)."""
        row = await self._fetchrow("workflow_promote_due", kinds, self.channel)
        assert row is not None
        return int(row["promoted"])

    async def vacuum_workflows(self, retention: timedelta) -> int:
        """Contract ``VacuumWorkflows``: delete terminal executions completed before
        ``retention`` ago, cascading to history, signals, timers and jobs; and the
        earlier runs (continue-as-new) of any execution that ended before
        ``retention`` ago, with their histories (an ever-running execution keeps
        its recent runs only).

        A retention <= 0 removes nothing. Returns the executions removed.
        """
        if retention <= timedelta(0):
            return 0
        await self._fetchval("workflow_runs_vacuum", retention)
        return int(await self._fetchval("workflow_vacuum", retention))

    async def list_stalled_workflows(
        self, older_than: timedelta, limit: int
    ) -> list[StalledWorkflow]:
        """Contract ``ListStalledWorkflows``: running executions updated at least
        ``older_than`` ago (inclusive) with nothing pending — no pending,
        scheduled, active or uncertain workflow job, no unfired timer, and not
        blocked on a signal (an execution whose awaited signal is already
        buffered counts as stalled: its task was lost). Oldest first, at most
        ``limit``; examined in batches (``scan_stalled_workflows``), one
        statement per ``_STALLED_VIEW_BATCH`` executions.
        """
        if limit <= 0:
            return []
        found: dict[uuid.UUID, StalledWorkflow] = {}
        after: tuple[datetime, uuid.UUID] | None = None
        while True:  # batches from the oldest until `limit` in scan order, or the end
            scan = await self.scan_stalled_workflows(older_than, after, _STALLED_VIEW_BATCH)
            found.update((s.id, s) for s in scan.stalled)
            after = scan.cursor
            # every unexamined execution was updated at or after the cursor's bin
            upto = sum(1 for s in found.values() if after is None or _key(s)[0] < after[0])
            if scan.scanned < _STALLED_VIEW_BATCH or upto >= limit:
                break
        return sorted(found.values(), key=_key)[:limit]

    async def scan_stalled_workflows(
        self,
        older_than: timedelta,
        after: tuple[datetime, uuid.UUID] | None,
        batch: int,
    ) -> StalledScan:
        """Contract ``ScanStalledWorkflows``: one batch of the stalled scan.

        Examines the next ``batch`` (> 0) running executions in
        ``(progress_at, id)`` order after ``after`` (None: from the oldest)
        among those whose 10-second progress bin (``progress_at``, ``updated_at``
        cut to 10 seconds) ended by ``now - older_than`` — an index range,
        whatever the number of parked executions — plus, beside the cursor,
        the executions of the cutoff's own bin updated at least ``older_than``
        ago and every running execution holding a buffered signal, and returns
        the stalled ones among them (the test of ``list_stalled_workflows``),
        oldest first, with the cursor of the next batch. In the product an
        execution only becomes stalled by changing (its ``progress_at`` moves
        past the cursor or into the cutoff's bin) or by a signal being
        buffered for it, so a scan that follows the cursor misses none; a job
        deleted by hand after its execution was examined is seen by the next
        scan from the start.

        Raises:
            ValueError: ``batch`` is not positive.
        """
        if batch <= 0:
            raise ValueError(f"batch must be positive, got {batch}")
        at, id = after if after is not None else (None, None)
        rows = await self._fetch("workflow_stalled_scan", older_than, at, id, batch)
        cursor = None
        if rows and rows[0]["cursor_id"] is not None:
            cursor = (rows[0]["cursor_at"], rows[0]["cursor_id"])
        return StalledScan(
            stalled=_stalled(rows), scanned=int(rows[0]["scanned"]) if rows else 0, cursor=cursor
        )

    # --- helpers shared with the runtime mixin --------------------------------------

    async def _finish(
        self,
        conn: asyncpg.Connection,
        id: uuid.UUID,
        state: WorkflowState,
        result: bytes | None,
        reason: str,
    ) -> int:
        """The terminal transition shared by every verb that ends an execution, in
        the caller's transaction: state, result and reason set, runnable tasks and
        operations cancelled, waiters notified, and every signal still unconsumed
        recorded as undelivered (one ``SignalsUndelivered`` history event after
        the outcome's events, the execution's ``signals_undelivered`` count and one
        ``azync.workflow.signals_undelivered`` ledger event). One statement
        (``azync_workflow_finish``), which locks the execution row first.

        Returns:
            The number of signals recorded undelivered.

        Raises:
            NotFoundError: the execution is missing or already terminal.
        """
        row = await self._fetchrow(
            "workflow_finish", id, state.value, result, clean_text(reason), self.channel, conn=conn
        )
        if row is None:
            raise NotFoundError(
                await self._state_message(conn, id, f"{state.value} transition", "")
            )
        return int(row["undelivered"])

    async def _suspend(
        self,
        conn: asyncpg.Connection | None,
        id: uuid.UUID,
        reason: str,
        seq: int | None = None,
        operation_id: uuid.UUID | None = None,
    ) -> bool:
        """running -> suspended with ``reason`` and the history ``seq`` / operation
        it concerns. Returns False when the execution is not running."""
        row = await self._fetchrow(
            "workflow_suspend", id, clean_text(reason), seq, operation_id, conn=conn
        )
        return row is not None

    async def _lock_live(self, conn: asyncpg.Connection, id: uuid.UUID, verb: str) -> str:
        row = await self._fetchrow("workflow_lock", id, conn=conn)
        if row is None:
            raise NotFoundError(f"workflow execution {id} does not exist; cannot {verb}")
        if row["state"] not in LIVE_WORKFLOW_STATES:
            raise NotFoundError(
                f"workflow execution {id} is {row['state']} (finished); cannot {verb}"
            )
        return str(row["state"])

    async def _state_message(
        self, conn: asyncpg.Connection | None, id: uuid.UUID, verb: str, needed: str
    ) -> str:
        row = await self._fetchrow("workflow_get", id, conn=conn)
        if row is None:
            return f"workflow execution {id} does not exist; {verb} not applied"
        need = f" (needs {needed})" if needed else ""
        return f"workflow execution {id} is {row['state']}{need}; {verb} not applied"

    async def _schedule_task(
        self, conn: asyncpg.Connection, run_id: uuid.UUID, kind: str, run_at: datetime | None
    ) -> None:
        row = await self._fetchrow(
            "workflow_task_schedule", run_id, kind, run_at, self.channel, conn=conn
        )
        if row is not None and row["inserted"]:
            self._count(conn, row["kind"], ENQUEUED)


def op_route(o: ScheduleOperationParams) -> str:
    """The routing of an operation as ``azync_workflow_ops_insert`` reads it (JSON).

    Raises:
        ValueError: a task queue the store refuses.
    """
    route: dict[str, object] = {
        "task_queue": check_task_queue(o.task_queue, "operation task_queue"),
        "priority": check_priority(o.priority, "operation priority"),
    }
    if o.limit_key is not None:
        route["limit_key"] = check_text(o.limit_key, "operation limit_key")
    return _route_json(route)


def op_meta(o: ScheduleOperationParams) -> str:
    """The meta of an operation as stored (JSON), with its timeouts in seconds
    under ``schedule_to_start_s`` / ``schedule_to_close_s``: the insert trigger
    of migration 0029 turns them into its deadlines.

    Raises:
        TypeError, ValueError: a timeout that is not a positive ``timedelta``.
    """
    meta = dict(o.meta)
    for key, value in (
        ("schedule_to_start", o.schedule_to_start),
        ("schedule_to_close", o.schedule_to_close),
    ):
        seconds = check_timeout(value, key)
        if seconds is not None:
            meta[f"{key}_s"] = f"{seconds:g}"
    return encode_meta(meta)


def child_route(c: ChildStartParams) -> str:
    """The routing of a child execution as ``azync_workflow_children_start`` reads it.

    Raises:
        ValueError: a task queue the store refuses.
    """
    return _route_json(
        {
            "task_queue": check_task_queue(c.task_queue, "child task_queue"),
            "priority": check_priority(c.priority, "child priority"),
            "execution_timeout_s": check_timeout(c.execution_timeout, "execution_timeout"),
            "run_timeout_s": check_timeout(c.run_timeout, "run_timeout"),
        }
    )


def _route_json(route: dict[str, object]) -> str:
    return msgspec.json.encode({k: v for k, v in route.items() if v is not None}).decode()


def check_start(p: WorkflowStartParams) -> None:
    """The checks of every workflow start (raises ValueError naming the field)."""
    check_name(p.name, "workflow name")
    check_task_queue(p.task_queue, "workflow task_queue")
    check_priority(p.priority, "workflow priority")
    check_name(p.version, "workflow version", empty_ok=True)
    check_text(p.business_idempotency_key, "workflow idempotency_key")
    check_meta(p.meta, "workflow meta")
    check_timeout(p.execution_timeout, "execution_timeout")
    check_timeout(p.run_timeout, "run_timeout")
    encode_search_attributes(p.search_attributes)


def _search_json(p: WorkflowStartParams) -> str:
    """The stored form of a start's search attributes, as JSON text."""
    return json.dumps(encode_search_attributes(p.search_attributes), ensure_ascii=False)


def execution_from_row(row: asyncpg.Record, prefix: str = "") -> WorkflowExecutionView:
    """Build a :class:`WorkflowExecutionView` from an executions row (its columns
    named with ``prefix``); with the ``task_failures``/``task_error`` and
    ``waits`` columns (describe and list queries), a running execution gets its
    ``blocked_reason``: the failures of its workflow task, then what it waits
    for from the workers (``azync_workflow_waits``)."""
    failures, error = row.get("task_failures"), row.get("task_error")
    state = row[prefix + "state"]
    reasons: list[str] = []
    if state == WorkflowState.RUNNING.value and failures and error:
        plural = "s" if failures != 1 else ""
        reasons.append(f"{error} (after {failures} workflow task attempt{plural})")
    if state == WorkflowState.RUNNING.value and row.get("waits"):
        reasons.append(row["waits"])
    blocked = "; ".join(reasons)
    result = row[prefix + "result"]
    return WorkflowExecutionView(
        id=row[prefix + "id"],
        name=row[prefix + "name"],
        version=row[prefix + "version"],
        state=WorkflowState(state),
        business_idempotency_key=row[prefix + "business_idempotency_key"],
        task_queue=row[prefix + "task_queue"],
        priority=row.get(prefix + "priority") or 0,
        input=bytes(row[prefix + "input"]),
        result=None if result is None else bytes(result),
        failure_reason=row[prefix + "failure_reason"],
        meta=decode_meta(row[prefix + "meta"]),
        created_at=row[prefix + "created_at"],
        updated_at=row[prefix + "updated_at"],
        completed_at=row[prefix + "completed_at"],
        suspend_reason=row[prefix + "suspend_reason"],
        suspend_seq=row[prefix + "suspend_seq"],
        suspend_operation_id=row[prefix + "suspend_operation_id"],
        signals_undelivered=row[prefix + "signals_undelivered"],
        blocked_reason=blocked,
        run_id=row.get(prefix + "run_id") or row[prefix + "id"],
        run_no=row.get(prefix + "run_no") or 1,
        run_started_at=row.get(prefix + "run_started_at") or row[prefix + "created_at"],
        parent_id=row.get(prefix + "parent_id"),
        parent_run_id=row.get(prefix + "parent_run_id"),
        parent_seq=row.get(prefix + "parent_seq"),
        parent_close_policy=row.get(prefix + "parent_close_policy") or "",
        awaited_signals=list(row.get(prefix + "awaited_signals") or [])
        if state in LIVE_WORKFLOW_STATES
        else [],
        next_timer_at=row.get("next_timer_at") if state in LIVE_WORKFLOW_STATES else None,
        execution_timeout=row.get(prefix + "execution_timeout"),
        run_timeout=row.get(prefix + "run_timeout"),
        timeout_at=row.get(prefix + "timeout_at"),
        search_attributes=decode_search_attributes(_jsonb(row.get(prefix + "search_attributes"))),
        reset_from_run=row.get(prefix + "reset_from_run"),
        reset_seq=row.get(prefix + "reset_seq"),
        reset_reason=row.get(prefix + "reset_reason") or "",
    )


def _jsonb(value: Any) -> dict[str, Any]:
    """A jsonb map column (asyncpg returns text) as a dict."""
    if not value or value == "{}":
        return {}
    decoded: dict[str, Any] = json.loads(value) if isinstance(value, str) else dict(value)
    return decoded


def history_from_row(row: asyncpg.Record) -> HistoryEvent:
    return HistoryEvent(
        workflow_id=row["workflow_id"],
        seq=row["seq"],
        type=row["type"],
        payload=bytes(row["payload"]),
        created_at=row["created_at"],
    )


#: Executions one statement of ``list_stalled_workflows`` examines.
_STALLED_VIEW_BATCH = 1000


def _key(s: StalledWorkflow) -> tuple[datetime, uuid.UUID]:
    assert s.updated_at is not None
    return (s.updated_at, s.id)


def _stalled(rows: list[asyncpg.Record]) -> list[StalledWorkflow]:
    """The stalled executions of ``workflow_stalled_scan`` rows (a NULL id: none)."""
    return [
        StalledWorkflow(id=r["id"], name=r["name"], updated_at=r["updated_at"])
        for r in rows
        if r["id"] is not None
    ]
