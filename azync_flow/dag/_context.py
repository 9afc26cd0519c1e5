"""What a DAG task handler receives: :class:`TaskContext`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..codec import decode_value
from ..store.dags import DAGResults, TaskResult


@dataclass(frozen=True)
class TaskOutcome:
    """The settled outcome of an upstream task.

    Attributes:
        skipped: the task settled skipped (it deliberately did nothing).
        has_result: the task succeeded with a stored result.
        raw: the stored result bytes (JSON), None without one.
    """

    skipped: bool
    has_result: bool
    raw: bytes | None

    @property
    def value(self) -> Any:
        """The decoded result, or None when skipped or succeeded without a result.

        Raises:
            PayloadError: the stored result is not JSON.
        """
        if self.raw is None:
            return None
        return decode_value(self.raw, Any, "task result")

    @classmethod
    def from_store(cls, r: TaskResult) -> TaskOutcome:
        return cls(skipped=r.skipped, has_result=r.result is not None, raw=r.result)


@dataclass
class TaskContext:
    """Context passed to every DAG task and compensation handler.

    Attributes:
        run_id: the DAG run (execution) id.
        key: this task's key (``comp:<key>`` for a compensation).
        kind: the handler kind.
        attempt: 1-based attempt number of this lease.
        max_attempts: the resolved retry budget.
        raw_payload: the payload bytes exactly as stored.
        meta: the run's string annotations.
        task_results: settled outcomes of this task's dependencies (for a
            compensation: of the task it compensates), keyed by task key. A
            dependency absent here did not succeed or skip (it was tolerated
            dead or cancelled).
        compensates: for a compensation, the key of the compensated task.
    """

    run_id: uuid.UUID
    key: str
    kind: str
    attempt: int
    max_attempts: int
    raw_payload: bytes
    meta: Mapping[str, str]
    task_results: Mapping[str, TaskOutcome] = field(default_factory=dict)
    compensates: str = ""
    _store: DAGResults | None = field(default=None, repr=False)
    _connection: Any = field(default=None, repr=False)

    @property
    def connection(self) -> Any:
        """The asyncpg connection inside the transaction that acks this task
        (a ``transactional=True`` task only): write the handler's effects on it
        to commit them with the task's result. Do not commit, roll back or
        close it.

        Raises:
            RuntimeError: the task is not transactional.
        """
        if self._connection is None:
            raise RuntimeError(
                f"task {self.key!r} is not transactional: declare it with "
                "@dag.task(..., transactional=True) to get ctx.connection"
            )
        return self._connection

    @property
    def payload(self) -> Any:
        """The decoded JSON payload (the run input unless overridden).

        Raises:
            PayloadError: the stored payload is not JSON (the task is then
                dead-lettered, not retried).
        """
        return decode_value(self.raw_payload, Any, f"payload of task {self.key!r}")

    async def results(self, keys: Sequence[str] = ()) -> dict[str, TaskOutcome]:
        """Read settled outcomes of any tasks of the run (empty keys: all settled)."""
        if self._store is None:
            return {}
        found = await self._store.task_results(self.run_id, keys)
        return {k: TaskOutcome.from_store(v) for k, v in found.items()}
