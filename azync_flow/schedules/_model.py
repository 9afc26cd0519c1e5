"""What a schedule does when it fires (actions), how it treats overlaps and
downtime (policy), and what ``describe`` returns."""

from __future__ import annotations

import enum
import string
import uuid
from datetime import datetime, timedelta
from typing import Any

import msgspec

from azync_flow.codec import encode_value
from azync_flow.errors import ScheduleSpecError

from ._spec import Fire, ScheduleSpec

__all__ = [
    "DEFAULT_ID_TEMPLATE",
    "FAILOVER_GRACE",
    "Action",
    "EnqueueJob",
    "MissedRange",
    "Overlap",
    "ScheduleChange",
    "ScheduleCounts",
    "ScheduleDescription",
    "SchedulePolicy",
    "ScheduleRun",
    "ScheduleSummary",
    "StartDAG",
    "StartWorkflow",
    "describe_action",
    "run_key",
]

#: The key a run's id is derived from (``uuid5``); placeholders: ``schedule_id``,
#: ``nominal`` (UTC, ISO 8601) and ``local`` (the nominal time in the spec's zone).
DEFAULT_ID_TEMPLATE = "{schedule_id}@{nominal}"
_PLACEHOLDERS = frozenset({"schedule_id", "nominal", "local"})
#: Namespace of the run ids derived from run keys.
RUN_NAMESPACE = uuid.UUID("6f3f8a52-2a0e-5b51-9a43-0c2f5d4f1e7a")


class Overlap(enum.StrEnum):
    """What a fire does while the schedule's previous run is still going."""

    #: the new run is not started (recorded as ``skipped``)
    SKIP = "skip"
    #: one run waits and starts when the previous ends; more are skipped
    BUFFER_ONE = "buffer_one"
    #: every fire waits, up to ``SchedulePolicy.buffer_limit`` of them; they
    #: start one at a time, oldest first; more are skipped
    BUFFER_ALL = "buffer_all"
    #: start it anyway
    ALLOW_ALL = "allow_all"
    #: cancel the previous run, then start (workflows and DAGs)
    CANCEL_OTHER = "cancel_other"


#: A fire at most this late is never missed, whatever ``catchup_window``
#: says: it covers a scheduler failover (leader TTL, 10 s by default, plus a
#: tick of 1 s) and a slow tick with room to spare.
FAILOVER_GRACE = timedelta(minutes=1)


class SchedulePolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Overlap and catch-up behaviour of a schedule.

    Attributes:
        overlap: see :class:`Overlap` (default: skip).
        catchup_window: how late a fire may start. Fires due at most
            ``max(catchup_window, FAILOVER_GRACE)`` ago run (oldest first);
            older ones are missed (counted, recorded as one range, published
            as ``azync.schedule.missed``). None (default): the grace applies
            and, when no fire lies within it, the latest older fire runs. It
            also bounds how long a buffered start may wait.
        buffer_limit: most fires waiting under ``Overlap.BUFFER_ALL``
            (positive; further fires are skipped).
    """

    overlap: Overlap = Overlap.SKIP
    catchup_window: timedelta | None = None
    buffer_limit: int = 100

    def window(self) -> timedelta:
        """How late a fire may start before it is missed."""
        if self.catchup_window is None:
            return FAILOVER_GRACE
        return max(self.catchup_window, FAILOVER_GRACE)


def _check_template(template: str) -> str:
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ScheduleSpecError(f"id template {template!r}: {exc}") from None
    unknown = {f.split(".")[0].split("[")[0].split("!")[0] for f in fields} - _PLACEHOLDERS
    if unknown or ("nominal" not in fields and "local" not in fields):
        raise ScheduleSpecError(
            f"id template {template!r} must use {{nominal}} or {{local}} and only "
            f"{sorted(_PLACEHOLDERS)} (unknown: {sorted(unknown)})"
        )
    return template


class StartWorkflow(msgspec.Struct, frozen=True, kw_only=True, tag="workflow"):
    """Start workflow ``workflow`` (a registered name) with ``input``.

    Build it with :meth:`of`. The execution id is ``uuid5`` of the rendered
    ``id_template``, so one nominal time never starts two executions.
    """

    workflow: str
    input: msgspec.Raw = msgspec.Raw(b"null")
    version: str = ""
    id_template: str = DEFAULT_ID_TEMPLATE

    @classmethod
    def of(
        cls, workflow: Any, input: Any = None, *, id_template: str = DEFAULT_ID_TEMPLATE
    ) -> StartWorkflow:
        """Args:
            workflow: a ``@workflow`` definition or a workflow name.
            input: the workflow input (JSON-encodable), the same for every run.
            id_template: see :data:`DEFAULT_ID_TEMPLATE`.

        Raises:
            ScheduleSpecError: a bad id template.
            PayloadEncodeError: ``input`` is not JSON-encodable.
        """
        name = workflow if isinstance(workflow, str) else workflow.name
        version = "" if isinstance(workflow, str) else workflow.version
        raw = msgspec.Raw(encode_value(input, f"input of scheduled workflow {name!r}"))
        return cls(
            workflow=name, input=raw, version=version, id_template=_check_template(id_template)
        )


class StartDAG(msgspec.Struct, frozen=True, kw_only=True, tag="dag"):
    """Start a run of DAG ``dag`` (by name; the scheduler must know the DAG: the
    worker attaches it with ``attach_dags`` or ``attach_schedules(worker, dags=[...])``).
    Build it with :meth:`of`."""

    dag: str
    input: msgspec.Raw = msgspec.Raw(b"null")
    id_template: str = DEFAULT_ID_TEMPLATE

    @classmethod
    def of(cls, dag: Any, input: Any = None, *, id_template: str = DEFAULT_ID_TEMPLATE) -> StartDAG:
        """Args:
        dag: a ``DAG`` or its name.
        input: the run input (JSON-encodable).
        id_template: see :data:`DEFAULT_ID_TEMPLATE`.
        """
        name = dag if isinstance(dag, str) else dag.name
        raw = msgspec.Raw(encode_value(input, f"input of scheduled DAG {name!r}"))
        return cls(dag=name, input=raw, id_template=_check_template(id_template))


class EnqueueJob(msgspec.Struct, frozen=True, kw_only=True, tag="job"):
    """Enqueue a queue job of ``kind`` with ``payload``. Build it with :meth:`of`."""

    kind: str
    payload: msgspec.Raw = msgspec.Raw(b"null")
    id_template: str = DEFAULT_ID_TEMPLATE

    @classmethod
    def of(
        cls, kind: str, payload: Any = None, *, id_template: str = DEFAULT_ID_TEMPLATE
    ) -> EnqueueJob:
        """Args:
        kind: the handler kind.
        payload: the job payload (JSON-encodable).
        id_template: see :data:`DEFAULT_ID_TEMPLATE`.
        """
        raw = msgspec.Raw(encode_value(payload, f"payload of scheduled job {kind!r}"))
        return cls(kind=kind, payload=raw, id_template=_check_template(id_template))


Action = StartWorkflow | StartDAG | EnqueueJob


def run_key(action: Action, schedule_id: str, fire: Fire) -> tuple[str, uuid.UUID]:
    """``(key, run id)`` of the run ``action`` starts for ``fire``."""
    key = action.id_template.format(
        schedule_id=schedule_id,
        nominal=fire.nominal_at.isoformat(),
        local=fire.local.isoformat(),
    )
    return key, uuid.uuid5(RUN_NAMESPACE, key)


def describe_action(action: Action) -> str:
    """One line naming what ``action`` starts (``workflow order``, ``job email``)."""
    if isinstance(action, StartWorkflow):
        return f"workflow {action.workflow}"
    if isinstance(action, StartDAG):
        return f"dag {action.dag}"
    return f"job {action.kind}"


class ScheduleRun(msgspec.Struct, kw_only=True):
    """A run of a schedule, as ``describe`` shows it.

    Attributes:
        nominal_at: nominal instant (UTC).
        local: the nominal instant in the schedule's zone.
        fire_at: when it was due (UTC).
        run_id: the workflow execution, DAG run or job id.
        outcome: ``started``, ``skipped``, ``missed`` (a buffered start later
            than the catch-up window), ``buffered`` or ``requested``.
        state: the run's current state (``running``, ``succeeded``, ...;
            ``gone`` once vacuumed; empty when not started).
    """

    nominal_at: datetime
    local: datetime
    fire_at: datetime
    run_id: uuid.UUID
    outcome: str
    state: str = ""


class ScheduleSummary(msgspec.Struct, kw_only=True):
    """One line of ``list``: id, action, paused, next fire (UTC, None: no more)."""

    id: str
    action: str
    paused: bool
    next_fire_at: datetime | None
    note: str = ""


class MissedRange(msgspec.Struct, kw_only=True):
    """Nominal times of a schedule that did not run, recorded as one range.

    Attributes:
        first_nominal_at: the first missed nominal instant (UTC).
        last_nominal_at: the last (inclusive).
        count: how many nominal times (a lower bound when not ``count_exact``).
        count_exact: False when a long cron range was counted only in part.
        reason: ``catchup`` (older than the catch-up window), ``paused``
            (passed while paused) or ``update`` (before an edit took effect).
        recorded_at: when (store clock).
    """

    first_nominal_at: datetime
    last_nominal_at: datetime
    count: int
    count_exact: bool
    reason: str
    recorded_at: datetime


class ScheduleChange(msgspec.Struct, kw_only=True):
    """One edit of a schedule.

    Attributes:
        at: when (store clock).
        verb: ``update``, ``pause`` or ``unpause``.
        old_spec, new_spec, old_policy, new_policy: before and after (None for
            pause and unpause).
        note: the operator's note.
    """

    at: datetime
    verb: str
    old_spec: ScheduleSpec | None = None
    new_spec: ScheduleSpec | None = None
    old_policy: SchedulePolicy | None = None
    new_policy: SchedulePolicy | None = None
    note: str = ""


class ScheduleCounts(msgspec.Struct, kw_only=True):
    """What became of the schedule's nominal times so far."""

    started: int = 0
    skipped: int = 0
    missed: int = 0


class ScheduleDescription(msgspec.Struct, kw_only=True):
    """What ``describe`` returns.

    Attributes:
        id: the schedule id.
        spec: its spec (datetimes in UTC).
        action: what it starts.
        policy: overlap and catch-up.
        paused: no fire while True; ``note`` says why.
        next_fires: what the scheduler will fire next, in order: due fires
            it has not handled yet, a due fire whose jittered start is still
            ahead, then future fires (``local`` in the spec's zone and UTC).
        recent_runs: the last runs, newest first, with their outcome.
        created_at: creation time (store clock).
        counts: started, skipped and missed nominal times so far.
        recent_missed: the last missed ranges, newest first.
        recent_changes: the last edits, newest first.
    """

    id: str
    spec: ScheduleSpec
    action: Action
    policy: SchedulePolicy
    paused: bool
    note: str
    next_fires: list[Fire]
    recent_runs: list[ScheduleRun]
    created_at: datetime
    counts: ScheduleCounts = msgspec.field(default_factory=ScheduleCounts)
    recent_missed: list[MissedRange] = msgspec.field(default_factory=list)
    recent_changes: list[ScheduleChange] = msgspec.field(default_factory=list)
