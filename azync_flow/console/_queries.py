"""What each page of the console reads: the client's and the store's verbs,
plus the read-only ``console_`` queries (``ConsoleReads``) for the views no
other verb has. Nothing here writes."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from azync_flow._decisions import reconcile_verdict
from azync_flow._operations import decode_operation, seq_of_execution_key
from azync_flow._text import shorten
from azync_flow.client import Client, UncertainOperationView
from azync_flow.dag import DAGClient
from azync_flow.errors import NotFoundError
from azync_flow.replay.events import Event, decode_event
from azync_flow.retry import RetryPolicy
from azync_flow.schedules import ScheduleClient, ScheduleDescription
from azync_flow.search import search_jsonpath
from azync_flow.store import Store
from azync_flow.store.admin import DailyCount, Depths
from azync_flow.store.dags import DAGState, DAGView
from azync_flow.store.queue import Job, Source
from azync_flow.store.workflows import (
    SearchFilter,
    StalledWorkflow,
    WorkflowExecutionView,
    WorkflowRunView,
    WorkflowState,
)
from azync_flow.telemetry import run_trace_id

from ._graph import Graph, TaskInfo, lay_out_dag
from ._timeline import Failure, Operation, Timeline, lay_out

__all__ = [
    "ConsoleStore",
    "ExecutionDetail",
    "ExecutionFilter",
    "ExecutionPage",
    "ExecutionRow",
    "Overview",
    "dag_detail",
    "execution_detail",
    "executions",
    "overview",
]

#: The store the console reads and acts through: every role of the contract.
ConsoleStore = Store[Any]

#: Rows the overview lists per panel.
PANEL_ROWS = 10


@dataclass(frozen=True)
class Blocked:
    id: uuid.UUID
    name: str
    #: what holds it up: its workflow task's failures, then what it waits for
    reason: str


@dataclass
class Overview:
    """The overview page: counts, queues, what needs a person."""

    now: datetime
    by_state: dict[str, int]
    depths: dict[str, dict[str, Depths]]
    dead_letters: int
    uncertain: list[UncertainOperationView]
    stalled: list[StalledWorkflow]
    blocked: list[Blocked]
    schedules: list[Any]
    subscriber_lag: dict[str, Depths]
    #: Today's counts (UTC day) per source: enqueued, processed, failed, reaped.
    today: dict[str, DailyCount] = field(default_factory=dict)


async def overview(store: ConsoleStore) -> Overview:
    """Everything the overview shows, read now."""
    client = Client(store)
    counts = await store.console_rows("console_execution_counts")
    by_state = {s.value: 0 for s in WorkflowState}
    by_state.update({r["state"]: r["n"] for r in counts})
    depths = {s.value: await store.kind_depths(s) for s in Source}
    dead = sum(d.dead for kinds in depths.values() for d in kinds.values())
    blocked = [
        Blocked(r["id"], r["name"], "; ".join(x for x in (_blocked(r), r["waits"]) if x))
        for r in await store.console_rows("console_blocked", PANEL_ROWS)
    ]
    today = {}
    for source in Source:
        days = await store.all_daily(source)
        if days:
            today[source.value] = days[-1]
    return Overview(
        now=datetime.now(UTC),
        today=today,
        by_state=by_state,
        depths=depths,
        dead_letters=dead,
        uncertain=await client.list_uncertain(limit=PANEL_ROWS),
        stalled=await client.list_stalled(timedelta(seconds=60), limit=PANEL_ROWS),
        blocked=blocked,
        schedules=await ScheduleClient(store).list(limit=PANEL_ROWS * 5),
        subscriber_lag=depths[Source.EVENT.value],
    )


# --- executions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutionFilter:
    """The executions page's filters (None / '' = any)."""

    state: str | None = None
    name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    key: str | None = None
    #: search attribute filters, all of which must hold
    where: tuple[SearchFilter, ...] = ()


@dataclass(frozen=True)
class ExecutionRow:
    id: uuid.UUID
    name: str
    state: str
    created_at: datetime
    completed_at: datetime | None
    key: str
    parent_id: uuid.UUID | None
    run_no: int
    input_preview: str
    result_preview: str
    reason: str


@dataclass
class ExecutionPage:
    rows: list[ExecutionRow]
    next_cursor: tuple[datetime, uuid.UUID] | None


def head_text(head: bytes | None, length: int | None, limit: int = 96) -> str:
    """A stored payload's first bytes as text for a list cell, cut after a comma
    with ``…`` when longer than ``limit``, ``…`` also when only its head was read."""
    if head is None:
        return ""
    text = bytes(head).decode("utf-8", "replace")
    if len(text) > limit:
        return shorten(text, limit, breaks_after=",")
    return text + ("…" if (length or 0) > len(head) else "")


def _blocked(r: Mapping[str, Any]) -> str:
    failures, error = r["task_failures"], r["task_error"]
    if r["state"] != "running" or not failures or not error:
        return ""
    return f"{error} (after {failures} workflow task attempt{'s' if failures != 1 else ''})"


