"""DAG verbs of the PostgreSQL driver (contract :mod:`azync_flow.store.dags`).

Every verb is one transaction. DAG tasks are ``azync_jobs`` rows with
``source = 'dag'``; they are settled through the plain queue verbs
(``snooze``, ``skip``, ``reschedule``, ``dead``, ``release``, ``extend_lease``,
plus :meth:`DAGMixin.ack_task_result`) and promoted by ``promote_due(Source.DAG)``
(which leaves ``$sleep`` tasks and paused DAGs alone). DAG-only statements
remain where the semantics differ: ``dag_dequeue`` (leases across several
kinds, oldest first) and ``dag_reap_expired`` (keeps the attempt, reports
each reaped task so the lost attempt's span can be closed).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ...errors import NotFoundError
from .._common import TransactionIsolation
from ..dags import (
    DAGDep,
    DAGFailure,
    DAGFilter,
    DAGParams,
    DAGSignalParams,
    DAGState,
    DAGView,
    OnFailurePolicy,
    ReapedTask,
    SettledDAG,
    TaskResult,
)
from ..queue import DEFAULT_TASK_QUEUE, Job, JobState
from ..validate import check_meta, check_name, check_text
from ._base import PgBase, decode_meta, encode_meta, job_from_row, lease_order, stale_lease
from ._queries import QUERIES
from ._steptx import PgStepTransaction, open_step_transaction

__all__ = [
    "DAGMixin",
]

_ZERO = timedelta(0)


_reaped_decoder = msgspec.json.Decoder(list[ReapedTask])


_settled_decoder = msgspec.json.Decoder(list[SettledDAG])


def _settled(row: asyncpg.Record) -> SettledDAG:
    """A :class:`SettledDAG` from a row with the header's columns."""
    return SettledDAG(
        id=row["id"],
        name=row["name"],
        state=DAGState(row["state"]),
        reason=row["failure_reason"] or "",
        created_at=row["created_at"],
        trace_context=decode_meta(row["trace_context"]),
    )


# Ledger fan-out of DAG lifecycle events, spliced into the DAG statements that
# change a header's state (marker line ``-- @publish_dag_events $N``, $N = the
# NOTIFY channel), so the event rows and every subscriber's delivery job commit
# or roll back with the state change itself. The host statement defines
# ``clock(t)`` and ``dag_events(dag_id, type, body json)`` and must reference
# ``dag_ev_wake`` in its final SELECT (an unreferenced SELECT CTE never runs).
# Same fan-out as ``event_publish``: one pending delivery per subscriber
# registered for the type; the event meta is the DAG's trace context.
_PUBLISH_DAG_EVENTS = """, dag_ev AS (
    INSERT INTO azync_events (id, type, aggregate_type, aggregate_id, version, occurred_at,
                              payload, meta, created_at)
    SELECT gen_random_uuid(), e.type, 'dag', e.dag_id::text, 0, c.t,
           convert_to(e.body::text, 'UTF8'), coalesce(h.trace_context, '{{}}'::jsonb), c.t
    FROM dag_events e CROSS JOIN clock c LEFT JOIN azync_dags h ON h.id = e.dag_id
    RETURNING id, type
), dag_ev_jobs AS (
    INSERT INTO azync_jobs (id, source, kind, state, run_at, max_attempts,
                            max_attempts_explicit, event_id, enqueued_at, updated_at)
    SELECT gen_random_uuid(), 'event', s.name, 'pending', c.t, s.max_attempts,
           s.max_attempts > 0, v.id, c.t, c.t
    FROM dag_ev v JOIN azync_subscribers s ON s.event_type = v.type CROSS JOIN clock c
    RETURNING kind
), dag_ev_stat AS (
    SELECT azync_job_count((SELECT t FROM clock),
                           array_agg(ROW('event', kind, 1, 0, 0, 0)::azync_job_delta))
    FROM dag_ev_jobs
), dag_ev_wake AS (
    SELECT pg_notify({channel}, 'event:' || kind) FROM (SELECT DISTINCT kind FROM dag_ev_jobs) k
    WHERE (SELECT count(*) FROM dag_ev_stat) >= 0
)"""
_PUBLISH_MARK = re.compile(r"^-- @publish_dag_events (\$\d+)$", re.MULTILINE)


