"""OpenTelemetry metric instruments of azync_flow, recorded where things happen.

This module depends on ``opentelemetry-api`` only. The instruments live on the
global ``MeterProvider`` (a proxy until the application installs one, which
``azync_flow.telemetry.metrics`` does for ``azync-flow worker --metrics-port``
and ``OTEL_METRICS_EXPORTER``); with none installed every call below is a
cheap no-op. Counters and histograms are in-process: recording one costs no
SQL. The gauges of pending work are fed by one periodic query on the leader
(:class:`Backlog`, filled by the worker's ``metrics.backlog`` step).

:data:`CATALOGUE` lists every instrument (name, type, unit, attributes,
meaning); docs/metrics.md documents the same list.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from opentelemetry import metrics

from azync_flow.store.admin import BacklogEntry

__all__ = [
    "ATTR_ACTIVITY_NAME",
    "ATTR_CHANGE",
    "ATTR_JOB_KIND",
    "ATTR_LEADERSHIP",
    "ATTR_REASON",
    "ATTR_RESOLUTION",
    "ATTR_SCHEDULE_ID",
    "ATTR_SOURCE",
    "ATTR_SUBSCRIBER",
    "BACKLOG",
    "CATALOGUE",
    "METER_NAME",
    "Backlog",
    "BacklogRow",
    "MetricInfo",
    "attempt_ended",
    "dag_finished",
    "job_attempt",
    "job_wait",
    "leadership_changed",
    "leadership_held",
    "reaped",
    "schedule_fired",
    "schedule_lag",
    "uncertain_resolved",
    "workflow_continued",
    "workflow_finished",
    "workflow_started",
    "workflow_suspended",
]

#: The instrumentation scope of every instrument (as the tracer's).
METER_NAME = "azync_flow"

# Attribute keys: the span attributes' vocabulary (``azync.*``), plus these.
ATTR_WORKFLOW_NAME = "azync.workflow.name"
ATTR_DAG_NAME = "azync.dag.name"
ATTR_KIND = "azync.kind"
ATTR_OUTCOME = "azync.outcome"
ATTR_STATE = "azync.state"
ATTR_ACTIVITY_NAME = "azync.activity.name"
ATTR_SOURCE = "azync.source"
ATTR_JOB_KIND = "azync.job.kind"
ATTR_REASON = "azync.reason"
ATTR_RESOLUTION = "azync.resolution"
ATTR_SCHEDULE_ID = "azync.schedule.id"
ATTR_SUBSCRIBER = "azync.subscriber"
ATTR_LEADERSHIP = "azync.leadership"
ATTR_CHANGE = "azync.change"

#: Bucket bounds (seconds) of the duration histograms: 1 ms to 1 h.
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """One instrument: what docs/metrics.md documents for it.

    Attributes:
        name: the OpenTelemetry name (Prometheus: dots become ``_``, counters
            get ``_total``, a unit ``s`` adds ``_seconds``).
        type: ``counter``, ``histogram`` or ``gauge`` (observable).
        unit: UCUM unit (``s``, ``{attempt}``, ...).
        attributes: the attribute keys of its data points.
        description: what one unit of it means.
    """

    name: str
    type: str
    unit: str
    attributes: tuple[str, ...]
    description: str


CATALOGUE: tuple[MetricInfo, ...] = (
    MetricInfo("azync_flow.workflow.started", "counter", "{execution}", (ATTR_WORKFLOW_NAME,),
               "Executions whose first workflow task committed on this worker."),
    MetricInfo("azync_flow.workflow.completed", "counter", "{execution}", (ATTR_WORKFLOW_NAME,),
               "Executions that succeeded (counted by the process that committed the end)."),
    MetricInfo("azync_flow.workflow.failed", "counter", "{execution}", (ATTR_WORKFLOW_NAME,),
               "Executions that failed."),
    MetricInfo("azync_flow.workflow.cancelled", "counter", "{execution}",
               (ATTR_WORKFLOW_NAME, ATTR_STATE),
               "Executions ended by a cancellation (state cancelled) or a terminate "
               "(state terminated)."),
    MetricInfo("azync_flow.workflow.continued_as_new", "counter", "{execution}",
               (ATTR_WORKFLOW_NAME,), "Runs that continued as new."),
    MetricInfo("azync_flow.workflow.suspended", "counter", "{execution}",
               (ATTR_WORKFLOW_NAME, ATTR_REASON),
               "Executions suspended: reason nondeterminism, uncertain (an operation parked "
               "for a decision) or lease_expired (its workflow task lost too often)."),
    MetricInfo("azync_flow.workflow.task.duration", "histogram", "s",
               (ATTR_WORKFLOW_NAME, ATTR_OUTCOME),
               "Workflow task (replay pass) latency: load, replay and commit."),
    MetricInfo("azync_flow.activity.attempts", "counter", "{attempt}",
               (ATTR_ACTIVITY_NAME, ATTR_OUTCOME),
               "Activity attempts by outcome (a lost attempt with the reaper's outcome)."),
    MetricInfo("azync_flow.activity.duration", "histogram", "s",
               (ATTR_ACTIVITY_NAME, ATTR_OUTCOME),
               "Activity attempt latency, from the lease to the settled outcome."),
    MetricInfo("azync_flow.operation.uncertain", "counter", "{operation}", (ATTR_ACTIVITY_NAME,),
               "Operations parked uncertain (never re-run blindly; they wait for a decision)."),
    MetricInfo("azync_flow.operation.uncertain.resolved", "counter", "{operation}",
               (ATTR_ACTIVITY_NAME, ATTR_RESOLUTION),
               "Uncertain operations resolved (complete, fail, retry) by a hook, an operator "
               "or a late report."),
    MetricInfo("azync_flow.dag.task.attempts", "counter", "{attempt}",
               (ATTR_DAG_NAME, ATTR_KIND, ATTR_OUTCOME),
               "DAG task and compensation attempts by outcome."),
    MetricInfo("azync_flow.dag.task.duration", "histogram", "s",
               (ATTR_DAG_NAME, ATTR_KIND, ATTR_OUTCOME), "DAG task attempt latency."),
    MetricInfo("azync_flow.dag.finished", "counter", "{run}", (ATTR_DAG_NAME, ATTR_STATE),
               "DAG runs finished, by terminal state."),
    MetricInfo("azync_flow.job.attempts", "counter", "{attempt}",
               (ATTR_SOURCE, ATTR_JOB_KIND, ATTR_OUTCOME),
               "Queue job attempts and event deliveries (source queue or event) by outcome."),
    MetricInfo("azync_flow.job.duration", "histogram", "s",
               (ATTR_SOURCE, ATTR_JOB_KIND, ATTR_OUTCOME),
               "Queue job and event delivery attempt latency."),
    MetricInfo("azync_flow.job.schedule_to_start", "histogram", "s",
               (ATTR_SOURCE, ATTR_JOB_KIND),
               "Queue wait of every leased job (workflow tasks and activities included): "
               "from when it was due to its lease, on the database clock."),
    MetricInfo("azync_flow.job.pending", "gauge", "{job}", (ATTR_SOURCE, ATTR_JOB_KIND),
               "Jobs due and waiting for a worker (leader's snapshot)."),
    MetricInfo("azync_flow.job.oldest_pending_age", "gauge", "s", (ATTR_SOURCE, ATTR_JOB_KIND),
               "Age of the oldest job due and waiting (leader's snapshot)."),
    MetricInfo("azync_flow.subscriber.lag", "gauge", "s", (ATTR_SUBSCRIBER,),
               "How far a subscriber is behind: age of its oldest delivery due and waiting."),
    MetricInfo("azync_flow.subscriber.backlog", "gauge", "{delivery}", (ATTR_SUBSCRIBER,),
               "Deliveries of a subscriber due and waiting."),
    MetricInfo("azync_flow.operation.uncertain.open", "gauge", "{operation}",
               (ATTR_JOB_KIND,), "Uncertain operations waiting for a decision now."),
    MetricInfo("azync_flow.operation.uncertain.oldest_age", "gauge", "s", (ATTR_JOB_KIND,),
               "How long the oldest undecided uncertain operation has waited."),
    MetricInfo("azync_flow.reaps", "counter", "{attempt}", (ATTR_KIND, ATTR_OUTCOME),
               "Attempts whose lease expired, by what was reaped (workflow.task, activity, "
               "dag.task, dag.compensation, job, event.delivery) and what the reaper did "
               "(retried, dead, uncertain)."),
    MetricInfo("azync_flow.schedule.fires", "counter", "{fire}",
               (ATTR_SCHEDULE_ID, ATTR_OUTCOME),
               "Nominal times of schedules: started, buffered, skipped (overlap) or missed."),
    MetricInfo("azync_flow.schedule.lag", "histogram", "s", (ATTR_SCHEDULE_ID,),
               "Delay from a fire's due time to the scheduler starting its run."),
    MetricInfo("azync_flow.leadership.changes", "counter", "{change}",
               (ATTR_LEADERSHIP, ATTR_CHANGE),
               "Maintenance leadership acquired, lost or released by this process."),
    MetricInfo("azync_flow.leadership.held", "gauge", "{leadership}", (ATTR_LEADERSHIP,),
               "1 while this process leads the election, else 0."),
)  # fmt: skip


def _version() -> str:
    try:
        return metadata.version("azync-flow")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0+unknown"


_meter = metrics.get_meter(METER_NAME, _version())
_BY_NAME = {m.name: m for m in CATALOGUE}


class _Tally:
    """A counter kept in this process and reported whole at each collection
    (an observable counter): an event costs a dict update, not the SDK's
    per-measurement work, which is paid once per series per scrape or push."""

    __slots__ = ("_counts", "_lock")

    def __init__(self, name: str) -> None:
        # id(attrs) -> [attrs, total]; the dict keeps each (cached) attrs alive
        self._counts: dict[int, list[Any]] = {}
        self._lock = threading.Lock()
        info = _BY_NAME[name]
        _meter.create_observable_counter(name, [self._observe], info.unit, info.description)

    def add(self, amount: int, attrs: _Attrs) -> None:
        with self._lock:
            entry = self._counts.get(id(attrs))
            if entry is None:
                self._counts[id(attrs)] = [attrs, amount]
            else:
                entry[1] += amount

    def _observe(self, _options: metrics.CallbackOptions) -> Iterator[metrics.Observation]:
        with self._lock:
            totals = [(attrs, total) for attrs, total in self._counts.values()]
        for attrs, total in totals:
            yield metrics.Observation(total, attrs)


def _counter(name: str) -> _Tally:
    return _Tally(name)


def _histogram(name: str) -> metrics.Histogram:
    info = _BY_NAME[name]
    return _meter.create_histogram(
        name, info.unit, info.description, explicit_bucket_boundaries_advisory=DURATION_BUCKETS
    )


_WF_STARTED = _counter("azync_flow.workflow.started")
_WF_COMPLETED = _counter("azync_flow.workflow.completed")
_WF_FAILED = _counter("azync_flow.workflow.failed")
_WF_CANCELLED = _counter("azync_flow.workflow.cancelled")
_WF_CONTINUED = _counter("azync_flow.workflow.continued_as_new")
_WF_SUSPENDED = _counter("azync_flow.workflow.suspended")
_WF_TASK_DURATION = _histogram("azync_flow.workflow.task.duration")
_ACT_ATTEMPTS = _counter("azync_flow.activity.attempts")
_ACT_DURATION = _histogram("azync_flow.activity.duration")
_UNCERTAIN = _counter("azync_flow.operation.uncertain")
_UNCERTAIN_RESOLVED = _counter("azync_flow.operation.uncertain.resolved")
_DAG_ATTEMPTS = _counter("azync_flow.dag.task.attempts")
_DAG_DURATION = _histogram("azync_flow.dag.task.duration")
_DAG_FINISHED = _counter("azync_flow.dag.finished")
_JOB_ATTEMPTS = _counter("azync_flow.job.attempts")
_JOB_DURATION = _histogram("azync_flow.job.duration")
_JOB_WAIT = _histogram("azync_flow.job.schedule_to_start")
_REAPS = _counter("azync_flow.reaps")
_SCHEDULE_FIRES = _counter("azync_flow.schedule.fires")
_SCHEDULE_LAG = _histogram("azync_flow.schedule.lag")
_LEADERSHIP_CHANGES = _counter("azync_flow.leadership.changes")

_Attrs = dict[str, str]
_attrs_cache: dict[tuple[str, ...], _Attrs] = {}


def _attrs(*pairs: str) -> _Attrs:
    """``{k1: v1, k2: v2, ...}``, one shared dict per distinct set for the life of
    the process (the hot path builds no dict per call; the counters key on it).
    ``pairs`` alternate keys and values; the values are names, never ids, so
    the sets are as few as the series."""
    found = _attrs_cache.get(pairs)
    if found is None:
        found = _attrs_cache[pairs] = dict(zip(pairs[::2], pairs[1::2], strict=True))
    return found


# --- workflows --------------------------------------------------------------------------


def workflow_started(name: str) -> None:
    """An execution's first workflow task committed."""
    _WF_STARTED.add(1, _attrs(ATTR_WORKFLOW_NAME, name))