async def executions(
    store: ConsoleStore,
    flt: ExecutionFilter,
    cursor: tuple[datetime, uuid.UUID] | None,
    limit: int = 50,
) -> ExecutionPage:
    """One page of executions, newest first, after ``cursor`` (keyset paging)."""
    rows = await store.console_rows(
        "console_executions",
        flt.state or None,
        flt.name or None,
        flt.since,
        flt.until,
        flt.key or None,
        cursor[0] if cursor else None,
        cursor[1] if cursor else None,
        limit + 1,
        search_jsonpath(flt.where) if flt.where else None,
    )
    out = [
        ExecutionRow(
            id=r["id"],
            name=r["name"],
            state=r["state"],
            created_at=r["created_at"],
            completed_at=r["completed_at"],
            key=r["business_idempotency_key"],
            parent_id=r["parent_id"],
            run_no=r["run_no"],
            input_preview=head_text(r["input_head"], r["input_len"]),
            result_preview=head_text(r["result_head"], r["result_len"]),
            reason=r["failure_reason"] or r["suspend_reason"] or _blocked(r),
        )
        for r in rows[:limit]
    ]
    more = len(rows) > limit
    return ExecutionPage(out, (out[-1].created_at, out[-1].id) if more and out else None)


@dataclass(frozen=True)
class HistoryRow:
    seq: int
    at: datetime
    type: str
    detail: str
    event: Event


@dataclass(frozen=True)
class Child:
    id: uuid.UUID
    name: str
    state: str
    created_at: datetime
    completed_at: datetime | None
    reason: str


@dataclass(frozen=True)
class Timer:
    seq: int
    fire_at: datetime
    fired_at: datetime | None


@dataclass(frozen=True)
class BufferedSignal:
    name: str
    message_id: str
    at: datetime


@dataclass
class ExecutionDetail:
    """Everything the page of one execution shows (of run ``run_no``)."""

    view: WorkflowExecutionView
    runs: list[WorkflowRunView]
    run_no: int
    history: list[HistoryRow]
    operations: list[Operation]
    timers: list[Timer]
    children: list[Child]
    buffered: list[BufferedSignal]
    timeline: Timeline
    trace_id: str
    now: datetime
    uncertain: list[UncertainOperationView] = field(default_factory=list)
    #: Per uncertain operation id: the reconcile hook's last verdict on its
    #: current attempt (``unknown: …``), ``""`` when no hook recorded one.
    verdicts: dict[uuid.UUID, str] = field(default_factory=dict)
    #: The trace id is derived from the execution id (no trace context stored).
    trace_derived: bool = False

    @property
    def current(self) -> bool:
        return self.run_no == self.view.run_no

    @property
    def live(self) -> bool:
        return self.view.state in (WorkflowState.RUNNING, WorkflowState.SUSPENDED)

    @property
    def active_operations(self) -> builtins.list[Operation]:
        return [o for o in self.operations if o.state in ("active", "pending", "scheduled")]

    @property
    def pending_timers(self) -> builtins.list[Timer]:
        return [t for t in self.timers if t.fired_at is None]


def _detail(name: str, described: str) -> str:
    if described.startswith(name):
        described = described[len(name) :].strip("()")
    return described


def _operation(r: Mapping[str, Any]) -> Operation:
    retry: RetryPolicy | None = None
    activity = str(r["kind"]).removeprefix("$op:").rsplit("@", 1)[0]
    try:
        payload = decode_operation(bytes(r["payload"]))
        retry, activity, seq = payload.retry, payload.activity, payload.seq
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
        seq = seq_of_execution_key(r["task_key"]) if "/" in r["task_key"] else 0
    return Operation(
        id=r["id"],
        seq=seq,
        activity=activity,
        state=r["state"],
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        enqueued_at=r["enqueued_at"],
        started_at=r["started_at"],
        completed_at=r["completed_at"],
        run_at=r["run_at"],
        lease_until=r["lease_until"],
        last_error=r["last_error"],
        retry=retry,
        failures=[
            Failure(n, e, at)
            for n, e, at in zip(r["fail_attempts"], r["fail_errors"], r["fail_ats"], strict=True)
        ],
    )


def trace_id_of(trace_context: Any) -> str:
    """The trace id in a W3C carrier (``traceparent`` ``00-<trace id>-<span>-<flags>``)."""
    if isinstance(trace_context, str):
        try:
            trace_context = msgspec.json.decode(trace_context)
        except msgspec.DecodeError:
            return ""
    parent = trace_context.get("traceparent", "") if isinstance(trace_context, dict) else ""
    parts = str(parent).split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


