"""The one-line descriptions the CLI's history table shows (DETAIL) and errors quote."""

from __future__ import annotations

import msgspec

from azync_flow.replay.events import (
    ActivityFailed,
    CancelRequested,
    OperationResolved,
    OperationUncertain,
    SignalReceived,
    WorkflowCompleted,
)

LONG_REASON = (
    "the bank's gateway answered 504 after the transfer request was sent, so whether "
    "it moved the money is unknown"
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


def test_a_long_reason_or_message_is_cut_at_a_word_boundary_with_an_ellipsis() -> None:
    uncertain = OperationUncertain(scheduled_seq=3, reason=LONG_REASON).describe()
    failed = ActivityFailed(scheduled_seq=3, error_type="Uncertain", message=LONG_REASON)
    for text, shown in (
        (uncertain, uncertain.removeprefix("OperationUncertain(scheduled_seq=3, ")),
        (failed.describe(), failed.describe().split("Uncertain: ", 1)[1]),
    ):
        cut = shown.split("…", 1)[0]
        assert "…" in shown, text
        assert LONG_REASON.startswith(cut), text
        assert LONG_REASON[len(cut)] == " ", text  # the cut word is whole
        assert len(cut) + 1 <= 60


def test_a_long_payload_is_cut_after_a_comma_with_an_ellipsis() -> None:
    payload = b'{"order":"o-1","lines":[' + b",".join(b'"sku-%d"' % i for i in range(40)) + b"]}"
    shown = SignalReceived(seq=1, name="go", payload=msgspec.Raw(payload)).describe()
    cut = shown.removeprefix("SignalReceived(go, payload=").removesuffix(")")
    assert cut.endswith(",…")
    assert payload.decode().startswith(cut.removesuffix("…"))
    assert len(cut) <= 80


def test_a_payload_cut_never_splits_a_character() -> None:
    payload = ('"' + "été " * 40 + '"').encode()  # two bytes per é
    shown = SignalReceived(seq=1, name="go", payload=msgspec.Raw(payload)).describe()
    assert "\ufffd" not in shown
    assert shown.endswith("…)")
