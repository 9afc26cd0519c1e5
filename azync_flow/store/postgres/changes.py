"""Change hints for admin surfaces (contract ``ChangeNotifier``), kept cheap.

Per-row change notification would put a NOTIFY on every settle, and NOTIFY
serialises committing transactions on a global lock — too costly for the hot
path. Instead a :class:`ChangeSubscription` rides on the wake channel and on
Postgres' cumulative table statistics:

* the first item is a ``ChangeEntity.RESET``, sent once LISTEN is live;
* every wake (a job of ``(source, kind)`` became pending) is forwarded as a
  partition hint ``Change(entity=JOB, source=..., kind=..., state="pending")``
  with no id;
* once a second the listener compares the insert/update/delete counters of
  the jobs, DAG, event and workflow tables of the schema; when they moved, it
  sends a RESET ("refetch"), as it does after every reconnect.

So every committed change is announced by a hint or a RESET, never silently
lost, at the price of coarse hints: a consumer refetches on RESET. Latency is
about one second plus Postgres' statistics flush delay (up to ~10 s for an
idle backend).
"""

from __future__ import annotations

import asyncpg

from ..types import Change, ChangeEntity, Source
from ._base import PgBase
from ._queries import QUERIES
from .notify import ListenSubscription, parse_wake

__all__ = [
    "CHANGE_POLL_INTERVAL",
    "ChangeMixin",
    "ChangeSubscription",
]

#: How often the statistics counters are compared (seconds).
CHANGE_POLL_INTERVAL = 1.0


class ChangeSubscription(ListenSubscription[Change]):
    """The stream of ``ChangeNotifier.changes``; see the module docstring."""

    tick_interval = CHANGE_POLL_INTERVAL
    _task_name = "azync-change-listener"

    def __init__(self, store: PgBase) -> None:
        super().__init__(store)
        self._seen: int | None = None

    def _decode(self, payload: str) -> Change | None:
        wake = parse_wake(payload)
        if wake is None:
            return None
        return Change(
            entity=ChangeEntity.JOB, source=Source(wake.source), kind=wake.kind, state="pending"
        )

    async def _after_connect(self, conn: asyncpg.Connection, *, reconnected: bool) -> None:
        self._seen = await self._counters(conn)
        self._put(await self._reset(conn))

    async def _tick(self, conn: asyncpg.Connection) -> None:
        seen = await self._counters(conn)
        if seen != self._seen:
            self._seen = seen
            self._put(await self._reset(conn))

    async def _counters(self, conn: asyncpg.Connection) -> int:
        value = await conn.fetchval(
            QUERIES["change_counters"],
            self._store.now(),
            self._store.schema,
            timeout=self.tick_interval * 5,
        )
        return int(value)

    async def _reset(self, conn: asyncpg.Connection) -> Change:
        at = await conn.fetchval("SELECT coalesce($1::timestamptz, now())", self._store.now())
        return Change(entity=ChangeEntity.RESET, at=at)


class ChangeMixin(PgBase):
    async def changes(self) -> ChangeSubscription | None:
        """Contract ``ChangeNotifier.Changes``: change hints, first a RESET.

        Returns None when the store is poll-only. Close the subscription to
        release its dedicated connection.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        if self.config.poll_only:
            return None
        sub = ChangeSubscription(self)
        await sub.start()
        return sub