def _splice_publish() -> None:
    for name, sql in QUERIES.items():
        if name.startswith("dag_"):
            QUERIES[name] = _PUBLISH_MARK.sub(
                lambda m: _PUBLISH_DAG_EVENTS.format(channel=m.group(1)), sql
            )


_splice_publish()


class _PgDAGTaskTransaction(PgStepTransaction):
    """``DAGTaskTransaction`` of the PostgreSQL driver."""

    def __init__(
        self,
        store: DAGMixin,
        conn: asyncpg.Connection,
        tx: Any,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
    ) -> None:
        super().__init__(store, conn, tx)
        self._dags = store
        self._job = job_id
        self._token = lease_token

    async def ack(self, result: bytes | None) -> None:
        await self._settling()
        row = await self._dags._fetchrow(
            "dag_ack_result", self._job, self._token, result, self._dags.channel, conn=self._conn
        )
        if row is None:
            raise NotFoundError(stale_lease(self._job, "dag task"))
        await self._commit()


class DAGMixin(PgBase):
    @asynccontextmanager
    async def dag_task_transaction(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AsyncIterator[_PgDAGTaskTransaction]:
        """Implements ``TransactionalDAGConsumer.dag_task_transaction`` (documented there)."""

        def make(conn: asyncpg.Connection, tx: Any) -> _PgDAGTaskTransaction:
            return _PgDAGTaskTransaction(self, conn, tx, id, lease_token)

        async with open_step_transaction(
            self, "dag_task_transaction_open", id, (id, lease_token), isolation, make, "dag task"
        ) as handle:
            yield handle

    """asyncpg implementation of the DAG roles of the contract."""

    # --- creation ---------------------------------------------------------------

    async def create_dag(
        self, p: DAGParams, *, trace_context: Mapping[str, str] | None = None
    ) -> tuple[bool, uuid.UUID | None]:
        """Insert the header, tasks and edges atomically (contract ``CreateDAG``).

        Initial states: a task with dependencies is blocked; a root task is
        pending, except a root ``$sleep`` (scheduled at now()+sleep_for) and a
        root ``$signal`` (waiting). Workers of runnable kinds are woken on
        commit.

        Args:
            p: the run.
            trace_context: extension: the starter's W3C carrier
                (``traceparent``/``tracestate``/``baggage``), stored in the
                header's ``trace_context`` and merged into every task's meta
                (over ``p.meta``; the header's meta stays ``p.meta``). A
                deduplicated start leaves the live run's value untouched.

        Returns:
            ``(True, None)`` when inserted; ``(False, existing_id)`` when a live
            (running, suspended, compensating or paused) DAG of the same name
            holds ``p.idempotency_key``.

        Raises:
            ValueError: duplicate task keys, an edge naming an unknown task, a
                name, kind, key or meta entry containing NUL, or a name or kind
                longer than 255 characters (nothing written).
        """
        async with self.transaction() as conn:
            return await self.create_dag_tx(conn, p, trace_context=trace_context)

    async def create_dag_tx(
        self,
        tx: asyncpg.Connection,
        p: DAGParams,
        *,
        trace_context: Mapping[str, str] | None = None,
    ) -> tuple[bool, uuid.UUID | None]:
        """Contract ``TxDAGStore.CreateDAGTx``: :meth:`create_dag` in the caller's transaction.

        ``tx`` must be a connection inside an open transaction: the header,
        tasks and edges commit or roll back with the caller's own writes.
        """
        _check_params(p)
        carrier = dict(trace_context or {})
        while True:
            hid = await self._fetchval(
                "dag_insert_header",
                p.id,
                p.name,
                (p.on_failure or OnFailurePolicy.CANCEL).value,
                p.idempotency_key,
                encode_meta(p.meta),
                encode_meta(carrier),
                conn=tx,
            )
            if hid is not None:
                break
            existing = await self._fetchval("dag_find_live_key", p.name, p.idempotency_key, conn=tx)
            if existing is not None:
                return False, existing
            # The holder went terminal between the two statements: try again.
        has_deps = {d.task_key for d in p.deps}
        t = p.tasks
        await self._fetchrow(
            "dag_insert_tasks",
            p.id,
            encode_meta({**p.meta, **carrier}),
            [x.key for x in t],
            [x.kind for x in t],
            [x.payload for x in t],
            [x.max_attempts for x in t],
            [x.compensation_kind for x in t],
            [x.compensation_payload for x in t],
            [x.signal_name for x in t],
            [x.sleep_for for x in t],
            [x.ignore_dead_deps for x in t],
            [x.deadline for x in t],
            [x.key in has_deps for x in t],
            self.channel,
            [x.task_queue or DEFAULT_TASK_QUEUE for x in t],
            conn=tx,
        )
        if p.deps:
            await self._fetch(
                "dag_insert_deps",
                p.id,
                [d.task_key for d in p.deps],
                [d.depends_on_key for d in p.deps],
                conn=tx,
            )
        return True, None

    # --- signals ------------------------------------------------------------------

    async def signal(self, p: DAGSignalParams) -> tuple[int, bool]:
        """Deliver or buffer one named signal (contract ``Signal``).

        The signal is appended to the DAG's inbox (a repeated non-empty
        ``message_id`` is dropped with ``deduplicated=True``), then consumed at
        once when a matching task is deliverable: a waiting ``$signal`` task
        succeeds with the payload as its result, a scheduled ``$sleep`` task is
        woken (run_at = now). Each signal is consumed by at most one task, the
        oldest signal going to the earliest-created deliverable task.

        Returns:
            ``(delivered, deduplicated)``; ``(0, False)`` means buffered.

        Raises:
            NotFoundError: the DAG is missing or terminal.
            ValueError: the signal name or ``message_id`` contain NUL, or the name
                is too long (nothing written).
        """
        check_name(p.name, "DAG signal name")
        check_text(p.message_id, "DAG signal message_id")
        async with self.transaction() as conn:
            row = await self._fetchrow("dag_lock_live", p.dag_id, conn=conn)
            if row is None:
                raise NotFoundError(f"dag {p.dag_id} is missing or terminal; signal not accepted")
            sid = await self._fetchval(
                "dag_signal_insert", p.dag_id, p.name, p.message_id, p.payload, conn=conn
            )
            if sid is None:
                return 0, True
            res = await self._fetchrow("dag_deliver_signals", [p.dag_id], self.channel, conn=conn)
            delivered = int(res["delivered"]) if res else 0
            if delivered == 0:
                await self._fetch("dag_notify_tick", self.channel, conn=conn)
            return delivered, False

    async def deliver_buffered_signals(self) -> int:
        """Hand buffered signals to tasks that became deliverable; return the count.

        Contract ``DeliverBufferedSignals``: oldest signal first per task,
        set-based and idempotent. Headers are locked (skip-locked) so a
        concurrent :meth:`signal` on the same DAG never double-spends a signal.
        """
        async with self.transaction() as conn:
            ids = [r["id"] for r in await self._fetch("dag_lock_signalled", conn=conn)]
            if not ids:
                return 0
            res = await self._fetchrow("dag_deliver_signals", ids, self.channel, conn=conn)
            return int(res["delivered"]) if res else 0

    # --- lookups ------------------------------------------------------------------

    async def find_dag_by_key(self, name: str, idempotency_key: str) -> uuid.UUID:
        """The live DAG (running, suspended, compensating or paused) holding the key.

        Raises:
            NotFoundError: no live DAG holds ``(name, idempotency_key)``.
        """
        found = await self._fetchval("dag_find_live_key", name, idempotency_key)
        if found is None:
            raise NotFoundError(f"no live dag {name!r} holds idempotency key {idempotency_key!r}")
        return uuid.UUID(str(found))

    async def get_dag(self, id: uuid.UUID) -> DAGView:
        """One DAG header. Raises NotFoundError when none matches."""
        row = await self._fetchrow("dag_get", id)
        if row is None:
            raise NotFoundError(f"dag {id} not found")
        return _view(row)

    async def list_dags(
        self, filter: DAGFilter, offset: int, limit: int
    ) -> tuple[list[DAGView], int]:
        """DAGs matching ``filter``, newest first (created_at desc), and the total count."""
        state = filter.state.value if filter.state else ""
        async with self.pool.acquire() as conn:
            total = await self._fetchval("dag_count", filter.name, state, conn=conn)
            rows = await self._fetch(
                "dag_list", filter.name, state, max(offset, 0), max(limit, 0), conn=conn
            )
        return [_view(r) for r in rows], int(total)

    async def dag_tasks(self, id: uuid.UUID) -> list[Job]:
        """Implements ``DAGAdmin.dag_tasks`` (documented there)."""
        rows = await self._fetch("dag_tasks", id)
        if not rows:
            raise NotFoundError(f"dag {id} not found")
        return [job_from_row(r) for r in rows if r["id"] is not None]

    async def dag_deps(self, id: uuid.UUID) -> list[DAGDep]:
        """Implements ``DAGAdmin.dag_deps`` (documented there)."""
        rows = await self._fetch("dag_deps", id)
        return [DAGDep(task_key=r[0], depends_on_key=r[1]) for r in rows]

    async def dag_name_state_counts(self) -> dict[str, dict[DAGState, int]]:
        """How many DAGs sit in each state, per definition name (absent = zero)."""
        out: dict[str, dict[DAGState, int]] = {}
        for r in await self._fetch("dag_name_state_counts"):
            out.setdefault(r["name"], {})[DAGState(r["state"])] = int(r["n"])
        return out

    async def dag_task_counts(
        self, ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, dict[JobState, int]]:
        """``DAGAdmin.dag_task_counts``: task counts per state for each requested DAG."""
        if not ids:
            return {}
        out: dict[uuid.UUID, dict[JobState, int]] = {}
        for r in await self._fetch("dag_task_counts", list(ids)):
            out.setdefault(r["dag_id"], {})[JobState(r["state"])] = int(r["n"])
        return out

    async def task_results(self, dag_id: uuid.UUID, keys: Sequence[str]) -> dict[str, TaskResult]:
        """Settled outcomes of succeeded and skipped tasks, keyed by task key.

        Empty ``keys`` returns every settled task. A succeeded task without a
        result maps to ``TaskResult(result=None)``; a skipped one to
        ``TaskResult(skipped=True)``. Unsettled tasks are absent.
        """
        rows = await self._fetch("dag_task_results", dag_id, list(keys))
        return {
            r["task_key"]: TaskResult(
                result=None if r["result"] is None else bytes(r["result"]),
                skipped=r["state"] == JobState.SKIPPED,
            )
            for r in rows
        }

    # --- settle -------------------------------------------------------------------

    async def ack_task_result(
        self, id: uuid.UUID, lease_token: uuid.UUID, result: bytes | None
    ) -> None:
        """Implements ``DAGConsumer.ack_task_result`` (documented there)."""
        await self._must(
            "dag_ack_result",
            id,
            lease_token,
            result,
            self.channel,
            what=stale_lease(id, "dag task"),
        )

    async def dag_dequeue(
        self,
        kinds: Sequence[str],
        limit: int,
        lease: timedelta,
        default_max_attempts: int = 25,
        task_queues: Sequence[str] = (DEFAULT_TASK_QUEUE,),
    ) -> list[Job]:
        """Implements ``DAGConsumer.dag_dequeue`` (documented there)."""
        if limit <= 0 or not kinds:
            return []
        rows = await self._fetch(
            "dag_dequeue", list(kinds), limit, lease, default_max_attempts, list(task_queues)
        )
        return sorted((job_from_row(r) for r in rows), key=lease_order)

    async def dag_trace_context(self, id: uuid.UUID) -> dict[str, str]:
        """Implements ``DAGAdmin.dag_trace_context`` (documented there)."""
        row = await self._fetchrow("dag_trace_context", id)
        if row is None:
            raise NotFoundError(f"dag {id} not found")
        return decode_meta(row["trace_context"])

    async def dag_notify_tick(self) -> None:
        """Wake the DAG scheduler (NOTIFY ``dag:$tick``)."""
        await self._fetch("dag_notify_tick", self.channel)

    # --- scheduler tick -----------------------------------------------------------

    async def promote_unblocked(self, *, since: datetime | None = None) -> int:
        """Promote blocked tasks whose dependencies are satisfied; return the count.

        Contract ``PromoteUnblocked``: a dependency is satisfied when it
        succeeded or was skipped, and for an ``ignore_dead_deps`` task also
        when it died or was cancelled. Only running/compensating DAGs promote.

        Args:
            since: incremental mode (an extension): only DAGs whose header or
                a task changed at or after this backend time are examined.
                None (the contract call) examines every DAG.
        """
        row = await self._fetchrow("dag_promote_unblocked", self.channel, since)
        return int(row["promoted"]) if row else 0

    async def complete_due_sleeps(self) -> int:
        """Succeed every scheduled ``$sleep`` task whose run_at is due; return the count."""
        row = await self._fetchrow("dag_complete_due_sleeps", self.channel)
        return int(row["completed"]) if row else 0

    async def dag_reap_expired_tasks(self, max_reaps: int = 5) -> list[ReapedTask]:
        """Reclaim expired DAG task leases and say which: back to pending with
        ``reap_count + 1``, or dead once ``reap_count`` reaches ``max_reaps``."""
        row = await self._fetchrow("dag_reap_expired", max_reaps)
        assert row is not None
        return _reaped_decoder.decode(row["expired"])

    async def apply_failure_policy(
        self, *, on_settled: Callable[[SettledDAG], None] | None = None
    ) -> list[DAGFailure]:
        """Apply each running DAG's on-failure policy to its triggering dead tasks.

        Contract ``ApplyFailurePolicy``: a dead task triggers unless it has
        dependents and all of them declare ``ignore_dead_deps`` (a dead leaf
        always triggers). Cancel: non-terminal tasks are cancelled, the
        compensation chain inserted, the DAG moves to compensating (failed when
        nothing to compensate). Suspend: the DAG is suspended, tasks untouched.
        Headers are locked skip-locked, so two schedulers never act twice.
        The run's ``failure_reason`` names every dead task with its error,
        tolerated ones marked ``[tolerated]``, root cause (first to die) first:
        ``dead tasks: pay [tolerated]: RuntimeError: declined; cleanup: OSError: ...``.

        Ledger events, in the same transaction: one ``azync.dag.failed`` per
        DAG acted on, plus ``azync.dag.compensation_started`` (cancel, with a
        chain) or ``azync.dag.settled`` (cancel, nothing to compensate).

        ``on_settled(run)`` is called after the commit for each DAG that failed
        outright (nothing to compensate).
        """
        failures: list[DAGFailure] = []
        settled: list[SettledDAG] = []
        reasons: dict[uuid.UUID, str] = {}
        async with self.transaction() as conn:
            rows = await self._fetch("dag_failure_candidates", conn=conn)
            for r in rows:
                if r["dead_tasks"]:
                    reasons[r["id"]] = r["reason"]
                    failures.append(
                        DAGFailure(
                            dag_id=r["id"],
                            policy=OnFailurePolicy(r["on_failure"] or "cancel"),
                            dead_tasks=list(r["dead_tasks"]),
                        )
                    )
            suspend = [f for f in failures if f.policy == OnFailurePolicy.SUSPEND]
            cancel = [f for f in failures if f.policy != OnFailurePolicy.SUSPEND]
            if suspend:
                await self._fetch(
                    "dag_suspend_many",
                    [f.dag_id for f in suspend],
                    [reasons[f.dag_id] for f in suspend],
                    [_json_keys(f.dead_tasks) for f in suspend],
                    self.channel,
                    conn=conn,
                )
            if cancel:
                rows = await self._fetch(
                    "dag_compensate_many",
                    [f.dag_id for f in cancel],
                    [reasons[f.dag_id] for f in cancel],
                    self.channel,
                    True,
                    [_json_keys(f.dead_tasks) for f in cancel],
                    conn=conn,
                )
                settled = [_settled(r) for r in rows if r["state"] == DAGState.FAILED]
        if on_settled is not None:
            for run in settled:
                on_settled(run)
        return failures

    async def complete_dags(
        self,
        *,
        since: datetime | None = None,
        on_settled: Callable[[SettledDAG], None] | None = None,
    ) -> int:
        """Settle DAGs whose work is finished; return the number transitioned.

        Contract ``CompleteDAGs``, including its authoritative tolerance
        re-check: a running DAG whose tasks are all terminal but which holds a
        non-tolerated dead task is left running for :meth:`apply_failure_policy`.
        ``since`` restricts the pass as in :meth:`promote_unblocked`.

        Ledger events, in the same statement: ``azync.dag.settled`` per DAG
        that became succeeded, failed or cancelled, and
        ``azync.dag.compensation_failed`` per compensating DAG suspended by a
        dead compensation.

        ``on_settled(run)`` is called after the commit for each DAG that became
        succeeded, failed or cancelled (for its run span).
        """
        row = await self._fetchrow("dag_complete", self.channel, since)
        if row is None:
            return 0
        if on_settled is not None:
            for run in _settled_decoder.decode(row["settled_runs"]):
                on_settled(run)
        return int(row["settled"])

    # --- admin verbs --------------------------------------------------------------

    async def pause_dag(self, id: uuid.UUID, reason: str) -> None:
        """Freeze a running DAG: header paused, pending/scheduled tasks paused.

        Raises:
            NotFoundError: the DAG is missing or not running.
        """
        async with self.transaction() as conn:
            await self._must(
                "dag_pause", id, reason, what=f"dag {id} is missing or not running", conn=conn
            )

    async def retry_dag(self, id: uuid.UUID) -> None:
        """Resume a live DAG: reset dead tasks (fresh budget), release paused ones.

        With a compensation chain only dead compensation tasks are reset and
        the DAG (re)enters compensating; otherwise it runs.

        Raises:
            NotFoundError: the DAG is missing or terminal.
        """
        await self._must("dag_retry", id, self.channel, what=f"dag {id} is missing or terminal")

    async def compensate_dag(self, id: uuid.UUID) -> SettledDAG | None:
        """Manually start compensation of a running or suspended DAG.

        Publishes ``azync.dag.compensation_started`` (trigger ``manual``), or
        ``azync.dag.settled`` when there is nothing to compensate, in the same
        transaction.

        Returns:
            The run when it failed outright (nothing to compensate), else None
            (it compensates now).

        Raises:
            NotFoundError: the DAG is missing or in any other state.
        """
        async with self.transaction() as conn:
            row = await self._fetchrow("dag_lock_state", id, conn=conn)
            if row is None or row["state"] not in (DAGState.RUNNING, DAGState.SUSPENDED):
                raise NotFoundError(f"dag {id} is missing or not running/suspended")
            view = await self._fetchrow("dag_get", id, conn=conn)
            assert view is not None
            reason = view["failure_reason"] or "compensation requested"
            rows = await self._fetch(
                "dag_compensate_many", [id], [reason], self.channel, False, ["[]"], conn=conn
            )
        failed = [_settled(r) for r in rows if r["state"] == DAGState.FAILED]
        return failed[0] if failed else None

    async def cancel_dag(self, id: uuid.UUID) -> DAGState:
        """Cancel a live DAG without compensating.

        A compensating DAG keeps compensating and lands cancelled once its
        compensation settles. A DAG cancelled now publishes
        ``azync.dag.settled`` in the same statement.

        Returns:
            The DAG's state after the call: ``cancelled`` when this call ended
            it, ``compensating`` when it lands cancelled later.

        Raises:
            NotFoundError: the DAG is missing or already terminal.
        """
        row = await self._must(
            "dag_cancel", id, self.channel, what=f"dag {id} is missing or terminal"
        )
        return DAGState(row["state"])

    async def vacuum_dags(self, retention: timedelta) -> int:
        """Implements ``DAGAdmin.vacuum_dags`` (documented there)."""
        if retention <= _ZERO:
            return 0
        return int(await self._fetchval("dag_vacuum", retention))


def _check_params(p: DAGParams) -> None:
    check_name(p.name, "DAG name")
    check_text(p.idempotency_key, "DAG idempotency_key")
    check_meta(p.meta, "DAG meta")
    for t in p.tasks:
        check_text(t.key, "DAG task key")
        check_name(t.kind, f"DAG task {t.key!r} kind", empty_ok=True)
        check_name(t.compensation_kind, f"DAG task {t.key!r} compensation_kind", empty_ok=True)
        check_name(t.signal_name, f"DAG task {t.key!r} signal_name", empty_ok=True)
        check_name(t.task_queue, f"DAG task {t.key!r} task_queue", empty_ok=True)
    keys = [t.key for t in p.tasks]
    seen: set[str] = set()
    for k in keys:
        if k in seen:
            raise ValueError(f"dag {p.name!r}: duplicate task key {k!r}")
        seen.add(k)
    for d in p.deps:
        for k in (d.task_key, d.depends_on_key):
            if k not in seen:
                raise ValueError(f"dag {p.name!r}: dependency names unknown task {k!r}")


def _json_keys(keys: list[str]) -> str:
    return msgspec.json.encode(keys).decode()


def _view(r: asyncpg.Record) -> DAGView:
    return DAGView(
        id=r["id"],
        name=r["name"],
        state=DAGState(r["state"]),
        on_failure=OnFailurePolicy(r["on_failure"] or "cancel"),
        idempotency_key=r["idempotency_key"],
        failure_reason=r["failure_reason"],
        meta=decode_meta(r["meta"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        completed_at=r["completed_at"],
    )
