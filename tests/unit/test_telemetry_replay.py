"""At the telemetry level: replay emits no spans for steps that already ran.

A miniature replay engine drives the telemetry API the way the workflow
runtime must: every pass is a full replay on a different "process" (its own
tracer provider, the run's trace context read back from JSON), replayed steps
open no attempt span, workflow code (replayed or live) runs with spans
suppressed, and only the step that actually executes makes a span.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from opentelemetry.trace import StatusCode

from azync_flow.telemetry import (
    AttemptKind,
    AttemptOutcome,
    RunEvent,
    RunKind,
    RunTracer,
    run_span_id,
    suppress_spans,
)
from azync_flow.testing_otel import SpanCapture, nesting_violations, parent_id, trace_ids

# W: A1, ctx.sleep(2), A2, wait_signal("approve"), A3.
STEPS: list[tuple[str, str]] = [
    ("activity", "A1"),
    ("timer", "sleep"),
    ("activity", "A2"),
    ("signal", "approve"),
    ("activity", "A3"),
]


class TransientError(Exception):
    pass


@dataclass
class Process:
    """One worker process: its own tracer provider and exporter."""

    capture: SpanCapture
    tracer: RunTracer = field(init=False)

    def __post_init__(self) -> None:
        self.tracer = RunTracer(self.capture.provider)


@dataclass
class Db:
    """What Postgres would hold for the run: JSON, read back by every process."""

    run_id: str
    trace_context: str
    history: list[str] = field(default_factory=list)
    passes: int = 0

    def carrier(self) -> dict[str, str]:
        return json.loads(self.trace_context)


def crash_in_pass(db: Db, proc: Process) -> None:
    """A pass whose process is killed mid-way: the span is opened, never ended.

    Runs in a thread that dies with the span still current, as a killed
    process would; nothing of it can be exported.
    """

    def doomed() -> None:
        db.passes += 1
        att = proc.tracer.attempt_span(
            AttemptKind.WORKFLOW_TASK,
            "W",
            carrier=db.carrier(),
            run_id=db.run_id,
            attempt=db.passes,
        )
        att.__enter__()

    t = threading.Thread(target=doomed)
    t.start()
    t.join()


def run_pass(db: Db, proc: Process) -> None:
    """One workflow task: full replay of the history, then the next live step."""
    db.passes += 1
    with proc.tracer.attempt_span(
        AttemptKind.WORKFLOW_TASK,
        "W",
        carrier=db.carrier(),
        run_id=db.run_id,
        attempt=db.passes,
        workflow_name="W",
        seq=len(db.history) + 1,
    ) as att:
        user = proc.capture.provider.get_tracer("user-workflow-code")
        replayed = new = 0
        # Workflow code is replayed code: it runs with spans suppressed, live or not.
        with suppress_spans():
            for _kind, name in STEPS[: len(db.history)]:
                with user.start_as_current_span(f"workflow code {name}"):
                    replayed += 1
            if len(db.history) < len(STEPS):
                _kind, name = STEPS[len(db.history)]
                with user.start_as_current_span(f"workflow code {name}"):
                    new = 1
        att.set_pass_stats(
            history_length=len(db.history), events_replayed=replayed, new_commands=new
        )
        att.set_outcome(AttemptOutcome.SUCCEEDED)


def run_activity(db: Db, proc: Process, name: str, *, attempt: int, fail: bool) -> None:
    """One activity attempt; on success its result joins the history."""
    with proc.tracer.attempt_span(
        AttemptKind.ACTIVITY,
        name,
        carrier=db.carrier(),
        run_id=db.run_id,
        attempt=attempt,
        workflow_name="W",
        seq=STEPS.index(("activity", name)) + 1,
    ) as att:
        user = proc.capture.provider.get_tracer("http-client")
        with user.start_as_current_span(f"POST /{name}"):
            pass
        try:
            if fail:
                raise TransientError(f"{name} flaked")
        except TransientError as exc:
            att.record_failure(exc)
            att.set_outcome(AttemptOutcome.RETRIED, retry_delay=1.0)
            return
        att.set_outcome(AttemptOutcome.SUCCEEDED)
    db.history.append(name)


def drive_c28() -> tuple[Db, list[Process], int, int]:
    """Run the scenario; return the db, the processes, the caller's trace and span ids."""
    caller = Process(SpanCapture("api"))
    killed = Process(SpanCapture("worker-0"))
    workers = [Process(SpanCapture("worker-1")), Process(SpanCapture("worker-2"))]
    run_id = str(uuid.uuid4())
    started = datetime.now(UTC)
    with caller.capture.provider.get_tracer("api").start_as_current_span("POST /w") as s:
        carrier = caller.tracer.start_run_span(RunKind.WORKFLOW, "W", run_id)
    db = Db(run_id=run_id, trace_context=json.dumps(carrier))
    turn = iter(workers * 20)

    # A crashed pass never ends its span; the reaper closes it (lease expired).
    crash_in_pass(db, killed)
    caller.tracer.lost_attempt(
        AttemptKind.WORKFLOW_TASK,
        "W",
        carrier=db.carrier(),
        run_id=run_id,
        attempt=1,
        started_at=started,
        outcome=AttemptOutcome.RETRIED,
        workflow_name="W",
    )

    for kind, name in STEPS:
        run_pass(db, next(turn))  # forced replay before each step, next worker
        if kind == "activity":
            attempt = 1
            if name == "A2":
                run_activity(db, next(turn), name, attempt=1, fail=True)
                attempt = 2
            run_activity(db, next(turn), name, attempt=attempt, fail=False)
        elif kind == "timer":
            caller.tracer.run_event(db.carrier(), RunEvent.TIMER_FIRED, run_id=run_id)
            db.history.append(name)
        else:
            caller.tracer.run_event(db.carrier(), RunEvent.SIGNAL, run_id=run_id, subject=name)
            db.history.append(name)
    completer = next(turn)
    run_pass(db, completer)  # completes the workflow, then exports the run span
    completer.tracer.end_run_span(
        RunKind.WORKFLOW, "W", run_id, carrier=db.carrier(), started_at=started, state="succeeded"
    )
    ctx = s.get_span_context()
    killed.capture.shutdown()
    assert killed.capture.spans() == []
    return db, [caller, *workers], ctx.trace_id, ctx.span_id


