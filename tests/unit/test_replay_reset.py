"""Where a reset cuts a history and what the kept part re-opens
(``azync_flow.replay.reset``, no database)."""

from __future__ import annotations

import msgspec
import pytest

from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    ChildCompleted,
    ChildStarted,
    Event,
    HistoryEntry,
    OperatorNote,
    SignalReceived,
    SignalsUndelivered,
    TimerFired,
    TimerStarted,
    WorkflowCompleted,
    WorkflowFailed,
)
from azync_flow.replay.reset import ResetPlan, plan_reset, reset_point

OK = msgspec.Raw(b'"ok"')


def _history(*events: Event) -> list[HistoryEntry]:
    return [HistoryEntry(seq=i, event=e) for i, e in enumerate(events, 1)]


#: 1 a scheduled, 2 a done, 3 timer, 4 fired, 5 signal, 6 b scheduled, 7 b failed,
#: 8 the code fails
FAILED_RUN = _history(
    ActivityScheduled(seq=1, name="a"),
    ActivityCompleted(scheduled_seq=1, result=OK),
    TimerStarted(seq=3, fire_after_s=5),
    TimerFired(timer_seq=3),
    SignalReceived(seq=5, name="go"),
    ActivityScheduled(seq=6, name="b"),
    ActivityFailed(scheduled_seq=6, error_type="E"),
    WorkflowFailed(seq=8, error_type="ActivityError"),
)


def test_first_failure_keeps_the_events_before_the_first_failed_activity() -> None:
    assert reset_point(FAILED_RUN, to="first_failure") == 6


def test_last_task_drops_the_trailing_pass_written_events_back_to_an_external_input() -> None:
    # 8 (end) and nothing before it back to 7 (external): keep 1..7
    assert reset_point(FAILED_RUN, to="last_task") == 7
    # ends with b scheduled (6) by the pass that delivered a signal (5); the
    # timer's firing (4) is an input a pass delivered too: dropped with it
    assert reset_point(FAILED_RUN[:6], to="last_task") == 3
    assert reset_point(FAILED_RUN[:2], to="last_task") == 2


def test_last_task_passes_over_operator_notes_written_after_the_last_pass() -> None:
    noted = _history(*(e.event for e in FAILED_RUN[:6]), OperatorNote(message="m"))
    assert reset_point(noted, to="last_task") == 3  # as without the note
    # the only pass (it scheduled a), then a note: back to the start
    between = _history(*(e.event for e in FAILED_RUN[:1]), OperatorNote(message="m"))
    assert reset_point(between, to="last_task") == 0


def test_to_seq_is_kept_as_given_but_never_past_the_end_of_the_run() -> None:
    assert reset_point(FAILED_RUN, to_seq=5) == 5
    assert reset_point(FAILED_RUN, to_seq=8) == 7
    undelivered = _history(WorkflowCompleted(seq=1, result=OK), SignalsUndelivered(seq=2))
    assert reset_point(undelivered, to_seq=2) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one"),
        ({"to_seq": 9}, "0..8"),
        ({"to_seq": -1}, "0..8"),
        ({"to_seq": True}, "0..8"),
        ({"to": "middle"}, "unknown reset point"),
    ],
)
def test_bad_points_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reset_point(FAILED_RUN, **kwargs)  # type: ignore[arg-type]


def test_the_plan_reruns_activities_and_reopens_timers_without_their_outcome() -> None:
    assert plan_reset(FAILED_RUN, 6) == ResetPlan(keep=6, rerun_activities=(6,))
    assert plan_reset(FAILED_RUN, 3) == ResetPlan(keep=3, open_timers=(3,))
    assert plan_reset(FAILED_RUN, 1) == ResetPlan(keep=1, rerun_activities=(1,))
    assert plan_reset(FAILED_RUN, 7) == ResetPlan(keep=7)
    assert plan_reset(FAILED_RUN, 0) == ResetPlan(keep=0)


def test_a_point_keeping_a_child_start_without_its_outcome_is_refused() -> None:
    history = _history(
        ChildStarted(seq=1, name="kid", workflow_id="x"),
        ChildCompleted(started_seq=1, result=OK),
    )
    with pytest.raises(ValueError, match="starts a child at seq 1"):
        plan_reset(history, 1)
    assert plan_reset(history, 2) == ResetPlan(keep=2)
    assert plan_reset(history, 0) == ResetPlan(keep=0)
