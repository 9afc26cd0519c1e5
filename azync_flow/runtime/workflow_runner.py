"""Runs leased workflow tasks (``$wft`` jobs): load, replay pass, commit — one pass each.

Per task::

    state   = store.load_workflow_task(run_id, after_seq)   # one snapshot
    outcome = instance.advance(history, signals, due timers, cancel, now)
    store.commit_pass(...)                                   # one transaction, fenced

A cached instance (sticky cache) is fed only the events after the seq it has
seen; a fresh one replays the whole history. Results are identical (the replay
tests run in both modes). A commit that loses the fence (``ConflictError``:
another pass or completion moved ``next_seq``) writes nothing; the instance is
evicted and the task abandoned so the next pass replays fresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry import context as otel_context

from azync_flow import _metrics
from azync_flow._operations import operation_params, with_result_type
from azync_flow._transient import retry_transient
from azync_flow._workflow.definitions import Registry
from azync_flow._workflow.limits import HistoryLimit
from azync_flow.errors import (
    ConflictError,
    NotFoundError,
    PayloadError,
    UnknownWorkflowError,
    is_not_found,
)
from azync_flow.replay.engine import WorkflowInstance
from azync_flow.replay.events import OperationUncertain, encode_event
from azync_flow.replay.outcome import PassOutcome, PassStatus, UnfitDecision, WorkflowInfo
from azync_flow.replay.passes import InstanceCache, to_entries
from azync_flow.retry import RetryPolicy, describe_error
from azync_flow.runtime.children import child_params, end_closed_children_spans
from azync_flow.runtime.clock import BackendClock
from azync_flow.store.queue import Job
from azync_flow.store.workflows import (
    ChildSignalParams,
    LeasedTask,
    PassWrite,
    WorkflowExecutionView,
    WorkflowRuntimeStore,
    WorkflowState,
    WorkflowTaskState,
)
from azync_flow.store.workflows import Outcome as StoreOutcome
from azync_flow.telemetry import (
    ATTR_SEQ,
    AttemptKind,
    AttemptOutcome,
    AttemptSpan,
    RunEvent,
    RunKind,
    RunTracer,
    end_finished_run,
    suppressed_context,
)
from azync_flow.worker import lease_gone

if TYPE_CHECKING:
    from azync_flow.runtime.local_dispatch import LocalDispatch

__all__ = ["WorkflowRunner"]

log = logging.getLogger("azync_flow.workflow")

#: This process, as a release reason names it.
WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"
#: Executions a worker remembers it cannot run (its leases skip them).
MAX_LEFT = 1000

#: Backoff of a workflow task whose pass crashed outside user code.
TASK_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=30)
)


class CachedRun(NamedTuple):
    """What a pass run without a load needs to know of a cached execution.

    Attributes:
        carrier: its stored trace context.
        signals_waiting: its last pass left a buffered signal unconsumed (only
            a pass that loads the signals may run next).
        execution: its row as last read (name, id, creation time).
    """

    carrier: dict[str, str]
    signals_waiting: bool
    execution: WorkflowExecutionView


class WorkflowRunner:
    """Executes workflow tasks for the workflows of ``registry``.

    Args:
        store: the store.
        registry: workflow (and activity) definitions.
        cache_size: executions kept in memory between passes (0 = full replay
            on every pass).
        max_payload_bytes: per-value limit for values workflows write.
        task_context: returns the ``contextvars.Context`` each workflow's root
            task runs in (e.g. one with spans suppressed, see
            ``azync_flow.telemetry.suppressed_context``); None = a copy of the
            current context.
        history_limit: the history size past which a WARNING suggests
            ``continue_as_new`` (default :class:`HistoryLimit`).
    """

    def __init__(
        self,
        store: WorkflowRuntimeStore,
        registry: Registry,
        *,
        cache_size: int = 1000,
        max_payload_bytes: int | None = None,
        task_context: Callable[[], contextvars.Context] | None = None,
        tracer: RunTracer | None = None,
        dispatch: LocalDispatch | None = None,
        history_limit: HistoryLimit | None = None,
    ) -> None:
        self.store = store
        #: Leases the activities a pass schedules to this worker (None: never).
        self.dispatch = dispatch
        self.clock = BackendClock(store)
        #: Per cached execution: its trace context, and whether its last pass
        #: left a buffered signal unconsumed (then only a loaded pass may run).
        self.runs: dict[uuid.UUID, CachedRun] = {}
        self._locks: dict[uuid.UUID, list[Any]] = {}  # [lock, holders + waiters]
        self._preloaded: dict[uuid.UUID, LeasedTask] = {}
        #: Fault-injection points for tests: ``hook(run_id, path)`` (sync or async)
        #: right before any pass commit / after it committed and its span ended;
        #: path is "task" (a leased workflow task), "completion" (folded into an
        #: operation's completion) or "start" (an eager start).
        self.before_commit: Callable[[uuid.UUID, str], Any] | None = None
        self.after_commit: Callable[[uuid.UUID, str], Any] | None = None
        #: Called with the delay in seconds of the earliest durable timer a
        #: committed pass armed (the worker pokes its task loop then: no NOTIFY
        #: announces a timer). None: timers are found by polling.
        self.timer_armed: Callable[[float], None] | None = None
        self.task_context = task_context or suppressed_task_context
        self.registry = registry
        self.cache = InstanceCache(cache_size)
        self.max_payload_bytes = max_payload_bytes
        self.tracer = tracer or RunTracer()
        #: When a run's history is large enough to log a continue-as-new warning.
        self.history_limit = history_limit or HistoryLimit()
        self.passes = 0
        self.conflicts = 0
        self._warned: set[str] = set()
        #: Executions this worker found it cannot run (oldest first): its
        #: leases skip them, so it never takes the same one again and again.
        self.left: dict[uuid.UUID, None] = {}
        self._background: set[asyncio.Future[Any]] = set()

    async def run(self, job: Job, lease: Any) -> None:
        """``JobRunner`` signature for ``Worker.add_loop``: ``lease.token`` fences."""
        await self.run_task(job, lease.token, lease)

    async def run_task(self, job: Job, token: uuid.UUID, lease: Any = None) -> PassOutcome | None:
        """Run one leased workflow task and settle it. Returns the pass outcome
        (None when no pass ran: execution not running or commit lost).

        A pass that runs makes exactly one ``workflow.task`` attempt span (child
        of the run span) with its replay statistics; workflow code runs with
        spans suppressed. After the commit, consumed signals, fired timers and
        a cancellation are recorded as run events, and a pass that finished the
        execution exports the run span. With the worker's ``lease`` handle, a
        pass that did not commit after its lease was lost or lapsed (a frozen
        worker) exports no span: the reaper closed that attempt."""
        assert job.run_id is not None
        async with self.serialized(job.run_id):
            return await self._run_task(job, token, lease)

    def preload(self, tasks: list[LeasedTask]) -> list[Job]:
        """Keep the loads that came with leased tasks for their passes; the jobs."""
        for task in tasks:
            self._preloaded[task.job.id] = task
        return [task.job for task in tasks]

    @contextlib.asynccontextmanager
    async def serialized(self, run_id: uuid.UUID) -> AsyncIterator[None]:
        """Hold this worker's one pass slot of ``run_id`` (passes of one execution
        never overlap in this process: the cached instance has one owner)."""
        entry = self._locks.get(run_id)
        if entry is None:
            entry = self._locks[run_id] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[run_id]

    def busy(self, run_id: uuid.UUID) -> bool:
        """True while a pass of ``run_id`` holds (or waits for) its pass slot here."""
        return run_id in self._locks

    async def _run_task(self, job: Job, token: uuid.UUID, lease: Any) -> PassOutcome | None:
        assert job.run_id is not None
        run_id = job.run_id
        preloaded = self._preloaded.pop(job.id, None)
        cached = self.cache.take(run_id)
        try:
            after = cached.next_seq - 1 if cached is not None else 0
            if preloaded is not None and preloaded.after_seq == after:
                state = preloaded.state  # leased and loaded in one round trip
            else:
                state = await self.store.load_workflow_task(run_id, after_seq=after)
            if cached is not None and cached.next_seq > state.next_seq:
                cached.close()
                cached, state = None, await self.store.load_workflow_task(run_id)
        except BaseException:
            if cached is not None:
                cached.close()
            raise
        self.clock.observe(state.now)
        execution = state.execution
        if cached is not None and cached.info.current_run_id != (execution.run_id or run_id):
            # the execution continued as new since this instance was cached
            cached.close()
            cached, state = None, await self.store.load_workflow_task(run_id)
            execution = state.execution
        if execution.state != WorkflowState.RUNNING:
            if cached is not None:
                cached.close()
            try:
                await self.store.ack(job.id, token)  # suspended or finished: nothing to do
            except Exception as err:  # terminate already settled it
                if not is_not_found(err):
                    raise
            return None
        async with self.tracer.attempt_span(
            AttemptKind.WORKFLOW_TASK,
            execution.name,
            carrier=state.trace_context,
            run_id=run_id,
            attempt=job.attempt,
            workflow_name=execution.name,
            seq=state.next_seq,
        ) as span:
            try:
                outcome = await self._pass(job, token, state, cached, span)
            finally:
                # Taken over (lease lost or lapsed: a frozen worker) and not
                # committed: the reaper records this pass; a second span would
                # show it twice, or end after the run span.
                if span.outcome is None and lease_gone(lease):
                    span.abandon()
        if outcome is not None:
            self._run_events(state, outcome)
            self._end_run(state, outcome)
            await self.hook("after_commit", run_id, "task")
        return outcome

    def _end_run(self, state: WorkflowTaskState, outcome: PassOutcome) -> None:
        self.end_run(state.execution, state.trace_context, outcome)

    def end_run(
        self,
        execution: WorkflowExecutionView,
        carrier: dict[str, str] | None,
        outcome: PassOutcome,
    ) -> None:
        """A pass whose commit made the execution terminal exports the run span
        (after its own span ended, so the run span ends last)."""
        finished = _FINISHED.get(outcome.status)
        if finished is not None:
            end_finished_run(
                self.tracer,
                RunKind.WORKFLOW,
                execution.name,
                execution.id,
                carrier,
                execution.created_at,
                finished,
                outcome.failure_reason,
            )
        if outcome.live_children and (
            finished is not None or outcome.status is PassStatus.CONTINUED_AS_NEW
        ):
            # the run's end terminated them (parent-close policy): their run spans too
            run = execution.run_id or execution.id
            task = asyncio.ensure_future(
                end_closed_children_spans(self.tracer, self.store, execution.id, run)
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _pass(
        self,
        job: Job,
        token: uuid.UUID,
        state: WorkflowTaskState,
        cached: WorkflowInstance | None,
        span: AttemptSpan,
    ) -> PassOutcome | None:
        execution = state.execution
        run_id = execution.id
        try:
            defn = self.registry.workflow(execution.name)
            if cached is None:
                defn.check_input(execution.input)
        except (UnknownWorkflowError, PayloadError) as err:
            # A routing or deploy problem, never the run's failure: leave the
            # task (its attempt given back) for a worker that can run it.
            if cached is not None:
                cached.close()
            await self._leave(job, token, execution, err)
            span.set_outcome(AttemptOutcome.RELEASED)
            return None
        instance = cached or WorkflowInstance(
            defn,
            execution.input,
            WorkflowInfo.of(
                run_id,
                execution.name,
                execution.version,
                execution.meta,
                attempt=job.attempt,
                run_id=execution.run_id,
                parent_id=execution.parent_id,
                task_queue=execution.task_queue,
                priority=execution.priority,
            ),
            max_payload_bytes=self.max_payload_bytes,
            task_context=self.task_context(),
        )
        instance.history_bytes += sum(len(e.payload) for e in state.history)
        try:
            outcome = instance.advance(
                to_entries(state.history),
                buffered_signals=state.signals,
                fired_timers=state.due_timers,
                cancel_requested=state.cancel_requested,
                now=state.now,
            )
        except Exception as err:  # a bug outside user code: retry the task with backoff
            instance.close()
            log.exception("workflow task %s of %s crashed", job.id, run_id)
            span.record_failure(err)
            delay = await self._retry_later(job, token, err)
            span.set_outcome(AttemptOutcome.RETRIED, retry_delay=delay)
            return None
        span.set_pass_stats(
            history_length=state.next_seq - 1,
            events_replayed=outcome.events_replayed,
            new_commands=len(outcome.new_events),
        )
        committed = await self._commit(job, token, instance, outcome, state)
        if committed is None:
            span.add_event("pass.conflict")
        else:
            await self.repark_unfit(run_id, outcome)
            span.set_outcome(AttemptOutcome.SUCCEEDED)
            if outcome.status is PassStatus.FAILED and outcome.error is not None:
                span.add_event("workflow.failed", {"reason": outcome.failure_reason[:1024]})
        return committed

    async def repark_unfit(self, run_id: uuid.UUID, outcome: PassOutcome) -> None:
        """After a committed pass of ``run_id`` that is waiting on calls whose
        decided result does not fit their result type: park each operation as
        uncertain again (suspending the run) so an operator decides anew.

        Fenced by the store (a newer decision wins); a failure is logged and
        left to the next pass of the run, which finds the same result."""
        if outcome.status is not PassStatus.BLOCKED:
            return
        for unfit in outcome.unfit_decisions:
            try:
                seq = await retry_transient(functools.partial(self._repark, run_id, unfit))
            except Exception:
                log.exception(
                    "workflow %s: could not park operation %s/%d for a new decision",
                    run_id,
                    run_id,
                    unfit.seq,
                )
                continue
            if seq:
                log.warning(
                    "workflow %s suspended: activity %r (%s/%d): %s",
                    run_id,
                    unfit.activity,
                    run_id,
                    unfit.seq,
                    unfit.reason,
                )

    async def _repark(self, run_id: uuid.UUID, unfit: UnfitDecision) -> int:
        event_type, event = encode_event(
            OperationUncertain(scheduled_seq=unfit.seq, reason=unfit.reason)
        )
        return await self.store.repark_decided_operation(
            run_id,
            f"{run_id}/{unfit.seq}",
            unfit.result,
            unfit.reason,
            payload=lambda old: with_result_type(old, unfit.result_type),
            event_type=event_type,
            event=event,
        )

    def _run_events(self, state: WorkflowTaskState, outcome: PassOutcome) -> None:
        self.run_events(
            state.trace_context,
            state.execution.id,
            outcome,
            {s.signal_id: s.name for s in state.signals},
            set(state.due_timers),
        )

    def run_events(
        self,
        carrier: dict[str, str] | None,
        run_id: uuid.UUID,
        outcome: PassOutcome,
        names: dict[int, str],
        due: set[int],
    ) -> None:
        """Record a committed pass's consumed signals, fired timers and cancellation
        as run events."""
        for signal_id, seq in outcome.consumed_signals:
            self.tracer.run_event(
                carrier,
                RunEvent.SIGNAL,
                run_id=run_id,
                subject=names.get(signal_id, "?"),
                attributes={ATTR_SEQ: seq},
            )
        for seq in outcome.fired_timers:
            if seq in due:  # cancelled timers are marked fired too; they did not fire
                self.tracer.run_event(
                    carrier, RunEvent.TIMER_FIRED, run_id=run_id, attributes={ATTR_SEQ: seq}
                )
        if outcome.status is PassStatus.CANCELLED:
            self.tracer.run_event(carrier, RunEvent.CANCEL_REQUESTED, run_id=run_id)

    async def hook(self, name: str, run_id: uuid.UUID, path: str) -> None:
        """Call the fault-injection point ``name`` (``before_commit``/``after_commit``)."""
        fn = getattr(self, name)
        if fn is not None:
            result = fn(run_id, path)
            if inspect.isawaitable(result):
                await result

    def pass_write(
        self,
        instance: WorkflowInstance,
        outcome: PassOutcome,
        expected_next_seq: int,
        carrier: dict[str, str] | None,
    ) -> PassWrite:
        """The store write of a pass (operations not yet leased; see :meth:`claim`)."""
        run_id = instance.info.execution_id
        return PassWrite(
            expected_next_seq=expected_next_seq,
            events=[(type_name, payload) for _, type_name, payload in outcome.new_events],
            operations=[
                operation_params(
                    run_id,
                    instance.info.name,
                    c,
                    carrier,
                    instance.info.task_queue,
                    instance.info.priority,
                )
                for c in outcome.activities
            ],
            timers=[(t.seq, t.fire_after) for t in outcome.timers],
            consumed_signals=outcome.consumed_signals,
            fired_timers=outcome.fired_timers,
            outcome=_store_outcome(outcome, instance.cancel_seen),
            cancel_known=instance.cancel_known,
            awaited_signals=outcome.awaited_signals,
            run_id=instance.info.run_id,
            children=[
                child_params(
                    self.tracer, carrier, c, instance.info.task_queue, instance.info.priority
                )
                for c in outcome.children
            ],
            child_signals=[
                ChildSignalParams(
                    workflow_id=c.workflow_id,
                    name=c.name,
                    payload=c.payload,
                    message_id=c.message_id,
                )
                for c in outcome.child_signals
            ],
            child_cancels=[c.workflow_id for c in outcome.child_cancels],
            updates=list(outcome.update_results),
        )

    async def _commit(
        self,
        job: Job,
        token: uuid.UUID,
        instance: WorkflowInstance,
        outcome: PassOutcome,
        state: WorkflowTaskState,
    ) -> PassOutcome | None:
        run_id = instance.info.execution_id
        expected_next_seq, carrier, execution = state.next_seq, state.trace_context, state.execution
        claim = None
        try:
            write = self.pass_write(instance, outcome, expected_next_seq, carrier)
            claim = self.dispatch.claim(write) if self.dispatch is not None else None
            await self.hook("before_commit", run_id, "task")
            result = await retry_transient(
                lambda: self.store.commit_pass(job.id, token, run_id, write)
            )
        except (ConflictError, NotFoundError):  # lost the fence: e.g. another pass, terminate
            if claim is not None:
                claim.cancel()
            instance.close()
            self.conflicts += 1
            try:
                await self.store.abandon_workflow_task(job.id, token)
            except Exception as err:
                if not is_not_found(err):
                    raise
            return None
        except BaseException:
            if claim is not None:
                claim.cancel()
            instance.close()
            raise
        self.committed(instance, outcome, CachedRun(carrier or {}, False, execution), result.now)
        if claim is not None:
            claim.launch(result.leased)
        return outcome

    def committed(
        self,
        instance: WorkflowInstance,
        outcome: PassOutcome,
        run: CachedRun,
        now: datetime | None,
    ) -> None:
        """Book-keeping after a pass committed (any path): counters, warnings and
        the instance back into the sticky cache."""
        run_id = instance.info.execution_id
        self.passes += 1
        self.clock.observe(now)
        if outcome.timers and self.timer_armed is not None:
            # fire_at = commit clock + fire_after; the commit's clock read came
            # before this return, so waking fire_after from now is never early
            self.timer_armed(min(t.fire_after for t in outcome.timers).total_seconds())
        _count_pass(instance.info, outcome)
        for command in outcome.activities:
            kind = f"$op:{command.name}@{command.version}"
            if kind not in self.registry.activities and kind not in self._warned:
                self._warned.add(kind)
                log.warning(
                    "workflow %s scheduled activity %r (version %s), which is not registered "
                    "on this worker: its operation stays pending until a worker that registers "
                    "it runs (the execution waits; nothing is lost)",
                    instance.info.name,
                    command.name,
                    command.version,
                )
        if outcome.status is PassStatus.NONDETERMINISM:
            log.error("workflow %s suspended: %s", run_id, outcome.error)
        instance.history_bytes += sum(len(payload) for _, _, payload in outcome.new_events)
        if outcome.status is PassStatus.BLOCKED and not instance.history_warned:
            instance.history_warned = self.history_limit.warn(
                instance.info, outcome.next_seq - 1, instance.history_bytes
            )
        self.cache.put(run_id, instance)
        if run_id in self.cache:
            self.runs[run_id] = run._replace(signals_waiting=outcome.unconsumed_signals > 0)
            if len(self.runs) > 2 * max(self.cache.max_size, 1):
                self.runs = {k: v for k, v in self.runs.items() if k in self.cache}
        else:
            self.runs.pop(run_id, None)

    async def _retry_later(
        self, job: Job, token: uuid.UUID, err: BaseException, why: str = ""
    ) -> timedelta:
        delay = TASK_RETRY.delay(job.attempt)
        try:
            await self.store.reschedule(job.id, token, delay, why or describe_error(err))
        except Exception as lost:  # the task was settled meanwhile (e.g. terminate)
            if not is_not_found(lost):
                raise
        return delay

    async def _leave(
        self,
        job: Job,
        token: uuid.UUID,
        execution: WorkflowExecutionView,
        err: UnknownWorkflowError | PayloadError,
    ) -> None:
        """Release a task this worker cannot run (it lacks the workflow, or cannot
        decode the execution's input: another app's or version's workflow of
        the same name on its task queue), with the reason kept for describe();
        its later leases skip that execution. One WARNING per workflow name."""
        name, run_id = execution.name, execution.id
        if isinstance(err, UnknownWorkflowError):
            why = f"a worker ({WORKER_NAME}) leased it without registering workflow {name!r}"
        else:
            why = f"a worker ({WORKER_NAME}) cannot decode its input: {describe_error(err)}"
        self.left[run_id] = None
        while len(self.left) > MAX_LEFT:
            del self.left[next(iter(self.left))]
        try:
            await self.store.release_blocked(job.id, token, why)
        except Exception as lost:  # settled meanwhile (e.g. terminate)
            if not is_not_found(lost):
                raise
        if name in self._warned:
            return
        self._warned.add(name)
        log.warning(
            "workflow %r: this worker cannot run execution %s (%s); it leaves it and every "
            "such execution for a worker that can, and the run waits (describe() shows why). "
            "Give each app or incompatible version its own task queue (docs/flow-control.md)",
            name,
            run_id,
            describe_error(err),
        )


def _count_pass(info: WorkflowInfo, outcome: PassOutcome) -> None:
    """The execution-level metrics of a committed pass: the first pass of an
    execution's first run starts it; a continue-as-new; a nondeterminism suspension."""
    first_seq = outcome.next_seq - len(outcome.new_events)
    if first_seq == 1 and info.run_id in (None, info.execution_id):
        _metrics.workflow_started(info.name)
    if outcome.status is PassStatus.CONTINUED_AS_NEW:
        _metrics.workflow_continued(info.name)
    elif outcome.status is PassStatus.NONDETERMINISM:
        _metrics.workflow_suspended(info.name, "nondeterminism")


