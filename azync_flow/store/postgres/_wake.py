"""Wake-ups sent after the commit that implies them, not inside it.

A transaction that sends NOTIFY holds a database-wide lock from its
pre-commit until its WAL flush, so notifying commits are serialised and
never share a flush. The hot workflow statements therefore record the
wake-ups their commit implies (the SQL function ``azync_wake`` under
``azync.defer_wakes``, returned as the statement's ``wakes`` column) and the
driver hands them here once the statement has committed:

* listeners of this process (its workers' wake subscriptions, its clients'
  result waiters) get them at once, with no round trip;
* other processes get them through one notifier per store: a background
  task that sends every payload queued meanwhile in one statement, with at
  most one such statement in flight, so many commits share one notifying
  transaction.

A wake lost between the commit and the notify (the process dies) is covered
by the listeners' polling fallback, as a lost NOTIFY always was.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

import asyncpg

__all__ = ["PostCommitWakes", "split_wakes"]

log = logging.getLogger(__name__)

#: How the statement's ``wakes`` column separates payloads.
_SEPARATOR = "\n"

_NOTIFY = "SELECT pg_notify($1::text, p) FROM unnest($2::text[]) AS p"


def split_wakes(column: str | None) -> list[str]:
    """The payloads of a statement's ``wakes`` column (None or '': none)."""
    if not column:
        return []
    return list(dict.fromkeys(p for p in column.split(_SEPARATOR) if p))


class PostCommitWakes:
    """Deliver wake-up payloads of committed statements: in-process listeners
    directly, other processes by one coalescing NOTIFY sender.

    Args:
        dsn: the server; the notifier keeps one connection of its own there
            (so listeners can tell its notifications from other processes').
        channel: the store's NOTIFY channel.
    """

    def __init__(self, dsn: str, channel: str) -> None:
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None
        #: The backend that sends this store's NOTIFYs: its notifications
        #: reached this process's listeners already, by :meth:`send`.
        self.sender_pid: int | None = None
        self._channel = channel
        self._pending: dict[str, None] = {}
        self._task: asyncio.Task[None] | None = None
        self._local: weakref.WeakSet[_Local] = weakref.WeakSet()

    def register(self, listener: _Local) -> None:
        """Hand this process's wake-ups to ``listener`` as they are sent."""
        self._local.add(listener)

    def unregister(self, listener: _Local) -> None:
        self._local.discard(listener)

    def send(self, payloads: Iterable[str]) -> None:
        """Wake the waiters of ``payloads`` (their commit is done). Returns at
        once; the NOTIFY to other processes follows in the background."""
        fresh = [p for p in payloads if p]
        if not fresh:
            return
        for listener in list(self._local):
            for p in fresh:
                listener.deliver(self._channel, p)
        self._pending.update(dict.fromkeys(fresh))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush(), name="azync-wakes")

    async def send_within(self, conn: Any, payloads: Iterable[str]) -> None:
        """Wake the waiters of ``payloads`` when the transaction open on
        ``conn`` commits (a plain NOTIFY in it: the caller's transaction, whose
        commit this process does not see)."""
        batch = list(dict.fromkeys(p for p in payloads if p))
        if batch:
            await conn.execute(_NOTIFY, self._channel, batch)

    async def _flush(self) -> None:
        while self._pending:
            batch = list(self._pending)
            self._pending.clear()
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(self._dsn)
                    self.sender_pid = self._conn.get_server_pid()
                await self._conn.execute(_NOTIFY, self._channel, batch)
            except Exception as exc:  # a lost wake is covered by polling
                log.debug("post-commit NOTIFY of %d wake-ups failed: %s", len(batch), exc)
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None

    async def close(self) -> None:
        """Send what is queued, close this process's listening subscriptions
        of the store (a client's lingering LISTEN connection among them), then
        stop. Safe to call more than once."""
        for listener in list(self._local):
            await listener.close()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            except (TimeoutError, Exception):  # closing: polling covers the rest
                task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 2.0)
            except (TimeoutError, Exception):
                conn.terminate()


class _Local(Protocol):
    """What an in-process listener offers (the store's LISTEN subscriptions)."""

    def deliver(self, channel: str, payload: str) -> None:
        """Take ``payload`` as if it had arrived by NOTIFY on ``channel``."""

    async def close(self) -> None:
        """Stop listening and release the connection (idempotent)."""
