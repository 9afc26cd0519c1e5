"""The console's pictures, laid out without a browser: the timeline of a run
(attempts, backoff, timers, signals) and the graph of a DAG run
(depth columns, the compensation chain in the order it ran)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from azync_flow.console._graph import TaskInfo, compensation_order, lay_out_dag
from azync_flow.console._timeline import Failure, Operation, attempts_of, lay_out
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityScheduled,
    SignalReceived,
    TimerFired,
    TimerStarted,
    UpdateAccepted,
    UpdateCompleted,
)
from azync_flow.retry import RetryPolicy

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def charge(**overrides: object) -> Operation:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "seq": 1,
        "activity": "charge",
        "state": "succeeded",
        "attempt": 3,
        "max_attempts": 5,
        "enqueued_at": at(0),
        "started_at": at(7),
        "completed_at": at(8),
        "run_at": at(7),
        "lease_until": None,
        "last_error": "",
        "retry": RetryPolicy(initial_interval=timedelta(seconds=2), jitter=0),
        "failures": [Failure(1, "busy", at(1)), Failure(2, "busy again", at(4))],
    }
    values.update(overrides)
    return Operation(**values)  # type: ignore[arg-type]


def test_attempts_are_separated_by_the_backoff_of_their_retry_policy() -> None:
    attempts = attempts_of(charge(), now=at(10))
    assert [(a.number, a.outcome) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    first, second, third = attempts
    assert first.start == at(0)
    assert first.estimated
    assert second.start == at(1 + 2)  # 2 s after the first failure: the policy's delay
    assert second.estimated
    assert (third.start, third.end, third.estimated) == (at(7), at(8), False)


def test_a_running_attempt_lasts_until_now_and_a_dead_one_ends_red() -> None:
    running = attempts_of(charge(state="active", completed_at=None), now=at(9))
    assert (running[-1].outcome, running[-1].end) == ("running", at(9))
    dead = charge(state="dead", attempt=2, completed_at=at(4), started_at=at(3))
    assert [a.outcome for a in attempts_of(dead, now=at(9))] == ["failed", "dead"]


def test_an_operators_decision_is_not_drawn_as_an_attempt() -> None:
    op = charge(
        state="succeeded",
        attempt=1,
        started_at=at(0.5),
        failures=[
            Failure(1, "uncertain: timed out", at(2)),
            Failure(1, "resolved retry by ann", at(5)),
        ],
    )
    assert [a.outcome for a in attempts_of(op, now=at(9))] == ["uncertain"]


def test_an_attempt_waiting_for_a_decision_is_one_uncertain_bar_whatever_notes_follow() -> None:
    op = charge(
        state="uncertain",
        attempt=1,
        started_at=at(0.5),
        completed_at=None,
        failures=[
            Failure(1, "uncertain: the provider timed out", at(2)),
            Failure(1, "reconcile: unknown: PSP lookup down", at(2.1)),
            Failure(1, "late outcome ignored: attempt 1 reported completed", at(3)),
        ],
    )
    attempts = attempts_of(op, now=at(9))
    assert [(a.number, a.outcome, a.start, a.end) for a in attempts] == [
        (1, "uncertain", at(0.5), at(2))
    ]
    scheduled = ActivityScheduled(seq=1, name="settle")
    tl = lay_out([(1, at(0), scheduled)], [op], start=at(0), end=None, now=at(9))
    assert [b.kind for b in tl.bars] == ["uncertain"]
    assert "waiting for a decision" in tl.bars[0].title


def test_the_timeline_has_a_lane_per_command_and_marks_signals() -> None:
    history = [
        (1, at(0), ActivityScheduled(seq=1, name="charge")),
        (2, at(8), ActivityCompleted(scheduled_seq=1)),
        (3, at(8), TimerStarted(seq=3, fire_after_s=5)),
        (4, at(13), TimerFired(timer_seq=3)),
        (5, at(14), SignalReceived(seq=5, name="approve")),
    ]
    tl = lay_out(history, [charge()], start=at(0), end=at(15), now=at(15))
    assert [lane.label for lane in tl.lanes] == ["#1 charge", "#3 timer 5.0s", "signals"]
    assert sorted(b.kind for b in tl.bars) == ["failed", "failed", "succeeded", "timer"]
    assert len(tl.gaps) == 2  # the two backoffs
    assert [m.label for m in tl.marks] == ["approve"]
    xs = [b.x for b in tl.bars if b.kind != "timer"]
    assert xs == sorted(xs)
    assert all(0 <= b.x <= tl.width for b in tl.bars)


def test_a_long_idle_wait_is_cut_so_what_happened_stays_readable() -> None:
    history = [(1, at(0), ActivityScheduled(seq=1, name="charge"))]
    op = charge(state="succeeded", attempt=1, failures=[], started_at=at(0), completed_at=at(2))
    tl = lay_out(history, [op], start=at(0), end=None, now=at(86400), awaited_signals=["ok"])
    assert tl.cut  # "now is 23h ... further"
    (bar,) = tl.bars
    assert bar.width > 100  # 2 s of work is not a sliver of a day
    assert [m.kind for m in tl.marks] == ["waiting"]


def task(key: str, state: str = "succeeded", done: float | None = None) -> TaskInfo:
    return TaskInfo(key, f"saga/{key}", state, 1, "", at(done) if done is not None else None)


def test_the_graph_puts_each_task_right_of_its_dependencies() -> None:
    deps = [("charge", "reserve"), ("ship", "charge"), ("notify", "reserve")]
    g = lay_out_dag([task("reserve"), task("charge"), task("ship", "dead"), task("notify")], deps)
    x = {n.key: n.x for n in g.nodes}
    assert x["reserve"] < x["charge"] < x["ship"]
    assert x["notify"] == x["charge"]
    assert len(g.edges) == 3
    assert g.compensation_y is None


def test_compensations_are_numbered_in_the_order_they_ran() -> None:
    tasks = [task("reserve"), task("charge"), task("ship", "dead"),
             task("comp:reserve", done=9), task("comp:charge", done=8)]  # fmt: skip
    deps = [("charge", "reserve"), ("ship", "charge"), ("comp:reserve", "comp:charge")]
    assert [t.key for t in compensation_order(tasks, deps)] == ["comp:charge", "comp:reserve"]
    g = lay_out_dag(tasks, deps)
    numbered = sorted((n.order, n.key) for n in g.nodes if n.order)
    assert numbered == [(1, "comp:charge"), (2, "comp:reserve")]
    assert [e.compensation for e in g.edges].count(True) == 1


def test_an_update_is_a_mark_where_it_was_accepted_and_a_bar_while_its_handler_ran() -> None:
    history = [
        (1, at(1), UpdateAccepted(seq=1, update_id="u1", name="address")),
        (2, at(3), UpdateCompleted(seq=2, update_id="u1", name="address")),
    ]
    tl = lay_out(history, [], start=at(0), end=at(4), now=at(4))
    assert [lane.label for lane in tl.lanes] == ["updates"]
    ((mark, bar),) = [(m, b) for m in tl.marks for b in tl.bars]
    assert (mark.kind, mark.label, bar.kind) == ("update", "address", "update")
    assert mark.x == bar.x
    assert "completed" in bar.title
