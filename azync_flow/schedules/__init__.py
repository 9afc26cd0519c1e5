"""Schedules: cron expressions and intervals in a time zone, with explicit DST
policies, fired exactly once per nominal time by a leader-only scheduler.

Example::

    from azync_flow.schedules import ScheduleSpec, StartWorkflow

    await client.schedules.create(
        "nightly-report",
        ScheduleSpec(cron=("30 1 * * *",), tz="Europe/London"),
        StartWorkflow.of(report, {"kind": "daily"}),
    )

or ``@workflow(schedule="30 1 * * *", tz="Europe/London")``. See docs/schedules.md.
"""

from ._actions import RunStarter
from ._client import ScheduleClient
from ._model import (
    DEFAULT_ID_TEMPLATE,
    Action,
    EnqueueJob,
    Overlap,
    ScheduleDescription,
    SchedulePolicy,
    ScheduleRun,
    ScheduleSummary,
    StartDAG,
    StartWorkflow,
    describe_action,
)
from ._scheduler import SCHEDULE_LEADERSHIP, Scheduler, declared_schedule_id
from ._spec import Fire, Interval, MissingTime, RepeatedTime, ScheduleSpec, aware_utc
from ._store import ScheduleRuntimeStore

__all__ = [
    "DEFAULT_ID_TEMPLATE",
    "SCHEDULE_LEADERSHIP",
    "Action",
    "EnqueueJob",
    "Fire",
    "Interval",
    "MissingTime",
    "Overlap",
    "RepeatedTime",
    "RunStarter",
    "ScheduleClient",
    "ScheduleDescription",
    "SchedulePolicy",
    "ScheduleRun",
    "ScheduleRuntimeStore",
    "ScheduleSpec",
    "ScheduleSummary",
    "Scheduler",
    "StartDAG",
    "StartWorkflow",
    "aware_utc",
    "declared_schedule_id",
    "describe_action",
]
