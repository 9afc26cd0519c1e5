"""Where a reset cuts a run's history, and what the kept part leaves open.

A reset starts a new run of an execution that keeps the history of the
current run up to a point and continues from there with the current code
(``WorkflowHandle.reset``). Every event boundary is a workflow-task boundary
for this engine: the new run's first pass replays the kept events (the
recorded commands are matched, the recorded inputs delivered) and whatever the
code does next is new. So the point is where the caller says, moved back only
past terminal events (a run cannot continue after its end).

The kept history may schedule things whose outcome it does not hold:

* an activity scheduled without its ``ActivityCompleted``/``ActivityFailed``
  runs again (its outcome came after the point, or never came);
* a timer started and neither fired nor cancelled is started again with its
  original deadline (it fires at once if that passed);
* a child started without its outcome is refused: the child's outcome goes to
  the run that started it, so the new run would wait for it forever.

This module does no I/O: it reads decoded history and returns the plan the
store carries out in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from azync_flow.replay.events import (
    TERMINAL_TYPES,
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    ChildCompleted,
    ChildFailed,
    ChildStarted,
    HistoryEntry,
    OperatorNote,
    SignalsUndelivered,
    TimerCancelled,
    TimerFired,
    TimerStarted,
    WorkflowFailed,
)

__all__ = ["ResetPlan", "ResetTarget", "plan_reset", "reset_point"]

#: Named reset points: ``"first_failure"`` keeps the events before the first
#: failure (an activity that failed for good, a child that did not succeed, or
#: the code raising); ``"last_task"`` drops what the last workflow task wrote
#: (the trailing commands, inputs a pass delivered and the end of the run), so
#: the code runs that task again.
ResetTarget = Literal["first_failure", "last_task"]

_FAILURES = (ActivityFailed, ChildFailed, WorkflowFailed)


class ResetPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a reset keeps and what it re-opens.

    Attributes:
        keep: the new run keeps events ``1..keep`` (0: none, a fresh start).
        rerun_activities: seqs of the kept ``ActivityScheduled`` events without
            an outcome in the kept history: their activities run again.
        open_timers: seqs of the kept ``TimerStarted`` events neither fired
            nor cancelled in the kept history: started again.
    """

    keep: int
    rerun_activities: tuple[int, ...] = ()
    open_timers: tuple[int, ...] = ()


def _pass_input(entry: HistoryEntry) -> bool:
    """An input a workflow task delivered and wrote (a timer fired, a signal
    received, a cancel request, an accepted update)."""
    kind = type(entry.event)
    return not kind.is_command and not kind.is_external


def reset_point(
    history: Sequence[HistoryEntry],
    *,
    to_seq: int | None = None,
    to: ResetTarget | None = None,
) -> int:
    """The last seq a reset keeps.

    Args:
        history: the current run's history, in seq order.
        to_seq: keep events ``1..to_seq`` (0: none).
        to: a named point (exactly one of ``to_seq`` and ``to``).

    Returns:
        The seq to keep up to, moved back before the run's terminal events.

    Raises:
        ValueError: neither or both given, ``to_seq`` negative or past the
            end of the history, an unknown ``to``, or ``"first_failure"`` on a
            history without a failure.
    """
    if (to_seq is None) == (to is None):
        raise ValueError("give exactly one reset point: to_seq=N or to='first_failure'/'last_task'")
    last = history[-1].seq if history else 0
    if to_seq is not None:
        if isinstance(to_seq, bool) or not isinstance(to_seq, int) or not 0 <= to_seq <= last:
            raise ValueError(
                f"to_seq must be a seq of this run's history (0..{last}), got {to_seq}"
            )
        point = to_seq
    elif to == "first_failure":
        failed = [e.seq for e in history if isinstance(e.event, _FAILURES)]
        if not failed:
            raise ValueError("this run's history has no failure to reset before")
        point = failed[0] - 1
    elif to == "last_task":
        point = last
        ended = [e.seq for e in history if type(e.event).__name__ in TERMINAL_TYPES]
        if ended:
            point = ended[0] - 1
        # operators' notes written after the last task are no part of it
        while point > 0 and isinstance(history[point - 1].event, OperatorNote):
            point -= 1
        # a pass writes the inputs it delivers, then its commands
        while point > 0 and type(history[point - 1].event).is_command:
            point -= 1
        while point > 0 and _pass_input(history[point - 1]):
            point -= 1
    else:
        raise ValueError(f"unknown reset point {to!r}; use 'first_failure' or 'last_task'")
    ended = [
        e.seq
        for e in history
        if type(e.event).__name__ in TERMINAL_TYPES or isinstance(e.event, SignalsUndelivered)
    ]
    return min(point, ended[0] - 1) if ended else point


def plan_reset(history: Sequence[HistoryEntry], keep: int) -> ResetPlan:
    """What keeping events ``1..keep`` of ``history`` re-opens.

    Raises:
        ValueError: the kept history starts a child without its outcome
            (names the seq), or ``keep`` is not within the history.
    """
    last = history[-1].seq if history else 0
    if not 0 <= keep <= last:
        raise ValueError(f"cannot keep {keep} events of a history of {last}")
    kept = [e for e in history if e.seq <= keep]
    activities: dict[int, bool] = {}
    timers: dict[int, bool] = {}
    children: dict[int, bool] = {}
    for entry in kept:
        event = entry.event
        if isinstance(event, ActivityScheduled):
            activities[entry.seq] = False
        elif isinstance(event, ActivityCompleted | ActivityFailed):
            activities[event.scheduled_seq] = True
        elif isinstance(event, TimerStarted):
            timers[entry.seq] = False
        elif isinstance(event, TimerFired | TimerCancelled):
            timers[event.timer_seq] = True
        elif isinstance(event, ChildStarted):
            children[entry.seq] = False
        elif isinstance(event, ChildCompleted | ChildFailed):
            children[event.started_seq] = True
    open_children = sorted(seq for seq, done in children.items() if not done)
    if open_children:
        raise ValueError(
            f"cannot reset to seq {keep}: the kept history starts a child at seq "
            f"{open_children[0]} without its outcome (the child reports to the run that "
            "started it); reset to before that start, or after the child's outcome"
        )
    return ResetPlan(
        keep=keep,
        rerun_activities=tuple(sorted(s for s, done in activities.items() if not done)),
        open_timers=tuple(sorted(s for s, done in timers.items() if not done)),
    )
