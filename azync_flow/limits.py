"""Concurrency and rate limits, enforced in PostgreSQL across every worker.

Declare them where the work is declared::

    from datetime import timedelta
    from azync_flow import ConcurrencyLimit, RateLimit, activity

    @activity(
        limits=[ConcurrencyLimit("charges", 10), RateLimit("psp", 100, timedelta(seconds=1))],
    )
    async def charge(order: Order) -> str: ...

    @activity(limits=[ConcurrencyLimit("per-customer", 2, per_key=True)],
              limit_key=lambda order: order.customer_id)
    async def ship(order: Order) -> str: ...

    worker.register("email.send", send, limits=[RateLimit("smtp", 50, timedelta(minutes=1))])
    await client.enqueue("email.send", mail, limit_key=mail.customer_id)

A limit is a name: every kind that declares the same name shares it. Workers
store the definitions of the kinds they register when they start (the last
start wins); docs/flow-control.md tells the rules.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TypeAlias

from azync_flow.store.queue import LimitSpec
from azync_flow.store.validate import check_limits

__all__ = ["ConcurrencyLimit", "Limit", "RateLimit", "limit_specs"]


@dataclasses.dataclass(frozen=True)
class ConcurrencyLimit:
    """At most ``max_in_flight`` jobs in flight (leased and not settled).

    Attributes:
        name: the limit's name; kinds declaring the same name share it.
        max_in_flight: the limit (1 to 10,000), per key when ``per_key``.
        per_key: count each job key apart (an activity's ``limit_key``, a queue
            job's ``limit_key`` at enqueue), serving the keys round robin.

    Raises:
        ValueError: a bad name or a limit out of range.
        TypeError: ``max_in_flight`` is not an int.
    """

    name: str
    max_in_flight: int
    per_key: bool = False

    def __post_init__(self) -> None:
        check_limits([self.spec()])

    def spec(self) -> LimitSpec:
        """The stored definition."""
        return LimitSpec(
            name=self.name, type="concurrency", capacity=self.max_in_flight, per_key=self.per_key
        )


@dataclasses.dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` starts (leases) in any window of ``period``.

    Every attempt's lease is a start, retries included.

    Attributes:
        name: the limit's name; kinds declaring the same name share it.
        limit: starts per period (1 to 10,000), per key when ``per_key``.
        period: the window (positive).
        per_key: count each job key apart.

    Raises:
        ValueError: a bad name, a limit out of range or a period not positive.
        TypeError: ``limit`` is not an int.
    """

    name: str
    limit: int
    period: timedelta
    per_key: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.period, timedelta):
            raise TypeError(f"rate limit {self.name!r} period must be a timedelta")
        check_limits([self.spec()])

    def spec(self) -> LimitSpec:
        """The stored definition."""
        return LimitSpec(
            name=self.name,
            type="rate",
            capacity=self.limit,
            period=self.period,
            per_key=self.per_key,
        )


Limit: TypeAlias = ConcurrencyLimit | RateLimit


def limit_specs(limits: object, field: str = "limits") -> list[LimitSpec]:
    """The definitions of ``limits`` (a sequence of limits), checked.

    Raises:
        TypeError: ``limits`` is not a list or tuple of ConcurrencyLimit / RateLimit.
        ValueError: two limits share a name.
    """
    if not isinstance(limits, list | tuple):
        raise TypeError(f"{field} must be a list of ConcurrencyLimit or RateLimit")
    specs = []
    for lim in limits:
        if not isinstance(lim, ConcurrencyLimit | RateLimit):
            raise TypeError(f"{field}: expected ConcurrencyLimit or RateLimit, got {lim!r}")
        specs.append(lim.spec())
    return check_limits(specs, field)
