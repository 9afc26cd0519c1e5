"""Replay checks a complete decision's result against the activity's result
type in the replaying code: one that does not fit leaves the call unresolved
(reported as an unfit decision), a later decision's outcome is used, and an
activity's own result is not checked (it fails the run as before)."""

from __future__ import annotations

import msgspec

from azync_flow import activity, workflow
from azync_flow.replay import PassStatus, RecordedHistory, Replayer
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    Event,
    HistoryEntry,
    OperationResolved,
    OperationUncertain,
)
from azync_flow.replay.outcome import PassOutcome
from azync_flow.workflow import WorkflowContext


@activity(name="charge_id", idempotent=False)
def charge_id(amount: int) -> str:
    return "unused"


@workflow(name="pay")
async def pay(ctx: WorkflowContext, amount: int) -> str:
    return "charged " + await charge_id(amount)


def _replay(*events: Event) -> PassOutcome:
    head: list[Event] = [
        ActivityScheduled(seq=1, name="charge_id", version="1", input=msgspec.Raw(b"[5]")),
        OperationUncertain(scheduled_seq=1, reason="provider timed out"),
    ]
    entries = [HistoryEntry(seq, e) for seq, e in enumerate([*head, *events], start=1)]
    history = RecordedHistory.from_rows("pay", b"5", entries)
    return Replayer([pay]).replay(history).outcome


def _decided(result: bytes, by: str = "ann") -> list[Event]:
    return [
        OperationResolved(scheduled_seq=1, decision="complete", decided_by=by),
        ActivityCompleted(scheduled_seq=1, result=msgspec.Raw(result), attempts=0),
    ]


def test_an_unfit_decided_result_leaves_the_call_waiting_and_says_why() -> None:
    outcome = _replay(*_decided(b"12345"))
    assert outcome.status is PassStatus.BLOCKED
    (unfit,) = outcome.unfit_decisions
    assert (unfit.seq, unfit.activity, unfit.result) == (1, "charge_id", b"12345")
    assert unfit.result_type.name == "str"
    assert unfit.reason.startswith("the decided result 12345 does not fit the result type str")
    assert unfit.reason.endswith("; decide again")


def test_a_later_decision_that_fits_is_used() -> None:
    again = OperationUncertain(scheduled_seq=1, reason="the decided result … decide again")
    outcome = _replay(*_decided(b"12345"), again, *_decided(b'"ch_1"'))
    assert outcome.status is PassStatus.COMPLETED
    assert outcome.result == b'"charged ch_1"'
    assert outcome.unfit_decisions == []


def test_a_later_fail_decision_fails_the_call() -> None:
    failed = ActivityFailed(scheduled_seq=1, error_type="Uncertain", message="declined")
    fail = OperationResolved(scheduled_seq=1, decision="fail", decided_by="ann")
    outcome = _replay(*_decided(b"12345"), fail, failed)
    assert outcome.status is PassStatus.FAILED
    assert outcome.unfit_decisions == []


def test_a_late_report_accepted_as_the_decision_is_checked_too() -> None:
    outcome = _replay(*_decided(b"[1]", by="late report of attempt 1"))
    assert [u.result for u in outcome.unfit_decisions] == [b"[1]"]


def test_an_activitys_own_result_is_not_held_back() -> None:
    outcome = _replay(ActivityCompleted(scheduled_seq=1, result=msgspec.Raw(b"12345")))
    assert outcome.status is PassStatus.FAILED  # the decode error fails the run, as before
    assert outcome.unfit_decisions == []
    assert "result of activity 'charge_id'" in outcome.failure_reason
