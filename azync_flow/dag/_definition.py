"""Decorator-built DAG definitions, validated and turned into ``DAGParams``."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from ..codec import encode_value
from ..errors import DAGValidationError
from ..store.dags import KIND_SIGNAL, KIND_SLEEP, DAGDep, DAGParams, DAGTask, OnFailurePolicy

if TYPE_CHECKING:
    from ._context import TaskContext

Handler = Callable[["TaskContext"], Awaitable[Any]]
H = TypeVar("H", bound=Handler)

#: Task keys may not start with these: "$" is internal, "comp:" names compensations.
RESERVED_PREFIXES = ("$", "comp:")

_UNSET: Any = object()


@dataclass(frozen=True)
class TaskSpec:
    """One declared task of a :class:`DAG` (see :meth:`DAG.task` for the fields)."""

    key: str
    kind: str
    handler: Handler | None
    after: tuple[str, ...] = ()
    compensate: Handler | None = None
    compensation_kind: str = ""
    compensation_payload: Any = _UNSET
    max_attempts: int = 0
    deadline: timedelta = timedelta(0)
    ignore_dead_deps: bool = False
    skip_when_upstream_skipped: bool = False
    sleep_for: timedelta = timedelta(0)
    signal_name: str = ""
    payload: Any = _UNSET
    task_queue: str = "default"
    transactional: bool = False
    isolation: str = "read_committed"


@dataclass
class DAG:
    """A named static task graph with a failure policy.

    Example::

        saga = DAG("order", on_failure="cancel")

        @saga.task(compensate=release_stock)
        async def reserve(ctx: TaskContext) -> dict: ...

        @saga.task(after=[reserve], max_attempts=3, deadline=timedelta(minutes=5))
        async def charge(ctx: TaskContext) -> dict: ...

        saga.signal("warehouse_ok", after=[charge])

    Args:
        name: the definition name; idempotency keys are scoped to it.
        on_failure: ``"cancel"`` (cancel remaining tasks and run the
            compensation chain) or ``"suspend"`` (park the run for a manual
            retry/compensate/cancel).
    """

    name: str
    on_failure: OnFailurePolicy | str = OnFailurePolicy.CANCEL
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    _keys_by_handler: dict[int, str] = field(default_factory=dict, repr=False)
    _validated: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or self.name.startswith("$"):
            raise DAGValidationError(self.name, "", "a DAG needs a name not starting with '$'")
        self.on_failure = OnFailurePolicy(self.on_failure)

    # --- declaration ------------------------------------------------------------

    def task(
        self,
        fn: H | None = None,
        *,
        key: str | None = None,
        after: Iterable[str | Handler] = (),
        compensate: Handler | None = None,
        compensation_payload: Any = _UNSET,
        max_attempts: int = 0,
        deadline: timedelta | None = None,
        ignore_dead_deps: bool = False,
        skip_when_upstream_skipped: bool = False,
        payload: Any = _UNSET,
        kind: str | None = None,
        task_queue: str = "default",
        transactional: bool = False,
        isolation: str = "read_committed",
    ) -> Any:
        """Declare a handler task. Use as ``@dag.task`` or ``@dag.task(...)``.

        Args:
            key: task key, unique in the DAG (default: the function name).
            after: dependencies, as keys or previously declared handlers.
            compensate: handler run as ``comp:<key>`` if this task succeeded
                and the DAG later compensates (reverse completion order).
            compensation_payload: JSON-encodable payload of the compensation
                (default: the run input).
            max_attempts: retry budget in total (0 = the runner's default).
            deadline: snooze budget for ``NotReady``, measured from the first
                snooze on the backend clock; past it the task dies. Never
                inherited by the compensation.
            ignore_dead_deps: run even when a dependency died or was
                cancelled; a dead dependency whose dependents all set this
                does not trigger the failure policy (but the run ends failed).
            skip_when_upstream_skipped: settle skipped without running when
                every dependency was skipped (skip propagation).
            payload: this task's JSON payload (default: the run input).
            kind: handler kind (default ``"<dag>/<key>"``).
            task_queue: the task queue of the task and its compensation: only
                workers serving it run them.
            transactional: run the handler inside the transaction that acks
                the task with its result: its statements on ``ctx.connection``
                commit with the ack or not at all (exactly once). Its
                compensation is an ordinary handler.
            isolation: that transaction's isolation level
                (``"read_committed"``, ``"repeatable_read"``, ``"serializable"``).

        Returns:
            The handler, unchanged (so it stays unit-testable and usable in
            ``after=``).

        Raises:
            DAGValidationError: duplicate or reserved key, unknown dependency.
            ValueError: an unknown isolation level.
        """
        if isolation not in ("read_committed", "repeatable_read", "serializable"):
            raise ValueError(
                "isolation must be read_committed, repeatable_read or serializable, "
                f"got {isolation!r}"
            )

        def register(f: H) -> H:
            k = key or f.__name__
            comp_kind = f"{self.name}/comp:{k}" if compensate is not None else ""
            self._add(
                TaskSpec(
                    key=k,
                    kind=kind or f"{self.name}/{k}",
                    handler=f,
                    after=self._resolve(k, after),
                    compensate=compensate,
                    compensation_kind=comp_kind,
                    compensation_payload=compensation_payload,
                    max_attempts=max_attempts,
                    deadline=deadline or timedelta(0),
                    ignore_dead_deps=ignore_dead_deps,
                    skip_when_upstream_skipped=skip_when_upstream_skipped,
                    payload=payload,
                    task_queue=task_queue,
                    transactional=transactional,
                    isolation=isolation,
                )
            )
            self._keys_by_handler[id(f)] = k
            return f

        return register(fn) if fn is not None else register

    def sleep(
        self,
        key: str,
        duration: timedelta,
        *,
        after: Iterable[str | Handler] = (),
        wake_on: str = "",
        compensate: Handler | None = None,
        compensation_payload: Any = _UNSET,
    ) -> str:
        """Declare an internal sleep task: it succeeds ``duration`` after it starts.

        The timer starts on the backend clock when the task becomes runnable.
        A signal named ``wake_on`` (if given) ends it early.
        ``compensate``/``compensation_payload`` work as in :meth:`task`.
        Returns the key.
        """
        self._add(
            TaskSpec(
                key=key,
                kind=KIND_SLEEP,
                handler=None,
                after=self._resolve(key, after),
                sleep_for=duration,
                signal_name=wake_on,
                compensate=compensate,
                compensation_kind=f"{self.name}/comp:{key}" if compensate else "",
                compensation_payload=compensation_payload,
            )
        )
        return key

    def signal(
        self,
        key: str,
        *,
        after: Iterable[str | Handler] = (),
        name: str = "",
        compensate: Handler | None = None,
        compensation_payload: Any = _UNSET,
    ) -> str:
        """Declare an internal signal task: it succeeds when signal ``name`` arrives.

        ``name`` defaults to the key; the signal payload becomes the task's
        result. A signal sent before the task is reachable is buffered.
        ``compensate``/``compensation_payload`` work as in :meth:`task`.
        Returns the key.
        """
        self._add(
            TaskSpec(
                key=key,
                kind=KIND_SIGNAL,
                handler=None,
                after=self._resolve(key, after),
                signal_name=name or key,
                compensate=compensate,
                compensation_kind=f"{self.name}/comp:{key}" if compensate else "",
                compensation_payload=compensation_payload,
            )
        )
        return key

    # --- validation and encoding ------------------------------------------------

    def validate(self) -> None:
        """Check dependencies and cycles; raise :class:`DAGValidationError` naming a task."""
        if not self.tasks:
            raise DAGValidationError(self.name, "", "the DAG declares no tasks")
        for spec in self.tasks.values():
            for dep in spec.after:
                if dep not in self.tasks:
                    raise DAGValidationError(
                        self.name, spec.key, f"depends on unknown task {dep!r}"
                    )
        self._check_cycles()
        self._validated = True

    def params(
        self,
        input: Any = None,
        *,
        id: uuid.UUID | None = None,
        idempotency_key: str = "",
        meta: Mapping[str, str] | None = None,
        payloads: Mapping[str, Any] | None = None,
    ) -> DAGParams:
        """Validate and build the store's :class:`DAGParams` for one run.

        Args:
            input: JSON-encodable run input, the default payload of every task.
            id: run id (default: a fresh uuid4).
            idempotency_key: dedupes live runs of this DAG name.
            meta: string annotations copied onto every task.
            payloads: per-task payload overrides, by key.
        """
        if not self._validated:
            self.validate()
        raw_input = encode_value(input, f"input of dag {self.name!r}")
        overrides = dict(payloads or {})
        for k in overrides:
            if k not in self.tasks:
                raise DAGValidationError(self.name, k, "payload given for an unknown task")
        tasks = [self._task_params(s, raw_input, overrides) for s in self.tasks.values()]
        deps = [
            DAGDep(task_key=s.key, depends_on_key=d) for s in self.tasks.values() for d in s.after
        ]
        return DAGParams(
            id=id or uuid.uuid4(),
            name=self.name,
            on_failure=OnFailurePolicy(self.on_failure),
            idempotency_key=idempotency_key,
            meta=dict(meta or {}),
            tasks=tasks,
            deps=deps,
        )

    def handlers(self) -> dict[str, tuple[TaskSpec, Handler, bool]]:
        """Map every handler kind to ``(spec, handler, is_compensation)``."""
        out: dict[str, tuple[TaskSpec, Handler, bool]] = {}
        for s in self.tasks.values():
            if s.handler is not None:
                out[s.kind] = (s, s.handler, False)
            if s.compensate is not None:
                out[s.compensation_kind] = (s, s.compensate, True)
        return out

    # --- internals --------------------------------------------------------------

    def _add(self, spec: TaskSpec) -> None:
        if not spec.key:
            raise DAGValidationError(self.name, spec.key, "task key must not be empty")
        for prefix in RESERVED_PREFIXES:
            if spec.key.startswith(prefix):
                raise DAGValidationError(
                    self.name, spec.key, f"task keys must not start with the reserved {prefix!r}"
                )
        if spec.key in self.tasks:
            raise DAGValidationError(self.name, spec.key, "duplicate task key")
        if spec.key in spec.after:
            raise DAGValidationError(self.name, spec.key, "task depends on itself (cycle)")
        self.tasks[spec.key] = spec
        self._validated = False

    def _resolve(self, key: str, after: Iterable[str | Handler]) -> tuple[str, ...]:
        out: list[str] = []
        for dep in after:
            if isinstance(dep, str):
                name = dep
            else:
                found = self._keys_by_handler.get(id(dep))
                if found is None:
                    raise DAGValidationError(
                        self.name, key, f"depends on {dep!r}, which is not a task of this DAG"
                    )
                name = found
            if name not in out:
                out.append(name)
        return tuple(out)

    def _check_cycles(self) -> None:
        indegree = {k: len(s.after) for k, s in self.tasks.items()}
        dependents: dict[str, list[str]] = {k: [] for k in self.tasks}
        for s in self.tasks.values():
            for d in s.after:
                dependents[d].append(s.key)
        ready = [k for k, n in indegree.items() if n == 0]
        seen = 0
        while ready:
            k = ready.pop()
            seen += 1
            for t in dependents[k]:
                indegree[t] -= 1
                if indegree[t] == 0:
                    ready.append(t)
        if seen != len(self.tasks):
            stuck = sorted(k for k, n in indegree.items() if n > 0)
            raise DAGValidationError(
                self.name, stuck[0], f"dependency cycle among tasks {', '.join(stuck)}"
            )

    def _task_params(self, s: TaskSpec, raw_input: bytes, overrides: dict[str, Any]) -> DAGTask:
        if s.key in overrides:
            payload = encode_value(overrides[s.key], f"payload of task {s.key!r}")
        elif s.payload is not _UNSET:
            payload = encode_value(s.payload, f"payload of task {s.key!r}")
        else:
            payload = raw_input
        comp_payload: bytes | None = None
        if s.compensate is not None:
            comp_payload = raw_input
            if s.compensation_payload is not _UNSET:
                what = f"compensation payload of task {s.key!r}"
                comp_payload = encode_value(s.compensation_payload, what)
        return DAGTask(
            key=s.key,
            kind=s.kind,
            payload=payload,
            max_attempts=s.max_attempts,
            compensation_kind=s.compensation_kind,
            compensation_payload=comp_payload,
            signal_name=s.signal_name,
            sleep_for=s.sleep_for,
            ignore_dead_deps=s.ignore_dead_deps,
            deadline=s.deadline,
            task_queue=s.task_queue,
        )
