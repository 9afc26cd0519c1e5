"""``@transaction``: a workflow step whose own SQL commits with its recorded outcome."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from azync_flow._workflow.definitions import (
    DEFAULT_ACTIVITY_RETRY,
    ActivityDefinition,
    ActivityOptions,
)
from azync_flow.codec import encode_value
from azync_flow.replay.engine import current_instance
from azync_flow.retry import RetryPolicy
from azync_flow.store.workflows import TransactionIsolation

__all__ = ["TransactionDefinition", "transaction"]

P = ParamSpec("P")
R = TypeVar("R")

_LEVELS: tuple[str, ...] = typing.get_args(TransactionIsolation)
#: What ``with_options`` may change (the rest would make the step non-transactional).
_PER_CALL = frozenset({"retry", "start_to_close", "task_queue", "priority"})


class TransactionDefinition(ActivityDefinition[P, R]):
    """A ``@transaction``: ``async def f(conn, *args) -> R`` run as a durable step
    whose statements on ``conn`` commit in the same transaction as the step's
    recorded result.

    Inside workflow code ``await step(*args)`` (without ``conn``) schedules it
    like an activity. Each attempt runs in its own transaction: the result and
    the step's writes commit together, or neither does (a crash, an exception,
    a lost lease), so its effects on the application's tables happen exactly
    once. A serialization failure or deadlock (SQLSTATE 40001 / 40P01) re-runs
    the whole step at once; any other exception rolls it back and follows the
    retry policy.

    Attributes:
        isolation: the transaction's isolation level.
    """

    def __init__(
        self,
        fn: Callable[Concatenate[Any, P], Awaitable[R]],
        name: str,
        version: str,
        options: ActivityOptions,
        isolation: TransactionIsolation,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"@transaction needs an async def taking the connection first, got {fn!r}"
            )
        params = list(inspect.signature(fn).parameters.values())
        if not params or params[0].kind not in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            raise TypeError(
                f"@transaction function {fn.__qualname__} takes the connection as its "
                "first positional parameter"
            )
        if isolation not in _LEVELS:
            raise ValueError(f"isolation must be one of {list(_LEVELS)}, got {isolation!r}")
        super().__init__(typing.cast(Callable[P, Any], fn), name, version, options)
        self.isolation: TransactionIsolation = isolation
        # The step's arguments are the function's, minus the connection.
        self._signature = self._signature.replace(parameters=params[1:])
        self.param_types = self.param_types[1:]
        self._min_args = max(0, self._min_args - (params[0].default is params[0].empty))
        if self._max_args < 1 << 30:
            self._max_args -= 1

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        instance = current_instance()
        if instance is None:
            raise TypeError(
                f"transactional step {self.name!r} runs durably inside a workflow; "
                f"outside one call {self.name}.fn(conn, ...) in your own transaction"
            )
        return self._durable_call(instance, self.options, args, kwargs)

    def with_options(self, **overrides: Any) -> Callable[P, Awaitable[R]]:
        """Return a caller with some options replaced for these calls only:
        ``retry``, ``start_to_close``, ``task_queue``, ``priority``.

        Raises:
            TypeError: another option (a transactional step is always
                idempotent and renews its lease while it runs).
        """
        other = sorted(set(overrides) - _PER_CALL)
        if other:
            raise TypeError(f"a transactional step's {other} cannot be changed per call")
        return super().with_options(**overrides)

    async def run_in(self, conn: Any, data: bytes) -> bytes:
        """Run one attempt on ``conn`` (inside the step's transaction): decode the
        arguments, call, encode the result."""
        args = self.decode_args(data)
        fn = typing.cast(Callable[..., Awaitable[Any]], self.fn)
        return encode_value(await fn(conn, *args), f"result of activity {self.name!r}")


@overload
def transaction(
    fn: Callable[Concatenate[Any, P], Awaitable[R]], /
) -> TransactionDefinition[P, R]: ...


@overload
def transaction(
    *,
    name: str | None = None,
    version: str = "1",
    retry: RetryPolicy | None = None,
    start_to_close: timedelta | None = None,
    isolation: TransactionIsolation = "read_committed",
    task_queue: str | None = None,
    priority: int | None = None,
) -> Callable[[Callable[Concatenate[Any, P], Awaitable[R]]], TransactionDefinition[P, R]]: ...


def transaction(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str = "1",
    retry: RetryPolicy | None = None,
    start_to_close: timedelta | None = None,
    isolation: TransactionIsolation = "read_committed",
    task_queue: str | None = None,
    priority: int | None = None,
) -> Any:
    """Declare a transactional step: an async function taking an asyncpg
    connection first, whose SQL commits together with the step's result.

    ::

        @transaction
        async def debit(conn: asyncpg.Connection, account: str, cents: int) -> int:
            return await conn.fetchval(
                "UPDATE accounts SET cents = cents - $2 WHERE id = $1 RETURNING cents",
                account, cents)

        balance = await debit("acct-1", 500)          # in workflow code: no conn

    The connection belongs to the worker's store and is in the database's
    default ``search_path`` (the application's, not azync_flow's schema). Do
    not commit, roll back or close it, and do no non-transactional side effect
    (an HTTP call, a message) in the function: it may run again after a
    rollback.

    Args:
        name: registry name (default: ``__qualname__``); job kind ``$op:<name>@<version>``.
        version: step version (part of the job kind).
        retry: retry policy for failures other than serialization failures and
            deadlocks (default: 3 attempts in total).
        start_to_close: limit of ONE attempt; past it the transaction is
            rolled back and the attempt counts as failed (retried per policy).
        isolation: ``"read_committed"`` (default), ``"repeatable_read"`` or
            ``"serializable"``.
        task_queue: the task queue its attempts are routed to (default: the
            calling workflow's).
        priority: lease priority of its attempts (default: the workflow's).

    Returns:
        A :class:`TransactionDefinition`; register it with the activities.

    Raises:
        TypeError: ``fn`` is not an ``async def`` taking the connection first.
        ValueError: an unknown isolation level.

    Warning:
        Renaming a step called by running executions breaks their replay, as
        for an activity.
    """
    options = ActivityOptions(
        retry=retry or DEFAULT_ACTIVITY_RETRY,
        start_to_close=start_to_close,
        idempotent=True,  # both-or-neither: a lost attempt is safe to run again
        task_queue=task_queue,
        priority=priority,
    )

    def wrap(f: Callable[Concatenate[Any, P], Awaitable[R]]) -> TransactionDefinition[P, R]:
        return TransactionDefinition(f, name or f.__qualname__, version, options, isolation)

    return wrap(fn) if fn is not None else wrap
