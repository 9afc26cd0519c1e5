"""Client verbs for DAG runs: start, signal, inspect and administer."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from opentelemetry.trace import TracerProvider

from ..codec import encode_value
from ..errors import DAGIdempotencyConflictError, NotFoundError
from ..payload_codec import payloads_equal
from ..store.dags import (
    DAGClientStore,
    DAGDep,
    DAGFilter,
    DAGParams,
    DAGSignalParams,
    DAGState,
    DAGView,
)
from ..store.queue import Job, JobState
from ..store.validate import check_id
from ..telemetry import RUN_CALLER_KEY, RunEvent, RunKind, RunTracer, end_finished_run
from ._context import TaskOutcome
from ._definition import DAG

#: Trace-carrier keys merged into every task's meta at start; not part of the request.
_CARRIER_KEYS = frozenset({"traceparent", "tracestate", "baggage", RUN_CALLER_KEY})


def _strip(meta: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in meta.items() if k not in _CARRIER_KEYS}


@dataclass(frozen=True)
class DAGRun:
    """Handle returned by :meth:`DAGClient.run`.

    Attributes:
        id: the run id (the existing run's id when deduplicated).
        inserted: False when a live run of the same DAG held the idempotency key.
    """

    id: uuid.UUID
    inserted: bool


@dataclass(frozen=True)
class SignalReceipt:
    """Outcome of :meth:`DAGClient.signal`.

    Attributes:
        delivered: tasks completed or woken now (0 = buffered for later).
        deduplicated: the message id was seen before; nothing happened.
    """

    delivered: int
    deduplicated: bool


class DAGClient:
    """Start and administer DAG runs.

    Args:
        store: a store implementing ``DAGStore`` and ``TxDAGStore``.
        tracer_provider: where run spans go (None: the global provider).
            Starting a run reserves its run span ``dag <name>`` in the
            caller's trace (a new trace without one) and stores its W3C
            context with the run; every task attempt is its child. Signals and
            cancellations are short spans in the run's trace; a ``cancel`` or
            ``compensate`` that ends the run at once exports the run span.

    Every verb taking a run id (``id``, ``run_id``) takes a UUID or its str:
    another value is a ``TypeError``, a str that is not a UUID a
    ``ValueError``; nothing is written.
    """

    def __init__(
        self,
        store: DAGClientStore[asyncpg.Connection],
        *,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.store = store
        self.tracer = RunTracer(tracer_provider)

    async def run(
        self,
        dag: DAG,
        input: Any = None,
        *,
        idempotency_key: str = "",
        meta: Mapping[str, str] | None = None,
        payloads: Mapping[str, Any] | None = None,
        id: uuid.UUID | str | None = None,
    ) -> DAGRun:
        """Validate ``dag`` and start a run of it (one transaction).

        Args:
            dag: the definition.
            input: JSON-encodable run input (default payload of every task).
            idempotency_key: while a live run of this DAG holds the key, no new
                run starts and that run's id is returned (``inserted`` False) —
                when the request is the same (task kinds, payloads, meta).
            meta: string annotations copied to every task.
            payloads: per-task payload overrides.
            id: run id (default: fresh uuid4).

        Raises:
            DAGValidationError: the graph is invalid (nothing is stored).
            PayloadEncodeError: ``input`` or a payload is not JSON-encodable (an
                unsupported type, a lone surrogate, nesting over ~1000 levels, NaN/±Inf).
            DAGIdempotencyConflictError: a live run holds ``idempotency_key`` with
                different tasks, payloads or meta (nothing is stored).
            ValueError: a name, key or meta entry contains NUL, or a name is too long.
        """
        if id is not None:
            id = check_id(id, "id")
        p = dag.params(input, id=id, idempotency_key=idempotency_key, meta=meta, payloads=payloads)
        carrier = self.tracer.start_run_span(RunKind.DAG, dag.name, p.id)
        inserted, existing = await self.store.create_dag(p, trace_context=carrier)
        return await self._deduped(p, inserted, existing)

    async def _deduped(self, p: DAGParams, inserted: bool, existing: uuid.UUID | None) -> DAGRun:
        """The run of a create; on dedupe, check the live run holds the same request.

        Contract ``CreateDAG`` returns the holder's id whatever it holds, so the
        comparison is the client's: one extra read (``dag_tasks``), only when
        deduplicated. Compared: the set of task keys, each task's kind and
        payload bytes, and the run meta (task meta minus the stored trace carrier).
        """
        if inserted or existing is None:
            return DAGRun(id=p.id, inserted=True)
        stored = {j.task_key: j for j in await self.store.dag_tasks(existing) if j.task_key}
        differs: list[str] = []
        for t in p.tasks:
            j = stored.get(t.key)
            if j is None or j.kind != t.kind:
                differs.append(f"task {t.key!r} (kind)")
            elif not _same_payload(j.payload, t.payload):
                differs.append(f"task {t.key!r} (payload)")
            elif _strip(j.meta) != _strip(p.meta):
                differs.append(f"task {t.key!r} (meta)")
        requested = {t.key for t in p.tasks}
        differs += [
            f"task {k!r} (not requested)"
            for k in sorted(stored)
            if k not in requested and not k.startswith("comp:")
        ]
        if differs:
            raise DAGIdempotencyConflictError(
                f"dag {p.name!r}: live run {existing} already holds idempotency key "
                f"{p.idempotency_key!r} with a different request ({', '.join(differs[:5])}); "
                "nothing started",
                existing,
            )
        return DAGRun(id=existing, inserted=False)

    async def run_tx(
        self,
        tx: asyncpg.Connection,
        dag: DAG,
        input: Any = None,
        *,
        idempotency_key: str = "",
        meta: Mapping[str, str] | None = None,
        payloads: Mapping[str, Any] | None = None,
        id: uuid.UUID | None = None,
    ) -> DAGRun:
        """:meth:`run` inside the caller's open asyncpg transaction (``create_dag_tx``)."""
        p = dag.params(input, id=id, idempotency_key=idempotency_key, meta=meta, payloads=payloads)
        carrier = self.tracer.start_run_span(RunKind.DAG, dag.name, p.id)
        inserted, existing = await self.store.create_dag_tx(tx, p, trace_context=carrier)
        return await self._deduped(p, inserted, existing)

    async def signal(
        self, run_id: uuid.UUID | str, name: str, payload: Any = None, *, message_id: str = ""
    ) -> SignalReceipt:
        """Send signal ``name`` to a live run; buffered if its task is not yet waiting.

        An accepted (not deduplicated) signal is a ``signal <name>`` span in
        the run's trace, linked to the caller's span when that belongs to
        another trace.

        Args:
            message_id: dedupes repeats within (run, name); use the sender's event id.

        Raises:
            NotFoundError: the run is missing or terminal.
            PayloadEncodeError: ``payload`` is not JSON-encodable (nothing is sent).
            ValueError: ``name`` or ``message_id`` contain NUL, or ``name`` is too long.
        """
        run_id = check_id(run_id, "run_id")
        delivered, dup = await self.store.signal(
            DAGSignalParams(
                dag_id=run_id,
                name=name,
                payload=encode_value(payload, f"payload of signal {name!r}"),
                message_id=message_id,
            )
        )
        if not dup:
            await self._run_event(
                run_id, RunEvent.SIGNAL, name, {"azync.signal.delivered": delivered}
            )
        return SignalReceipt(delivered=delivered, deduplicated=dup)

    async def find_by_key(self, dag: DAG | str, idempotency_key: str) -> uuid.UUID:
        """The live run holding the business key. Raises NotFoundError when none."""
        return await self.store.find_dag_by_key(_name(dag), idempotency_key)

    async def get(self, run_id: uuid.UUID | str) -> DAGView:
        """The run header. Raises NotFoundError when none."""
        run_id = check_id(run_id, "run_id")
        return await self.store.get_dag(run_id)

    async def list(
        self,
        *,
        dag: DAG | str = "",
        state: DAGState | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[builtins.list[DAGView], int]:
        """Runs newest first, filtered by definition name and state; with the total."""
        return await self.store.list_dags(DAGFilter(name=_name(dag), state=state), offset, limit)

    async def tasks(self, run_id: uuid.UUID | str) -> builtins.list[Job]:
        """Every task of the run (compensations last). Raises NotFoundError when none."""
        run_id = check_id(run_id, "run_id")
        return await self.store.dag_tasks(run_id)

    async def deps(self, run_id: uuid.UUID | str) -> builtins.list[DAGDep]:
        """Every edge of the run, compensation chain included."""
        run_id = check_id(run_id, "run_id")
        return await self.store.dag_deps(run_id)

    async def results(
        self, run_id: uuid.UUID | str, keys: Sequence[str] = ()
    ) -> dict[str, TaskOutcome]:
        """Settled (succeeded or skipped) task outcomes, keyed by task key."""
        run_id = check_id(run_id, "run_id")
        found = await self.store.task_results(run_id, list(keys))
        return {k: TaskOutcome.from_store(v) for k, v in found.items()}

    async def name_state_counts(self) -> dict[str, dict[DAGState, int]]:
        """Run counts per definition name and state."""
        return await self.store.dag_name_state_counts()

    async def task_counts(
        self, run_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, dict[JobState, int]]:
        """Task counts per state for each run."""
        return await self.store.dag_task_counts(run_ids)

    async def pause(self, run_id: uuid.UUID | str, reason: str = "") -> None:
        """Freeze a running run (resume with :meth:`retry`). NotFoundError unless running."""
        run_id = check_id(run_id, "run_id")
        await self.store.pause_dag(run_id, reason)

    async def retry(self, run_id: uuid.UUID | str) -> None:
        """The one resume verb: reset dead tasks, release paused ones, resume."""
        run_id = check_id(run_id, "run_id")
        await self.store.retry_dag(run_id)

    async def compensate(self, run_id: uuid.UUID | str) -> None:
        """Start compensation of a running or suspended run by hand."""
        run_id = check_id(run_id, "run_id")
        settled = await self.store.compensate_dag(run_id)
        if settled is not None:  # nothing to compensate: this call ended it
            await self._end_run(run_id)

    async def cancel(self, run_id: uuid.UUID | str) -> None:
        """Cancel a live run without compensating (a compensating run finishes first).

        Recorded as a ``cancel.requested`` span in the run's trace; a run that
        this call ended (it was not compensating) also exports its run span.
        """
        run_id = check_id(run_id, "run_id")
        state = await self.store.cancel_dag(run_id)
        await self._run_event(run_id, RunEvent.CANCEL_REQUESTED)
        if state == DAGState.CANCELLED:  # this call ended it: its commit won
            await self._end_run(run_id)

    async def vacuum(self, retention: timedelta) -> int:
        """Delete settled runs completed more than ``retention`` ago; return how many."""
        return await self.store.vacuum_dags(retention)

    async def _end_run(self, run_id: uuid.UUID) -> None:
        """Export the run span of a run this client just ended."""
        try:
            view = await self.store.get_dag(run_id)
            carrier = await self.store.dag_trace_context(run_id)
        except NotFoundError:  # vacuumed meanwhile
            return
        end_finished_run(
            self.tracer,
            RunKind.DAG,
            view.name,
            run_id,
            carrier,
            view.created_at,
            view.state,
            view.failure_reason,
        )

    async def _run_event(
        self,
        run_id: uuid.UUID,
        event: RunEvent,
        subject: str | None = None,
        attributes: Mapping[str, int | str] | None = None,
    ) -> None:
        try:
            carrier = await self.store.dag_trace_context(run_id)
        except NotFoundError:  # vacuumed meanwhile: nothing to attach to
            return
        if not carrier:  # started untraced: no trace to add to
            return
        self.tracer.run_event(carrier, event, run_id=run_id, subject=subject, attributes=attributes)


def _name(dag: DAG | str) -> str:
    return dag if isinstance(dag, str) else dag.name


def _same_payload(stored: bytes | None, requested: bytes | None) -> bool:
    """Payloads compared as JSON (two encryptions of one value differ as bytes)."""
    if stored is None or requested is None:
        return stored is requested
    return payloads_equal(stored, requested)
