"""Client of workflow executions: start, signal, result, cancel, terminate, describe,
history.

Example::

    client = Client(store)
    handle = await client.start(order_workflow, Order(...), idempotency_key="order-17")
    await handle.signal("approve", {"by": "ann"}, message_id="approve-17")
    result = await handle.result(timeout=timedelta(minutes=5))
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import time
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Self, TypeVar

import asyncpg
import msgspec

from azync_flow._client_interactions import (
    DEFAULT_QUERY_TIMEOUT,
    TERMINAL_STATES,
    Waits,
    query_workflow,
    update_workflow,
)
from azync_flow._decisions import (
    Decided,
    UncertainOperationView,
    default_decider,
    resolve_operation,
)
from azync_flow._local_workflows import local_workflows
from azync_flow._publish import publish_event
from azync_flow._text import clean_text
from azync_flow._transaction import check_transaction
from azync_flow._transient import retry_transient
from azync_flow._workflow.definitions import WorkflowDefinition
from azync_flow._workflow.limits import HistoryLimit
from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import (
    ConflictError,
    NotFoundError,
    SearchAttributeError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowTerminatedError,
    WorkflowTimeoutError,
)
from azync_flow.limits import ConcurrencyLimit
from azync_flow.replay import check_signal_name
from azync_flow.replay.events import (
    HistoryEntry,
    OperatorNote,
    WorkflowClosedByOperator,
    WorkflowTerminated,
    encode_event,
)
from azync_flow.replay.passes import to_entries
from azync_flow.replay.replayer import RecordedHistory
from azync_flow.replay.reset import ResetTarget, plan_reset, reset_point
from azync_flow.search import SearchValue, check_search_attributes, parse_search_filter
from azync_flow.store.events import Subscriber
from azync_flow.store.queue import DEFAULT_TASK_QUEUE, EnqueueParams, LimitUsage
from azync_flow.store.validate import (
    check_id,
    check_name,
    check_priority,
    check_reason,
    check_same_start,
    check_task_queue,
    check_text,
    check_timeout,
)
from azync_flow.store.workflows import (
    ResetResult,
    SearchFilter,
    SignalParams,
    StalledWorkflow,
    WorkflowClientStore,
    WorkflowExecutionView,
    WorkflowRunView,
    WorkflowStartParams,
    WorkflowState,
)
from azync_flow.telemetry import RunEvent, RunKind, RunTracer, end_finished_run, traced_meta

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from azync_flow.schedules import ScheduleClient
    from azync_flow.worker import Worker

__all__ = [
    "MAX_NOTE_LENGTH",
    "Client",
    "ExecutionPage",
    "UncertainOperationView",
    "WorkflowHandle",
]

log = logging.getLogger("azync_flow.client")

R = TypeVar("R")


class ExecutionPage(NamedTuple):
    """One page of :meth:`Client.list`."""

    executions: list[WorkflowExecutionView]
    next_cursor: tuple[datetime, uuid.UUID] | None


class Client:
    """Starts and addresses workflow executions through a store.

    Every call that reaches the database (here and on :class:`WorkflowHandle`)
    may raise :class:`~azync_flow.StoreUnavailableError` (the database cannot be
    reached; retryable) or :class:`~azync_flow.SchemaNotMigratedError` (run
    ``azync-flow migrate``), never a raw driver error.

    Args:
        store: the store (``PostgresStore``).
        poll_interval: longest pause between two reads while waiting for a result.
        worker: a :class:`~azync_flow.worker.Worker` of this process (or use
            ``Client.for_worker(worker)``). While it runs, a start of a workflow it
            registers (without ``id`` or ``idempotency_key``) commits the
            execution together with its first pass, run by that worker, and
            a signal wakes its workflow-task loop at once. Other starts, and
            every start of a client without a worker, take the plain path.
        listen_linger: how long the LISTEN connection of ``result`` waits stays
            open after the last waiter left (default 5 s; 0: closed at once, no
            idle connection). A client awaiting results one after another then
            shares one connection instead of setting one up per result (about
            5 ms of a 15 ms start-to-result on a 2-core machine). ``close()``,
            and closing the store, always close it.
        history_limit: the thresholds behind ``describe().history_limit_exceeded``
            (default :class:`~azync_flow.workflow.HistoryLimit`).
    """

    @property
    def _handle_class(self) -> type[WorkflowHandle[Any]]:
        """What :meth:`start` and :meth:`get_handle` build (the testing kit's
        client builds handles whose ``result()`` skips time)."""
        return WorkflowHandle

    def __init__(
        self,
        store: WorkflowClientStore[asyncpg.Connection],
        *,
        poll_interval: timedelta = timedelta(milliseconds=200),
        fallback_poll: timedelta = timedelta(seconds=5),
        tracer_provider: TracerProvider | None = None,
        worker: Worker | None = None,
        listen_linger: timedelta = timedelta(seconds=5),
        history_limit: HistoryLimit | None = None,
    ):
        self.store = store
        self.history_limit = history_limit or HistoryLimit()
        self.worker = worker
        self.tracer = RunTracer(tracer_provider)
        self._waits = Waits(
            store,
            poll_interval=poll_interval.total_seconds(),
            fallback_poll=fallback_poll.total_seconds(),
            linger=listen_linger.total_seconds(),
        )

    @classmethod
    def for_worker(cls, worker: Worker, **options: Any) -> Self:
        """A client bound to ``worker`` (a Worker of this process): while the
        worker runs, starting a workflow it runs commits the execution with its
        first pass (run there), and signals wake its loop directly.

        Args:
            worker: the Worker; the client uses its store.
            **options: more ``Client`` options (``poll_interval``, ...).
        """
        return cls(worker.store, worker=worker, **options)  # type: ignore[arg-type]

    @property
    def wakeups(self) -> int:
        """``result``, ``query`` and ``update`` waits ended by a wake-up (not by a
        fallback re-read); a test hook."""
        return self._waits.wakeups

    @property
    def schedules(self) -> ScheduleClient:
        """Schedules on this client's store (create, describe, list, pause,
        unpause, trigger, delete, backfill; docs/schedules.md).

        Raises:
            TypeError: the store does not implement the schedule roles
                (:class:`~azync_flow.schedules.ScheduleRuntimeStore`).
        """
        from azync_flow.schedules import ScheduleClient, ScheduleRuntimeStore

        if not isinstance(self.store, ScheduleRuntimeStore):
            raise TypeError("this client's store does not implement ScheduleRuntimeStore")
        return ScheduleClient(self.store)

    async def close(self) -> None:
        """Release the LISTEN connection (only open while a ``result`` waits)."""
        await self._waits.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        meta: dict[str, str] | None = None,
        **options: Any,
    ) -> uuid.UUID | None:
        """Enqueue a plain queue job, carrying the caller's trace context in ``meta``
        (a worker with ``trace_jobs(worker)`` makes its attempt spans children of the caller's).

        Args:
            kind: the handler kind.
            payload: a msgspec-encodable value.
            meta: string annotations.
            **options: more ``EnqueueParams`` fields (``delay``, ``run_at``,
                ``max_attempts``, ``idempotency_key``, ``task_queue``,
                ``priority``, ...).

        Returns:
            The job id, or None when deduplicated by its idempotency key.

        Raises:
            PayloadEncodeError: ``payload`` is not JSON-encodable.
            TypeError: ``kind`` or ``idempotency_key`` is not a str, ``id`` is
                neither a UUID nor a str.
            ValueError: ``kind`` is empty or a name the store refuses; ``id``
                is a str that is not a UUID. Nothing is written.
        """
        params = _job_params(kind, payload, options.pop("id", None), traced_meta(meta), options)
        inserted = await self.store.enqueue(params)
        return params.id if inserted else None

    async def enqueue_many(
        self,
        kind: str,
        payloads: Sequence[Any],
        *,
        ids: Sequence[uuid.UUID | str] | None = None,
        idempotency_keys: Sequence[str] | None = None,
        meta: dict[str, str] | None = None,
        conn: asyncpg.Connection | None = None,
        **options: Any,
    ) -> builtins.list[uuid.UUID | None]:
        """Enqueue many plain queue jobs of one kind in one transaction (one
        statement): each as :meth:`enqueue` would, in order.

        An item whose idempotency key a live job (or an unexpired TTL window,
        or an earlier item of this batch) holds writes nothing and gets None.
        Every payload is encoded and every item checked before anything is
        written, so one bad item writes nothing. A few thousand jobs per call
        is a good size (docs/queue.md).

        Args:
            kind: the handler kind of every job.
            payloads: one msgspec-encodable value per job.
            ids: one job id per payload (default: new UUIDs).
            idempotency_keys: one key per payload ('' for none).
            meta: string annotations of every job (the caller's trace context
                is added).
            conn: the caller's asyncpg connection inside an open transaction:
                the jobs exist if and only if it commits. Without it the batch
                commits on its own.
            **options: more ``EnqueueParams`` fields shared by every job
                (``delay``, ``run_at``, ``max_attempts``, ``idempotency_ttl``, ...).

        Returns:
            Per payload, in order: the job id, or None when deduplicated.

        Raises:
            PayloadEncodeError: a payload is not JSON-encodable.
            ValueError: ``ids`` or ``idempotency_keys`` is not one per payload;
                a kind, key or meta entry the store refuses; ``conn`` has no
                open transaction.
            TypeError: ``conn`` is not an asyncpg connection.
            ConflictError: a job with one of ``ids`` exists, or ``ids`` repeats one.
        """
        _check_lengths(len(payloads), ids=ids, idempotency_keys=idempotency_keys)
        job_meta = traced_meta(meta)
        params = [
            _job_params(
                kind,
                payload,
                ids[i] if ids is not None else None,
                job_meta,
                options,
                idempotency_keys[i] if idempotency_keys is not None else None,
                at=f"[{i}]" if ids is not None or idempotency_keys is not None else "",
            )
            for i, payload in enumerate(payloads)
        ]
        if conn is None:
            inserted = await self.store.enqueue_many(params)
        else:
            check_transaction(conn, "enqueue_many")
            inserted = await self.store.enqueue_many_tx(conn, params)
        return [p.id if ok else None for p, ok in zip(params, inserted, strict=True)]

    async def publish(
        self,
        event_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        id: uuid.UUID | str | None = None,
        meta: dict[str, str] | None = None,
        conn: asyncpg.Connection | None = None,
    ) -> uuid.UUID:
        """Publish an event to the ledger (docs/events.md): one delivery per
        subscriber of ``event_type`` registered now is created with it, atomically.

        Args:
            event_type: e.g. ``"order.placed"`` (at most 255 characters).
            payload: a msgspec-encodable value.
            key: what the event is about (subscribers see ``ctx.key``).
            id: the event id (default: a fresh uuid4).
            meta: string annotations; the caller's trace context is added.
            conn: the caller's asyncpg connection: inside the caller's
                transaction the event exists if and only if it commits (the
                outbox pattern); any search path works.

        Returns:
            The event id.

        Raises:
            ValueError: ``event_type`` empty, too long or containing NUL; ``key`` with
                NUL; an ``id`` str that is not a UUID; ``conn`` without an open
                transaction.
            TypeError: ``event_type`` or ``key`` is not a str; ``id`` is neither
                a UUID nor a str; ``conn`` is not an asyncpg connection (a pool, ...).
            PayloadEncodeError: ``payload`` is not JSON-encodable.
            ConflictError: an event with this ``id`` exists.
        """
        return await publish_event(
            self.store,
            event_type,
            payload,
            key=key,
            id=id,
            meta=meta,
            conn=conn,
        )

    async def subscribers(self, event_type: str) -> builtins.list[Subscriber]:
        """The subscribers a :meth:`publish` of ``event_type`` made now reaches.

        Each registration (made by a worker's ``attach_subscribers`` or by
        ``register_subscribers``) gets one delivery of every event of its type
        published while it is registered.

        Args:
            event_type: e.g. ``"order.placed"`` (exact match, at most 255 characters).

        Returns:
            The registrations of that type ordered by subscriber name, each a
            ``Subscriber(name, event_type, max_attempts, ordered)``
            (``max_attempts`` 0: the worker's default; ``ordered``: deliveries
            run one key at a time). Empty when nobody subscribes.

        Raises:
            ValueError: ``event_type`` is empty, longer than 255 characters or
                contains NUL.
            TypeError: ``event_type`` is not a str.
        """
        return await self.store.subscribers(event_type)

    async def list(
        self,
        workflow: WorkflowDefinition[Any, Any] | str | None = None,
        *,
        state: WorkflowState | str | None = None,
        limit: int = 50,
        cursor: tuple[datetime, uuid.UUID] | None = None,
        where: Sequence[SearchFilter | str] = (),
    ) -> ExecutionPage:
        """Executions, newest first, optionally of one workflow and/or state.

        Args:
            workflow: a ``@workflow`` definition or a workflow name.
            state: running, suspended, succeeded, failed or cancelled.
            limit: page size.
            cursor: ``page.next_cursor`` of the previous page.
            where: search attribute filters, all of which must hold: built
                with ``SearchAttr`` (``SearchAttr("amount") > 1000``) or in
                text form (``'customer = "c-17"'``, see ``azync_flow.search``).

        Returns:
            An :class:`ExecutionPage`; ``next_cursor`` is None on the last page.
            Each view carries ``blocked_reason`` as :meth:`WorkflowHandle.describe`
            does.

        Raises:
            ValueError: an unknown state, ``limit`` < 1, or a ``cursor`` that is
                not a ``next_cursor`` (a ``(datetime, UUID)`` pair).
            SearchAttributeError: a filter of a bad name, operator or value
                (also a ``ValueError``).
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if cursor is not None and not (
            isinstance(cursor, tuple)
            and len(cursor) == 2
            and isinstance(cursor[0], datetime)
            and isinstance(cursor[1], uuid.UUID)
        ):
            raise ValueError(
                f"cursor {cursor!r} is not a next_cursor of a page of this list "
                "(a (datetime, UUID) pair)"
            )
        name = workflow.name if isinstance(workflow, WorkflowDefinition) else workflow
        filters = [parse_search_filter(w) if isinstance(w, str) else w for w in where]
        for f in filters:
            if not isinstance(f, SearchFilter):
                raise SearchAttributeError(
                    f"where takes SearchAttr comparisons or filter text, got {f!r}"
                )
        rows = await self.store.list_workflow_executions(
            name=name, state=state, limit=limit + 1, before=cursor, where=filters
        )
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if rows else None
        next_cursor = (last.created_at, last.id) if more and last is not None else None
        return ExecutionPage(rows, next_cursor)

    @typing.overload
    async def start(
        self,
        workflow: WorkflowDefinition[Any, R],
        input: Any = None,
        *,
        id: uuid.UUID | str | None = None,
        idempotency_key: str = "",
        meta: dict[str, str] | None = None,
        version: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue] | None = None,
    ) -> WorkflowHandle[R]: ...

    @typing.overload
    async def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: uuid.UUID | str | None = None,
        idempotency_key: str = "",
        meta: dict[str, str] | None = None,
        version: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue] | None = None,
    ) -> WorkflowHandle[Any]: ...

    async def start(
        self,
        workflow: WorkflowDefinition[Any, R] | str,
        input: Any = None,
        *,
        id: uuid.UUID | str | None = None,
        idempotency_key: str = "",
        meta: dict[str, str] | None = None,
        version: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue] | None = None,
    ) -> WorkflowHandle[Any]:
        """Start an execution (or return the live one holding ``idempotency_key``).

        A start whose ``id`` or live ``idempotency_key`` (scoped to the workflow
        name) matches an existing execution returns that execution's handle
        (``handle.started`` is False) when the workflow and the input are the
        same. A finished execution frees its key: a later start runs anew.

        Args:
            workflow: a ``@workflow`` definition, or a registered workflow's name
                (a process without the code: ``input`` is then encoded as given,
                and ``handle.result()`` returns plain JSON values).
            input: the workflow's input (JSON-encodable).
            id: the execution id, a UUID or its str (default: a new UUID).
            idempotency_key: business key; a live execution holding it is reused.
            meta: string annotations kept with the execution.
            version: workflow version to record (default: the definition's; "" for a name).
            task_queue: the task queue of the execution: only workers serving it
                run its workflow tasks; its activities and children go there
                too unless their options say otherwise (docs/flow-control.md).
            priority: the lease priority of its workflow tasks (higher first,
                aged by waiting: one unit is a minute's head start, within
                ±10,000); its activities and children take it unless their
                options say otherwise.
            execution_timeout: the longest the execution may take from now,
                across continue-as-new runs (None: no limit).
            run_timeout: the longest each run may take from its start (None:
                no limit). When either elapses the engine ends the execution
                ``failed`` and ``result()`` raises :class:`WorkflowTimeoutError`
                (docs/flow-control.md).
            search_attributes: search attributes to start with (name -> str,
                int, float, bool or timezone-aware datetime); the code can
                change them with ``ctx.upsert_search_attributes``.

        Raises:
            TypeError: ``workflow`` is neither a definition nor a name;
                ``idempotency_key`` or ``task_queue`` is not a str; ``id`` is
                neither a UUID nor a str.
            ValueError: an empty name; a name, key or meta entry the store
                refuses (NUL, not valid UTF-8, over 255 characters for a name);
                an ``id`` str that is not a UUID; a priority out of range.
                Nothing is written.
            IdempotencyConflictError: same id/key, different workflow or input.
            PayloadEncodeError: the input is not JSON-encodable (NaN/±Inf,
                nesting over ~1000 levels, lone surrogate, unsupported type).
            PayloadError: (a definition) the input does not decode to the
                workflow's declared input type; nothing is created.
            SearchAttributeError: a search attribute of a bad name or value
                (also a ``ValueError``); nothing is written.
            StoreUnavailableError: the database cannot be reached; retry with
                the same ``id`` or ``idempotency_key``.
            SchemaNotMigratedError: the store's schema has no azync_flow tables.
        """
        name, encode, version = _workflow_target(workflow, version, "start")
        run_id = uuid.uuid4() if id is None else check_id(id, "id")
        check_text(idempotency_key, "idempotency_key")
        data = encode(input)
        check_timeout(execution_timeout, "execution_timeout")
        check_timeout(run_timeout, "run_timeout")
        params = WorkflowStartParams(
            id=run_id,
            name=name,
            input=data,
            version=version,
            business_idempotency_key=idempotency_key,
            task_queue=check_task_queue(task_queue),
            priority=check_priority(priority),
            meta=meta or {},
            execution_timeout=execution_timeout,
            run_timeout=run_timeout,
            search_attributes=check_search_attributes(search_attributes or {}),
        )
        # The run's trace: the run span is reserved in the caller's trace (exported
        # when the run ends); its context is stored with the execution (a
        # deduplicated start keeps the stored one).
        carrier = self.tracer.start_run_span(RunKind.WORKFLOW, name, run_id)
        local = local_workflows(self.worker)
        if (
            local is not None
            and id is None
            and not idempotency_key
            and not params.search_attributes
            and local.accepts(name, params.task_queue)
        ):
            started = await local.start(params, carrier)
            inserted, wid = started.inserted, started.id
        else:
            inserted, wid = await self.store.start_workflow(params, trace_context=carrier)
        if not inserted:
            existing = await self.store.get_workflow_execution(wid)
            check_same_start(wid, existing.name, existing.input, params)
        definition = workflow if isinstance(workflow, WorkflowDefinition) else None
        return self._handle_class(self, wid, definition, started=inserted)

    @typing.overload
    async def start_many(
        self,
        workflow: WorkflowDefinition[Any, R],
        inputs: Sequence[Any],
        *,
        ids: Sequence[uuid.UUID | str] | None = None,
        idempotency_keys: Sequence[str] | None = None,
        meta: dict[str, str] | None = None,
        version: str | None = None,
        conn: asyncpg.Connection | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue] | None = None,
    ) -> builtins.list[WorkflowHandle[R]]: ...

    @typing.overload
    async def start_many(
        self,
        workflow: str,
        inputs: Sequence[Any],
        *,
        ids: Sequence[uuid.UUID | str] | None = None,
        idempotency_keys: Sequence[str] | None = None,
        meta: dict[str, str] | None = None,
        version: str | None = None,
        conn: asyncpg.Connection | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue] | None = None,
    ) -> builtins.list[WorkflowHandle[Any]]: ...

    async def start_many(
        self,
        workflow: WorkflowDefinition[Any, R] | str,
        inputs: Sequence[Any],
        *,
        ids: Sequence[uuid.UUID | str] | None = None,
        idempotency_keys: Sequence[str] | None = None,
        meta: dict[str, str] | None = None,
        version: str | None = None,
        conn: asyncpg.Connection | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        priority: int = 0,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        search_attributes: Mapping[str, SearchValue]
        | Sequence[Mapping[str, SearchValue]]
        | None = None,
    ) -> builtins.list[WorkflowHandle[Any]]:
        """Start many executions of one workflow in one transaction: each as
        :meth:`start` would, in order.

        An item whose ``id`` or live ``idempotency_key`` an execution (or an
        earlier item of this batch) holds starts nothing and gets that
        execution's handle (``handle.started`` False). Every input is encoded
        and every item checked before anything is written; an error writes
        nothing. The starts always take the plain path (a worker of this
        client does not run their first pass inline).

        Args:
            workflow: a ``@workflow`` definition or a registered workflow's name.
            inputs: one input per execution (JSON-encodable).
            ids: one execution id per input (default: new UUIDs).
            idempotency_keys: one business key per input ('' for none).
            meta: string annotations kept with every execution.
            version: workflow version to record (default: the definition's; "" for a name).
            conn: the caller's asyncpg connection inside an open transaction:
                the executions exist if and only if it commits. Without it the
                batch commits on its own.
            task_queue: the task queue of every execution (see :meth:`start`).
            priority: the priority of every execution (see :meth:`start`).
            execution_timeout: every execution's execution timeout (see :meth:`start`).
            run_timeout: every execution's run timeout (see :meth:`start`).
            search_attributes: search attributes of every execution (a
                mapping), or one mapping per input (see :meth:`start`).

        Returns:
            One handle per input, in order.

        Raises:
            TypeError: ``workflow`` is neither a definition nor a name; ``conn``
                is not an asyncpg connection; an id is neither a UUID nor a
                str, a key not a str.
            ValueError: ``ids`` or ``idempotency_keys`` is not one per input; a
                name, key or meta entry the store refuses; an id str that is
                not a UUID; ``conn`` has no open transaction.
            IdempotencyConflictError: an id/key is held by an execution of
                another workflow or input (nothing started).
            PayloadEncodeError: an input is not JSON-encodable.
            PayloadError: (a definition) an input does not decode to the
                workflow's declared input type.
            SearchAttributeError: a search attribute of a bad name or value,
                or not one mapping per input (also a ``ValueError``).
        """
        _check_lengths(len(inputs), ids=ids, idempotency_keys=idempotency_keys)
        per_item = _search_per_item(search_attributes, len(inputs))
        name, encode, version = _workflow_target(workflow, version, "start_many")
        queue = check_task_queue(task_queue)
        check_priority(priority)
        check_timeout(execution_timeout, "execution_timeout")
        check_timeout(run_timeout, "run_timeout")
        params = [
            WorkflowStartParams(
                id=check_id(ids[i], f"ids[{i}]") if ids is not None else uuid.uuid4(),
                name=name,
                input=encode(value),
                version=version,
                business_idempotency_key=check_text(idempotency_keys[i], f"idempotency_keys[{i}]")
                if idempotency_keys
                else "",
                task_queue=queue,
                priority=priority,
                meta=meta or {},
                execution_timeout=execution_timeout,
                run_timeout=run_timeout,
                search_attributes=per_item[i],
            )
            for i, value in enumerate(inputs)
        ]
        carriers = [self.tracer.start_run_span(RunKind.WORKFLOW, name, p.id) for p in params]
        if conn is None:
            started = await self.store.start_workflows(params, trace_contexts=carriers)
        else:
            check_transaction(conn, "start_many")
            started = await self.store.start_workflows_tx(conn, params, trace_contexts=carriers)
        definition = workflow if isinstance(workflow, WorkflowDefinition) else None
        return [
            self._handle_class(self, wid, definition, started=inserted) for inserted, wid in started
        ]

    async def list_limits(self) -> builtins.list[LimitUsage]:
        """Every stored limit (docs/flow-control.md#limits): its definition, the
        kinds and task queues it applies to, how many jobs hold it now (a rate
        limit: starts in the last period) and how many due jobs of its kinds
        and task queues wait, by name."""
        return await self.store.list_limits()

    async def set_task_queue_limit(self, task_queue: str, limit: ConcurrencyLimit | None) -> None:
        """Make ``limit`` the limit of everything in flight on ``task_queue``
        across every worker (docs/flow-control.md#task-queue-limits): queue
        jobs and activities routed there, whatever their kind. None removes it.

        Args:
            task_queue: the task queue's name.
            limit: a global concurrency limit, or None (unlimited).

        Raises:
            TypeError: ``limit`` is neither a ConcurrencyLimit nor None.
            ValueError: a bad task queue name; a per-key limit.
        """
        if limit is not None and not isinstance(limit, ConcurrencyLimit):
            raise TypeError(f"limit must be a ConcurrencyLimit or None, got {limit!r}")
        await self.store.declare_task_queue_limit(
            task_queue, limit.spec() if limit is not None else None
        )

    async def list_uncertain(
        self, workflow_id: uuid.UUID | str | None = None, limit: int = 100
    ) -> builtins.list[UncertainOperationView]:
        """Operations waiting for a decision (oldest first), optionally of one
        execution: workflow, activity, input, since when and why (docs/uncertain.md).

        Raises:
            TypeError, ValueError: ``workflow_id`` is neither a UUID nor its str.
        """
        if workflow_id is not None:
            workflow_id = check_id(workflow_id, "workflow_id")
        ops = await self.store.list_uncertain_operations(limit=limit, workflow_id=workflow_id)
        return [UncertainOperationView.from_store(op) for op in ops]

    async def list_stalled(
        self, older_than: timedelta = timedelta(0), limit: int = 100
    ) -> builtins.list[StalledWorkflow]:
        """Running executions with nothing pending, oldest change first: no live
        workflow task or operation, no unfired timer, and not waiting on a
        signal (or waiting on one that is already buffered). Such a run will
        not move on its own — its task or operation was lost — so it is listed
        here instead of waiting silently; the leader's ``repair_stalled`` step
        gives each a workflow task once it is ``stalled_after`` old.

        Args:
            older_than: only executions unchanged for at least this long.
            limit: most executions returned (>= 1).

        Returns:
            ``StalledWorkflow`` rows (``id``, ``name``, ``updated_at``).

        Raises:
            ValueError: ``limit`` < 1 or ``older_than`` negative.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        return await self.store.list_stalled_workflows(older_than, limit)

    async def resolve_uncertain(
        self,
        operation_id: Any,
        decision: str,
        result: Any = None,
        error: str | None = None,
        note: str | None = None,
        decided_by: str | None = None,
    ) -> None:
        """Decide an uncertain operation, audited, in one transaction with the
        execution's resume and its next workflow task (docs/uncertain.md).

        Args:
            operation_id: the operation id (UUID or its string), or an item of
                :meth:`list_uncertain`.
            decision: ``complete`` (the workflow gets ``result`` as if the
                activity returned it), ``fail`` (the workflow sees ``ActivityError``
                of type ``Uncertain`` with ``error``) or ``retry`` (run it again;
                the uncertain attempt stays recorded).
            note: why; kept in history (``OperationResolved``) and on the operation.
            decided_by: who (default: ``user@host`` of this process).

        Raises:
            ValueError: unknown decision or malformed id.
            DecisionError: a complete decision's ``result`` does not fit the
                activity's result type recorded with the operation (also a
                ValueError); nothing changed.
            NotFoundError: no such operation, or it is not uncertain; nothing changed.
            ConflictError: already resolved (e.g. by a concurrent resolver); nothing changed.
        """
        op_id = getattr(operation_id, "operation_id", operation_id)
        resolved_op = await resolve_operation(
            self.store,
            op_id,
            decision,
            result=result,
            error=error,
            note=note,
            decided_by=decided_by,
        )
        await self._uncertain_resolved_event(resolved_op, decision)

    async def _uncertain_resolved_event(self, decided: Decided, decision: str) -> None:
        """Record the decision as an ``uncertain.resolved`` run event on the run's trace."""
        self.tracer.run_event(
            await self.store.workflow_trace_context(decided.workflow_id),
            RunEvent.UNCERTAIN_RESOLVED,
            run_id=decided.workflow_id,
            subject=decided.activity,
            attributes={"azync.resolution": decision},
        )

    def get_handle(
        self,
        id: uuid.UUID | str,
        workflow: WorkflowDefinition[Any, R] | None = None,
    ) -> WorkflowHandle[R]:
        """A handle on an existing execution (no I/O).

        Args:
            id: the execution id, a UUID or its str.
            workflow: its definition (typed results), if at hand.

        Raises:
            TypeError: ``id`` is neither a UUID nor a str.
            ValueError: ``id`` is a str that is not a UUID.
        """
        return self._handle_class(self, check_id(id, "id"), workflow, started=False)


