"""Control-flow signals a DAG task handler raises, and the definition error.

``NotReady`` and ``Skip`` derive from ``BaseException`` so a handler's broad
``except Exception`` cannot swallow them by accident.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from ..store.errors import AzyncError, ConflictError


class NotReady(BaseException):
    """Raise from a task handler to re-check later without spending an attempt.

    The task is snoozed for ``delay``. When the task declared a ``deadline``
    (its snooze budget), the first snooze stamps the deadline on the backend
    clock and a snooze settled past it dead-letters the task, which triggers the
    DAG's failure policy.

    Args:
        delay: how long to wait before the next attempt (default 1 second).
        reason: shown as the last error if the deadline is exhausted.
    """

    def __init__(self, delay: timedelta = timedelta(seconds=1), reason: str = "not ready") -> None:
        super().__init__(reason)
        self.delay = delay
        self.reason = reason


class Skip(BaseException):
    """Raise from a task handler to settle the task as skipped.

    A skipped task is terminal, has no result, satisfies its dependents like a
    succeeded one and is never compensated.

    Args:
        reason: kept as the task's last error for the ops surfaces.
    """

    def __init__(self, reason: str = "skipped") -> None:
        super().__init__(reason)
        self.reason = reason


class DAGValidationError(AzyncError, ValueError):
    """A DAG definition is invalid (cycle, unknown dependency, duplicate or reserved key).

    Attributes:
        dag: the DAG name.
        task: the offending task key.
    """

    code = "dag_invalid"

    def __init__(self, dag: str, task: str, problem: str) -> None:
        super().__init__(f"dag {dag!r}, task {task!r}: {problem}")
        self.dag = dag
        self.task = task


class DAGIdempotencyConflictError(ConflictError):
    """A run reused the idempotency key of a live run of the same DAG with
    different tasks, task payloads or meta. Nothing was started.

    Attributes:
        existing_id: the live run holding the key.
    """

    code = "idempotency_conflict"

    def __init__(self, message: str, existing_id: uuid.UUID) -> None:
        super().__init__(message)
        self.existing_id = existing_id
