"""Every recorded history of the samples replays against the current sample code
(re-record with ``python -m tests.replay.record`` after an intended change)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from azync_flow.testing import recorded_histories, replay_histories

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "samples"))

from composition import WORKFLOWS as COMPOSITION_WORKFLOWS  # noqa: E402
from order import WORKFLOWS as ORDER_WORKFLOWS  # noqa: E402
from payment_uncertain import workflows as PAYMENT_WORKFLOWS  # noqa: E402


@pytest.mark.parametrize("history", recorded_histories(HERE))
def test_recorded_sample_history_replays_against_the_current_code(history: Path) -> None:
    workflows = [*ORDER_WORKFLOWS, *PAYMENT_WORKFLOWS, *COMPOSITION_WORKFLOWS]
    assert replay_histories(history, workflows=workflows) == 1


def test_every_sample_workflow_has_a_recorded_history() -> None:
    recorded = {
        p.read_text().split('"workflow_name":"')[1].split('"')[0] for p in HERE.glob("*.json")
    }
    every = [*ORDER_WORKFLOWS, *PAYMENT_WORKFLOWS, *COMPOSITION_WORKFLOWS]
    assert recorded == {w.name for w in every}