def test_c28_one_span_per_activity_attempt_all_in_the_callers_trace() -> None:
    _db, procs, trace_id, caller_span = drive_c28()
    spans = [sp for p in procs for sp in p.capture.spans()]
    assert trace_ids(spans) == {trace_id}

    [start] = [sp for sp in spans if sp.name == "workflow W"]
    assert start.parent is None
    assert [link.context.span_id for link in start.links] == [caller_span]
    assert start.context.span_id == run_span_id(_db.run_id)
    assert nesting_violations(spans) == []
    activity = {
        name: sorted(
            (sp for sp in spans if sp.name == f"activity {name}"),
            key=lambda sp: sp.attributes["azync.attempt"],
        )
        for name in ("A1", "A2", "A3")
    }
    assert {k: [sp.attributes["azync.attempt"] for sp in v] for k, v in activity.items()} == {
        "A1": [1],
        "A2": [1, 2],
        "A3": [1],
    }
    a2_first, a2_second = activity["A2"]
    assert a2_first.status.status_code is StatusCode.ERROR
    assert a2_first.attributes["azync.outcome"] == "retried"
    assert a2_second.attributes["azync.outcome"] == "succeeded"
    # Same parent whichever worker ran the attempt, before and after replays.
    every_activity = [sp for v in activity.values() for sp in v]
    assert {parent_id(sp) for sp in every_activity} == {start.context.span_id}
    assert {sp.resource.attributes["service.name"] for sp in every_activity} == {
        "worker-1",
        "worker-2",
    }
    # The handler's own spans nest under their attempt.
    for sp in every_activity:
        [child] = [c for c in spans if parent_id(c) == sp.context.span_id]
        assert child.name == f"POST /{sp.name.split()[1]}"


def test_c28_replayed_steps_emit_no_spans() -> None:
    db, procs, _trace_id, _ = drive_c28()
    spans = [sp for p in procs for sp in p.capture.spans()]
    passes = sorted(
        (sp for sp in spans if sp.name == "workflow.task W"),
        key=lambda sp: sp.attributes["azync.attempt"],
    )
    # The crashed pass (attempt 1) was closed by the reaper; 6 committed passes
    # exported their own.
    assert [sp.attributes["azync.attempt"] for sp in passes] == [1, 2, 3, 4, 5, 6, 7]
    lost, *committed = passes
    assert lost.status.description == "lease expired"
    assert [sp.attributes["azync.events_replayed"] for sp in committed] == [0, 1, 2, 3, 4, 5]
    assert [sp.attributes["azync.new_commands"] for sp in committed] == [1, 1, 1, 1, 1, 0]
    # Workflow code ran 20 times across the passes and emitted nothing: what a
    # pass did is on its workflow.task span.
    assert [sp for sp in spans if sp.name.startswith("workflow code ")] == []
    [start] = [sp for sp in spans if sp.name == "workflow W"]
    assert {parent_id(sp) for sp in passes} == {start.context.span_id}
    assert db.passes == 7


def test_c28_a_pure_replay_pass_exports_exactly_one_span() -> None:
    db, procs, _, _ = drive_c28()
    worker = procs[1]
    worker.capture.clear()
    run_pass(db, worker)  # a duplicate delivery after completion: replays all 5 steps
    [only] = worker.capture.spans()
    assert only.name == "workflow.task W"
    assert only.attributes["azync.events_replayed"] == len(STEPS)
    assert only.attributes["azync.new_commands"] == 0