def workflow_continued(name: str) -> None:
    """A run continued as new."""
    _WF_CONTINUED.add(1, _attrs(ATTR_WORKFLOW_NAME, name))


def workflow_suspended(name: str, reason: str) -> None:
    """An execution was suspended (``nondeterminism``, ``uncertain``, ``lease_expired``)."""
    _WF_SUSPENDED.add(1, _attrs(ATTR_WORKFLOW_NAME, name, ATTR_REASON, reason))


def workflow_finished(name: str, state: str) -> None:
    """A workflow execution ended in ``state`` (succeeded, failed, cancelled, terminated)."""
    if state == "succeeded":
        _WF_COMPLETED.add(1, _attrs(ATTR_WORKFLOW_NAME, name))
    elif state == "failed":
        _WF_FAILED.add(1, _attrs(ATTR_WORKFLOW_NAME, name))
    else:
        _WF_CANCELLED.add(1, _attrs(ATTR_WORKFLOW_NAME, name, ATTR_STATE, state))


def dag_finished(name: str, state: str) -> None:
    """A DAG run ended in ``state``."""
    _DAG_FINISHED.add(1, _attrs(ATTR_DAG_NAME, name, ATTR_STATE, state))


# --- attempts ---------------------------------------------------------------------------


def attempt_ended(
    kind: str,
    name: str,
    outcome: str,
    seconds: float | None,
    *,
    workflow_name: str | None = None,
    dag_name: str | None = None,
) -> None:
    """One attempt of a run ended (a span of the run's trace).

    Args:
        kind: ``workflow.task``, ``activity``, ``dag.task``, ``dag.compensation``
            (``job`` attempts are counted by :func:`job_attempt`).
        name: the workflow, activity or task name.
        outcome: ``succeeded``, ``retried``, ``dead``, ``snoozed``, ``skipped``,
            ``uncertain``; ``error`` (an exception escaped) or ``unsettled`` (no
            outcome: its commit lost to another pass).
        seconds: its latency; None for an attempt lost to lease expiry (closed
            by the reaper, which also counts it in ``azync_flow.reaps``).
        workflow_name: the activity's workflow (for ``workflow.suspended``).
        dag_name: the DAG of a task attempt.
    """
    if kind == "activity":
        attrs = _attrs(ATTR_ACTIVITY_NAME, name, ATTR_OUTCOME, outcome)
        _ACT_ATTEMPTS.add(1, attrs)
        if seconds is not None:
            _ACT_DURATION.record(seconds, attrs)
        if outcome == "uncertain":
            _UNCERTAIN.add(1, _attrs(ATTR_ACTIVITY_NAME, name))
            workflow_suspended(workflow_name or "", "uncertain")
    elif kind == "workflow.task":
        if seconds is not None:
            attrs = _attrs(ATTR_WORKFLOW_NAME, name, ATTR_OUTCOME, outcome)
            _WF_TASK_DURATION.record(seconds, attrs)
    elif kind in ("dag.task", "dag.compensation"):
        attrs = _attrs(ATTR_DAG_NAME, dag_name or "", ATTR_KIND, kind, ATTR_OUTCOME, outcome)
        _DAG_ATTEMPTS.add(1, attrs)
        if seconds is not None:
            _DAG_DURATION.record(seconds, attrs)


