"""Deterministic replay: history events, the deterministic loop, matching, passes, Replayer.

Pure: no I/O, no database. The runtime loads state from the store, calls
:func:`run_pass` (or advances a cached :class:`WorkflowInstance`), and commits
the :class:`PassOutcome`.
"""

from azync_flow.errors import HistoryFileError
from azync_flow.replay.engine import WorkflowInstance, current_instance
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    CancelRequested,
    Event,
    HistoryEntry,
    OperationResolved,
    OperationUncertain,
    PatchMarker,
    SideEffectRecorded,
    SignalReceived,
    SignalsUndelivered,
    TimerCancelled,
    TimerFired,
    TimerStarted,
    WorkflowCancelled,
    WorkflowCompleted,
    WorkflowFailed,
    WorkflowTerminated,
    decode_event,
    encode_event,
)
from azync_flow.replay.outcome import (
    BufferedSignal,
    CancelTimer,
    Command,
    PassOutcome,
    PassStatus,
    ScheduleActivity,
    StartTimer,
    WorkflowInfo,
)
from azync_flow.replay.passes import InstanceCache, run_pass, to_entries
from azync_flow.replay.replayer import (
    RecordedEvent,
    RecordedHistory,
    Replayer,
    ReplayResult,
)

__all__ = [
    "ActivityCompleted",
    "ActivityFailed",
    "ActivityScheduled",
    "BufferedSignal",
    "CancelRequested",
    "CancelTimer",
    "Command",
    "Event",
    "HistoryEntry",
    "HistoryFileError",
    "InstanceCache",
    "OperationResolved",
    "OperationUncertain",
    "PassOutcome",
    "PassStatus",
    "PatchMarker",
    "RecordedEvent",
    "RecordedHistory",
    "ReplayResult",
    "Replayer",
    "ScheduleActivity",
    "SideEffectRecorded",
    "SignalReceived",
    "SignalsUndelivered",
    "StartTimer",
    "TimerCancelled",
    "TimerFired",
    "TimerStarted",
    "WorkflowCancelled",
    "WorkflowCompleted",
    "WorkflowFailed",
    "WorkflowInfo",
    "WorkflowInstance",
    "WorkflowTerminated",
    "current_instance",
    "decode_event",
    "encode_event",
    "run_pass",
    "to_entries",
]
