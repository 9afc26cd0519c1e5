"""Offline replay: check a recorded history against the current workflow code.

Run it in CI before deploying changed workflow code::

    result = Replayer([order_workflow]).replay("histories/order-1.json")
    assert result.ok, result.error

File format (JSON, as written by :meth:`RecordedHistory.to_json`)::

    {"workflow_id": "...", "workflow_name": "order", "input": <input JSON>,
     "events": [{"seq": 1, "type": "ActivityScheduled", "payload": {...}}, ...]}

Histories written with a payload codec replay through a codec that reads them
(``Replayer(workflows, codec=...)``, else the process codec); one whose codec
or key is missing raises :class:`~azync_flow.errors.PayloadCodecError` before
replaying rather than replaying undecodable values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from azync_flow.errors import HistoryFileError, NonDeterminismError, PayloadCodecError
from azync_flow.payload_codec import PayloadCodec, is_envelope, open_envelope, use_payload_codec
from azync_flow.replay.engine import Startable, WorkflowInstance
from azync_flow.replay.events import HistoryEntry, decode_event, encode_event
from azync_flow.replay.outcome import PassOutcome, PassStatus, WorkflowInfo

__all__ = ["RecordedEvent", "RecordedHistory", "ReplayResult", "Replayer"]


class RecordedEvent(msgspec.Struct):
    seq: int
    type: str
    payload: msgspec.Raw


class RecordedHistory(msgspec.Struct, kw_only=True):
    """A portable history: what the Replayer needs besides the code."""

    workflow_name: str
    input: msgspec.Raw = msgspec.Raw(b"null")
    workflow_id: uuid.UUID = uuid.UUID(int=0)
    events: list[RecordedEvent] = msgspec.field(default_factory=list)
    #: The run the events belong to when it is not the first (continue-as-new):
    #: it seeds ``ctx.random()``/``ctx.uuid4()``. None = the first run.
    run_id: uuid.UUID | None = None
    #: The workflow version the execution recorded at its start, which a replay
    #: shows as ``ctx.info.version`` (as a worker's replay does). None: not
    #: known (a history built from bare events); the definition's own is used.
    version: str | None = None

    @classmethod
    def from_rows(
        cls,
        workflow_name: str,
        input_bytes: bytes,
        rows: Iterable[Any],
        workflow_id: uuid.UUID | None = None,
    ) -> RecordedHistory:
        """Build from store rows (``(seq, type, payload)`` tuples, ``HistoryEvent``
        objects or ``HistoryEntry`` values)."""
        events = []
        for row in rows:
            if isinstance(row, HistoryEntry):
                type_name, payload = encode_event(row.event)
                events.append(RecordedEvent(row.seq, type_name, msgspec.Raw(payload)))
            elif isinstance(row, tuple):
                events.append(RecordedEvent(int(row[0]), row[1], msgspec.Raw(bytes(row[2]))))
            else:
                events.append(
                    RecordedEvent(int(row.seq), row.type, msgspec.Raw(bytes(row.payload)))
                )
        return cls(
            workflow_name=workflow_name,
            input=msgspec.Raw(input_bytes),
            workflow_id=workflow_id or uuid.UUID(int=0),
            events=events,
        )

    def entries(self) -> list[HistoryEntry]:
        return [HistoryEntry(e.seq, decode_event(e.type, bytes(e.payload))) for e in self.events]

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> RecordedHistory:
        return msgspec.json.decode(data, type=cls)


@dataclass
class ReplayResult:
    """Verdict of one replay.

    Attributes:
        ok: True when code and history agree.
        error: the NonDeterminismError when they do not.
        outcome: the pass outcome (status, and any new commands the code would
            issue past the end of a partial history).
    """

    ok: bool
    error: NonDeterminismError | None
    outcome: PassOutcome

    def raise_for_error(self) -> None:
        """Raise the NonDeterminismError if the replay failed (for pytest)."""
        if self.error is not None:
            raise self.error


class Replayer:
    """Replays recorded histories against workflow definitions.

    Args:
        workflows: ``@workflow`` definitions (or a Registry's ``workflows.values()``).
        codec: the payload codec the history's payloads were written with (a
            codec or a list of codecs); None: the process codec
            (:func:`~azync_flow.payload_codec.active_codec`).
    """

    def __init__(
        self,
        workflows: Iterable[Any],
        *,
        codec: PayloadCodec | Sequence[PayloadCodec] | None = None,
    ) -> None:
        items = getattr(workflows, "workflows", None)
        defs = items.values() if isinstance(items, dict) else workflows
        self._workflows: dict[str, Startable] = {d.name: d for d in defs}
        self._codec = codec

    def replay(
        self,
        history: RecordedHistory | str | Path | bytes | Sequence[HistoryEntry],
        *,
        workflow_name: str | None = None,
        input_bytes: bytes = b"null",
        workflow_id: uuid.UUID | None = None,
    ) -> ReplayResult:
        """Replay ``history`` (a RecordedHistory, a JSON file path, JSON bytes, or a
        list of entries with ``workflow_name``/``input_bytes``) and report the verdict.

        Raises:
            HistoryFileError: the file or JSON is not a valid recorded history.
            OSError: the file cannot be read.
            KeyError: the history's workflow is not among the definitions.
            PayloadCodecError: a payload of the history cannot be decoded with
                the codec (its codec or key is not configured).
        """
        recorded = self._load(history, workflow_name, input_bytes, workflow_id)
        if self._codec is None:
            return self._replay(recorded)
        with use_payload_codec(self._codec):
            return self._replay(recorded)

    def _replay(self, recorded: RecordedHistory) -> ReplayResult:
        _check_payloads(recorded)
        entries = recorded.entries()
        defn = self._workflows[recorded.workflow_name]
        info = WorkflowInfo(
            execution_id=recorded.workflow_id,
            name=recorded.workflow_name,
            version=defn.version if recorded.version is None else recorded.version,
            run_id=recorded.run_id,
        )
        instance = WorkflowInstance(defn, bytes(recorded.input), info)
        try:
            outcome = instance.advance(entries)
        finally:
            instance.close()
        error = outcome.error if outcome.status is PassStatus.NONDETERMINISM else None
        return ReplayResult(ok=error is None, error=error, outcome=outcome)  # type: ignore[arg-type]

    @staticmethod
    def _load(
        history: Any, name: str | None, input_bytes: bytes, workflow_id: uuid.UUID | None
    ) -> RecordedHistory:
        if isinstance(history, RecordedHistory):
            return history
        if isinstance(history, Path) or (
            isinstance(history, str) and not history.lstrip().startswith("{")
        ):
            return _parse(Path(history).read_bytes(), str(history))
        if isinstance(history, (bytes, str)):
            return _parse(history, "<json>")
        if name is None:
            raise ValueError("workflow_name is required when replaying a list of events")
        return RecordedHistory.from_rows(name, input_bytes, history, workflow_id)


def _parse(data: bytes | str, source: str) -> RecordedHistory:
    """Decode a history file's JSON, events included, naming ``source`` on error."""
    try:
        recorded = RecordedHistory.from_json(data)
    except msgspec.ValidationError as exc:
        raise HistoryFileError(source, f"not a recorded history: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise HistoryFileError(source, f"not valid JSON: {exc}") from exc
    for event in recorded.events:
        try:
            decode_event(event.type, bytes(event.payload))
        except ValueError as exc:
            raise HistoryFileError(source, f"event seq {event.seq}: {exc}") from exc
    return recorded


def _check_payloads(recorded: RecordedHistory) -> None:
    """Open every codec envelope of the history (its input, and each value an
    event embeds), so a missing codec or key is reported as such.

    Raises:
        PayloadCodecError: naming the input or the event seq.
    """
    values: list[tuple[str, Any]] = [("the input", recorded.input)]
    for item in recorded.events:
        event = decode_event(item.type, bytes(item.payload))
        fields = getattr(event, "__struct_fields__", ())
        where = f"event seq {item.seq} ({item.type})"
        values += [(where, getattr(event, f)) for f in fields]
    for where, value in values:
        if isinstance(value, msgspec.Raw) and is_envelope(value):
            try:
                open_envelope(bytes(value))
            except PayloadCodecError as exc:
                raise PayloadCodecError(
                    f"{where} of the history cannot be decoded: {exc.args[0]}",
                    codec=exc.codec,
                    key_id=exc.key_id,
                ) from None
