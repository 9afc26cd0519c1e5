"""``WorkflowEnvironment``: a real worker on a real store whose time tests can skip.

The store reads "now" from a :class:`MovableClock` that runs at real speed
from the current time when the environment starts, and that tests skip
forward: by :meth:`WorkflowEnvironment.sleep`, by
:meth:`WorkflowEnvironment.run_until_settled`, or automatically while
``handle.result()`` waits and nothing is runnable.
A skip always goes to the next due moment (timers, sleeps, signal-wait
timeouts, retry backoffs, snoozes, DAG sleep tasks, schedule fires) or
deadline (execution and run timeouts, activity schedule-to-start and
schedule-to-close timeouts), whichever comes first, and lets the worker run
everything that became due before it moves on, so timed things run in time
order and nothing runs past a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from azync_flow._client_interactions import TERMINAL_STATES
from azync_flow._workflow.definitions import Registry
from azync_flow.app import attach_dags, attach_subscribers, attach_workflows
from azync_flow.client import Client, WorkflowHandle
from azync_flow.store import Store
from azync_flow.store.admin import NukeReport
from azync_flow.store.queue import Source
from azync_flow.worker import Retention, Worker

from ._clock import MovableClock
from ._deadlines import next_due

if TYPE_CHECKING:
    from azync_flow.dag import DAG, DAGClient, DAGWorkerBinding
    from azync_flow.runtime import WorkflowRuntime

__all__ = ["TestClient", "TestWorkflowHandle", "WorkflowEnvironment"]

R = TypeVar("R")

#: Ledger retention in the environment: longer than any skip a test makes.
_KEEP_EVENTS = timedelta(days=36500)
#: Real-time pause between two looks while a result waits on something outside time.
_OUTSIDE_TIME_POLL = 0.05


class WorkflowEnvironment:
    """A worker running in-process against ``store``, with skippable time.

    Build it, optionally register queue handlers on :attr:`worker`, then
    :meth:`start` it with the workflows, activities, DAGs and subscribers
    under test; :meth:`close` stops the worker (the ``workflow_env`` pytest
    fixture does both and drops the test's schema)::

        env = await workflow_env.start(workflows=[order], activities=[reserve, charge])
        handle = await env.client.start(order, Order(...))
        await env.sleep(timedelta(days=30))     # everything due in 30 days runs, in order
        assert await handle.result() == ...     # skips to each next due moment

    Args:
        store: an open ``PostgresStore`` whose clock is ``clock``.
        clock: the store's :class:`MovableClock`; set to the current UTC time
            at :meth:`start` unless already set, and made to flow at real speed
            from there (``clock.flowing``).
        auto_time_skipping: ``handle.result()`` skips to the next due moment
            whenever nothing is runnable (switch off with
            :meth:`auto_time_skipping_disabled` or this flag).
        **worker_options: :class:`~azync_flow.worker.Worker` options
            (``concurrency``, ``lease``, ``retry``, ...).

    Attributes:
        worker: the :class:`~azync_flow.worker.Worker` (register queue handlers
            on it before :meth:`start`).
        client: a :class:`TestClient` (start, signal, result, cancel, ... as in
            production; its handles skip time in ``result()``).
        dags: a :class:`~azync_flow.dag.DAGClient` on the same store.
        runtime: the workflow runtime (after :meth:`start`).
    """

    def __init__(
        self,
        store: Store[asyncpg.Connection],
        clock: MovableClock,
        *,
        auto_time_skipping: bool = True,
        **worker_options: Any,
    ) -> None:
        self.store = store
        self.clock = clock
        self.auto_time_skipping = auto_time_skipping
        options: dict[str, Any] = {
            "concurrency": 10,
            "poll_interval": timedelta(milliseconds=200),
            "shutdown_grace": timedelta(seconds=5),
            "handle_signals": False,
            # queue maintenance only once queue handlers are registered (start()):
            # every maintenance step is one more statement per time skip
            "maintain": (),
            # keep what finished: a skip past the retention must not vacuum what
            # the test still reads
            "retention": Retention(completed=timedelta(0), stats=timedelta(0)),
            **worker_options,
        }
        self.worker = Worker(store, **options)
        self.client = TestClient(self, store)
        self.runtime: WorkflowRuntime | None = None
        self.dag_binding: DAGWorkerBinding | None = None
        self._dags: DAGClient | None = None
        self._bg: asyncio.Task[None] | None = None
        self._skipping = asyncio.Lock()

    # --- lifecycle -------------------------------------------------------------

    async def start(
        self,
        workflows: Iterable[Any] = (),
        activities: Iterable[Any] = (),
        *,
        dags: Iterable[DAG] = (),
        subscribers: Iterable[Any] = (),
        **runtime_options: Any,
    ) -> WorkflowEnvironment:
        """Register what is under test and start the worker in the background.

        Args:
            workflows: ``@workflow`` definitions (or a ``Registry``).
            activities: ``@activity`` definitions.
            dags: ``DAG`` definitions whose tasks this worker runs.
            subscribers: ``@subscriber`` definitions of the event ledger
                (``azync_flow.events``); events are kept for the whole test.
            **runtime_options: ``WorkflowRuntime`` options (``cache_size``, ...).

        Returns:
            This environment (so ``env = await workflow_env.start(...)`` reads well).

        Raises:
            RuntimeError: already started.
        """
        if self._bg is not None:
            raise RuntimeError("the environment is already started")
        workflow_defs = workflows if isinstance(workflows, Registry) else list(workflows)
        activity_defs, dag_list, subs = list(activities), list(dags), list(subscribers)
        if workflow_defs or activity_defs or not (dag_list or subs or self.worker.handlers):
            runtime_options.setdefault("retention", timedelta(0))  # see __init__
            self.runtime = attach_workflows(
                self.worker, workflow_defs, activity_defs, **runtime_options
            )
        if self.worker.handlers:
            self.worker.maintain_source(Source.QUEUE)
        if dag_list:
            self.dag_binding = attach_dags(self.worker, dag_list)
        if self.clock() is None:
            self.clock.set(datetime.now(UTC))
        self.clock.flowing = True
        if subs:
            # Recorded now, not at the first lease: an event published right
            # after start() must reach them.
            # the ledger retention must not drop what a skip made old while the test reads it
            await attach_subscribers(self.worker, subs, keep=_KEEP_EVENTS).register()
        self._bg = asyncio.create_task(self.worker.run(), name="azync test worker")
        try:
            await self.worker._started_or_failed(self._bg)  # surfaces a failed start
        except BaseException:
            self._bg = None
            raise
        return self

    async def close(self) -> None:
        """Stop the worker (in-flight jobs get ``shutdown_grace``) and the client."""
        bg, self._bg = self._bg, None
        if bg is not None:
            self.worker.shutdown()
            await bg
        await self.client.close()

    async def __aenter__(self) -> WorkflowEnvironment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def started(self) -> bool:
        """True between :meth:`start` and :meth:`close`."""
        return self._bg is not None

    # --- time ------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The environment's current time (what the store reads as ``now()``)."""
        now = self.clock()
        return now if now is not None else datetime.now(UTC)

    @contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Within the block ``handle.result()`` waits in real time (the clock only
        runs at real speed unless :meth:`sleep` moves it)."""
        before, self.auto_time_skipping = self.auto_time_skipping, False
        try:
            yield
        finally:
            self.auto_time_skipping = before

    async def sleep(self, duration: timedelta) -> None:
        """Skip ``duration`` of time, running everything that becomes due in order.

        The clock jumps from one due moment to the next (timers, sleeps, retry
        backoffs, snoozes, DAG sleep tasks, signal-wait timeouts, schedule
        fires) or deadline (execution, run, schedule-to-start and
        schedule-to-close timeouts), whichever comes first, letting the
        worker run whatever became runnable at each before moving on, and ends
        ``duration`` after it started (plus the milliseconds the worker took),
        with nothing runnable left. Attempts running when it is called finish
        first. Skips from other tasks (``handle.result()``) wait for it.

        Raises:
            ValueError: ``duration`` is negative.
            RuntimeError: the environment is not started.
        """
        if duration < timedelta(0):
            raise ValueError("env.sleep needs a non-negative duration")
        target = self.now + duration
        await self.settle()
        async with self._skipping:
            while (due := await next_due(self.store, self.now)) is not None and due <= target:
                await self._move_clock(due)
                await self.settle()
            await self._move_clock(target)
            await self.settle()

    async def skip_to_next_due(self) -> bool:
        """Jump to the next due moment or deadline and run what became runnable there.

        Call it when nothing is runnable (after :meth:`settle`); it does not
        run what is runnable now first.

        Returns:
            False when nothing is waiting on time (the clock did not move).
        """
        async with self._skipping:  # one skip at a time: two would jump twice
            due = await next_due(self.store, self.now)
            if due is None:
                return False
            await self._move_clock(due)
            await self.settle()
            return True

    async def _move_clock(self, when: datetime) -> None:
        """Jump forward to ``when``; never back (the clock ran on while the worker
        worked, possibly past ``when`` already)."""
        if when <= self.now:
            return
        # A jump lapses the worker's maintenance leaderships (leases on this clock):
        # hand them back first so they are re-acquired, not reported as lost.
        await self.worker.maintenance.release()
        self.clock.set(when)

    async def settle(self) -> None:
        """Wait until the worker finds nothing runnable at the current time.

        Raises:
            RuntimeError: the environment is not started.
        """
        if self._bg is None:
            raise RuntimeError("start the environment first: await env.start(...)")
        await self.worker.wait_idle()

    async def run_until_settled(
        self,
        handle: WorkflowHandle[Any] | None = None,
        *,
        timeout: timedelta | float = 30.0,  # noqa: ASYNC109 - bounds the whole drive in real time
    ) -> None:
        """Run and skip time until no job is runnable and nothing is due (backoffs
        included), or until ``handle``'s execution is terminal.

        An execution waiting for a signal with no timeout counts as settled:
        nothing will move it but the signal.

        Args:
            handle: stop as soon as this execution has finished.
            timeout: bound in real seconds (or a timedelta).

        Raises:
            TimeoutError: not settled within ``timeout`` (e.g. a workflow that
                loops on a timer forever).
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        async with asyncio.timeout(seconds):
            await self.settle()
            while not (handle is not None and await _is_terminal(handle)):
                if not await self.skip_to_next_due():
                    return

    # --- reset ---------------------------------------------------------------------

    async def reset_source(self, source: Source | str) -> NukeReport:
        """Delete every job, counter and idempotency key of one source (a dev reset).

        For a test that reuses one environment across phases: after
        ``await env.reset_source("queue")`` the queue has no jobs in any
        state, ``stats`` of its kinds start from zero, and a job enqueued
        with an idempotency key used before is inserted again. Other sources
        are untouched, and so is the event ledger: events, with their ids,
        and subscriber registrations stay (resetting ``"event"`` deletes only
        the delivery jobs). Workflow executions and DAG runs are not jobs and
        stay, so resetting ``"workflow"`` or ``"dag"`` leaves their live runs
        with nothing to run; use a fresh schema (``unique_schema``) for those.
        An attempt running at that moment loses its job: its report is
        refused as for a lost lease. Works started or not.

        Args:
            source: ``Source.QUEUE`` / ``"queue"``, ``"event"``, ``"dag"`` or
                ``"workflow"``.

        Returns:
            How many rows went, per kind (``jobs``, ``stats``, ``keys``).

        Raises:
            ValueError: ``source`` is not one of those four; nothing deleted.
        """
        return await self.store.nuke_all(source)

    # --- DAGs ----------------------------------------------------------------------

    @property
    def dags(self) -> DAGClient:
        """A :class:`~azync_flow.dag.DAGClient` on the environment's store."""
        if self._dags is None:
            from azync_flow.dag import DAGClient

            self._dags = DAGClient(self.store)
        return self._dags


async def _is_terminal(handle: WorkflowHandle[Any]) -> bool:
    # the row alone: describe() also sizes the history, needless while polling
    view = await handle.client.store.get_workflow_execution(handle.id)
    return view.state in TERMINAL_STATES


class TestClient(Client):
    """A :class:`~azync_flow.client.Client` whose handles skip time in ``result()``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self, env: WorkflowEnvironment, store: Store[asyncpg.Connection], **options: Any
    ) -> None:
        super().__init__(store, **options)
        self.env = env

    @property
    def _handle_class(self) -> type[WorkflowHandle[Any]]:
        return TestWorkflowHandle


class TestWorkflowHandle(WorkflowHandle[R]):
    """A handle whose :meth:`result` skips time while nothing is runnable."""

    __test__ = False
    client: TestClient

    async def result(self, timeout: timedelta | float | None = None) -> R:  # noqa: ASYNC109
        """Wait for the execution to finish and return its result.

        With auto time skipping on (the default), whenever the worker finds
        nothing runnable the clock jumps to the next due moment. When nothing
        is due either (a signal wait without timeout), it waits in real time
        for something outside time (a signal sent by another task).

        Args:
            timeout: bound in real seconds (or a timedelta); None waits forever.

        Raises:
            WorkflowFailedError / WorkflowCancelledError / WorkflowTerminatedError:
                as ``WorkflowHandle.result``.
            TimeoutError: ``timeout`` elapsed first (the message names the state).
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        bound = asyncio.timeout(seconds)
        try:
            async with bound:
                return await self._drive()
        except TimeoutError:
            if not bound.expired():
                raise
            state = (await self.describe()).state
            raise TimeoutError(f"workflow {self.id} still {state} after {seconds}s") from None

    async def _drive(self) -> R:
        env = self.client.env
        if env.started:
            await env.settle()
        while True:
            if await _is_terminal(self):
                return await super().result()
            if env.started and env.auto_time_skipping and await env.skip_to_next_due():
                continue
            with contextlib.suppress(TimeoutError):
                return await super().result(timeout=_OUTSIDE_TIME_POLL)
            if env.started:  # something outside time (a signal) may have made work
                await env.settle()