def reaped(kind: str, outcome: str, count: int = 1) -> None:
    """``count`` attempts of ``kind`` lost to lease expiry; the reaper's ``outcome``."""
    if count > 0:
        _REAPS.add(count, _attrs(ATTR_KIND, kind, ATTR_OUTCOME, outcome))


def uncertain_resolved(activity: str, resolution: str) -> None:
    """An uncertain operation was decided (``complete``, ``fail``, ``retry``)."""
    _UNCERTAIN_RESOLVED.add(1, _attrs(ATTR_ACTIVITY_NAME, activity, ATTR_RESOLUTION, resolution))


# --- jobs -------------------------------------------------------------------------------


def job_attempt(source: str, kind: str, outcome: str, seconds: float) -> None:
    """A queue job attempt or event delivery settled with ``outcome``."""
    attrs = _attrs(ATTR_SOURCE, source, ATTR_JOB_KIND, kind, ATTR_OUTCOME, outcome)
    _JOB_ATTEMPTS.add(1, attrs)
    _JOB_DURATION.record(seconds, attrs)


def job_wait(source: str, kind: str, seconds: float) -> None:
    """A job was leased ``seconds`` after it became due (never negative)."""
    _JOB_WAIT.record(max(seconds, 0.0), _attrs(ATTR_SOURCE, source, ATTR_JOB_KIND, kind))


