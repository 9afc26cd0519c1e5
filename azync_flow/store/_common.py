"""What every domain module of the contract shares: the push-stream Protocol
and the type variables of the Protocols."""

from __future__ import annotations

from types import TracebackType
from typing import Literal, Protocol, Self, TypeVar, runtime_checkable

__all__ = ["Subscription", "TTx_contra", "TransactionIsolation"]

T_co = TypeVar("T_co", covariant=True)
#: The driver's connection type, for the verbs that write in the caller's transaction.
TTx_contra = TypeVar("TTx_contra", contravariant=True)
#: Isolation level of a transactional step's transaction.
TransactionIsolation = Literal["read_committed", "repeatable_read", "serializable"]


@runtime_checkable
class Subscription(Protocol[T_co]):
    """A push stream (the Go channel of ``Wake``/``Changes``).

    Iterate it with ``async for`` (or ``await anext(sub)`` under
    ``asyncio.timeout`` to wait with a bound — cancelling a pending
    ``__anext__`` loses no item); iteration ends after :meth:`close`. Use it
    as an async context manager to close it on exit.
    """

    def __aiter__(self) -> Self: ...

    async def __anext__(self) -> T_co: ...

    async def close(self) -> None:
        """Stop the stream and release its connection. Idempotent."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
