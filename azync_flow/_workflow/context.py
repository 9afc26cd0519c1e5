"""``WorkflowContext``: the deterministic stand-ins workflow code uses."""

from __future__ import annotations

import asyncio
import logging
import typing
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

from azync_flow._workflow.children import (
    ChildHandle,
    ChildOptions,
    ChildWorkflow,
    ParentClosePolicy,
)
from azync_flow._workflow.handlers import query_handler, update_handler
from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import PayloadCodecError, PayloadError
from azync_flow.replay import check_signal_name
from azync_flow.replay.engine import WorkflowInstance
from azync_flow.replay.events import SignalReceived
from azync_flow.replay.outcome import WorkflowInfo
from azync_flow.search import SearchValue, encode_search_attributes
from azync_flow.store.validate import check_priority, check_timeout

__all__ = ["WorkflowContext"]

T = TypeVar("T")
log = logging.getLogger("azync_flow.workflow")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def _seconds(duration: timedelta | float) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


class WorkflowContext:
    """Passed as the first argument of every ``@workflow`` function.

    Everything here is deterministic: on replay it returns what the first run got.
    """

    def __init__(self, instance: WorkflowInstance) -> None:
        self._instance = instance

    @property
    def info(self) -> WorkflowInfo:
        """Execution id, workflow name, version and workflow-task attempt."""
        return self._instance.info

    @property
    def is_replaying(self) -> bool:
        """True while recorded history is being re-walked. Use only to skip
        side-effect-free work such as logging."""
        return self._instance.is_replaying

    def now(self) -> datetime:
        """Current time (UTC), recorded in history on first call and replayed after.

        Each call records one ``SideEffectRecorded`` event; the value is the
        backend (Postgres) time of the pass that first made the call.
        """
        return self._instance.now()

    def random(self) -> float:
        """A float in [0, 1) from a PRNG seeded by the execution id (same on replay)."""
        return self._instance.random()

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID from the seeded PRNG (same on replay)."""
        return self._instance.uuid4()

    def patched(self, patch_id: str) -> bool:
        """Version gate for changed code.

        Returns True for executions that reach this point with the new code
        (recording a ``PatchMarker``), False for executions that passed this
        point before the change (their history has no marker here). The answer
        for one ``patch_id`` is fixed for the rest of the execution.
        """
        return self._instance.patched(patch_id)

    def side_effect(self, fn: Callable[[], T], type: Any = Any) -> T:
        """Run ``fn`` once and record its result; replays return the recorded value.

        ``fn`` must be quick and must not fail; its result must be JSON-encodable.
        """
        raw = self._instance.side_effect("side_effect", lambda: encode_value(fn(), "side effect"))
        return typing.cast(T, decode_value(raw, type, "side effect"))

    def upsert_search_attributes(self, attributes: Mapping[str, SearchValue | None]) -> None:
        """Set search attributes of this execution (None removes a name).

        Records one ``SearchAttributesUpserted`` event; the execution's
        attributes change when the pass commits, and listings filter by them
        (``client.list(where=[SearchAttr("amount") > 1000])``). On replay the
        call must be made again with the same names and values, like any
        command: a changed upsert is a non-determinism error.

        Args:
            attributes: name -> str, int, float, bool, timezone-aware datetime,
                or None to remove it. Names pass the product's name check.

        Raises:
            SearchAttributeError: a bad name or value (also a ``ValueError``);
                nothing is recorded.
        """
        self._instance.upsert_search_attributes(
            encode_search_attributes(attributes, allow_unset=True)
        )

    async def sleep(self, duration: timedelta | float) -> None:
        """Durable timer: survives worker restarts. ``asyncio.sleep`` is equivalent.

        Args:
            duration: a ``timedelta`` or seconds. Zero or less just yields.
        """
        await asyncio.sleep(_seconds(duration))

    async def sleep_until(self, when: datetime) -> None:
        """Durable timer until the instant ``when`` (e.g. 09:00 in a zone).

        The remaining time is measured from :meth:`now` (recorded, so replay
        starts the same timer); the timer fires on the backend clock at or
        just after ``when`` whatever DST does in between, as the wall times
        were resolved to an instant when ``when`` was built. A ``when`` in the
        past just yields. Plain :meth:`sleep` durations are elapsed time and
        never shift with DST.

        Args:
            when: a timezone-aware datetime.

        Raises:
            ScheduleSpecError: ``when`` is naive (also a ``ValueError``).
        """
        from azync_flow.schedules import aware_utc

        target = aware_utc(when, "sleep_until")
        await asyncio.sleep(max(0.0, (target - self.now()).total_seconds()))

    async def wait_signal(
        self,
        name: str,
        *,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 - durable timeout, part of the API
        type: Any = Any,
    ) -> Any:
        """Wait for the next signal ``name`` and return its payload.

        A signal sent before the wait is buffered and returned at once; each
        signal is returned to exactly one wait, in arrival order. Waits for the
        same name are served first come, first served.

        A signal whose payload does not decode to ``type`` (not JSON, or not of
        that shape) is dropped: it is consumed (it stays in the history as
        received), a warning names it, and the wait goes on for the next signal
        of that name, within the same timeout. A sender's mistake thus cannot
        fail the run; replay drops the same signal again.

        Args:
            name: signal name.
            timeout: optional durable timeout (``timedelta`` or seconds).
            type: decode the payload to this type (unknown Struct fields ignored).

        Returns:
            The decoded payload.

        Raises:
            TimeoutError: (``asyncio.TimeoutError``) the timeout elapsed first; the
                signal, if it comes later, stays buffered for a later wait.
            ValueError: ``name`` contains NUL, is over 255 characters or starts
                with the reserved ``$update:`` prefix.
            PayloadCodecError: the payload is sealed with a codec or key this
                worker is not configured with (the signal is not dropped: the
                workflow task fails and is retried once the codec is set up).
        """
        check_signal_name(name)
        if timeout is None:
            return await self._next_signal(name, type)
        async with asyncio.timeout(_seconds(timeout)):
            return await self._next_signal(name, type)

    async def _next_signal(self, name: str, type: Any) -> Any:
        what = f"payload of signal {name!r}"
        while True:
            future = self._instance.add_signal_waiter(name)
            try:
                event: SignalReceived = await future
            finally:
                self._instance.remove_signal_waiter(name, future)
            try:
                return decode_value(event.payload, type, what)
            except PayloadCodecError:
                raise
            except PayloadError as exc:
                if not self.is_replaying:
                    log.warning(
                        "workflow %s (%s) dropped signal %r (message id %r, history seq %d): "
                        "%s; it goes on waiting for the next one",
                        self.info.name,
                        self.info.execution_id,
                        name,
                        event.message_id,
                        event.seq,
                        exc,
                    )

    async def wait(
        self,
        aws: Iterable[Awaitable[Any]],
        *,
        return_when: str = asyncio.ALL_COMPLETED,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109
    ) -> tuple[list[asyncio.Future[Any]], list[asyncio.Future[Any]]]:
        """Deterministic ``asyncio.wait``: lists instead of sets.

        Returns:
            ``(done, pending)``: done in completion order, pending in argument order.
            Prefer this (or ``asyncio.gather``) over iterating ``asyncio.wait``'s sets.
        """
        tasks = [asyncio.ensure_future(a) for a in aws]
        order: list[asyncio.Future[Any]] = []
        for task in tasks:
            task.add_done_callback(order.append)
        await asyncio.wait(
            tasks,
            return_when=return_when,
            timeout=None if timeout is None else _seconds(timeout),
        )
        await asyncio.sleep(0)  # let the done callbacks run
        done = [t for t in order if t.done()]
        done += [t for t in tasks if t.done() and t not in done]
        return done, [t for t in tasks if not t.done()]

    async def start_child(
        self,
        workflow: ChildWorkflow[R],
        input: Any = None,
        *,
        id: uuid.UUID | None = None,
        parent_close_policy: ParentClosePolicy = "terminate",
        task_queue: str | None = None,
        priority: int | None = None,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
    ) -> ChildHandle[R]:
        """Start ``workflow`` as a child execution and return its handle.

        The start is recorded in this execution's history (``ChildStarted``) in
        the same commit that creates the child, so it happens exactly once.
        The child is a full execution (listed with this execution as its
        ``parent_id``); its outcome comes back as a ``ChildCompleted`` or
        ``ChildFailed`` event that ``await handle.result()`` returns or raises.

        Args:
            workflow: the child's ``@workflow`` definition (any worker that
                registers it runs it).
            input: the child's input (JSON-encodable).
            id: the child's execution id; default: derived from this run's id
                and the seq (the same on every replay). An id already used by
                another execution makes ``result()`` raise ChildWorkflowError.
            parent_close_policy: what happens to the child if this run ends
                first: ``"terminate"`` (default), ``"request_cancel"`` or
                ``"abandon"``.
            task_queue: the child's task queue (default: this execution's);
                routing only, not compared on replay.
            priority: the child's priority (default: this execution's).
            execution_timeout: the longest the child execution may take from
                its start, across its continue-as-new runs (default: no limit).
            run_timeout: the longest each run of the child may take (default:
                no limit). When either elapses the child fails and ``result()``
                raises :class:`~azync_flow.errors.ChildWorkflowTimeoutError`.

        Raises:
            ValueError: an unknown ``parent_close_policy``.
            TypeError: ``id`` is not a ``uuid.UUID``; ``task_queue`` not a str;
                ``priority`` not an int.
            ValueError: a ``priority`` out of range; a timeout not positive.
            PayloadEncodeError: ``input`` is not JSON-encodable.
        """
        if id is not None and not isinstance(id, uuid.UUID):
            raise TypeError(f"child workflow id must be a uuid.UUID, got {id!r}")
        if task_queue is not None and not isinstance(task_queue, str):
            raise TypeError(f"task_queue must be a str, got {task_queue!r}")
        if priority is not None:
            check_priority(priority, "child priority")
        check_timeout(execution_timeout, "child execution_timeout")
        check_timeout(run_timeout, "child run_timeout")
        data = workflow.encode_input(input)
        options = ChildOptions(
            task_queue=task_queue or None,
            priority=priority,
            execution_timeout=execution_timeout,
            run_timeout=run_timeout,
        )
        seq, child_id, future = self._instance.start_child(
            workflow.name, workflow.version, data, id, parent_close_policy, options
        )
        return ChildHandle(self._instance, seq, child_id, future, workflow)

    async def execute_child(
        self,
        workflow: ChildWorkflow[R],
        input: Any = None,
        *,
        id: uuid.UUID | None = None,
        parent_close_policy: ParentClosePolicy = "terminate",
        task_queue: str | None = None,
        priority: int | None = None,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
    ) -> R:
        """``await (await ctx.start_child(...)).result()``: start a child and wait
        for its result.

        Raises:
            ChildWorkflowError: the child did not succeed
                (:class:`~azync_flow.errors.ChildWorkflowTimeoutError` when
                one of its timeouts ended it).
            ValueError / PayloadEncodeError: as :meth:`start_child`.
        """
        handle = await self.start_child(
            workflow,
            input,
            id=id,
            parent_close_policy=parent_close_policy,
            task_queue=task_queue,
            priority=priority,
            execution_timeout=execution_timeout,
            run_timeout=run_timeout,
        )
        return await handle.result()

    def continue_as_new(self, input: Any = None) -> NoReturn:
        """End this run and start a fresh run of the same execution with ``input``.

        The new run has the same workflow id, an empty history and a new run id
        (``ctx.info.run_id``); it starts in the same commit that ends this
        one. Signals this run has not consumed stay buffered for the new run.
        Live children get their parent-close policy, pending activities are
        cancelled. Clients waiting on ``result()`` get the final run's result.
        Call it (it raises) from the workflow function and let it propagate.

        Raises:
            ContinueAsNew: always (control flow; do not catch it).
            PayloadEncodeError: ``input`` is not JSON-encodable.
        """
        data = encode_value(input, "continue-as-new input")
        raise self._instance.continue_as_new(data)

    def query(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator registering a query handler: a plain function reading the
        workflow's state (usually closing over the workflow function's locals).

        ``handle.query(name, *args)`` calls it on a worker, with the state the
        workflow has after its whole history so far, and returns its result.
        Arguments are decoded to the handler's annotations; the result must be
        JSON-encodable. A query writes no history: a command issued inside the
        handler (an activity, a timer, ``ctx.now()``, ``ctx.random()``, a
        signal wait, ...) raises :class:`~azync_flow.errors.ReadOnlyContextError`.
        Register handlers before the workflow's first durable await, so every
        point of its history can answer.

        Args:
            name: query name (default: the function's ``__name__``).

        Returns:
            A decorator returning the function unchanged.

        Raises:
            TypeError: the handler is an ``async def``.
        """

        def register(fn: F) -> F:
            qname = name or fn.__name__
            self._instance.set_query_handler(qname, query_handler(qname, fn))
            return fn

        return register

    def update(
        self, name: str | None = None, *, validator: Callable[..., Any] | None = None
    ) -> Callable[[F], F]:
        """Decorator registering an update handler: a durable request/response
        into this running workflow.

        ``handle.update(name, *args)`` sends a request; the next workflow task
        runs ``validator(*args)`` (optional, read-only like a query: raising
        rejects the update, nothing is recorded and the caller gets
        :class:`~azync_flow.errors.UpdateRejectedError`). An accepted update is
        recorded (``UpdateAccepted``) and the handler runs as workflow code: it
        may await activities, timers and signals, and change the workflow's
        state; its result (or error) is recorded (``UpdateCompleted``) and
        returned to the caller. Requests are deduplicated by update id.

        Args:
            name: update name (default: the function's ``__name__``).
            validator: a plain function taking the same arguments; raise to reject.

        Returns:
            A decorator returning the function unchanged.

        Raises:
            TypeError: ``validator`` is an ``async def``.

        Warning:
            Register update handlers before the workflow's first durable await,
            and never remove one that running executions accepted updates for:
            replay restarts accepted handlers by name.
        """

        def register(fn: F) -> F:
            uname = name or fn.__name__
            self._instance.set_update_handler(uname, update_handler(uname, fn, validator))
            return fn

        return register
