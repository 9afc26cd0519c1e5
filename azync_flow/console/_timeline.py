"""The timeline of one run, laid out for an inline SVG: one lane per activity
(a bar per attempt, the backoff between attempts as a dashed gap), per timer
and per child, a lane of signals and one of updates, over a time axis.

Pure: it takes what the pages read (history rows, operations, timers) and
returns shapes with coordinates; the template draws them (escaping every label).
Attempt starts are stored for the latest attempt only (a job's ``started_at``);
an earlier attempt is drawn from the end of the backoff its retry policy gave it
after the previous failure (the policy's un-jittered delay), and says so in its
tooltip.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from azync_flow._decisions import NOTE_PREFIXES
from azync_flow._display import age
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    CancelRequested,
    ChildCompleted,
    ChildFailed,
    ChildStarted,
    Event,
    OperationResolved,
    OperationUncertain,
    SignalReceived,
    TimerCancelled,
    TimerFired,
    TimerStarted,
    UpdateAccepted,
    UpdateCompleted,
    WorkflowTerminated,
    WorkflowTimedOut,
)
from azync_flow.retry import RetryPolicy

__all__ = [
    "Attempt",
    "Bar",
    "Lane",
    "Mark",
    "Operation",
    "Timeline",
    "attempts_of",
    "lay_out",
]

#: Drawing sizes (px): the whole width, the label column, one lane.
WIDTH = 1100
LABEL = 210
LANE = 24
TOP = 28


@dataclass(frozen=True)
class Failure:
    """One recorded failed attempt (a row of the job's attempt history)."""

    attempt: int
    error: str
    at: datetime


@dataclass
class Operation:
    """An activity operation as the page reads it: its job and failed attempts."""

    id: uuid.UUID
    seq: int
    activity: str
    state: str
    attempt: int
    max_attempts: int
    enqueued_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    run_at: datetime
    lease_until: datetime | None
    last_error: str
    retry: RetryPolicy | None
    failures: list[Failure] = field(default_factory=list)


@dataclass(frozen=True)
class Attempt:
    """One attempt of an operation on the time axis.

    Attributes:
        outcome: ``failed``, ``uncertain``, ``succeeded``, ``running`` or ``dead``.
        estimated: the start is derived from the retry policy, not recorded.
    """

    number: int
    start: datetime
    end: datetime
    outcome: str
    error: str = ""
    estimated: bool = False


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    kind: str
    title: str
    dashed: bool = False


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    kind: str
    title: str
    label: str = ""

    @property
    def label_left(self) -> bool:
        """Near the right edge the label goes to the left of the mark."""
        return self.x > WIDTH - 160


@dataclass(frozen=True)
class Lane:
    y: float
    label: str
    href: str = ""


@dataclass
class Timeline:
    """What the template draws: lanes (labels), bars, gaps (dashed lines),
    marks (diamonds) and the axis ticks ``(x, text)``."""

    width: int
    height: int
    lanes: list[Lane] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    gaps: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)
    now_x: float | None = None
    #: How far past the right edge "now" is when a long idle wait was cut off.
    cut: str = ""


def attempts_of(op: Operation, now: datetime) -> list[Attempt]:
    """The attempts of ``op`` in order, each with its start, end and outcome.

    Rows that note something about an attempt rather than record one (the
    reconcile hook's verdict, a refused late report, ``resolved ... by ...``)
    are left out, so an uncertain attempt is drawn once, as uncertain. While
    the operation waits for a decision its uncertain attempt says so.
    """
    fails = [f for f in op.failures if not f.error.startswith(NOTE_PREFIXES)]
    out: list[Attempt] = []
    prev_end: datetime | None = None
    for i, f in enumerate(fails):
        last_recorded = f.attempt == op.attempt and i == len(fails) - 1
        if last_recorded and op.started_at is not None and op.started_at <= f.at:
            start, estimated = op.started_at, False
        elif prev_end is None:
            start, estimated = min(op.enqueued_at, f.at), True
        else:
            delay = op.retry.base_delay(fails[i - 1].attempt) if op.retry else timedelta(0)
            start, estimated = min(max(prev_end + delay, prev_end), f.at), True
        outcome = "uncertain" if f.error.startswith("uncertain") else "failed"
        if last_recorded and op.state == "dead":
            outcome = "dead"
        out.append(Attempt(f.attempt, start, f.at, outcome, f.error, estimated))
        prev_end = f.at
    recorded = {a.number for a in out}
    if op.attempt and op.attempt not in recorded and op.started_at is not None:
        if op.state == "active":
            out.append(Attempt(op.attempt, op.started_at, now, "running"))
        elif op.state == "succeeded" and op.completed_at is not None:
            out.append(Attempt(op.attempt, op.started_at, op.completed_at, "succeeded"))
    return out


