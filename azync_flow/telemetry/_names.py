"""Names shared by every span azync_flow creates: attribute keys, kinds, outcomes."""

from __future__ import annotations

from enum import StrEnum

INSTRUMENTATION_NAME = "azync_flow"

ATTR_RUN_ID = "azync.run_id"
ATTR_KIND = "azync.kind"
ATTR_WORKFLOW_NAME = "azync.workflow.name"
ATTR_DAG_NAME = "azync.dag.name"
ATTR_TASK_KEY = "azync.task_key"
ATTR_SEQ = "azync.seq"
ATTR_ATTEMPT = "azync.attempt"
ATTR_OUTCOME = "azync.outcome"
ATTR_RETRY_DELAY_S = "azync.retry_delay_s"
ATTR_HISTORY_LENGTH = "azync.history_length"
ATTR_EVENTS_REPLAYED = "azync.events_replayed"
ATTR_NEW_COMMANDS = "azync.new_commands"
ATTR_STATE = "azync.state"

#: Status description (and span event) of an attempt lost to lease expiry.
LEASE_EXPIRED = "lease expired"


class RunKind(StrEnum):
    """What a run is; the run span is named ``"<kind> <name>"``."""

    WORKFLOW = "workflow"
    DAG = "dag"


class AttemptKind(StrEnum):
    """What an attempt executes; the span name is ``"<kind> <name>"``."""

    WORKFLOW_TASK = "workflow.task"
    ACTIVITY = "activity"
    DAG_TASK = "dag.task"
    DAG_COMPENSATION = "dag.compensation"
    JOB = "job"


class AttemptOutcome(StrEnum):
    """How an attempt ended: recorded as ``azync.outcome`` on its span, and
    returned by ``DAGRunner.run_task``."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEAD = "dead"
    SNOOZED = "snoozed"
    SKIPPED = "skipped"
    UNCERTAIN = "uncertain"
    #: left unrun for a worker that can run it (the attempt given back)
    RELEASED = "released"


class RunEvent(StrEnum):
    """Things that happen to a run outside any attempt; a short span each."""

    SIGNAL = "signal"
    TIMER_FIRED = "timer.fired"
    UNCERTAIN_RESOLVED = "uncertain.resolved"
    CANCEL_REQUESTED = "cancel.requested"
    TERMINATED = "workflow.terminated"
