"""Durable calls made by workflow code (activities, timers, side effects, patches,
signal waits): the half of :class:`~azync_flow.replay.engine.WorkflowInstance`
the workflow layer calls. Each call is matched against history by ``_emit``.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from random import Random
from typing import Any

import msgspec

from azync_flow._result_type import check_result
from azync_flow.errors import (
    ActivityError,
    ActivityTimeoutError,
    ChildWorkflowError,
    ChildWorkflowTimeoutError,
    ContinueAsNew,
    DecisionError,
    NonDeterminismError,
    PayloadTooLargeError,
    WorkflowAbort,
    error_message,
)
from azync_flow.replay.events import (
    ActivityScheduled,
    ChildCancelRequested,
    ChildSignaled,
    ChildStarted,
    Event,
    PatchMarker,
    SearchAttributesUpserted,
    SideEffectRecorded,
    TimerCancelled,
    TimerStarted,
)
from azync_flow.replay.loop import DeterministicLoop, DurableTimerHandle
from azync_flow.replay.outcome import (
    CancelChild,
    CancelTimer,
    Command,
    ScheduleActivity,
    SignalChild,
    StartChild,
    StartTimer,
    UnfitDecision,
    WorkflowInfo,
)

#: Parent-close policies of a child execution (what happens to it when its
#: parent run ends while it is still live).
PARENT_CLOSE_POLICIES = ("terminate", "request_cancel", "abandon")

__all__ = ["DurableCallsMixin"]


class DurableCallsMixin:
    """Durable-call API of a workflow instance (state lives in the instance)."""

    loop: DeterministicLoop
    info: WorkflowInfo
    max_payload_bytes: int | None
    _activities: dict[int, tuple[asyncio.Future[Any], str]]
    _result_types: dict[int, Any]  # seq -> the activity's ResultType (checkable calls)
    _decided: set[int]  # seqs whose next ActivityCompleted is a complete decision's
    _unfit: dict[int, UnfitDecision]  # seqs whose decided result does not fit
    _children: dict[int, asyncio.Future[Any]]
    _timers: dict[int, DurableTimerHandle]
    _signal_waiters: dict[str, collections.deque[asyncio.Future[Any]]]
    _patches: dict[str, bool]
    _recorded: collections.deque[tuple[int, Event]]
    _pass_inputs: list[int]
    _commands: list[Command]
    _rng: Random
    _now: datetime
    _cursor: int
    _replaying: bool
    _closing: bool
    _failure: NonDeterminismError | None
    _check_writable: Callable[[str], None]  # InteractionsMixin: refuse durable calls in queries

    def _emit(self, event: Event) -> tuple[int, Event | None]:
        raise NotImplementedError

    def _stopped(self) -> bool:
        raise NotImplementedError

    # --- API used by the workflow layer ----------------------------------------------------------

    def schedule_activity(
        self,
        name: str,
        version: str,
        input_bytes: bytes,
        options: Any = None,
        result_type: Any = None,
    ) -> tuple[int, asyncio.Future[Any]]:
        """Issue (or match) an activity call; the future resolves to its result ``Raw``
        or raises :class:`ActivityError`. ``result_type`` (the activity's recordable
        result type) travels with the operation it schedules."""
        self._check_size("activity input", input_bytes)
        event = ActivityScheduled(seq=0, name=name, version=version, input=msgspec.Raw(input_bytes))
        seq, recorded = self._emit(event)
        future: asyncio.Future[Any] = self.loop.create_future()
        self._activities[seq] = (future, name)
        if result_type is not None:
            self._result_types[seq] = result_type
        if recorded is None:
            self._commands.append(
                ScheduleActivity(seq, name, version, input_bytes, options, result_type)
            )
        return seq, future

    def start_child(
        self,
        name: str,
        version: str,
        input_bytes: bytes,
        workflow_id: uuid.UUID | None,
        parent_close_policy: str,
        options: Any = None,
    ) -> tuple[int, uuid.UUID, asyncio.Future[Any]]:
        """Issue (or match) a child start. Returns ``(seq, child id, future)``; the
        future resolves to the child's result ``Raw`` or raises
        :class:`ChildWorkflowError`. Without ``workflow_id`` the child's id is
        derived from this run's id and the seq (the same on every replay).

        Raises:
            ValueError: an unknown ``parent_close_policy``.
        """
        if parent_close_policy not in PARENT_CLOSE_POLICIES:
            raise ValueError(
                f"parent_close_policy must be one of {', '.join(PARENT_CLOSE_POLICIES)}, "
                f"got {parent_close_policy!r}"
            )
        self._check_size("child workflow input", input_bytes)
        event = ChildStarted(
            seq=0,
            name=name,
            workflow_id="",
            input=msgspec.Raw(input_bytes),
            parent_close_policy=parent_close_policy,
        )
        seq, recorded = self._emit(event)
        if isinstance(recorded, ChildStarted):
            child_id = uuid.UUID(recorded.workflow_id)
        else:
            child_id = workflow_id or uuid.uuid5(self.info.current_run_id, f"child/{seq}")
            event.workflow_id = str(child_id)
            self._commands.append(
                StartChild(seq, child_id, name, version, input_bytes, parent_close_policy, options)
            )
        future: asyncio.Future[Any] = self.loop.create_future()
        self._children[seq] = future
        return seq, child_id, future

    def signal_child(
        self, started_seq: int, child_id: uuid.UUID, name: str, payload: bytes
    ) -> None:
        """Issue (or match) a signal to a child; its message id is derived from this
        run's id and the seq, so a re-run commit cannot deliver it twice."""
        self._check_size(f"payload of signal {name!r}", payload)
        event = ChildSignaled(
            seq=0,
            started_seq=started_seq,
            workflow_id=str(child_id),
            name=name,
            payload=msgspec.Raw(payload),
        )
        seq, recorded = self._emit(event)
        if recorded is None:
            event.message_id = f"{self.info.current_run_id}/{seq}"
            self._commands.append(SignalChild(seq, child_id, name, payload, event.message_id))

    def cancel_child(self, started_seq: int, child_id: uuid.UUID) -> None:
        """Issue (or match) a cancel request to a child."""
        event = ChildCancelRequested(seq=0, started_seq=started_seq, workflow_id=str(child_id))
        seq, recorded = self._emit(event)
        if recorded is None:
            self._commands.append(CancelChild(seq, child_id))

    def continue_as_new(self, input_bytes: bytes) -> ContinueAsNew:
        """The control-flow exception ending this run with a new run's input."""
        if self._failure is not None or self._closing:
            raise WorkflowAbort()
        self._check_size("continue-as-new input", input_bytes)
        return ContinueAsNew(input_bytes)

    def start_timer(self, handle: DurableTimerHandle, delay: float) -> None:
        """Loop hook: a durable timer was requested (``call_later``/``asyncio.sleep``)."""
        seq, recorded = self._emit(TimerStarted(seq=0, fire_after_s=delay))
        handle.seq = seq
        self._timers[seq] = handle
        if recorded is None:
            self._commands.append(StartTimer(seq, timedelta(seconds=delay)))

    def cancel_timer(self, handle: DurableTimerHandle) -> None:
        """Loop hook: a durable timer was cancelled before it fired."""
        if handle.seq not in self._timers or self._closing or self._stopped():
            return
        del self._timers[handle.seq]
        seq, recorded = self._emit(TimerCancelled(seq=0, timer_seq=handle.seq))
        if recorded is None:
            self._commands.append(CancelTimer(seq, handle.seq))

    def side_effect(self, kind: str, compute: Callable[[], bytes]) -> bytes:
        """Record ``compute()`` once; on replay return the recorded bytes."""
        event = SideEffectRecorded(seq=0, kind=kind)
        _, recorded = self._emit(event)
        if recorded is not None:
            return bytes(recorded.value)  # type: ignore[attr-defined]
        value = compute()
        self._check_size(f"side effect {kind}", value)
        event.value = msgspec.Raw(value)
        return value

    def upsert_search_attributes(self, attributes: dict[str, Any]) -> None:
        """Issue (or match) a search attribute upsert; ``attributes`` in stored
        form (checked by the caller). The store applies it with the commit."""
        self._emit(SearchAttributesUpserted(seq=0, attributes=dict(attributes)))

    def now(self) -> datetime:
        """Deterministic UTC time: the pass's backend time, recorded on first call."""
        raw = self.side_effect("now", lambda: msgspec.json.encode(self._now))
        return msgspec.json.decode(raw, type=datetime)

    def random(self) -> float:
        """Deterministic ``random.random()`` seeded by the execution id."""
        self._check_writable("ctx.random()")
        return self._rng.random()

    @property
    def rng(self) -> Random:
        """The deterministic PRNG (same sequence on every replay)."""
        self._check_writable("ctx.rng")
        return self._rng

    def uuid4(self) -> uuid.UUID:
        """Deterministic version-4 UUID from the seeded PRNG."""
        self._check_writable("ctx.uuid4()")
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def patched(self, patch_id: str) -> bool:
        """Version gate: True for code paths added after the execution reached this point."""
        if patch_id in self._patches:
            return self._patches[patch_id]
        self._check_writable(f"ctx.patched({patch_id!r})")
        if self._failure is not None or self._closing:
            raise WorkflowAbort()
        if self._recorded:
            _, recorded = self._recorded[0]
            hit = isinstance(recorded, PatchMarker) and recorded.patch_id == patch_id
            if hit:
                self._recorded.popleft()
        elif self._replaying and bisect.bisect_right(self._pass_inputs, self._cursor) < len(
            self._pass_inputs
        ):
            hit = False
        else:
            self._emit(PatchMarker(seq=0, patch_id=patch_id))
            hit = True
        self._patches[patch_id] = hit
        return hit

    def add_signal_waiter(self, name: str) -> asyncio.Future[Any]:
        """Register a waiter for the next signal ``name`` (FIFO among waiters)."""
        self._check_writable(f"ctx.wait_signal({name!r})")
        future: asyncio.Future[Any] = self.loop.create_future()
        self._signal_waiters.setdefault(name, collections.deque()).append(future)
        return future

    def remove_signal_waiter(self, name: str, future: asyncio.Future[Any]) -> None:
        waiters = self._signal_waiters.get(name)
        if waiters is not None and future in waiters:
            waiters.remove(future)

    def _has_waiter(self, name: str) -> bool:
        return any(not f.done() for f in self._signal_waiters.get(name, ()))

    def _pop_waiter(self, name: str) -> asyncio.Future[Any] | None:
        waiters = self._signal_waiters.get(name)
        while waiters:
            future = waiters.popleft()
            if not future.done():
                return future
        return None

    def _check_size(self, what: str, data: bytes) -> None:
        limit = self.max_payload_bytes
        if limit is not None and len(data) > limit:
            raise PayloadTooLargeError(what, len(data), limit)

    # --- activity resolution ---------------------------------------------------------------

    def _note_decision(self, seq: int, decision: str) -> None:
        """An OperationResolved of the call at ``seq``: a complete decision's
        result (the ActivityCompleted after it) is checked before it is used."""
        if decision == "complete":
            self._decided.add(seq)

    def _resolve_activity(self, seq: int, result: msgspec.Raw) -> None:
        if seq in self._decided:
            self._decided.discard(seq)
            unfit = self._misfit(seq, result)
            if unfit is not None:  # the call waits for a new decision
                self._unfit[seq] = unfit
                return
        self._unfit.pop(seq, None)
        self._result_types.pop(seq, None)
        pending = self._activities.pop(seq, None)
        if pending is not None and not pending[0].done():
            pending[0].set_result(result)

    def _misfit(self, seq: int, result: msgspec.Raw) -> UnfitDecision | None:
        """The decided ``result`` of the call at ``seq`` when it does not fit the
        activity's result type in this code (the check a decision passes when it
        is made); None when it fits or nothing can be checked."""
        expected = self._result_types.get(seq)
        pending = self._activities.get(seq)
        if expected is None or pending is None:
            return None
        data = bytes(result)
        try:
            check_result(data, expected)
        except DecisionError as exc:
            reason = f"{error_message(exc)}; decide again"
            return UnfitDecision(seq, pending[1], data, reason, expected)
        return None

    def _fail_activity(
        self, seq: int, error_type: str, message: str, attempts: int, timeout: str = ""
    ) -> None:
        self._decided.discard(seq)
        self._unfit.pop(seq, None)
        self._result_types.pop(seq, None)
        pending = self._activities.pop(seq, None)
        if pending is not None and not pending[0].done():
            error = (
                ActivityTimeoutError(pending[1], error_type, message, attempts, seq, timeout)
                if timeout
                else ActivityError(pending[1], error_type, message, attempts, seq)
            )
            pending[0].set_exception(error)

    # --- child resolution ---------------------------------------------------------------------

    def _resolve_child(self, seq: int, result: msgspec.Raw) -> None:
        future = self._children.pop(seq, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _fail_child(
        self, seq: int, child_id: str, state: str, error_type: str, message: str
    ) -> None:
        future = self._children.pop(seq, None)
        if future is not None and not future.done():
            error_class = (
                ChildWorkflowTimeoutError
                if error_type == "WorkflowTimeoutError"
                else ChildWorkflowError
            )
            future.set_exception(error_class(child_id, state, error_type, message))
