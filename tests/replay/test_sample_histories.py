"""Every recorded history of the samples replays against the current sample code
(re-record with ``python -m tests.replay.record`` after an intended change)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from azync_flow.replay import PassStatus, RecordedHistory, WorkflowInfo, WorkflowInstance
from azync_flow.testing import recorded_histories, replay_histories

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "samples"))

from composition import WORKFLOWS as COMPOSITION_WORKFLOWS  # noqa: E402
from order import WORKFLOWS as ORDER_WORKFLOWS  # noqa: E402
from payment_uncertain import workflows as PAYMENT_WORKFLOWS  # noqa: E402
from shopping_cart import WORKFLOWS as CART_WORKFLOWS  # noqa: E402

SAMPLE_WORKFLOWS = [*ORDER_WORKFLOWS, *PAYMENT_WORKFLOWS, *CART_WORKFLOWS, *COMPOSITION_WORKFLOWS]


@pytest.mark.parametrize("history", recorded_histories(HERE))
def test_recorded_sample_history_replays_against_the_current_code(history: Path) -> None:
    assert replay_histories(history, workflows=SAMPLE_WORKFLOWS) == 1


def test_every_sample_workflow_has_a_recorded_history() -> None:
    recorded = {
        p.read_text().split('"workflow_name":"')[1].split('"')[0] for p in HERE.glob("*.json")
    }
    assert recorded == {w.name for w in SAMPLE_WORKFLOWS}


@pytest.mark.parametrize("history", recorded_histories(HERE))
def test_recorded_sample_history_replays_the_same_with_a_cached_instance(history: Path) -> None:
    """The sticky-cache mode: one instance fed the history pass by pass (cut before
    each input event, where the recorded code was blocked) issues no new command
    and ends where the full replay ends."""
    recorded = RecordedHistory.from_json(history.read_bytes())
    entries = recorded.entries()
    defn = {w.name: w for w in SAMPLE_WORKFLOWS}[recorded.workflow_name]
    info = WorkflowInfo(recorded.workflow_id, defn.name, defn.version)
    instance = WorkflowInstance(defn, bytes(recorded.input), info)
    try:
        cuts = [i for i, e in enumerate(entries) if not e.event.is_command]
        for cut in [*cuts, len(entries)]:
            if not instance.reusable:  # finished (a record may follow the terminal event)
                break
            outcome = instance.advance(entries[:cut])
            assert outcome.status is not PassStatus.NONDETERMINISM, outcome.error
            assert outcome.new_events == [], (cut, outcome.new_events)
        assert outcome.status in (
            PassStatus.COMPLETED,
            PassStatus.FAILED,
            PassStatus.CANCELLED,
            PassStatus.CONTINUED_AS_NEW,
        )
    finally:
        instance.close()