#: Longest operator note :meth:`WorkflowHandle.annotate` takes, in characters.
MAX_NOTE_LENGTH = 4096


class WorkflowHandle(Generic[R]):
    """Addresses one execution.

    Attributes:
        id: the execution id.
        started: True when this handle's ``start`` created the execution.
    """

    def __init__(
        self,
        client: Client,
        id: uuid.UUID,
        workflow: WorkflowDefinition[Any, R] | None,
        *,
        started: bool,
    ) -> None:
        self.client = client
        self.id = id
        self.workflow = workflow
        self.started = started

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.id}>"

    async def signal(self, name: str, payload: Any = None, *, message_id: str = "") -> bool:
        """Send signal ``name``; buffered until a ``ctx.wait_signal(name)`` takes it.

        An accepted signal is either consumed by a ``wait_signal`` (a
        ``SignalReceived`` event) or, when the execution finishes first, recorded
        as undelivered with the completion (``SignalsUndelivered`` event,
        ``describe().signals_undelivered``); it is never dropped silently.

        Returns:
            True when accepted, False when ``message_id`` was already accepted
            (the duplicate is dropped; a retried send gets this same answer).

        Raises:
            NotFoundError: no such execution, or it finished (the message says
                "finished"; a send racing the completion gets this too).
            ValueError: ``name`` or ``message_id`` contains NUL or is not valid
                UTF-8, ``name`` is over 255 characters or starts with the
                reserved ``$update:`` prefix (update requests use it).
            PayloadEncodeError: ``payload`` is not JSON-encodable.
        """
        check_signal_name(name)
        data = encode_value(payload, f"payload of signal {name!r}")
        accepted = await self.client.store.signal_workflow(
            SignalParams(workflow_id=self.id, name=name, payload=data, message_id=message_id)
        )
        local = local_workflows(self.client.worker)
        if accepted and local is not None:
            local.wake_tasks()  # no NOTIFY hop for a worker of this process
        return accepted

    async def cancel(self) -> None:
        """Cancel the execution.

        A running execution sees ``asyncio.CancelledError`` at its current
        await and may clean up (durably) before it ends. A suspended one cannot
        run code: it is settled cancelled at once, without cleanup code, and its
        uncertain operations are cancelled with it (docs/workflows.md); this
        call then exports the run's span.

        Raises:
            NotFoundError: the execution is missing or already finished.
        """
        state = await self.client.store.cancel_workflow_execution(self.id)
        if state == WorkflowState.CANCELLED:  # ended by this call: its commit won
            await self._end_run_span()

    async def terminate(self, reason: str, *, terminated_by: str | None = None) -> None:
        """End the execution now, whatever it is doing, without running its code.

        For a run that cannot finish by itself (no worker registers its
        workflow, it waits for something that will never come); ``cancel`` is
        the cooperative verb that lets the code clean up. In one transaction:
        the execution becomes ``terminated``, a ``WorkflowTerminated`` event
        (``reason``, ``terminated_by``) ends its history, its pending and
        in-flight operations, its workflow task and its timers are cancelled
        (a worker still running one has its late commit or completion
        refused), an ``azync.workflow.terminated`` ledger event is published
        and ``result()`` waiters get :class:`WorkflowTerminatedError`.
        Works on running (even mid-pass) and suspended executions.

        Args:
            reason: why; recorded in history, on the execution and the ledger
                (NUL and lone surrogates are recorded escaped, like every reason).
            terminated_by: who (default: ``user@host`` of this process).

        Raises:
            ValueError: ``reason`` is empty or only whitespace; nothing changed.
            NotFoundError: the execution is missing or already finished
                (succeeded, failed, cancelled or terminated); nothing changed.
            ConflictError: workers kept its jobs busy for about 5 s (it backs
                off and retries meanwhile); nothing changed, call it again.
        """
        # free text, escaped like every recorded reason (NUL, lone surrogates)
        reason = clean_text(check_reason(reason))
        who = clean_text(terminated_by or default_decider())
        event = encode_event(WorkflowTerminated(reason=reason, terminated_by=who))
        done = await retry_transient(
            lambda: self.client.store.terminate_workflow(self.id, reason, who, event)
        )
        self.client.tracer.run_event(
            done.trace_context,
            RunEvent.TERMINATED,
            run_id=self.id,
            attributes={"azync.terminated_by": who, "azync.reason": reason[:1024]},
        )
        # This call's commit ended the run: it exports the run span (after the event).
        await self._end_run_span()

    async def annotate(self, message: str, *, noted_by: str | None = None) -> int:
        """Append an operator's note to the execution's history.

        The note is an ``OperatorNote`` event (``message``, ``noted_by``) at
        the history's next seq; ``history()`` and ``azync-flow workflows
        history`` show it in place. Replay skips it, so the execution runs on
        exactly as without it; a pass running meanwhile is replayed again
        with the note in its history (no seq is used twice). Works on live
        and finished executions; it wakes nothing.

        Args:
            message: the note, 1 to 4096 characters (NUL and lone surrogates
                are recorded escaped, like every reason).
            noted_by: who (default: ``user@host`` of this process).

        Returns:
            The note's seq in the history.

        Raises:
            NotFoundError: no execution has this id; nothing written.
            ValueError: ``message`` is empty or longer than 4096 characters.
            TypeError: ``message`` or ``noted_by`` is not a str.
        """
        if not isinstance(message, str):
            raise TypeError(f"message must be a str, got {type(message).__name__}")
        if not message or len(message) > MAX_NOTE_LENGTH:
            raise ValueError(
                f"message must be 1 to {MAX_NOTE_LENGTH} characters, got {len(message)}"
            )
        if noted_by is not None and not isinstance(noted_by, str):
            raise TypeError(f"noted_by must be a str, got {type(noted_by).__name__}")
        note = OperatorNote(
            message=clean_text(message), noted_by=clean_text(noted_by or default_decider())
        )
        type_name, payload = encode_event(note)
        return await self.client.store.append_history(self.id, type_name, payload)

    async def reset(
        self,
        to_seq: int | None = None,
        *,
        reason: str,
        to: ResetTarget | None = None,
    ) -> ResetResult:
        """Start a new run of this execution from a point of its current run's
        history, with the code the workers run now (Temporal's reset).

        The new run (``run_no + 1``, same execution id) keeps events
        ``1..point`` of the current run and continues from there: its first
        pass replays them, so activities completed in the kept events are not
        run again (their results come from history), and the code decides what
        happens next. Activities the kept events schedule without their
        outcome run again; timers they start without firing are started again
        with their original deadlines. Signals the old run consumed after the
        point are delivered again, in their original order, when the new run
        waits for them (each signal is consumed once per run). The old run
        stays, with its whole history, as an earlier run marked ``reset``
        (``runs()``, ``history(run_no=...)``); if it was still running it ends
        there (its workflow task and operations are cancelled, a worker still
        holding one writes nothing). Works whatever the state (running,
        suspended, failed, succeeded, cancelled, terminated).

        Args:
            to_seq: keep events ``1..to_seq`` of the current run (0: none; a
                seq past the run's end is moved back before it).
            reason: why (kept with the old run and shown by ``describe``).
            to: a named point instead of ``to_seq``: ``"first_failure"`` keeps
                the events before the first failure (an activity or child that
                failed, or the code raising), ``"last_task"`` drops what the
                last workflow task wrote so the code runs it again.

        Returns:
            A :class:`~azync_flow.store.workflows.ResetResult`: the new run,
            the seq kept, the activities enqueued again and the signals
            buffered again.

        Raises:
            NotFoundError: the execution does not exist.
            ValueError: ``reason`` is empty or only whitespace, no point or
                two, a ``to_seq`` outside the history, no
                failure to reset before, or a point that keeps a child start
                without its outcome (the child reports to the run that started
                it); nothing changed.
            ConflictError: the history kept moving while this planned, workers
                kept its jobs busy, or another live execution holds its
                idempotency key; nothing changed.
        """
        check_reason(reason)
        check_text(reason, "reason")
        last: ConflictError | None = None
        for _ in range(5):
            try:
                return await retry_transient(lambda: self._reset_once(to_seq, to, reason))
            except ConflictError as exc:  # the history moved on: plan again
                last = exc
        assert last is not None
        raise last

    async def _reset_once(
        self, to_seq: int | None, to: ResetTarget | None, reason: str
    ) -> ResetResult:
        """Plan a reset from the history as read now and carry it out."""
        store = self.client.store
        await store.get_workflow_execution(self.id)  # NotFoundError if none
        entries = to_entries(await store.list_history(self.id))
        plan = plan_reset(entries, reset_point(entries, to_seq=to_seq, to=to))
        return await store.reset_workflow(
            self.id,
            expected_next_seq=entries[-1].seq + 1 if entries else 1,
            keep=plan.keep,
            new_run_id=uuid.uuid4(),
            reason=reason,
            rerun_seqs=plan.rerun_activities,
            open_timer_seqs=plan.open_timers,
        )

    async def complete(self, result: Any, *, reason: str, closed_by: str | None = None) -> None:
        """Close the execution as ``succeeded`` with ``result``, without running
        its code (an operator's hand: the outcome was reached another way).

        In one transaction a ``WorkflowClosedByOperator`` event (outcome,
        result, ``reason``, ``closed_by``) ends its history, its workflow task,
        operations and timers are cancelled (a worker still running one writes
        nothing), and ``result()`` returns ``result``. Works on running and
        suspended executions.

        Args:
            result: the execution's result (any JSON-encodable value).
            reason: why (non-empty; recorded in history).
            closed_by: who (default: ``user@host`` of this process).

        Raises:
            ValueError: ``reason`` is empty or contains NUL; nothing changed.
            PayloadEncodeError: ``result`` is not JSON-encodable.
            NotFoundError: the execution is missing or already finished.
            ConflictError: workers kept its jobs busy for about 5 s; call again.
        """
        data = encode_value(result, "workflow result")
        await self._close("succeeded", data, reason, closed_by)

    async def fail(self, reason: str, *, closed_by: str | None = None) -> None:
        """Close the execution as ``failed``, without running its code; as
        :meth:`complete`, and ``result()`` raises :class:`WorkflowFailedError`
        whose message is ``failed by <closed_by>: <reason>``.

        Raises:
            ValueError: ``reason`` is empty or contains NUL; nothing changed.
            NotFoundError: the execution is missing or already finished.
            ConflictError: workers kept its jobs busy for about 5 s; call again.
        """
        await self._close("failed", None, reason, closed_by)

    async def _close(
        self, outcome: str, result: bytes | None, reason: str, closed_by: str | None
    ) -> None:
        check_reason(reason)
        check_text(reason, "reason")
        who = clean_text(closed_by or default_decider())
        event = encode_event(
            WorkflowClosedByOperator(
                outcome=outcome,
                result=msgspec.Raw(b"null" if result is None else result),
                reason=clean_text(reason),
                closed_by=who,
            )
        )
        store = self.client.store
        if result is not None:
            await retry_transient(lambda: store.complete_workflow(self.id, result, who, event))
        else:
            await retry_transient(lambda: store.fail_workflow(self.id, reason, who, event))
        await self._end_run_span()

    async def suspend(self, reason: str) -> None:
        """Pause a running execution (an operator's hold): it becomes
        ``suspended`` and runs no workflow code until :meth:`resume`.

        Signals sent meanwhile are kept, and activities already running and
        timers firing record their outcome; the code sees all of it once
        resumed. ``describe().suspend_reason`` reads ``suspended by an
        operator: <reason>``.

        Args:
            reason: why (non-empty).

        Raises:
            ValueError: ``reason`` is empty or contains NUL; nothing changed.
            NotFoundError: the execution is missing, finished or already
                suspended; nothing changed.
            ConflictError: a worker kept running a pass of it for about 5 s (it
                backs off and retries meanwhile); nothing changed, call again.
        """
        pause, deadline = 0.02, time.monotonic() + 5.0
        while True:
            try:
                return await retry_transient(
                    lambda: self.client.store.suspend_workflow(self.id, reason)
                )
            except ConflictError:  # a pass runs now: it ends within its lease
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)

    async def resume(self) -> None:
        """Resume a suspended execution (after fixing non-deterministic code, or
        one an operator suspended); a workflow task runs its code again.

        Raises:
            NotFoundError: the execution is missing or not suspended.
            ConflictError: an operation of it is still uncertain (resolve it).
        """
        await self.client.store.resume_workflow(self.id)

    async def describe(self) -> WorkflowExecutionView:
        """The execution row: state, result, failure reason, timestamps, and
        ``blocked_reason`` when a running execution's workflow task keeps
        failing (e.g. ``UnknownWorkflowError: no worker has registered workflow
        'x' (after 4 workflow task attempts)``); its current run (``run_id``,
        ``run_no``), its parent (``parent_id``) when it is a child, and the
        size of the current run's history (``history_events``,
        ``history_bytes``) with ``history_limit_exceeded`` set past the
        client's :class:`~azync_flow.workflow.HistoryLimit`.

        Raises:
            NotFoundError: no such execution.
        """
        store = self.client.store
        view = await self._row()
        events, size = await store.workflow_history_size(self.id)
        view.history_events, view.history_bytes = events, size
        view.history_limit_exceeded = self.client.history_limit.exceeded(events, size)
        return view

    async def runs(self) -> list[WorkflowRunView]:
        """The run chain of the execution (``continue_as_new``), oldest first;
        the last entry is the current (or final) run.

        Raises:
            NotFoundError: no such execution.
        """
        store = self.client.store
        runs: list[WorkflowRunView] = await store.list_workflow_runs(self.id)
        return runs

    async def history(self, run_no: int | None = None) -> list[HistoryEntry]:
        """The decoded history of the current run (or of earlier run ``run_no``,
        see :meth:`runs`), in seq order.

        Raises:
            NotFoundError: ``run_no`` names no earlier run.
        """
        store = self.client.store
        if run_no is not None and run_no != (await self._row()).run_no:
            return to_entries(await store.list_run_history(self.id, run_no))
        return to_entries(await store.list_history(self.id))

    async def recorded_history(self, run_no: int | None = None) -> RecordedHistory:
        """The history of the current run (or of earlier run ``run_no``) in the
        Replayer's portable form (``.to_json()`` to save it), with the version
        the execution recorded, which the replay shows as ``ctx.info.version``.

        Raises:
            NotFoundError: no such execution, or ``run_no`` names no run of it.
        """
        view = await self._row()
        if run_no is None or run_no == view.run_no:
            rows = await self.client.store.list_history(self.id)
            run_id, data = view.run_id, view.input
        else:
            store = self.client.store
            rows = await store.list_run_history(self.id, run_no)
            run = next(r for r in await self.runs() if r.run_no == run_no)
            run_id, data = run.run_id, run.input
        recorded = RecordedHistory.from_rows(view.name, data, rows, self.id)
        recorded.version = view.version
        if run_id is not None and run_id != self.id:
            recorded.run_id = run_id
        return recorded

    async def result(self, timeout: timedelta | float | None = None) -> R:  # noqa: ASYNC109
        """Wait for the execution to finish and return its result.

        Waits on change wake-ups: a terminal transition commits a
        ``NOTIFY 'workflow.done:<id>'`` that the client's shared LISTEN
        connection turns into a wake-up of this waiter. The row is re-read
        every ``fallback_poll`` seconds in case a notification was lost (and
        with a growing pause up to ``poll_interval`` when the store cannot listen).

        A **suspended** execution is not finished: ``result()`` keeps waiting
        through a suspension (a reconcile hook or operator may resolve its
        uncertain operation, or a fixed deploy resume it, and then it finishes).
        Pass a ``timeout`` (and check ``describe().state``) to notice a stuck
        run; ``cancel()`` ends a suspended run at once.

        Raises:
            WorkflowFailedError: the workflow raised.
            WorkflowCancelledError: it was cancelled.
            WorkflowTerminatedError: it was terminated (``terminate``).
            TimeoutError: ``timeout`` elapsed first (the execution keeps running;
                the message names its state, e.g. ``suspended``).
            ValueError: ``timeout`` is negative.
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if seconds is not None and seconds < 0:
            raise ValueError(f"timeout must not be negative, got {timeout!r}")
        deadline = None if seconds is None else time.monotonic() + seconds
        view = await self._row()
        if view.state in TERMINAL_STATES:
            return self._outcome(view)

        async def finished() -> WorkflowExecutionView | None:
            nonlocal view
            view = await self._row()
            return view if view.state in TERMINAL_STATES else None

        done = await self.client._waits.wait_for(self.id, finished, deadline)
        if done is None:
            raise TimeoutError(f"workflow {self.id} still {view.state} after {seconds}s")
        return self._outcome(done)

    async def query(
        self,
        name: str,
        *args: Any,
        timeout: timedelta | float = DEFAULT_QUERY_TIMEOUT,  # noqa: ASYNC109 - part of the API
        type: Any = Any,
    ) -> Any:
        """Ask the execution a question: call its query handler ``name`` (registered
        with ``@ctx.query``) with ``args`` and return the result.

        A worker that registers the workflow answers from the state after the
        execution's whole recorded history (its cached instance, or a full
        replay; finished executions are answered too). Nothing is written to
        history and the execution does not move.

        Args:
            name: the query name.
            *args: JSON-encodable arguments, decoded to the handler's annotations.
            timeout: how long to wait for a worker's answer (``timedelta`` or seconds).
            type: decode the result to this type.

        Returns:
            The handler's result.

        Raises:
            QueryTimeoutError: no worker answered within ``timeout`` (none runs
                that registers the workflow, or all were busy).
            QueryNotFoundError: the workflow has no query handler ``name``.
            QueryFailedError: the handler raised (``ReadOnlyContextError`` when it
                issued a command), or the history could not be replayed.
            NotFoundError: no such execution.
            PayloadEncodeError: an argument is not JSON-encodable.
            ValueError: ``timeout`` is not positive, or ``name`` is empty or too long.
        """
        client = self.client
        return await query_workflow(
            client.store,
            client._waits,
            client.worker,
            self.id,
            name,
            args,
            timeout=timeout,
            type=type,
        )

    async def update(
        self,
        name: str,
        *args: Any,
        update_id: str | None = None,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 - part of the API
        type: Any = Any,
    ) -> Any:
        """Send update ``name`` (a handler registered with ``@ctx.update``) and
        wait for its result.

        The next workflow task runs the handler's validator; a rejection is not
        recorded. An accepted update is recorded in history (``UpdateAccepted``,
        then ``UpdateCompleted`` with its result or error) and its handler
        runs as workflow code, surviving worker crashes. Calls with the same
        ``update_id`` (retries, concurrent duplicates) run the handler once
        and all get its outcome, also after the execution finished.

        Args:
            name: the update name.
            *args: JSON-encodable arguments, decoded to the handler's annotations.
            update_id: deduplication key (default: a new random id); at most
                255 characters.
            timeout: how long to wait for the outcome (None: as long as it takes).
            type: decode the result to this type.

        Returns:
            The handler's result.

        Raises:
            UpdateRejectedError: the validator raised, the workflow has no
                handler ``name`` (``UnknownUpdate``), ``update_id`` belongs to
                another update, or the execution is not running
                (``WorkflowNotRunning``). Nothing was recorded.
            UpdateFailedError: the handler raised, or the execution ended
                (``WorkflowFinished``) before the handler returned.
            TimeoutError: ``timeout`` elapsed first; the update goes on (call
                again with the same ``update_id`` to get its outcome).
            NotFoundError: no such execution.
            PayloadEncodeError: an argument is not JSON-encodable.
            ValueError: ``name`` or ``update_id`` is empty or too long.
        """
        client = self.client
        return await update_workflow(
            client.store,
            client._waits,
            client.worker,
            self.id,
            name,
            args,
            update_id=update_id,
            timeout=timeout,
            type=type,
        )

    async def _end_run_span(self) -> None:
        """Export the run span of the execution this handle's verb just ended
        (no pass did: a cancel of a suspended run, a terminate). Never raises
        for telemetry; nothing is exported once the execution was vacuumed."""
        store = self.client.store
        try:
            view = await store.get_workflow_execution(self.id)
            carrier = await store.workflow_trace_context(self.id)
        except NotFoundError:
            return
        end_finished_run(
            self.client.tracer,
            RunKind.WORKFLOW,
            view.name,
            view.id,
            carrier,
            view.created_at,
            view.state,
            view.failure_reason,
        )

    async def _row(self) -> WorkflowExecutionView:
        """The execution row alone (``result`` re-reads it; a continued execution's
        row is its final run's)."""
        view: WorkflowExecutionView = await self.client.store.get_workflow_execution(self.id)
        return view

    def _outcome(self, view: WorkflowExecutionView) -> R:
        if view.state == WorkflowState.SUCCEEDED:
            result_type = self.workflow.result_type if self.workflow else Any
            value = decode_value(view.result or b"null", result_type, "workflow result")
            return typing.cast(R, value)
        if view.state == WorkflowState.FAILED:
            error_type, sep, message = view.failure_reason.partition(": ")
            if not (sep and error_type.isidentifier()):  # a reason set by an operator
                error_type, message = "", view.failure_reason
            timed_out = _timeout_of(error_type, message)
            if timed_out is not None:
                raise WorkflowTimeoutError(self.id, *timed_out)
            raise WorkflowFailedError(self.id, error_type, message)
        if view.state == WorkflowState.TERMINATED:
            raise WorkflowTerminatedError(self.id, view.failure_reason)
        raise WorkflowCancelledError(self.id, view.failure_reason)


def _job_params(
    kind: str,
    payload: Any,
    id: uuid.UUID | str | None,
    meta: dict[str, str],
    options: dict[str, Any],
    idempotency_key: str | None = None,
    at: str = "",
) -> EnqueueParams:
    """The ``EnqueueParams`` of one job of :meth:`Client.enqueue` and
    :meth:`Client.enqueue_many` (``meta`` already carries the trace context):
    the payload meets the one encoder, the kind, id and key the one
    identifier check (``at`` names the item of a batch in errors).

    Raises:
        TypeError, ValueError: a bad kind, id or key (see :meth:`Client.enqueue`).
    """
    check_name(kind, "kind")
    if idempotency_key is not None:
        options = {**options, "idempotency_key": idempotency_key}
    if "idempotency_key" in options:
        check_text(options["idempotency_key"], f"idempotency_key{at}")
    return EnqueueParams(
        id=uuid.uuid4() if id is None else check_id(id, f"id{at}"),
        kind=kind,
        payload=encode_value(payload, f"payload of job {kind!r}"),
        meta=meta,
        **options,
    )


def _workflow_target(
    workflow: Any, version: str | None, verb: str
) -> tuple[str, Callable[[Any], bytes], str]:
    """``(name, input encoder, version)`` of what :meth:`Client.start` or
    :meth:`Client.start_many` starts.

    Raises:
        TypeError: ``workflow`` is neither a definition nor a name.
    """
    if isinstance(workflow, WorkflowDefinition):
        return (
            workflow.name,
            workflow.encode_input,
            workflow.version if version is None else version,
        )
    if isinstance(workflow, str):
        check_name(workflow, "workflow name")
        what = f"input of workflow {workflow!r}"
        return workflow, lambda value: encode_value(value, what), version or ""
    hint = "; decorate it with @workflow" if callable(workflow) else ""
    raise TypeError(
        f"Client.{verb} takes a @workflow definition or a workflow name (str), "
        f"got {type(workflow).__name__} {workflow!r}{hint}"
    )


def _search_per_item(
    given: Mapping[str, SearchValue] | Sequence[Mapping[str, SearchValue]] | None, n: int
) -> builtins.list[dict[str, SearchValue]]:
    """``start_many``'s search attributes, one checked dict per item."""
    if given is None:
        return [{} for _ in range(n)]
    if isinstance(given, Mapping):
        shared = check_search_attributes(given)
        return [dict(shared) for _ in range(n)]
    if isinstance(given, str | bytes) or len(given) != n:
        raise SearchAttributeError(
            f"search_attributes must be one mapping, or one mapping per input ({n})"
        )
    return [check_search_attributes(m) for m in given]


def _check_lengths(n: int, **per_item: Sequence[Any] | None) -> None:
    """Each given per-item sequence must have one entry per item.

    Raises:
        ValueError: one does not.
    """
    for field, values in per_item.items():
        if values is not None and len(values) != n:
            raise ValueError(f"{field} has {len(values)} entries for {n} items")


_TIMEOUT_MESSAGE = re.compile(r"^(execution|run) timeout of ([0-9.e+-]+)s elapsed$")


def _timeout_of(error_type: str, message: str) -> tuple[str, float] | None:
    """``(kind, seconds)`` of a failure a workflow timeout caused, else None."""
    if error_type != "WorkflowTimeoutError":
        return None
    found = _TIMEOUT_MESSAGE.match(message)
    return None if found is None else (found.group(1), float(found.group(2)))