# --- schedules and leadership -----------------------------------------------------------


def schedule_fired(schedule_id: str, outcome: str, count: int = 1) -> None:
    """``count`` nominal times of a schedule: started, buffered, skipped or missed."""
    if count > 0:
        _SCHEDULE_FIRES.add(count, _attrs(ATTR_SCHEDULE_ID, schedule_id, ATTR_OUTCOME, outcome))


def schedule_lag(schedule_id: str, seconds: float) -> None:
    """The scheduler started a run ``seconds`` after its fire time."""
    _SCHEDULE_LAG.record(max(seconds, 0.0), _attrs(ATTR_SCHEDULE_ID, schedule_id))


def leadership_changed(leadership: str, change: str) -> None:
    """This process ``acquired``, ``lost`` or ``released`` a leadership."""
    _LEADERSHIP_CHANGES.add(1, _attrs(ATTR_LEADERSHIP, leadership, ATTR_CHANGE, change))


_held_sources: list[Callable[[], Iterable[tuple[str, bool]]]] = []


def leadership_held(source: Callable[[], Iterable[tuple[str, bool]]]) -> None:
    """Report ``(leadership, held)`` pairs from ``source`` on the ``leadership.held`` gauge
    (a worker's maintenance registers itself; the callback runs at collection)."""
    _held_sources.append(source)
    if len(_held_sources) > 64:  # workers made and dropped by tests: keep the newest
        del _held_sources[0]


