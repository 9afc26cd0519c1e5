"""Command/event matching rules used during replay.

A command the code issues matches the recorded command event at the same
position when:

* the types are equal, and
* ``ActivityScheduled``: same activity name and the same input JSON (the
  version is not compared, so bumping an activity's version does not break
  running executions);
* ``TimerStarted``: always (changing a duration does not break replay; the
  recorded timer keeps its original deadline);
* ``TimerCancelled``: same timer seq;
* ``SideEffectRecorded``: same kind;
* ``PatchMarker``: same patch id;
* ``ChildStarted``: same workflow name and the same input JSON (a derived
  child id is the same on every replay; the recorded id is kept);
* ``ChildSignaled``: same child, signal name and the same payload JSON;
* ``ChildCancelRequested``: same child;
* ``UpdateCompleted``: same update id (the result may differ);
* ``SearchAttributesUpserted``: the same names and values;
* terminal events (completed/failed/cancelled/continued as new): always (the
  result or the new input may differ).

Payloads are compared as JSON, their codec layers undone: an encrypted payload
is never byte-identical to another encryption of the same value.
"""

from __future__ import annotations

from azync_flow.payload_codec import payloads_equal
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
    UpdateCompleted,
)

__all__ = ["commands_match"]


def commands_match(recorded: Event, new: Event) -> bool:
    """Return True when ``new`` (issued by the code) replays ``recorded``."""
    if type(recorded) is not type(new):
        return False
    if isinstance(recorded, ActivityScheduled):
        assert isinstance(new, ActivityScheduled)
        return recorded.name == new.name and payloads_equal(recorded.input, new.input)
    if isinstance(recorded, TimerCancelled):
        assert isinstance(new, TimerCancelled)
        return recorded.timer_seq == new.timer_seq
    if isinstance(recorded, SideEffectRecorded):
        assert isinstance(new, SideEffectRecorded)
        return recorded.kind == new.kind
    if isinstance(recorded, ChildStarted):
        assert isinstance(new, ChildStarted)
        return recorded.name == new.name and payloads_equal(recorded.input, new.input)
    if isinstance(recorded, ChildSignaled):
        assert isinstance(new, ChildSignaled)
        return (
            recorded.workflow_id == new.workflow_id
            and recorded.name == new.name
            and payloads_equal(recorded.payload, new.payload)
        )
    if isinstance(recorded, ChildCancelRequested):
        assert isinstance(new, ChildCancelRequested)
        return recorded.workflow_id == new.workflow_id
    if isinstance(recorded, PatchMarker):
        assert isinstance(new, PatchMarker)
        return recorded.patch_id == new.patch_id
    if isinstance(recorded, UpdateCompleted):
        assert isinstance(new, UpdateCompleted)
        return recorded.update_id == new.update_id
    if isinstance(recorded, SearchAttributesUpserted):
        assert isinstance(new, SearchAttributesUpserted)
        return recorded.attributes == new.attributes
    return True
