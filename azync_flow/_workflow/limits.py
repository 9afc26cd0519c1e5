"""The history limit: when a run's history is large enough to continue as new."""

from __future__ import annotations

import dataclasses
import logging

from azync_flow.replay.outcome import WorkflowInfo

__all__ = ["HistoryLimit"]

log = logging.getLogger("azync_flow.workflow")


@dataclasses.dataclass(frozen=True)
class HistoryLimit:
    """Warning thresholds of one run's history.

    Every pass replays (or, with the sticky cache, holds in memory) the whole
    history of the current run, so a run that never ends should call
    ``ctx.continue_as_new`` before its history gets this large. Nothing is
    refused at the threshold: the worker logs one WARNING per run (and
    worker process) and ``describe()`` sets ``history_limit_exceeded``.

    Attributes:
        warn_events: events in the current run's history (default 10,000).
        warn_bytes: total payload bytes of those events (default 10 MiB).
    """

    warn_events: int = 10_000
    warn_bytes: int = 10 * 1024 * 1024

    def exceeded(self, events: int, size: int) -> bool:
        """True when ``events`` or ``size`` (bytes) is past a threshold."""
        return events > self.warn_events or size > self.warn_bytes

    def warn(self, info: WorkflowInfo, events: int, size: int) -> bool:
        """Log the WARNING when past a threshold; returns whether it was logged."""
        if not self.exceeded(events, size):
            return False
        log.warning(
            "workflow %s (%s, run %s) has %d history events / %d bytes, past the history "
            "limit (%d events / %d bytes): every pass replays this history; call "
            "ctx.continue_as_new(...) to start a fresh run",
            info.execution_id,
            info.name,
            info.current_run_id,
            events,
            size,
            self.warn_events,
            self.warn_bytes,
        )
        return True