class _Axis:
    def __init__(self, t0: datetime, t1: datetime) -> None:
        self.t0 = t0
        span = max((t1 - t0).total_seconds(), 0.001)
        self.scale = (WIDTH - LABEL - 20) / span
        self.span = span

    def x(self, t: datetime) -> float:
        """``t`` on the axis, clamped to the drawing (a timer due next week ends at the edge)."""
        x = LABEL + max((t - self.t0).total_seconds(), 0.0) * self.scale
        return round(min(x, WIDTH - 8.0), 1)

    def ticks(self) -> list[tuple[float, str]]:
        step = _nice_step(self.span / 6)
        out, s = [], 0.0
        while s <= self.span + 1e-9:
            out.append((round(LABEL + s * self.scale, 1), "+" + (age(s) or "0s")))
            s += step
        return out


def _nice_step(raw: float) -> float:
    for step in (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
                 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 604800):  # fmt: skip
        if step >= raw:
            return float(step)
    return 2592000.0


def _bar(axis: _Axis, y: float, start: datetime, end: datetime, kind: str, title: str) -> Bar:
    x = axis.x(start)
    return Bar(x, y, max(axis.x(end) - x, 2.0), kind, title)


@dataclass
class _Rows:
    """History rows (seq, time, event) grouped by what they are about."""

    at: dict[int, datetime] = field(default_factory=dict)
    ends: dict[int, tuple[datetime, Event]] = field(default_factory=dict)
    others: list[tuple[int, datetime, Event]] = field(default_factory=list)


def _index(history: list[tuple[int, datetime, Event]]) -> _Rows:
    rows = _Rows()
    for seq, at, ev in history:
        rows.at[seq] = at
        ref = _refers_to(ev)
        if ref is not None:
            rows.ends.setdefault(ref, (at, ev))
        rows.others.append((seq, at, ev))
    return rows


def _refers_to(ev: Event) -> int | None:
    """The seq of the command an input event closes (None for others)."""
    if isinstance(ev, ActivityCompleted | ActivityFailed):
        return ev.scheduled_seq
    if isinstance(ev, TimerFired):
        return ev.timer_seq
    if isinstance(ev, TimerCancelled):
        return ev.timer_seq
    if isinstance(ev, ChildCompleted | ChildFailed):
        return ev.started_seq
    return None


def lay_out(
    history: list[tuple[int, datetime, Event]],
    operations: list[Operation],
    *,
    start: datetime,
    end: datetime | None,
    now: datetime,
    awaited_signals: list[str] | None = None,
    child_href: str = "",
) -> Timeline:
    """Lay out one run's timeline.

    Args:
        history: the run's rows as ``(seq, recorded at, event)``, in seq order.
        operations: the execution's activity operations (matched by seq).
        start: when the run began; the axis starts there.
        end: when it ended (None: live, the axis runs to ``now``).
        now: the backend clock's now.
        awaited_signals: signal names the run waits for now (drawn at its end).
        child_href: URL prefix of a child execution's page (its id is appended).

    Returns:
        The :class:`Timeline`; its lanes in the order their commands were recorded.
    """
    rows = _index(history)
    ops = {op.seq: op for op in operations}
    recorded = max([start, *(at for _, at, _ in history)])
    for op in operations:
        recorded = max(recorded, op.completed_at or op.started_at or op.enqueued_at)
    last = max(end or now, recorded)
    cut = ""
    busy = (recorded - start).total_seconds()
    if end is None and busy > 0 and (now - recorded).total_seconds() > 3 * busy:
        # A run parked for long: draw what happened, and the wait to the edge.
        last = recorded + timedelta(seconds=busy)
        cut = age(now - last)
    axis = _Axis(start, last)
    tl = Timeline(width=WIDTH, height=0, ticks=axis.ticks(), cut=cut)
    y = float(TOP)
    signals_y: float | None = None
    updates_y: float | None = None
    accepted: dict[str, datetime] = {}
    for seq, at, ev in rows.others:
        if isinstance(ev, ActivityScheduled):
            tl.lanes.append(Lane(y, f"#{seq} {ev.name}"))
            _activity(tl, axis, y, at, ops.get(seq), rows.ends.get(seq), now)
            y += LANE
        elif isinstance(ev, TimerStarted):
            tl.lanes.append(Lane(y, f"#{seq} timer {age(ev.fire_after_s) or '0s'}"))
            _timer(tl, axis, y, at, ev, rows.ends.get(seq), now)
            y += LANE
        elif isinstance(ev, ChildStarted):
            tl.lanes.append(Lane(y, f"#{seq} child {ev.name}", child_href + ev.workflow_id))
            done = rows.ends.get(seq)
            kind = "succeeded" if done and isinstance(done[1], ChildCompleted) else "failed"
            tl.bars.append(
                _bar(axis, y, at, done[0] if done else now, kind if done else "running",
                     f"child {ev.name} {ev.workflow_id}: " + (kind if done else "running"))
            )  # fmt: skip
            y += LANE
        elif isinstance(ev, SignalReceived):
            if signals_y is None:
                signals_y, y = y, y + LANE
                tl.lanes.append(Lane(signals_y, "signals"))
            tl.marks.append(Mark(axis.x(at), signals_y, "signal", f"signal {ev.name}", ev.name))
        elif isinstance(ev, UpdateAccepted | UpdateCompleted):
            if updates_y is None:
                updates_y, y = y, y + LANE
                tl.lanes.append(Lane(updates_y, "updates"))
            if isinstance(ev, UpdateAccepted):
                accepted[ev.update_id] = at
                tl.marks.append(
                    Mark(axis.x(at), updates_y, "update", f"update {ev.name} accepted", ev.name)
                )
            else:  # the handler ran from its acceptance to its completion
                outcome = f"failed: {ev.error_type}: {ev.message}" if ev.error_type else "completed"
                tl.bars.append(_bar(axis, updates_y, accepted.get(ev.update_id, at), at,
                                    "update", f"update {ev.name} {outcome}"))  # fmt: skip
        elif isinstance(ev, CancelRequested | WorkflowTerminated | WorkflowTimedOut):
            tl.marks.append(Mark(axis.x(at), TOP - 10, "cancel", ev.describe()))
    if awaited_signals and end is None:
        if signals_y is None:
            signals_y, y = y, y + LANE
            tl.lanes.append(Lane(signals_y, "signals"))
        for name in awaited_signals:
            tl.marks.append(Mark(axis.x(now), signals_y, "waiting", f"waiting for signal {name}",
                                 f"waiting: {name}"))  # fmt: skip
    tl.height = int(y) + 8
    if end is None:
        tl.now_x = axis.x(now)
    return tl


