"""An in-memory stand-in for the store + runtime that drives replay passes.

Used by the replay tests to run workflows end to end without a database, in
both cache modes: ``full`` (a fresh instance replays the whole history on every
pass) and ``sticky`` (one instance kept between passes, fed only new events).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from azync_flow.replay import (
    ActivityCompleted,
    ActivityFailed,
    BufferedSignal,
    HistoryEntry,
    PassOutcome,
    PassStatus,
    ScheduleActivity,
    StartTimer,
    WorkflowInfo,
    WorkflowInstance,
    decode_event,
    run_pass,
)

MODES = ("full", "sticky")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Sim:
    """Executes one workflow: history, signal inbox, timers, pending operations."""

    def __init__(
        self,
        defn: Any,
        inp: Any = None,
        *,
        mode: str = "full",
        activities: dict[str, Callable[..., Any]] | None = None,
        execution_id: uuid.UUID | None = None,
        history: list[HistoryEntry] | None = None,
    ) -> None:
        self.defn = defn
        self.input = msgspec.json.encode(inp)
        self.mode = mode
        self.activities = activities or {}
        self.info = WorkflowInfo(execution_id or uuid.UUID(int=42), defn.name, defn.version)
        self.history: list[HistoryEntry] = list(history or [])
        self.inbox: list[BufferedSignal] = []
        self.seen_message_ids: set[str] = set()
        self.timers: dict[int, float] = {}  # seq -> fire at (sim seconds)
        self.ops: dict[int, ScheduleActivity] = {}
        self.clock = 0.0
        self.cancel_requested = False
        self.instance: WorkflowInstance | None = None
        self.outcomes: list[PassOutcome] = []
        self._signal_ids = 0
        self.status = PassStatus.BLOCKED

    # --- environment ------------------------------------------------------------

    def signal(self, name: str, payload: Any = None, message_id: str = "") -> bool:
        if message_id and message_id in self.seen_message_ids:
            return False
        if message_id:
            self.seen_message_ids.add(message_id)
        self._signal_ids += 1
        self.inbox.append(
            BufferedSignal(self._signal_ids, name, msgspec.json.encode(payload), message_id)
        )
        return True

    def append(self, event: Any) -> None:
        self.history.append(HistoryEntry(len(self.history) + 1, event))

    def complete(self, seq: int, result: Any) -> None:
        self.ops.pop(seq)
        self.append(
            ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(msgspec.json.encode(result)))
        )

    def fail(self, seq: int, error_type: str = "ValueError", message: str = "boom") -> None:
        self.ops.pop(seq)
        self.append(
            ActivityFailed(scheduled_seq=seq, error_type=error_type, message=message, attempts=3)
        )

    def advance(self, seconds: float) -> None:
        self.clock += seconds

    # --- passes -----------------------------------------------------------------------

    def run_pass(self) -> PassOutcome:
        due = sorted(s for s, at in self.timers.items() if at <= self.clock)
        now = T0 + timedelta(seconds=self.clock)
        kwargs: dict[str, Any] = {
            "buffered_signals": list(self.inbox),
            "fired_timers": due,
            "cancel_requested": self.cancel_requested,
            "now": now,
        }
        if self.mode == "sticky":
            if self.instance is None:
                self.instance = WorkflowInstance(self.defn, self.input, self.info)
            outcome = self.instance.advance(self.history, **kwargs)
            if not self.instance.reusable:
                self.instance.close()
                self.instance = None
        else:
            outcome = run_pass(self.defn, self.input, self.history, info=self.info, **kwargs)
        self._apply(outcome)
        self.outcomes.append(outcome)
        self.status = outcome.status
        return outcome

    def _apply(self, outcome: PassOutcome) -> None:
        if outcome.status is PassStatus.NONDETERMINISM:
            return
        assert outcome.new_events == [] or outcome.new_events[0][0] == len(self.history) + 1
        for seq, type_name, payload in outcome.new_events:
            assert seq == len(self.history) + 1
            self.history.append(HistoryEntry(seq, decode_event(type_name, payload)))
        for command in outcome.commands:
            if isinstance(command, ScheduleActivity):
                self.ops[command.seq] = command
            elif isinstance(command, StartTimer):
                self.timers[command.seq] = self.clock + command.fire_after.total_seconds()
        for seq in outcome.fired_timers:
            self.timers.pop(seq, None)
        consumed = {sid for sid, _ in outcome.consumed_signals}
        self.inbox = [s for s in self.inbox if s.signal_id not in consumed]

    def run_activities(self, limit: int | None = None) -> int:
        """Complete pending operations (oldest first) with the registered fakes."""
        done = 0
        for seq in sorted(self.ops):
            if limit is not None and done >= limit:
                break
            op = self.ops[seq]
            defn = self.activities[op.name]
            try:
                result = defn.fn(*defn.decode_args(op.input))
            except Exception as exc:
                self.fail(seq, type(exc).__name__, str(exc))
            else:
                self.complete(seq, result)
            done += 1
        return done

    def run(self, max_passes: int = 200) -> PassOutcome:
        """Pass, run activities, fire timers, repeat until terminal or stuck."""
        outcome = self.run_pass()
        for _ in range(max_passes):
            if outcome.status is not PassStatus.BLOCKED:
                return outcome
            if self.ops:
                self.run_activities()
            elif self.timers:
                self.clock = max(self.clock, min(self.timers.values()))
            else:
                return outcome
            outcome = self.run_pass()
        raise AssertionError("workflow did not settle")

    def result(self) -> Any:
        last = self.outcomes[-1]
        assert last.status is PassStatus.COMPLETED, (last.status, last.error)
        return msgspec.json.decode(last.result)

    def types(self) -> list[str]:
        return [type(e.event).__name__ for e in self.history]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def test_sim_appends_events_at_consecutive_seqs(mode: str) -> None:
    from azync_flow import activity, workflow
    from azync_flow.workflow import WorkflowContext

    @activity(name="double")
    def double(x: int) -> int:
        return 2 * x

    @workflow(name="sim_check")
    async def wf(ctx: WorkflowContext, x: int) -> int:
        return await double(await double(x))

    sim = Sim(wf, 3, mode=mode, activities={"double": double})
    sim.run()
    assert sim.result() == 12
    assert [e.seq for e in sim.history] == list(range(1, len(sim.history) + 1))
