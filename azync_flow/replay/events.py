"""History event types (a msgspec tagged union) and their (type, bytes) codec.

The store keeps each event as ``(seq, type, payload bytes)``: ``type`` is the
class name below and the payload is the event encoded as JSON (the tag field
``"type"`` included, so a payload is self-describing). User values (inputs,
results, signal payloads, side-effect values) are embedded as
:class:`msgspec.Raw`, i.e. exactly the JSON bytes produced when the value was
first encoded; they round-trip byte for byte, ``"\\u0000"``, astral
characters and multi-MiB values included.

Two families:

* **Commands** — written by a replay pass from what the workflow code did;
  on replay they are matched in order against what the code does again:
  :class:`ActivityScheduled`, :class:`TimerStarted`, :class:`TimerCancelled`,
  :class:`SideEffectRecorded`, :class:`PatchMarker`, :class:`ChildStarted`,
  :class:`ChildSignaled`, :class:`ChildCancelRequested`, :class:`UpdateCompleted`,
  :class:`SearchAttributesUpserted`, and the terminal
  :class:`WorkflowCompleted`, :class:`WorkflowFailed`, :class:`WorkflowCancelled`,
  :class:`WorkflowContinuedAsNew`.
* **Inputs** — delivered to the code when the replay reaches them:
  :class:`ActivityCompleted`, :class:`ActivityFailed`, :class:`OperationUncertain`,
  :class:`OperationResolved` (appended by the activity runtime / operators),
  :class:`ChildCompleted`, :class:`ChildFailed` (appended by the store when a
  child execution ends),
  :class:`SignalsUndelivered` (appended by the store when the execution finishes
  with signals its code never consumed), :class:`ChildrenNotStarted` (children
  a finishing pass started whose ids another execution holds) and
  :class:`TimerFired`, :class:`SignalReceived`, :class:`CancelRequested`,
  :class:`UpdateAccepted` (appended by the pass that delivered them).

:class:`WorkflowTerminated` ends a history without the code's say: an operator's
``terminate`` appends it; replay reads it as the end of the recorded history.
:class:`WorkflowClosedByOperator` likewise (an operator's ``complete`` or
``fail``). :class:`WorkflowTimedOut` does the same when a workflow timeout elapses.

:class:`OperatorNote` is an annotation an operator appended (``handle.annotate``,
``azync-flow workflows annotate``): replay passes over it, wherever it stands.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from azync_flow._text import shorten

__all__ = [
    "COMMAND_TYPES",
    "EVENT_TYPES",
    "EXTERNAL_TYPES",
    "TERMINAL_TYPES",
    "ActivityCompleted",
    "ActivityFailed",
    "ActivityScheduled",
    "CancelRequested",
    "ChildCancelRequested",
    "ChildCompleted",
    "ChildFailed",
    "ChildSignaled",
    "ChildStarted",
    "ChildrenNotStarted",
    "Event",
    "HistoryEntry",
    "OperationResolved",
    "OperationUncertain",
    "OperatorNote",
    "PatchMarker",
    "SearchAttributesUpserted",
    "SideEffectRecorded",
    "SignalReceived",
    "SignalsUndelivered",
    "TimerCancelled",
    "TimerFired",
    "TimerStarted",
    "UndeliveredSignal",
    "UnstartedChild",
    "UpdateAccepted",
    "UpdateCompleted",
    "WorkflowCancelled",
    "WorkflowClosedByOperator",
    "WorkflowCompleted",
    "WorkflowContinuedAsNew",
    "WorkflowFailed",
    "WorkflowTerminated",
    "WorkflowTimedOut",
    "decode_event",
    "encode_event",
]


class Event(msgspec.Struct, tag_field="type", tag=True, kw_only=True):
    """Base of every history event. ``is_command`` marks events the code produces."""

    is_command: ClassVar[bool] = False
    #: True for events appended outside a replay pass (activity runtime, operator).
    is_external: ClassVar[bool] = False

    def describe(self) -> str:
        """A short human description used in error messages."""
        return type(self).__name__


#: Characters of free text (a message, a reason, a note) a description shows.
_DETAIL = 60


def _shown(raw: msgspec.Raw, limit: int = 80) -> str:
    """A JSON payload, cut after a comma with ``…`` when longer than ``limit``."""
    # enough bytes for limit + 1 whole characters: a cut never splits one
    text = bytes(raw)[: 4 * limit + 4].decode("utf-8", "replace")
    return shorten(text, limit, breaks_after=",")


# --- commands -----------------------------------------------------------------


class ActivityScheduled(Event):
    """The code called activity ``name``; ``input`` is the JSON array of its arguments."""

    is_command: ClassVar[bool] = True
    seq: int
    name: str
    version: str = ""
    input: msgspec.Raw = msgspec.Raw(b"[]")

    def describe(self) -> str:
        return f"ActivityScheduled({self.name}, input={_shown(self.input)})"


class TimerStarted(Event):
    """The code started a durable timer firing ``fire_after_s`` seconds later."""

    is_command: ClassVar[bool] = True
    seq: int
    fire_after_s: float

    def describe(self) -> str:
        return f"TimerStarted({self.fire_after_s:g}s)"


class TimerCancelled(Event):
    """The code cancelled the timer started at ``timer_seq`` before it fired."""

    is_command: ClassVar[bool] = True
    seq: int
    timer_seq: int

    def describe(self) -> str:
        return f"TimerCancelled(timer_seq={self.timer_seq})"


class SideEffectRecorded(Event):
    """A non-deterministic value (``ctx.now()``, ``ctx.side_effect``) recorded once."""

    is_command: ClassVar[bool] = True
    seq: int
    kind: str
    value: msgspec.Raw = msgspec.Raw(b"null")

    def describe(self) -> str:
        return f"SideEffectRecorded({self.kind})"


class PatchMarker(Event):
    """``ctx.patched(patch_id)`` returned True here for the first time."""

    is_command: ClassVar[bool] = True
    seq: int
    patch_id: str

    def describe(self) -> str:
        return f"PatchMarker({self.patch_id})"


class SearchAttributesUpserted(Event):
    """The code set search attributes (``ctx.upsert_search_attributes``):
    ``attributes`` maps each name to its stored form (``azync_flow.search``;
    null removes the name). The store merges them into the execution's
    attributes in the commit that appends this event."""

    is_command: ClassVar[bool] = True
    seq: int
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)

    def describe(self) -> str:
        names = ", ".join(sorted(self.attributes))
        return f"SearchAttributesUpserted({names})"


class WorkflowCompleted(Event):
    """The workflow function returned ``result``."""

    is_command: ClassVar[bool] = True
    seq: int
    result: msgspec.Raw = msgspec.Raw(b"null")

    def describe(self) -> str:
        return f"WorkflowCompleted(result={_shown(self.result)})"


class WorkflowFailed(Event):
    """The workflow function raised ``error_type: message``."""

    is_command: ClassVar[bool] = True
    seq: int
    error_type: str
    message: str = ""

    def describe(self) -> str:
        cause = f"{self.error_type}: {self.message}" if self.error_type else self.message
        return f"WorkflowFailed({cause})"


class WorkflowCancelled(Event):
    """The workflow function ended with ``CancelledError`` after a cancel request."""

    is_command: ClassVar[bool] = True
    seq: int


class ChildStarted(Event):
    """The code started child execution ``workflow_id`` of workflow ``name`` with
    ``input``; the child row was created in the same commit as this event."""

    is_command: ClassVar[bool] = True
    seq: int
    name: str
    workflow_id: str
    input: msgspec.Raw = msgspec.Raw(b"null")
    parent_close_policy: str = "terminate"

    def describe(self) -> str:
        return f"ChildStarted({self.name}, id={self.workflow_id}, input={_shown(self.input)})"


class ChildSignaled(Event):
    """The code sent signal ``name`` to its child ``workflow_id`` (started at
    ``started_seq``); delivered in the same commit, deduplicated by ``message_id``."""

    is_command: ClassVar[bool] = True
    seq: int
    started_seq: int
    workflow_id: str
    name: str
    payload: msgspec.Raw = msgspec.Raw(b"null")
    message_id: str = ""

    def describe(self) -> str:
        return f"ChildSignaled({self.name} -> {self.workflow_id}, payload={_shown(self.payload)})"


class ChildCancelRequested(Event):
    """The code asked its child ``workflow_id`` (started at ``started_seq``) to
    cancel; the request is recorded on the child in the same commit."""

    is_command: ClassVar[bool] = True
    seq: int
    started_seq: int
    workflow_id: str

    def describe(self) -> str:
        return f"ChildCancelRequested({self.workflow_id})"


class WorkflowContinuedAsNew(Event):
    """The code called ``ctx.continue_as_new(input)``: this run ended and run
    ``new_run_id`` of the same execution starts with ``input``."""

    is_command: ClassVar[bool] = True
    seq: int
    input: msgspec.Raw = msgspec.Raw(b"null")
    new_run_id: str = ""

    def describe(self) -> str:
        return f"WorkflowContinuedAsNew(input={_shown(self.input)})"


class UpdateCompleted(Event):
    """The handler of the update accepted as ``update_id`` returned ``result``
    (``error_type`` empty) or raised ``error_type: message``."""

    is_command: ClassVar[bool] = True
    seq: int
    update_id: str
    name: str
    result: msgspec.Raw = msgspec.Raw(b"null")
    error_type: str = ""
    message: str = ""

    def describe(self) -> str:
        outcome = (
            f"{self.error_type}: {shorten(self.message, _DETAIL)}" if self.error_type else "ok"
        )
        return f"UpdateCompleted({self.name}, id={self.update_id!r}, {outcome})"


# --- inputs written by a pass ------------------------------------------------------


class TimerFired(Event):
    """The timer started at ``timer_seq`` fired and was delivered here."""

    timer_seq: int

    def describe(self) -> str:
        return f"TimerFired(timer_seq={self.timer_seq})"


class SignalReceived(Event):
    """Buffered signal ``name`` was consumed by a waiting ``ctx.wait_signal`` here."""

    seq: int
    name: str
    payload: msgspec.Raw = msgspec.Raw(b"null")
    message_id: str = ""

    def describe(self) -> str:
        return f"SignalReceived({self.name}, payload={_shown(self.payload)})"


class CancelRequested(Event):
    """A cancel request was delivered here (the code saw ``CancelledError``)."""

    seq: int
    reason: str = ""

    def describe(self) -> str:
        return f"CancelRequested({shorten(self.reason, _DETAIL)})"


class UpdateAccepted(Event):
    """Update ``name`` (id ``update_id``, arguments ``args`` as a JSON array) passed
    its validator and its handler started here."""

    seq: int
    update_id: str
    name: str
    args: msgspec.Raw = msgspec.Raw(b"[]")

    def describe(self) -> str:
        return f"UpdateAccepted({self.name}, id={self.update_id!r}, args={_shown(self.args)})"


# --- inputs appended outside passes ------------------------------------------------


class ActivityCompleted(Event):
    """The activity scheduled at ``scheduled_seq`` returned ``result``."""

    is_external: ClassVar[bool] = True
    scheduled_seq: int
    result: msgspec.Raw = msgspec.Raw(b"null")
    attempts: int = 1

    def describe(self) -> str:
        return (
            f"ActivityCompleted(scheduled_seq={self.scheduled_seq}, result={_shown(self.result)})"
        )


class ActivityFailed(Event):
    """The activity scheduled at ``scheduled_seq`` failed for good."""

    is_external: ClassVar[bool] = True
    scheduled_seq: int
    error_type: str
    message: str = ""
    attempts: int = 1
    #: The timeout that ended it ("" when none did): ``schedule_to_start``,
    #: ``schedule_to_close``, ``start_to_close`` or ``heartbeat``.
    timeout: str = ""

    def describe(self) -> str:
        timeout = f", timeout={self.timeout}" if self.timeout else ""
        return (
            f"ActivityFailed(scheduled_seq={self.scheduled_seq}, "
            f"{self.error_type}: {shorten(self.message, _DETAIL)}, "
            f"attempts={self.attempts}{timeout})"
        )


class OperationUncertain(Event):
    """The outcome of the operation at ``scheduled_seq`` is unknown."""

    is_external: ClassVar[bool] = True
    scheduled_seq: int
    reason: str = ""

    def describe(self) -> str:
        reason = shorten(self.reason, _DETAIL)
        return f"OperationUncertain(scheduled_seq={self.scheduled_seq}, {reason})"


class OperationResolved(Event):
    """An audited decision on an uncertain operation: complete, fail, or retry.

    Informational for replay: a ``complete``/``fail`` decision is followed in
    history by the ActivityCompleted/ActivityFailed event that resolves the call.
    """

    is_external: ClassVar[bool] = True
    scheduled_seq: int
    decision: str  # "complete" | "fail" | "retry"
    decided_by: str = ""
    note: str = ""

    def describe(self) -> str:
        by = f" by {self.decided_by}" if self.decided_by else ""
        note = f": {shorten(self.note, _DETAIL)}" if self.note else ""
        return f"OperationResolved(scheduled_seq={self.scheduled_seq}, {self.decision}{by}{note})"


class OperatorNote(Event):
    """A note an operator appended to the history (``message``, who: ``noted_by``).

    Audit only: replay skips it wherever it stands (between any two events,
    after the terminal one), so appending one never changes what the code does.
    """

    is_external: ClassVar[bool] = True
    message: str
    noted_by: str = ""

    def describe(self) -> str:
        by = f" by {self.noted_by}" if self.noted_by else ""
        return f"OperatorNote({shorten(self.message, _DETAIL)}{by})"


class ChildCompleted(Event):
    """The child started at ``started_seq`` succeeded with ``result``."""

    is_external: ClassVar[bool] = True
    started_seq: int
    workflow_id: str = ""
    result: msgspec.Raw = msgspec.Raw(b"null")

    def describe(self) -> str:
        return f"ChildCompleted(started_seq={self.started_seq}, result={_shown(self.result)})"


class ChildFailed(Event):
    """The child started at ``started_seq`` ended in ``state`` (failed, cancelled,
    terminated) with ``error_type: message``."""

    is_external: ClassVar[bool] = True
    started_seq: int
    workflow_id: str = ""
    state: str = "failed"
    error_type: str = ""
    message: str = ""

    def describe(self) -> str:
        return (
            f"ChildFailed(started_seq={self.started_seq}, {self.state}, "
            f"{self.error_type}: {shorten(self.message, _DETAIL)})"
        )


class WorkflowTerminated(Event):
    """An operator ended the execution (``terminate``) without running its code:
    who (``terminated_by``) and why (``reason``). The terminal event: only a
    :class:`SignalsUndelivered` record may follow it."""

    is_external: ClassVar[bool] = True
    reason: str = ""
    terminated_by: str = ""

    def describe(self) -> str:
        return f"WorkflowTerminated(by {self.terminated_by}: {shorten(self.reason, _DETAIL)})"


class WorkflowClosedByOperator(Event):
    """An operator closed the execution (``complete`` or ``fail``) without running
    its code: ``outcome`` ``succeeded`` (with ``result``) or ``failed``, who
    (``closed_by``) and why (``reason``). The terminal event: only a
    :class:`SignalsUndelivered` record may follow it."""

    is_external: ClassVar[bool] = True
    outcome: str = ""
    result: msgspec.Raw = msgspec.Raw(b"null")  # null when failed
    reason: str = ""
    closed_by: str = ""

    def describe(self) -> str:
        return (
            f"WorkflowClosedByOperator({self.outcome} by {self.closed_by}: "
            f"{shorten(self.reason, _DETAIL)})"
        )


class WorkflowTimedOut(Event):
    """The execution's ``kind`` timeout (``execution`` or ``run``) of
    ``timeout_s`` seconds elapsed: the engine ended it (``failed``, with
    ``WorkflowTimeoutError``) without running its code. The terminal event:
    only a :class:`SignalsUndelivered` record may follow it."""

    is_external: ClassVar[bool] = True
    kind: str = ""
    timeout_s: float = 0.0

    def describe(self) -> str:
        return f"WorkflowTimedOut({self.kind} timeout of {self.timeout_s:g}s)"


class UndeliveredSignal(msgspec.Struct, kw_only=True):
    """One signal listed by :class:`SignalsUndelivered`."""

    signal_id: int
    name: str
    message_id: str = ""


class SignalsUndelivered(Event):
    """Signals accepted (``signal()`` returned True) but never consumed by the code
    when the execution finished, in arrival order.

    Appended by the store in the same transaction as the terminal transition,
    after the outcome's events (so it is the last event of a finished
    history). Replay ignores it: the code never saw these signals.
    """

    is_external: ClassVar[bool] = True
    seq: int
    signals: list[UndeliveredSignal] = msgspec.field(default_factory=list)

    def describe(self) -> str:
        names = ", ".join(s.name for s in self.signals[:5])
        more = f", +{len(self.signals) - 5} more" if len(self.signals) > 5 else ""
        return f"SignalsUndelivered({len(self.signals)}: {names}{more})"


class UnstartedChild(msgspec.Struct, kw_only=True):
    """One child listed by :class:`ChildrenNotStarted`: its ``ChildStarted`` seq,
    the id it asked for and why it could not start."""

    started_seq: int
    workflow_id: str
    error_type: str = ""
    message: str = ""


class ChildrenNotStarted(Event):
    """Children the pass that ended the execution started but that could not be
    created (their id is held by another execution): outcomes the code never saw.

    Appended by the store in the commit of that pass, right after its terminal
    event (a :class:`ChildFailed` would deliver them; the code has returned).
    Replay ignores it, as :class:`SignalsUndelivered`.
    """

    is_external: ClassVar[bool] = True
    children: list[UnstartedChild] = msgspec.field(default_factory=list)

    def describe(self) -> str:
        ids = ", ".join(c.workflow_id for c in self.children[:3])
        more = f", +{len(self.children) - 3} more" if len(self.children) > 3 else ""
        return f"ChildrenNotStarted({len(self.children)}: {ids}{more})"


class HistoryEntry(msgspec.Struct, frozen=True):
    """One stored history row: position, decoded event."""

    seq: int
    event: Event


AnyEvent = (
    ActivityScheduled
    | TimerStarted
    | TimerCancelled
    | SideEffectRecorded
    | PatchMarker
    | WorkflowCompleted
    | WorkflowFailed
    | WorkflowCancelled
    | TimerFired
    | SignalReceived
    | CancelRequested
    | UpdateAccepted
    | UpdateCompleted
    | ActivityCompleted
    | ActivityFailed
    | OperationUncertain
    | OperationResolved
    | OperatorNote
    | WorkflowTerminated
    | WorkflowClosedByOperator
    | WorkflowTimedOut
    | SignalsUndelivered
    | ChildStarted
    | ChildSignaled
    | ChildCancelRequested
    | WorkflowContinuedAsNew
    | ChildCompleted
    | ChildFailed
    | ChildrenNotStarted
    | SearchAttributesUpserted
)

EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        ActivityScheduled,
        TimerStarted,
        TimerCancelled,
        SideEffectRecorded,
        PatchMarker,
        WorkflowCompleted,
        WorkflowFailed,
        WorkflowCancelled,
        TimerFired,
        SignalReceived,
        CancelRequested,
        UpdateAccepted,
        UpdateCompleted,
        ActivityCompleted,
        ActivityFailed,
        OperationUncertain,
        OperationResolved,
        OperatorNote,
        WorkflowTerminated,
        WorkflowClosedByOperator,
        WorkflowTimedOut,
        SignalsUndelivered,
        ChildStarted,
        ChildSignaled,
        ChildCancelRequested,
        WorkflowContinuedAsNew,
        ChildCompleted,
        ChildFailed,
        ChildrenNotStarted,
        SearchAttributesUpserted,
    )
}
COMMAND_TYPES = frozenset(n for n, c in EVENT_TYPES.items() if c.is_command)
EXTERNAL_TYPES = frozenset(n for n, c in EVENT_TYPES.items() if c.is_external)
TERMINAL_TYPES = frozenset(
    {
        "WorkflowCompleted",
        "WorkflowFailed",
        "WorkflowCancelled",
        "WorkflowTerminated",
        "WorkflowClosedByOperator",
        "WorkflowTimedOut",
        "WorkflowContinuedAsNew",
    }
)

_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    name: msgspec.json.Decoder(cls) for name, cls in EVENT_TYPES.items()
}
_UNION_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(AnyEvent)


def encode_event(event: Event) -> tuple[str, bytes]:
    """Return ``(type name, JSON bytes)`` as the store keeps them."""
    return type(event).__name__, _ENCODER.encode(event)


def decode_event(type_name: str, payload: bytes) -> Event:
    """Decode a stored event.

    Raises:
        ValueError: unknown type name, or a payload that does not match it.
    """
    decoder = _DECODERS.get(type_name)
    if decoder is None:
        raise ValueError(f"unknown history event type {type_name!r}")
    try:
        event: Event = decoder.decode(payload)
        return event
    except msgspec.DecodeError as exc:
        raise ValueError(f"corrupt {type_name} event payload: {exc}") from exc


def decode_any(payload: bytes) -> Event:
    """Decode a self-describing event payload (its ``"type"`` tag selects the class)."""
    event: Event = _UNION_DECODER.decode(payload)
    return event
