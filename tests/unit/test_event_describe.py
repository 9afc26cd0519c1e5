"""The one-line descriptions the CLI's history table shows (DETAIL) and errors quote."""

from __future__ import annotations

import msgspec

from azync_flow.replay.events import (
    CancelRequested,
    OperationResolved,
    OperationUncertain,
    WorkflowCompleted,
)


def test_an_uncertain_operation_names_its_seq_and_reason() -> None:
    text = OperationUncertain(scheduled_seq=3, reason="bank timed out").describe()
    assert text == "OperationUncertain(scheduled_seq=3, bank timed out)"


def test_a_resolution_names_the_decision_who_took_it_and_why() -> None:
    text = OperationResolved(
        scheduled_seq=3, decision="complete", decided_by="ann@ops", note="bank says paid"
    ).describe()
    assert text == "OperationResolved(scheduled_seq=3, complete by ann@ops: bank says paid)"
    assert OperationResolved(scheduled_seq=4, decision="retry").describe() == (
        "OperationResolved(scheduled_seq=4, retry)"
    )


def test_completion_and_cancel_request_show_result_and_reason() -> None:
    done = WorkflowCompleted(seq=9, result=msgspec.Raw(b'{"ok":true}')).describe()
    assert done == 'WorkflowCompleted(result={"ok":true})'
    assert CancelRequested(seq=2, reason="user asked").describe() == "CancelRequested(user asked)"