async def execution_detail(
    store: ConsoleStore, id: uuid.UUID, run_no: int | None = None, *, child_href: str = ""
) -> ExecutionDetail:
    """One execution (run ``run_no``; None: the current run), with its timeline.

    Raises:
        NotFoundError: no such execution, or no such run of it.
    """
    client = Client(store)
    handle: Any = client.get_handle(id)
    view: WorkflowExecutionView = await handle.describe()
    runs: list[WorkflowRunView] = await handle.runs()
    run_no = view.run_no if run_no is None else run_no
    run = next((r for r in runs if r.run_no == run_no), None)
    if run is None:
        raise NotFoundError(f"execution {id} has no run {run_no} (runs 1..{len(runs)})")
    if run_no == view.run_no:
        raw = await store.list_history(id)
    else:
        driver: Any = store  # earlier runs: a driver read the client reaches the same way
        raw = await driver.list_run_history(id, run_no)
    history = []
    for h in raw:
        ev = decode_event(h.type, bytes(h.payload))
        history.append(HistoryRow(h.seq, h.created_at, h.type, _detail(h.type, ev.describe()), ev))
    op_rows = await store.console_rows("console_operations", id, 2000)
    now = op_rows[0]["at"] if op_rows else datetime.now(UTC)
    run_end = run.ended_at
    operations = [
        o
        for o in map(_operation, op_rows)
        if o.enqueued_at >= run.started_at and (run_end is None or o.enqueued_at <= run_end)
    ]
    timers = [
        Timer(r["seq"], r["fire_at"], r["fired_at"])
        for r in await store.console_rows("console_timers", id)
    ]
    children = [
        Child(r["id"], r["name"], r["state"], r["created_at"], r["completed_at"],
              r["failure_reason"])
        for r in await store.console_rows("console_children", id, 500)
    ]  # fmt: skip
    buffered = [
        BufferedSignal(r["name"], r["message_id"], r["created_at"])
        for r in await store.console_rows("console_buffered_signals", id, 100)
    ]
    traces = await store.console_rows("console_trace_context", id)
    end = run.ended_at if run_no != view.run_no else view.completed_at
    timeline = lay_out(
        [(h.seq, h.at, h.event) for h in history],
        operations,
        start=run.started_at,
        end=end,
        now=max(now, run.started_at),
        awaited_signals=view.awaited_signals if run_no == view.run_no else [],
        child_href=child_href,
    )
    uncertain = await client.list_uncertain(workflow_id=id) if view.suspend_operation_id else []
    verdicts = {
        u.operation_id: await reconcile_verdict(store, u.operation_id, u.attempt) for u in uncertain
    }
    trace_id = trace_id_of(traces[0]["trace_context"]) if traces else ""
    if not trace_id:
        # Started without a trace context: traced workers derive the run's
        # trace id from its id, so that is where its spans are.
        trace_id = f"{run_trace_id(id):032x}"
    return ExecutionDetail(
        view=view,
        runs=runs,
        run_no=run_no,
        history=history,
        operations=operations,
        timers=timers,
        children=children,
        buffered=buffered,
        timeline=timeline,
        trace_id=trace_id,
        now=now,
        uncertain=uncertain,
        verdicts=verdicts,
        trace_derived=not (traces and trace_id_of(traces[0]["trace_context"])),
    )


# --- DAG runs ---------------------------------------------------------------------------


@dataclass
class DAGDetail:
    view: DAGView
    tasks: list[Job]
    graph: Graph
    compensations: list[Job]


async def dag_runs(
    store: ConsoleStore, name: str, state: str | None, offset: int, limit: int = 50
) -> tuple[list[DAGView], int]:
    """A page of DAG runs, newest first, and the total."""
    return await DAGClient(store).list(
        dag=name, state=DAGState(state) if state else None, offset=offset, limit=limit
    )


async def dag_detail(store: ConsoleStore, id: uuid.UUID) -> DAGDetail:
    """One DAG run with its graph laid out.

    Raises:
        NotFoundError: no such run.
    """
    client = DAGClient(store)
    view = await client.get(id)
    tasks = await client.tasks(id)
    deps = [(d.task_key, d.depends_on_key) for d in await client.deps(id)]
    infos = [
        TaskInfo(j.task_key, j.kind, j.state.value, j.attempt, j.last_error, j.completed_at)
        for j in tasks
    ]
    graph = lay_out_dag(infos, deps)
    order = [n.key for n in graph.nodes if n.order]
    by_key = {j.task_key: j for j in tasks}
    return DAGDetail(view, tasks, graph, [by_key[k] for k in order])


# --- schedules, events -----------------------------------------------------------------


async def schedules(store: ConsoleStore, limit: int = 100) -> list[ScheduleDescription]:
    """Every schedule described: next fires (local and UTC), last runs, missed times."""
    client = ScheduleClient(store)
    return [
        await client.describe(s.id, fires=3, runs=5, missed=3, changes=3)
        for s in await client.list(limit=limit)
    ]


@dataclass(frozen=True)
class Delivery:
    id: uuid.UUID
    subscriber: str
    state: str
    attempt: int
    max_attempts: int
    replay: bool
    run_at: datetime
    last_error: str
    completed_at: datetime | None


async def deliveries(store: ConsoleStore, event_id: uuid.UUID) -> list[Delivery]:
    """An event's deliveries, by subscriber."""
    return [
        Delivery(r["id"], r["kind"], r["state"], r["attempt"], r["max_attempts"], r["replay"],
                 r["run_at"], r["last_error"], r["completed_at"])
        for r in await store.console_rows("console_event_deliveries", event_id)
    ]  # fmt: skip