def _observe_held(_options: metrics.CallbackOptions) -> Iterator[metrics.Observation]:
    held: dict[str, bool] = {}
    for source in list(_held_sources):
        for name, is_held in source():
            held[name] = held.get(name, False) or is_held
    for name, is_held in sorted(held.items()):
        yield metrics.Observation(1 if is_held else 0, _attrs(ATTR_LEADERSHIP, name))


_meter.create_observable_gauge(
    "azync_flow.leadership.held",
    [_observe_held],
    _BY_NAME["azync_flow.leadership.held"].unit,
    _BY_NAME["azync_flow.leadership.held"].description,
)


# --- the backlog gauges ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BacklogRow:
    """One ``(source, kind, state)`` of the backlog snapshot.

    Attributes:
        source: job source (``queue``, ``event``, ``workflow``, ``dag``).
        kind: job kind (an event delivery's is its subscriber's name).
        state: ``pending`` (due, waiting for a worker) or ``uncertain``.
        count: how many jobs.
        oldest_age: seconds since the oldest became due (pending) or uncertain.
    """

    source: str
    kind: str
    state: str
    count: int
    oldest_age: float


@dataclass
class Backlog:
    """The latest backlog snapshot of this process, read by the gauges at collection.

    Only the worker that leads the ``metrics.backlog`` step fills it; a
    snapshot older than ``2 * interval`` (leadership moved on) is not reported,
    so one process at a time reports the backlog. A key seen once is reported
    as 0 when it empties, so its series does not vanish.
    """

    rows: list[BacklogRow] = field(default_factory=list)
    taken_at: float = float("-inf")
    interval: float = 15.0
    _seen: dict[tuple[str, str, str], None] = field(default_factory=dict)

    def update(self, rows: Sequence[BacklogRow], interval: float) -> None:
        """Replace the snapshot (``interval``: seconds until the next one)."""
        self.rows = list(rows)
        self.interval = interval
        self.taken_at = time.monotonic()
        for r in rows:
            self._seen[(r.source, r.kind, r.state)] = None

    def fresh(self) -> list[BacklogRow]:
        """The snapshot with zeros for emptied keys; [] when stale or never taken."""
        if time.monotonic() - self.taken_at > 2 * self.interval:
            return []
        have = {(r.source, r.kind, r.state) for r in self.rows}
        zeros = [BacklogRow(*key, 0, 0.0) for key in self._seen if key not in have]
        return self.rows + zeros


