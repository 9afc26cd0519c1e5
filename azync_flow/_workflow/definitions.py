"""``@workflow`` / ``@activity`` decorators, their definitions and the registry."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import timedelta
from typing import Any, Generic, ParamSpec, TypeVar, overload

from azync_flow._result_type import ResultType, result_type_of
from azync_flow._workflow.context import WorkflowContext
from azync_flow._workflow.handlers import decode_args
from azync_flow.codec import DEFAULT_MAX_PAYLOAD_BYTES, decode_value, encode_value
from azync_flow.errors import UnknownWorkflowError
from azync_flow.limits import Limit, limit_specs
from azync_flow.replay.engine import WorkflowInstance, current_instance
from azync_flow.retry import RetryPolicy
from azync_flow.store.validate import check_name, check_timeout

__all__ = [
    "ActivityDefinition",
    "ActivityOptions",
    "Registry",
    "WorkflowDefinition",
    "activity",
    "workflow",
]

P = ParamSpec("P")
R = TypeVar("R")
I = TypeVar("I")  # noqa: E741


#: Retry policy of an activity declared without ``retry=``: 3 attempts in total,
#: 1 s initial backoff doubling up to 100 s (with the policy's default jitter).
DEFAULT_ACTIVITY_RETRY = RetryPolicy(maximum_attempts=3)


@dataclasses.dataclass(frozen=True)
class ActivityOptions:
    """Per-activity (or per-call) execution options.

    Attributes:
        retry: retry policy; the budget is in total attempts.
        start_to_close: limit of ONE attempt (its lease); ``None`` = worker default.
        heartbeat_timeout: an attempt that does not heartbeat within this is
            considered lost: its lease is renewed only by its own
            ``current_activity().heartbeat()`` calls, so once silent this long
            it is reaped (retried if idempotent, parked uncertain if not) and
            its task cancelled; ``None`` = the worker renews the lease while
            the attempt runs.
        idempotent: False marks a non-idempotent step: an attempt whose outcome is
            unknown is not retried blindly but parked as uncertain.
        reconcile: optional hook deciding an uncertain attempt's outcome.
        task_queue: the task queue its attempts are routed to (only workers
            serving it run them); ``None`` = the calling workflow's queue.
        priority: its lease priority (higher first, aged by waiting: one
            unit is a minute's head start, docs/flow-control.md); ``None`` =
            the calling workflow's priority.
        schedule_to_start: the longest the call may wait, from when it is
            scheduled, for its first attempt to be leased; ``None`` = no
            limit. Elapsed: the call fails at once (not retried) with
            ``ActivityTimeoutError`` (kind ``schedule_to_start``).
        schedule_to_close: the longest the call may take, from when it is
            scheduled until it settles, across every attempt and retry
            backoff; ``None`` = no limit. Elapsed: the call fails at once (not
            retried; a running attempt loses its lease) with
            ``ActivityTimeoutError`` (kind ``schedule_to_close``).
        limits: the concurrency and rate limits its attempts obey, across
            every worker (docs/flow-control.md#limits).
        limit_key: the key of its per-key limits: a function of the
            activity's arguments, called when the workflow schedules the call
            (it must be deterministic), or a str (``with_options``); ``None``
            = the key ``""``.
    """

    retry: RetryPolicy = dataclasses.field(default_factory=lambda: DEFAULT_ACTIVITY_RETRY)
    start_to_close: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    idempotent: bool = True
    reconcile: Callable[..., Any] | None = None
    task_queue: str | None = None
    priority: int | None = None
    schedule_to_start: timedelta | None = None
    schedule_to_close: timedelta | None = None
    limits: tuple[Limit, ...] = ()
    limit_key: Callable[..., str] | str | None = None

    def __post_init__(self) -> None:
        check_timeout(self.schedule_to_start, "schedule_to_start")
        check_timeout(self.schedule_to_close, "schedule_to_close")
        object.__setattr__(self, "limits", tuple(self.limits))
        limit_specs(self.limits)
        if self.limit_key is not None and not (
            isinstance(self.limit_key, str) or callable(self.limit_key)
        ):
            raise TypeError(f"limit_key must be a str or a function, got {self.limit_key!r}")
        if isinstance(self.limit_key, str):
            check_name(self.limit_key, "limit_key", empty_ok=True)

    def resolved(self, args: Sequence[Any]) -> ActivityOptions:
        """These options with ``limit_key`` computed from a call's arguments
        (unchanged when the activity has no limits or the key is a str).

        Raises:
            TypeError: the key function does not return a str.
            ValueError: the key has a NUL, is not valid UTF-8 or is over 255
                characters long.
        """
        if not self.limits or not callable(self.limit_key):
            return self
        key = check_name(self.limit_key(*args), "the activity's limit_key", empty_ok=True)
        return dataclasses.replace(self, limit_key=key)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolved forward refs: fall back to untyped decoding
        return {}


class ActivityDefinition(Generic[P, R]):
    """An ``@activity``: a plain function outside workflows, a durable step inside.

    Inside workflow code ``await act(x)`` records ``ActivityScheduled``, schedules
    an operation job ``$op:<name>@<version>`` and returns the result decoded to
    the function's return annotation, or raises
    :class:`~azync_flow.errors.ActivityError` once the retry budget is spent.
    Arguments are passed positionally (keyword arguments are bound to their
    positions); keyword-only parameters are not supported.
    """

    def __init__(
        self, fn: Callable[P, Any], name: str, version: str, options: ActivityOptions
    ) -> None:
        self.fn = fn
        self.name = name
        self.version = version
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        self._signature = inspect.signature(fn)
        hints = _hints(fn)
        params = list(self._signature.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._min_args = sum(1 for p in positional if p.default is p.empty)
        has_varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
        self._max_args = 1 << 30 if has_varargs else len(positional)
        self.return_type: Any = hints.get("return", Any)
        self.param_types: list[Any] = [
            hints.get(p.name, Any)
            for p in self._signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
        functools.update_wrapper(self, fn)

    @property
    def kind(self) -> str:
        """Job kind of this activity's operations: ``$op:<name>@<version>``."""
        return f"$op:{self.name}@{self.version}"

    @functools.cached_property
    def recorded_result_type(self) -> ResultType | None:
        """The result type its operations record (name and JSON schema of the
        return annotation; decisions are checked against it), or None when it
        cannot be checked (no annotation, ``Any``, a type msgspec cannot describe)."""
        return result_type_of(self.return_type)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        instance = current_instance()
        if instance is None:
            return self.fn(*args, **kwargs)
        return self._durable_call(instance, self.options, args, kwargs)

    def with_options(self, **overrides: Any) -> Callable[P, Awaitable[R]]:
        """Return a caller with some options replaced for these calls only.

        Accepts the fields of :class:`ActivityOptions` as keywords, except
        ``limits`` (a worker stores an activity's limits from its declaration).

        Raises:
            ValueError: ``limits`` is given.
        """
        if "limits" in overrides:
            raise ValueError(
                f"activity {self.name!r}: limits are declared with @activity(limits=...), "
                "not per call"
            )
        options = dataclasses.replace(self.options, **overrides)

        def call(*args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
            instance = current_instance()
            if instance is None:
                result = self.fn(*args, **kwargs)
                return result if inspect.isawaitable(result) else _ready(result)
            return self._durable_call(instance, options, args, kwargs)

        return call

    def encode_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        """Encode a call's arguments as a JSON array (the ActivityScheduled input)."""
        if not kwargs and self._min_args <= len(args) <= self._max_args:
            return encode_value(list(args), f"input of activity {self.name!r}")
        bound = self._signature.bind(*args, **kwargs)
        if bound.kwargs:
            raise TypeError(f"activity {self.name!r}: keyword-only parameters are not supported")
        return encode_value(list(bound.args), f"input of activity {self.name!r}")

    def decode_args(self, data: bytes) -> list[Any]:
        """Decode an operation's input back into positional arguments (typed by annotation)."""
        return decode_args(data, self.param_types, f"activity {self.name!r}")

    async def run(self, data: bytes) -> bytes:
        """Run one attempt for the activity runtime: decode args, call, encode the result.

        Sync functions run in a worker thread (``asyncio.to_thread``) so they do
        not block the event loop.
        """
        args = self.decode_args(data)
        fn = typing.cast(Callable[..., Any], self.fn)
        result = await fn(*args) if self.is_async else await asyncio.to_thread(fn, *args)
        return encode_value(result, f"result of activity {self.name!r}")

    async def _durable_call(
        self,
        instance: WorkflowInstance,
        options: ActivityOptions,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> R:
        data = self.encode_args(args, kwargs)
        if options.limits:
            options = options.resolved(self._signature.bind(*args, **kwargs).args)
        _, future = instance.schedule_activity(
            self.name, self.version, data, options, self.recorded_result_type
        )
        raw = await future
        result = decode_value(raw, self.return_type, f"result of activity {self.name!r}")
        return typing.cast(R, result)


async def _ready(value: Any) -> Any:
    return value


class WorkflowDefinition(Generic[I, R]):
    """A ``@workflow``: ``async def f(ctx: WorkflowContext, inp: I) -> R``.

    The input is decoded to the annotation of the second parameter; the
    function may also take only ``ctx``.
    """

    def __init__(
        self,
        fn: Callable[..., Coroutine[Any, Any, R]],
        name: str,
        version: str,
        schedule: dict[str, Any] | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@workflow needs an async def, got {fn!r}")
        self.fn = fn
        self.name = name
        self.version = version
        #: ``ScheduleClient.ensure`` arguments of a ``schedule=`` declaration (None: none).
        self.schedule = schedule
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            raise TypeError("a workflow function takes the WorkflowContext as first parameter")
        hints = _hints(fn)
        self.takes_input = len(params) >= 2
        self.input_type: Any = hints.get(params[1].name, Any) if self.takes_input else None
        self.result_type: Any = hints.get("return", Any)
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def create_coroutine(
        self, instance: WorkflowInstance, input_bytes: bytes
    ) -> Coroutine[Any, Any, bytes]:
        """Engine hook: the coroutine running this workflow, returning the encoded result."""
        return self._run(instance, input_bytes)

    async def _run(self, instance: WorkflowInstance, input_bytes: bytes) -> bytes:
        ctx = WorkflowContext(instance)
        if self.takes_input:
            value = decode_value(input_bytes, self.input_type, f"input of workflow {self.name!r}")
            result = await self.fn(ctx, value)
        else:
            result = await self.fn(ctx)
        limit = instance.max_payload_bytes
        what = f"result of workflow {self.name!r}"
        return encode_value(result, what, DEFAULT_MAX_PAYLOAD_BYTES if limit is None else limit)

    def check_input(self, data: bytes) -> None:
        """Check that a stored input decodes to the declared input type (what a
        worker checks before it runs an execution it has not cached).

        Raises:
            PayloadError: it does not (another app's or version's input under
                the same workflow name).
        """
        if self.takes_input:
            decode_value(data, self.input_type, f"input of workflow {self.name!r}")

    def encode_input(self, value: Any) -> bytes:
        """Encode a start input (the client and child starts use this), checked
        against the declared input type the way the worker will decode it.

        Raises:
            PayloadEncodeError: ``value`` is not JSON-encodable.
            PayloadError: the encoded value does not decode to the input type
                (e.g. a str for a Struct input), so the run could never start.
        """
        what = f"input of workflow {self.name!r}"
        data = encode_value(value, what)
        if self.takes_input:
            decode_value(data, self.input_type, what)
        return data

    def decode_result(self, data: bytes) -> R:
        """Decode a stored result (or a child's, for its parent) to the return annotation.

        Raises:
            PayloadError: ``data`` does not decode to the return annotation.
        """
        result = decode_value(data, self.result_type, f"result of workflow {self.name!r}")
        return typing.cast(R, result)


@overload
def workflow(fn: Callable[..., Coroutine[Any, Any, R]], /) -> WorkflowDefinition[Any, R]: ...


@overload
def workflow(
    *,
    name: str | None = None,
    version: str = "",
    schedule: str | Sequence[str] | None = None,
    tz: str = "UTC",
) -> Callable[[Callable[..., Coroutine[Any, Any, R]]], WorkflowDefinition[Any, R]]: ...


def workflow(
    fn: Callable[..., Coroutine[Any, Any, R]] | None = None,
    /,
    *,
    name: str | None = None,
    version: str = "",
    schedule: str | Sequence[str] | None = None,
    tz: str = "UTC",
) -> Any:
    """Declare a workflow. Use bare (``@workflow``) or with options.

    Args:
        name: registry name (default: the function's ``__qualname__``).
        version: a label recorded with each execution started from this
            definition (``client.start(defn)``, a child start; ``version=`` of
            ``start`` overrides it) and read back as ``ctx.info.version``;
            ``""`` (the default) means unversioned. It is nothing more: it
            does not route (any worker that registers the workflow's name,
            on the execution's task queue, runs executions of every version,
            ``""`` included, and
            ``ctx.info.version`` is the execution's recorded version, not the
            worker's); a start by name (``client.start("order")``, ``azync-flow
            workflows start order``) without ``version=`` records ``""``, not
            a registered version; a worker registers one definition per name,
            whatever their versions; replay does not compare it. Keep
            incompatible code apart with ``ctx.patched``, another name or a
            task queue (docs/workflows.md, "Workflow versions").
        schedule: cron expression(s) starting this workflow (input None) on
            their nominal times in ``tz``, with the default DST, overlap and
            catch-up policies (docs/schedules.md). The schedule, id
            ``workflow:<name>``, is created or updated when a worker running
            the workflow leads the scheduler.
        tz: IANA time zone of ``schedule``.

    Raises:
        ScheduleSpecError: an invalid cron expression or time zone.

    Warning:
        Renaming a workflow orphans running executions of the old name.
    """
    declared = None
    if schedule is not None:
        from azync_flow.schedules import ScheduleSpec

        crons = (schedule,) if isinstance(schedule, str) else tuple(schedule)
        declared = {"spec": ScheduleSpec(cron=crons, tz=tz).validated()}

    def wrap(f: Callable[..., Coroutine[Any, Any, R]]) -> WorkflowDefinition[Any, R]:
        return WorkflowDefinition(f, name or f.__qualname__, version, declared)

    return wrap(fn) if fn is not None else wrap


def activity(
    fn: Callable[P, Any] | None = None,
    /,
    *,
    name: str | None = None,
    version: str = "1",
    retry: RetryPolicy | None = None,
    start_to_close: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    idempotent: bool = True,
    reconcile: Callable[..., Any] | None = None,
    task_queue: str | None = None,
    priority: int | None = None,
    schedule_to_start: timedelta | None = None,
    schedule_to_close: timedelta | None = None,
    limits: Sequence[Limit] = (),
    limit_key: Callable[..., str] | None = None,
) -> Any:
    """Declare an activity (an async or sync function). Use bare or with options.

    Args:
        name: registry name (default: ``__qualname__``). Part of the operation
            job kind ``$op:<name>@<version>``.
        version: activity version (part of the job kind; not compared on replay).
        retry: retry policy (default: :data:`DEFAULT_ACTIVITY_RETRY`, 3 attempts).
        start_to_close: limit of one attempt.
        heartbeat_timeout: maximum gap between heartbeats of one attempt (the
            attempt is lost after a longer silence; see ``ActivityOptions``).
        idempotent: False for non-idempotent steps (uncertain outcomes are parked).
        reconcile: hook deciding an uncertain attempt's outcome.
        task_queue: the task queue its attempts are routed to (e.g. ``"gpu"``:
            only workers serving that queue run them); default: the calling
            workflow's queue.
        priority: lease priority of its attempts (higher first, aged by
            waiting); default: the calling workflow's priority.
        schedule_to_start: limit from scheduling to the first lease (not
            retried when it elapses; see ``ActivityOptions``).
        schedule_to_close: limit from scheduling to completion, across all
            attempts (not retried when it elapses; see ``ActivityOptions``).
        limits: :class:`~azync_flow.ConcurrencyLimit` / :class:`~azync_flow.RateLimit`
            its attempts obey across every worker; a worker that registers it
            stores them when it starts.
        limit_key: the key of its per-key limits, computed from the call's
            arguments when the workflow schedules it (deterministic, a str).

    Raises:
        TypeError / ValueError: bad limits (two of one name, out of range).

    Warning:
        Renaming an activity called by running executions breaks their replay
        (``NonDeterminismError``); gate such changes with ``ctx.patched``.
    """
    options = ActivityOptions(
        retry=retry or DEFAULT_ACTIVITY_RETRY,
        start_to_close=start_to_close,
        heartbeat_timeout=heartbeat_timeout,
        idempotent=idempotent,
        reconcile=reconcile,
        task_queue=task_queue,
        priority=priority,
        schedule_to_start=schedule_to_start,
        schedule_to_close=schedule_to_close,
        limits=tuple(limits),
        limit_key=limit_key,
    )

    def wrap(f: Callable[P, Any]) -> ActivityDefinition[P, Any]:
        return ActivityDefinition(f, name or f.__qualname__, version, options)

    return wrap(fn) if fn is not None else wrap


class Registry:
    """Name -> definition maps used by workers and the Replayer.

    Raises:
        ValueError: two different definitions under one name.
    """

    def __init__(
        self,
        workflows: Iterable[WorkflowDefinition[Any, Any]] = (),
        activities: Iterable[ActivityDefinition[Any, Any]] = (),
    ) -> None:
        self.workflows: dict[str, WorkflowDefinition[Any, Any]] = {}
        self.activities: dict[str, ActivityDefinition[Any, Any]] = {}
        for w in workflows:
            self.add_workflow(w)
        for a in activities:
            self.add_activity(a)

    def add_workflow(self, defn: WorkflowDefinition[Any, Any]) -> None:
        if not isinstance(defn, WorkflowDefinition):
            raise TypeError(f"{defn!r} is not decorated with @workflow")
        existing = self.workflows.get(defn.name)
        if existing is not None and existing is not defn:
            raise ValueError(f"two workflows registered under {defn.name!r}")
        self.workflows[defn.name] = defn

    def add_activity(self, defn: ActivityDefinition[Any, Any]) -> None:
        if not isinstance(defn, ActivityDefinition):
            raise TypeError(f"{defn!r} is not decorated with @activity")
        existing = self.activities.get(defn.kind)
        if existing is not None and existing is not defn:
            raise ValueError(f"two activities registered as {defn.kind!r}")
        self.activities[defn.kind] = defn

    def workflow(self, name: str) -> WorkflowDefinition[Any, Any]:
        """Return the workflow registered under ``name``.

        Raises:
            UnknownWorkflowError: none is.
        """
        try:
            return self.workflows[name]
        except KeyError:
            raise UnknownWorkflowError(name) from None

    def activity(self, kind: str) -> ActivityDefinition[Any, Any]:
        """Return the activity for an operation kind ``$op:<name>@<version>``.

        Raises:
            UnknownWorkflowError: none is registered.
        """
        try:
            return self.activities[kind]
        except KeyError:
            raise UnknownWorkflowError(kind) from None