def suppressed_task_context() -> contextvars.Context:
    """A context for a workflow's root task in which spans are dropped
    (workflow code is replayed code; it must never emit spans)."""
    ctx = contextvars.copy_context()
    ctx.run(otel_context.attach, suppressed_context())
    return ctx


#: Pass statuses that finish the execution, and the state they finish it in.
_FINISHED = {
    PassStatus.COMPLETED: WorkflowState.SUCCEEDED,
    PassStatus.FAILED: WorkflowState.FAILED,
    PassStatus.CANCELLED: WorkflowState.CANCELLED,
}


def _store_outcome(outcome: PassOutcome, cancel_seen: bool = False) -> StoreOutcome | None:
    status = outcome.status
    if status is PassStatus.CONTINUED_AS_NEW:
        assert outcome.continued is not None
        new_run, new_input = outcome.continued
        return ("continue", new_input, new_run, cancel_seen)
    if status is PassStatus.COMPLETED:
        assert outcome.result is not None
        return ("complete", outcome.result)
    if status is PassStatus.FAILED:
        return ("fail", outcome.failure_reason)
    if status is PassStatus.CANCELLED:
        return ("cancelled", outcome.failure_reason)
    if status is PassStatus.NONDETERMINISM:
        return ("suspend", outcome.failure_reason, getattr(outcome.error, "seq", None))
    return None