#: The process's backlog snapshot (one per process: the gauges are process-wide).
BACKLOG = Backlog()


def record_backlog(entries: Iterable[BacklogEntry], interval: float) -> None:
    """Replace this process's backlog snapshot with the store's ``backlog()`` rows
    (``interval``: seconds until the next sample)."""
    BACKLOG.update(
        [
            BacklogRow(e.source.value, e.kind, e.state.value, e.count, e.oldest_age.total_seconds())
            for e in entries
        ],
        interval,
    )


def _observer(
    state: str, value: Callable[[BacklogRow], float], attrs: Callable[[BacklogRow], _Attrs | None]
) -> Callable[[metrics.CallbackOptions], Iterator[metrics.Observation]]:
    def observe(_options: metrics.CallbackOptions) -> Iterator[metrics.Observation]:
        for row in BACKLOG.fresh():
            if row.state != state:
                continue
            a = attrs(row)
            if a is not None:
                yield metrics.Observation(value(row), a)

    return observe


def _job_attrs(row: BacklogRow) -> _Attrs:
    return _attrs(ATTR_SOURCE, row.source, ATTR_JOB_KIND, row.kind)


def _subscriber_attrs(row: BacklogRow) -> _Attrs | None:
    return _attrs(ATTR_SUBSCRIBER, row.kind) if row.source == "event" else None


def _op_attrs(row: BacklogRow) -> _Attrs:
    return _attrs(ATTR_JOB_KIND, row.kind)


def _count(row: BacklogRow) -> float:
    return row.count


def _age(row: BacklogRow) -> float:
    return row.oldest_age


_GAUGES: list[tuple[str, str, Callable[[BacklogRow], float], Callable[[BacklogRow], Any]]] = [
    ("azync_flow.job.pending", "pending", _count, _job_attrs),
    ("azync_flow.job.oldest_pending_age", "pending", _age, _job_attrs),
    ("azync_flow.subscriber.backlog", "pending", _count, _subscriber_attrs),
    ("azync_flow.subscriber.lag", "pending", _age, _subscriber_attrs),
    ("azync_flow.operation.uncertain.open", "uncertain", _count, _op_attrs),
    ("azync_flow.operation.uncertain.oldest_age", "uncertain", _age, _op_attrs),
]
for _name, _state, _value, _attr_fn in _GAUGES:
    _meter.create_observable_gauge(
        _name,
        [_observer(_state, _value, _attr_fn)],
        _BY_NAME[_name].unit,
        _BY_NAME[_name].description,
    )


def metrics_enabled() -> bool:
    """True once the application installed a real ``MeterProvider`` (the backlog
    query runs only then)."""
    provider = metrics.get_meter_provider()
    return type(provider).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")
