"""The replay engine: one :class:`WorkflowInstance` per execution.

An instance runs the workflow coroutine on a :class:`DeterministicLoop` and is
advanced pass by pass with :meth:`WorkflowInstance.advance`. A fresh instance
fed the whole history is a *full replay*; an instance kept in memory and fed
only the events appended since its last pass is the *sticky cache*. Both walk
the history the same way, so they produce the same outcome.

Walk rules (what makes replay deterministic):

1. The code runs until quiet (no ready callbacks) before each input is delivered.
2. Input events (activity results, timer firings, signals, cancel requests)
   are delivered one at a time, in history order, with a quiet run after each.
3. Every command the code issues is matched, in order, against the recorded
   command events; a different command, a recorded command the code never
   issues before the next input, or a command issued while pass-written history
   still lies ahead is a :class:`~azync_flow.errors.NonDeterminismError`.
4. After the recorded history, new inputs of the pass are delivered in a fixed
   order — cancel request, due timers by (deadline, seq), buffered signals in
   arrival order (each only to a waiting ``wait_signal`` of that name), then
   update requests in arrival order (see :mod:`azync_flow.replay._interactions`)
   — and recorded as new events interleaved with the commands they cause.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import contextvars
import random
import uuid
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from azync_flow.errors import (
    ContinueAsNew,
    ForbiddenCallError,
    NonDeterminismError,
    WorkflowAbort,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from azync_flow.replay import guard
from azync_flow.replay._calls import DurableCallsMixin
from azync_flow.replay._interactions import InteractionsMixin
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    CancelRequested,
    ChildCompleted,
    ChildFailed,
    Event,
    HistoryEntry,
    OperationResolved,
    OperationUncertain,
    OperatorNote,
    PatchMarker,
    SignalReceived,
    TimerFired,
    UpdateAccepted,
    WorkflowCancelled,
    WorkflowCompleted,
    WorkflowContinuedAsNew,
    WorkflowFailed,
    encode_event,
)
from azync_flow.replay.loop import DeterministicLoop, DurableTimerHandle
from azync_flow.replay.matcher import commands_match
from azync_flow.replay.outcome import (
    BufferedSignal,
    CancelTimer,
    Command,
    PassOutcome,
    PassStatus,
    UnfitDecision,
    WorkflowInfo,
    safe_message,
)

__all__ = ["Startable", "WorkflowInstance", "current_instance"]


class Startable(Protocol):
    """What the engine needs from a workflow definition."""

    name: str
    version: str

    def create_coroutine(
        self, instance: WorkflowInstance, input_bytes: bytes
    ) -> Coroutine[Any, Any, bytes]:
        """Return the coroutine running the workflow; it returns the encoded result."""
        ...


def current_instance() -> WorkflowInstance | None:
    """The instance whose workflow code is running on this thread, else None."""
    loop = asyncio.events._get_running_loop()
    if isinstance(loop, DeterministicLoop):
        host = loop._host
        if isinstance(host, WorkflowInstance):
            return host
    return None


class WorkflowInstance(DurableCallsMixin, InteractionsMixin):
    """A workflow execution held by the replay engine (pure; no I/O).

    Args:
        defn: the workflow definition.
        input_bytes: the execution's input (JSON bytes).
        info: execution identity; ``info.execution_id`` seeds ``random``/``uuid4``.
        max_payload_bytes: per-value size limit for values the workflow writes
            (activity inputs, results); ``None`` disables it.
        task_context: ``contextvars.Context`` the workflow's root task runs in
            (child tasks copy it). The runtime passes one with OpenTelemetry
            spans suppressed (``azync_flow.telemetry.suppressed_context``), so
            replayed code never emits spans.
    """

    def __init__(
        self,
        defn: Startable,
        input_bytes: bytes,
        info: WorkflowInfo,
        *,
        max_payload_bytes: int | None = None,
        task_context: contextvars.Context | None = None,
    ) -> None:
        guard.install()
        self._task_context = task_context
        self.defn = defn
        self.info = info
        self.max_payload_bytes = max_payload_bytes
        self.loop = DeterministicLoop(self)  # type: ignore[abstract]
        self._input = input_bytes
        # the first run's id is the execution id: its sequence is unchanged
        self._rng = random.Random(info.current_run_id.int)
        self._main: asyncio.Task[bytes] | None = None
        self._known_upto = 0
        self._next_seq = 1
        self._cursor = 0
        self._recorded: collections.deque[tuple[int, Event]] = collections.deque()
        self._pass_inputs: list[int] = []  # seqs of pass-written inputs not yet walked past
        self._pass_input_events: dict[int, Event] = {}
        self._activities: dict[int, tuple[asyncio.Future[Any], str]] = {}
        self._result_types: dict[int, Any] = {}
        self._decided: set[int] = set()
        self._unfit: dict[int, UnfitDecision] = {}
        self._children: dict[int, asyncio.Future[Any]] = {}
        self._timers: dict[int, DurableTimerHandle] = {}
        self._signal_waiters: dict[str, collections.deque[asyncio.Future[Any]]] = {}
        self._patches: dict[str, bool] = {}
        self._cancel_seen = False
        self._cancel_known = False
        self._closing = False
        self._failure: NonDeterminismError | None = None
        self._terminal: Event | None = None
        self._terminal_recorded = False
        self._now = datetime.fromtimestamp(0, UTC)
        self._replaying = False
        self._events_replayed = 0
        #: Runtime book-keeping of the history size (see the worker's history limit).
        self.history_bytes = 0
        self.history_warned = False
        self._init_interactions()
        self._reset_outputs()

    # --- public state ------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        """The seq the next appended event must take (the commit fence)."""
        return self._next_seq

    @property
    def reusable(self) -> bool:
        """True when the instance may be kept in a sticky cache for the next pass."""
        return self._failure is None and self._terminal is None and not self._closing

    @property
    def cancel_seen(self) -> bool:
        """True once a cancel request has been delivered to the code."""
        return self._cancel_seen

    @property
    def cancel_known(self) -> bool:
        """True once a pass was told of a cancel request (``cancel_requested``),
        delivered or not (the code may have ended before it could be), or one
        was delivered. A pass that does not know of a request must not commit."""
        return self._cancel_known or self._cancel_seen

    @property
    def is_replaying(self) -> bool:
        """True while recorded history is being re-walked (no new commands yet)."""
        return self._replaying

    # --- the pass -------------------------------------------------------------------

    def advance(
        self,
        history: Sequence[HistoryEntry],
        *,
        buffered_signals: Sequence[BufferedSignal] = (),
        fired_timers: Sequence[int] = (),
        cancel_requested: bool = False,
        now: datetime | None = None,
    ) -> PassOutcome:
        """Run one pass: feed history beyond what this instance has seen, then new inputs.

        Args:
            history: history entries in seq order; entries at or below the
                instance's known position are skipped (so the full history may
                be passed to a cached instance). Must be contiguous.
            buffered_signals: unconsumed signals in arrival order.
            fired_timers: seqs of timers that are due.
            cancel_requested: the execution has a pending cancel request.
            now: backend time of the pass (recorded by ``ctx.now()``), UTC.

        Returns:
            The pass outcome. After a nondeterminism, completed, failed or
            cancelled outcome the instance is not :attr:`reusable`.

        Raises:
            ValueError: the history has a gap or starts past the known position.
        """
        if not self.reusable:
            raise RuntimeError("this workflow instance is finished or poisoned; create a new one")
        self._reset_outputs()
        self._cancel_known = self._cancel_known or cancel_requested
        if now is not None:
            self._now = now
        entries = self._take_new(history)
        self._events_replayed = len(entries)
        self._replaying = bool(entries)
        if self._main is None:
            self._start_main()
        for entry in entries:
            if self._stopped():
                break
            if entry.event.is_command:
                continue
            self._deliver_recorded(entry)
        self._replaying = False
        self._cursor = self._known_upto
        self._pass_inputs.clear()
        self._pass_input_events.clear()
        if not self._stopped():
            self._check_all_recorded_issued(None)
        if not self._stopped():
            self._deliver_new_inputs(buffered_signals, fired_timers, cancel_requested)
        else:
            self._fired.extend(fired_timers)
        return self._outcome(buffered_signals)

    def close(self) -> None:
        """Cancel all workflow tasks (running their ``finally`` blocks) and drop the loop."""
        if self._closing:
            return
        self._closing = True
        self.loop.stopped = False
        tasks = self.loop.live_tasks()
        for task in tasks:
            task.cancel()
        try:
            self.loop.run_until_quiet()
            # Tasks that swallowed the cancellation: close their coroutines now, with
            # this loop running, so their finally blocks see a closing instance
            # (durable calls abort) instead of running later at garbage collection,
            # outside any workflow, where an activity call would be a plain call.
            self.loop.run_callable(lambda: _close_coroutines(tasks))
        finally:
            self.loop.close()

    # --- history feeding ---------------------------------------------------------------

    def _take_new(self, history: Sequence[HistoryEntry]) -> list[HistoryEntry]:
        # binary search (history is in seq order): a cached instance handed the
        # full history still costs O(log n + new events)
        start = bisect.bisect_right(history, self._known_upto, key=lambda e: e.seq)
        entries = list(history[start:])
        expected = self._known_upto + 1
        for entry in entries:
            if entry.seq != expected:
                raise ValueError(f"history gap: expected seq {expected}, got {entry.seq}")
            expected += 1
            event = entry.event
            if event.is_command:
                self._recorded.append((entry.seq, event))
                if isinstance(
                    event,
                    (WorkflowCompleted, WorkflowFailed, WorkflowCancelled, WorkflowContinuedAsNew),
                ):
                    self._terminal_recorded = True
            elif not event.is_external:
                self._pass_inputs.append(entry.seq)
                self._pass_input_events[entry.seq] = event
        if entries:
            self._known_upto = entries[-1].seq
            self._next_seq = self._known_upto + 1
        return entries

    def _deliver_recorded(self, entry: HistoryEntry) -> None:
        self._check_all_recorded_issued(entry)
        if self._stopped():
            return
        self._cursor = entry.seq
        self._deliver(entry.seq, entry.event)
        self._run()

    def _check_all_recorded_issued(self, before: HistoryEntry | None) -> None:
        """Every recorded command before ``before`` (or anywhere, at the end of the
        recorded history) must have been issued by now."""
        limit = before.seq if before is not None else None
        while self._recorded:
            seq, rec = self._recorded[0]
            if limit is not None and seq > limit:
                return
            if isinstance(rec, PatchMarker):  # a removed ctx.patched() call: tolerated
                self._recorded.popleft()
                continue
            if self._terminal is not None:
                return
            where = f"before {before.event.describe()} at seq {before.seq}" if before else ""
            detail = "the code did not issue this recorded command " + (
                where or "by the end of the recorded history"
            )
            self._mismatch(seq, rec.describe(), "", detail)
            return

    def _deliver(self, seq: int, event: Event) -> None:
        if isinstance(event, ActivityCompleted):
            self._resolve_activity(event.scheduled_seq, result=event.result)
        elif isinstance(event, ActivityFailed):
            self._fail_activity(
                event.scheduled_seq, event.error_type, event.message, event.attempts, event.timeout
            )
        elif isinstance(event, ChildCompleted):
            self._resolve_child(event.started_seq, event.result)
        elif isinstance(event, ChildFailed):
            self._fail_child(
                event.started_seq, event.workflow_id, event.state, event.error_type, event.message
            )
        elif isinstance(event, OperationResolved):
            # the activity stays pending; a "complete"/"fail" decision is followed
            # by its ActivityCompleted/ActivityFailed event (a complete one is
            # checked against the result type first), a "retry" by a later
            # attempt's outcome event.
            self._note_decision(event.scheduled_seq, event.decision)
        elif isinstance(event, OperationUncertain):
            pass  # audit only
        elif isinstance(event, OperatorNote):
            pass  # an operator's annotation: nothing for the code to see
        elif isinstance(event, TimerFired):
            handle = self._timers.pop(event.timer_seq, None)
            if handle is not None:
                self.loop.fire_timer(handle)
        elif isinstance(event, SignalReceived):
            waiter = self._pop_waiter(event.name)
            if waiter is None:
                self._mismatch(
                    seq,
                    event.describe() + f" name={event.name!r}",
                    "",
                    f"no ctx.wait_signal({event.name!r}) was waiting at this point",
                )
                return
            waiter.set_result(event)
        elif isinstance(event, UpdateAccepted):
            self._start_update(seq, event)
        elif isinstance(event, CancelRequested):
            self._cancel_seen = True
            if self._main is not None and not self._main.done():
                self._main.cancel()

    # --- new inputs -------------------------------------------------------------------------

    def _deliver_new_inputs(
        self,
        signals: Sequence[BufferedSignal],
        fired: Sequence[int],
        cancel_requested: bool,
    ) -> None:
        if cancel_requested and not self._cancel_seen and not self._stopped():
            self._append_input(CancelRequested(seq=0))
        self._fired.extend(fired)
        due = [self._timers[s] for s in fired if s in self._timers]
        due.sort(key=lambda h: (h.when(), h.seq))
        for handle in due:
            if self._stopped():
                return
            if handle.seq in self._timers:
                self._append_input(TimerFired(timer_seq=handle.seq))
        remaining = list(signals)
        while remaining and not self._stopped():
            index = next((i for i, s in enumerate(remaining) if self._has_waiter(s.name)), None)
            if index is None:
                break
            signal = remaining.pop(index)
            seq = self._append_input(
                SignalReceived(
                    seq=0,
                    name=signal.name,
                    payload=msgspec.Raw(signal.payload),
                    message_id=signal.message_id,
                )
            )
            self._consumed.append((signal.signal_id, seq))
        self._deliver_updates(signals)

    def _append_input(self, event: Event) -> int:
        seq = self._next_seq
        self._next_seq += 1
        if hasattr(event, "seq"):
            event.seq = seq
        self._out.append((seq, event))
        self._known_upto = seq
        self._cursor = seq
        self._deliver(seq, event)
        self._run()
        return seq

    # --- commands --------------------------------------------------------------------------

    def _emit(self, event: Event) -> tuple[int, Event | None]:
        """Match ``event`` (a new command) against history; returns (seq, recorded or None)."""
        self._check_writable(event.describe())
        if self._failure is not None or self._closing or self._terminal is not None:
            raise WorkflowAbort()
        if not isinstance(event, PatchMarker):
            while self._recorded and isinstance(self._recorded[0][1], PatchMarker):
                self._recorded.popleft()  # removed ctx.patched() call: tolerated
        # A command issued now must come before the next recorded pass-written input
        # (the original run issued it before that input was delivered).
        ahead = bisect.bisect_right(self._pass_inputs, self._cursor)
        next_input = self._pass_inputs[ahead] if ahead < len(self._pass_inputs) else None
        if self._recorded and (next_input is None or self._recorded[0][0] < next_input):
            seq, recorded = self._recorded.popleft()
            if not commands_match(recorded, event):
                self._mismatch(seq, recorded.describe(), event.describe())
                raise WorkflowAbort()
            return seq, recorded
        if self._replaying and next_input is not None:
            seq = next_input
            self._mismatch(
                seq,
                self._pass_input_events[seq].describe(),
                event.describe(),
                "the code issued a command the history does not have before this recorded input",
            )
            raise WorkflowAbort()
        seq = self._next_seq
        self._next_seq += 1
        event.seq = seq  # type: ignore[attr-defined]
        self._out.append((seq, event))
        self._known_upto = seq
        return seq, None

    def _mismatch(self, seq: int | None, recorded: str, new: str, detail: str = "") -> None:
        if self._failure is None:
            self._failure = NonDeterminismError(seq, recorded, new, detail)
        self.loop.halt()

    def forbidden(self, error: ForbiddenCallError) -> None:
        """Loop/guard hook: workflow code made a forbidden call (in a query handler
        or validator the call fails, but the instance stays usable)."""
        if self._read_only:
            return
        if self._failure is None and not self._closing:
            self._failure = error
        self.loop.halt()

    def _stopped(self) -> bool:
        return self._failure is not None or self._terminal is not None

    # --- main task ---------------------------------------------------------------------------

    def _start_main(self) -> None:
        coro = self.defn.create_coroutine(self, self._input)
        self._main = self.loop.create_task(
            coro, name=f"workflow:{self.defn.name}", context=self._task_context
        )
        self._main.add_done_callback(self._on_main_done)
        self._run()

    def _on_main_done(self, task: asyncio.Task[bytes]) -> None:
        if self._failure is not None or self._closing:
            return
        if task.cancelled():
            terminal: Event = WorkflowCancelled(seq=0)
        else:
            exc = task.exception()
            if isinstance(exc, WorkflowAbort):
                return
            if isinstance(exc, ContinueAsNew):
                terminal = WorkflowContinuedAsNew(seq=0, input=msgspec.Raw(exc.input))
            elif exc is not None:
                terminal = WorkflowFailed(
                    seq=0, error_type=type(exc).__name__, message=safe_message(exc)
                )
            else:
                terminal = WorkflowCompleted(seq=0, result=msgspec.Raw(task.result()))
        try:
            seq, recorded = self._emit(terminal)
        except WorkflowAbort:
            return
        if isinstance(terminal, WorkflowContinuedAsNew):
            if isinstance(recorded, WorkflowContinuedAsNew):
                terminal.new_run_id = recorded.new_run_id
            else:  # derived: a re-run of this pass names the same new run
                run = uuid.uuid5(self.info.current_run_id, f"continue-as-new/{seq}")
                terminal.new_run_id = str(run)
        self._terminal = terminal
        self.loop.halt()

    def _run(self) -> None:
        self.loop.run_until_quiet()

    # --- outcome --------------------------------------------------------------------------------

    def _reset_outputs(self) -> None:
        self._out: list[tuple[int, Event]] = []
        self._commands: list[Command] = []
        self._consumed: list[tuple[int, int]] = []
        self._fired: list[int] = []
        self._rejected = []

    def _outcome(self, signals: Sequence[BufferedSignal]) -> PassOutcome:
        consumed_ids = {signal_id for signal_id, _ in self._consumed}
        unconsumed = sum(1 for s in signals if s.signal_id not in consumed_ids)
        if self._failure is not None:
            return PassOutcome(
                PassStatus.NONDETERMINISM,
                error=self._failure,
                next_seq=self._next_seq - len(self._out),
                unconsumed_signals=len(signals),
            )
        events = [(seq, *encode_event(event)) for seq, event in self._out]
        fired = list(dict.fromkeys([*self._fired, *self._cancelled_timer_seqs()]))
        outcome = PassOutcome(
            PassStatus.BLOCKED,
            new_events=events,
            commands=list(self._commands),
            consumed_signals=list(self._consumed),
            fired_timers=fired,
            next_seq=self._next_seq,
            unconsumed_signals=unconsumed,
            events_replayed=self._events_replayed,
            awaited_signals=sorted(n for n in self._signal_waiters if self._has_waiter(n)),
            live_children=len(self._children),
            update_results=self._update_results(),
            unfit_decisions=list(self._unfit.values()),
        )
        terminal = self._terminal
        if isinstance(terminal, WorkflowCompleted):
            outcome.status = PassStatus.COMPLETED
            outcome.result = bytes(terminal.result)
        elif isinstance(terminal, WorkflowFailed):
            outcome.status = PassStatus.FAILED
            outcome.error = WorkflowFailedError(
                self.info.execution_id, terminal.error_type, terminal.message
            )
        elif isinstance(terminal, WorkflowCancelled):
            outcome.status = PassStatus.CANCELLED
            outcome.error = WorkflowCancelledError(self.info.execution_id)
        elif isinstance(terminal, WorkflowContinuedAsNew):
            outcome.status = PassStatus.CONTINUED_AS_NEW
            outcome.continued = (uuid.UUID(terminal.new_run_id), bytes(terminal.input))
        return outcome

    def _cancelled_timer_seqs(self) -> list[int]:
        return [c.timer_seq for c in self._commands if isinstance(c, CancelTimer)]


def _close_coroutines(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        if task.done():
            continue
        coro = task.get_coro()
        close = getattr(coro, "close", None)
        if close is None:
            continue
        with contextlib.suppress(BaseException):
            close()