def _activity(
    tl: Timeline,
    axis: _Axis,
    y: float,
    scheduled: datetime,
    op: Operation | None,
    done: tuple[datetime, Event] | None,
    now: datetime,
) -> None:
    if op is None:  # no job row (vacuumed): one bar from the command to its outcome
        ok = done is not None and isinstance(done[1], ActivityCompleted)
        outcome = ("succeeded" if ok else "failed") if done else "running"
        tl.bars.append(_bar(axis, y, scheduled, done[0] if done else now, outcome, outcome))
        return
    attempts = attempts_of(op, now)
    prev: Attempt | None = None
    for a in attempts:
        if prev is not None and a.start > prev.end:
            gap = _bar(axis, y, prev.end, a.start, "backoff", f"backoff {age(a.start - prev.end)}")
            tl.gaps.append(gap)
        how = " (start from the retry policy)" if a.estimated else ""
        if a.outcome == "uncertain" and op.state == "uncertain" and a is attempts[-1]:
            how += ", waiting for a decision"
        detail = f": {a.error}" if a.error else ""
        title = (
            f"{op.activity} attempt {a.number}: {a.outcome}, {age(a.end - a.start) or '0ms'}"
            f"{how}{detail}"
        )
        tl.bars.append(_bar(axis, y, a.start, a.end, a.outcome, title))
        prev = a
    if op.state in ("pending", "scheduled") and prev is not None:
        tl.gaps.append(
            _bar(axis, y, prev.end, op.run_at, "backoff", f"next attempt due {op.run_at:%H:%M:%S}")
        )
    if op.state == "active" and op.lease_until is not None:
        tl.marks.append(
            Mark(axis.x(op.lease_until), y, "lease", f"lease until {op.lease_until:%H:%M:%S} UTC")
        )
    if done is not None and isinstance(done[1], OperationUncertain | OperationResolved):
        tl.marks.append(Mark(axis.x(done[0]), y, "uncertain", done[1].describe()))


def _timer(
    tl: Timeline,
    axis: _Axis,
    y: float,
    at: datetime,
    ev: TimerStarted,
    done: tuple[datetime, Event] | None,
    now: datetime,
) -> None:
    due = at + timedelta(seconds=ev.fire_after_s)
    if done is None:
        tl.bars.append(_bar(axis, y, at, now, "timer", f"timer due {due:%H:%M:%S} UTC"))
        tl.gaps.append(_bar(axis, y, now, max(due, now), "timer-due", f"due {due:%H:%M:%S} UTC"))
        return
    fired = isinstance(done[1], TimerFired)
    title = f"timer {'fired' if fired else 'cancelled'} at {done[0]:%H:%M:%S} UTC"
    tl.bars.append(_bar(axis, y, at, done[0], "timer" if fired else "cancelled", title))
