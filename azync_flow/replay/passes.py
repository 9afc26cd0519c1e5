"""The pure pass API the runtime calls, and the sticky instance cache."""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from azync_flow.replay.engine import Startable, WorkflowInstance
from azync_flow.replay.events import HistoryEntry, decode_event
from azync_flow.replay.outcome import BufferedSignal, PassOutcome, WorkflowInfo

__all__ = ["InstanceCache", "run_pass", "to_entries"]


def to_entries(rows: Iterable[Any]) -> list[HistoryEntry]:
    """Decode store rows into :class:`HistoryEntry` values.

    Accepts ``HistoryEntry`` values, ``(seq, type, payload)`` tuples, or objects
    with ``seq``/``type``/``payload`` attributes (``store.workflows.HistoryEvent``).
    """
    entries: list[HistoryEntry] = []
    for row in rows:
        if isinstance(row, HistoryEntry):
            entries.append(row)
        elif isinstance(row, tuple):
            seq, type_name, payload = row
            entries.append(HistoryEntry(int(seq), decode_event(type_name, bytes(payload))))
        else:
            entries.append(HistoryEntry(int(row.seq), decode_event(row.type, bytes(row.payload))))
    return entries


def run_pass(
    defn: Startable,
    input_bytes: bytes,
    history: Sequence[Any],
    *,
    info: WorkflowInfo,
    buffered_signals: Sequence[BufferedSignal] = (),
    fired_timers: Sequence[int] = (),
    cancel_requested: bool = False,
    now: datetime | None = None,
    max_payload_bytes: int | None = None,
) -> PassOutcome:
    """Run one full-replay pass of an execution (no cache).

    Args:
        defn: the workflow definition (``@workflow``).
        input_bytes: the execution input (JSON bytes).
        history: the whole history, in seq order (see :func:`to_entries` for forms).
        info: execution identity.
        buffered_signals: unconsumed signals, arrival order.
        fired_timers: due timer seqs.
        cancel_requested: a cancel request is pending.
        now: backend time of this pass (UTC).
        max_payload_bytes: per-value limit for values the workflow writes.

    Returns:
        The :class:`PassOutcome` (new events from ``len(history) + 1``).
    """
    instance = WorkflowInstance(defn, input_bytes, info, max_payload_bytes=max_payload_bytes)
    try:
        return instance.advance(
            to_entries(history),
            buffered_signals=buffered_signals,
            fired_timers=fired_timers,
            cancel_requested=cancel_requested,
            now=now,
        )
    finally:
        instance.close()


class InstanceCache:
    """LRU of suspended :class:`WorkflowInstance` objects (the sticky cache).

    ``take`` removes the instance while a pass runs; put it back with ``put``
    only after the pass's commit succeeded (an uncommitted pass must be
    forgotten, or the cache would run ahead of the store).

    Args:
        max_size: instances kept; 0 disables caching (every pass replays fully).
    """

    def __init__(self, max_size: int = 1000) -> None:
        self.max_size = max_size
        self._items: collections.OrderedDict[uuid.UUID, WorkflowInstance] = (
            collections.OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, execution_id: object) -> bool:
        return execution_id in self._items

    def known_seqs(self) -> dict[uuid.UUID, int]:
        """The last seq each cached instance has seen, by execution (a load for it
        needs only the history after that)."""
        return {k: v.next_seq - 1 for k, v in self._items.items()}

    def take(self, execution_id: uuid.UUID, next_seq: int | None = None) -> WorkflowInstance | None:
        """Remove and return the cached instance, if any.

        When ``next_seq`` (the store's) is given, an instance that has seen
        events past it is stale and is closed instead of returned.
        """
        instance = self._items.pop(execution_id, None)
        if instance is not None and next_seq is not None and instance.next_seq > next_seq:
            instance.close()
            return None
        return instance

    def put(self, execution_id: uuid.UUID, instance: WorkflowInstance) -> None:
        """Keep ``instance`` if it can run more passes; evict the oldest over capacity."""
        if self.max_size <= 0 or not instance.reusable:
            instance.close()
            return
        self._items[execution_id] = instance
        self._items.move_to_end(execution_id)
        while len(self._items) > self.max_size:
            _, old = self._items.popitem(last=False)
            old.close()

    def evict(self, execution_id: uuid.UUID) -> None:
        """Forget (and close) one execution's instance."""
        instance = self._items.pop(execution_id, None)
        if instance is not None:
            instance.close()

    def clear(self) -> None:
        """Close every cached instance."""
        while self._items:
            _, instance = self._items.popitem()
            instance.close()
