"""A dedicated LISTEN connection as an async stream: the base of the wake,
change-hint and workflow-done subscriptions.

A :class:`ListenSubscription` holds one dedicated listening connection and
reconnects when it drops; each subclass decodes the payloads of its channel
and may replay what a reconnect gap could have hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import asyncpg

from ...errors import StoreError, StoreUnavailableError
from ..queue import Source, Wake
from ._base import PgBase
from ._guard import describe_outage, is_unavailable, translate

__all__ = [
    "HEALTH_INTERVAL",
    "MAX_BUFFERED",
    "ListenSubscription",
    "connect_dedicated",
    "parse_wake",
]

log = logging.getLogger(__name__)

#: Buffered wakes per subscription; further wakes are dropped (polling covers them).
MAX_BUFFERED = 10_000
#: How often the listener pings its connection to notice a silent network drop (s).
HEALTH_INTERVAL = 5.0
_RECONNECT_BACKOFF = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


class _Closed:
    """Sentinel queued to end iteration."""


_CLOSED = _Closed()
T = TypeVar("T")


def parse_wake(payload: str) -> Wake | None:
    """Decode a ``"<source>:<kind>"`` notification payload; None when malformed."""
    source, sep, kind = payload.partition(":")
    if not sep:
        return None
    try:
        return Wake(source=Source(source), kind=kind)
    except ValueError:
        return None


async def connect_dedicated(store: PgBase, *, own_path: bool = True) -> asyncpg.Connection:
    """Open a connection outside the pool, with the store's search_path
    (``own_path`` False: the one the server gives, as the user's own code gets).

    Raises:
        StoreUnavailableError: the server cannot be reached right now.
        StoreError: it refuses the connection (bad DSN, credentials).
    """
    epoch = store.availability.epoch
    try:
        settings = {"search_path": f'"{store.schema}"'} if own_path else None
        conn = await asyncpg.connect(store.dsn, server_settings=settings)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        if is_unavailable(exc):
            store.availability.failed(exc)
            raise StoreUnavailableError(
                f"cannot open a dedicated connection: {describe_outage(exc)}"
            ) from exc
        raise StoreError(
            f"cannot open a dedicated connection ({type(exc).__name__}: {exc})"
        ) from exc
    store.availability.succeeded(epoch)
    return conn


class ListenSubscription(Generic[T]):
    """An async iterator of items decoded from NOTIFY payloads on the store's
    channel, backed by one dedicated LISTEN connection.

    Survives the connection dropping (server restart, ``pg_terminate_backend``,
    network loss noticed by the periodic :meth:`_tick`): it reconnects with
    backoff and calls :meth:`_after_connect` so subclasses can announce what
    may have been missed. Iteration ends after :meth:`close`.
    """

    #: Seconds between :meth:`_tick` calls (which double as the health check).
    tick_interval = HEALTH_INTERVAL
    _task_name = "azync-listener"

    def __init__(self, store: PgBase) -> None:
        self._store = store
        self._queue: asyncio.Queue[T | _Closed] = asyncio.Queue(MAX_BUFFERED)
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        #: Times the listening connection was re-established (a test hook).
        self.reconnects = 0

    async def start(self) -> None:
        """Open the listening connection; LISTEN is live when this returns."""
        await self._connect()
        await self._after_connect(self._conn_or_fail(), reconnected=False)
        self._store.wakes.register(self)
        self._task = asyncio.create_task(self._supervise(), name=self._task_name)

    # --- subclass hooks ------------------------------------------------------------

    def _decode(self, payload: str) -> T | None:
        """Turn a NOTIFY payload into an item (None: ignore it)."""
        raise NotImplementedError

    async def _after_connect(self, conn: asyncpg.Connection, *, reconnected: bool) -> None:
        """Called once LISTEN is live, first on start then after each reconnect."""

    async def _tick(self, conn: asyncpg.Connection) -> None:
        """Periodic work on the listening connection; raising marks it unhealthy."""
        await conn.fetchval("SELECT 1", timeout=self.tick_interval)

    # --- connection management -------------------------------------------------

    def _conn_or_fail(self) -> asyncpg.Connection:
        if self._conn is None:
            raise StoreError("listening connection is not open")
        return self._conn

    async def _connect(self) -> None:
        conn = await connect_dedicated(self._store)
        try:
            await conn.add_listener(self._store.channel, self._on_notify)
        except Exception as exc:
            conn.terminate()
            if (err := translate(exc, self._store.schema)) is None:
                raise
            raise err from exc
        except BaseException:
            conn.terminate()
            raise
        self._lost.clear()
        conn.add_termination_listener(self._on_terminated)
        self._conn = conn

    def deliver(self, channel: str, payload: str) -> None:
        """A wake-up of this process's own commit (no NOTIFY round trip)."""
        self._on_notify(None, 0, channel, payload)

    def _on_notify(self, _conn: Any, pid: int, _channel: str, payload: str) -> None:
        if pid == self._store.wakes.sender_pid:
            return  # this store's own wake-up: delivered at once by ``deliver``
        item = self._decode(payload)
        if item is not None:
            self._put(item)

    def _on_terminated(self, _conn: Any) -> None:
        self._lost.set()

    def _put(self, item: T) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            log.debug("listener buffer full; dropping %s (polling covers it)", item)

    async def _supervise(self) -> None:
        while not self._closed:
            try:
                await asyncio.wait_for(self._lost.wait(), self.tick_interval)
            except TimeoutError:
                if await self._healthy():
                    continue
            if self._closed:
                return
            await self._reconnect()

    async def _healthy(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            await self._tick(conn)
        except Exception:  # any failure means the session cannot be trusted to LISTEN
            return False
        return True

    async def _reconnect(self) -> None:
        old, self._conn = self._conn, None
        if old is not None:
            old.terminate()
        attempt = 0
        while not self._closed:
            try:
                await self._connect()
            except StoreError as exc:
                delay = _RECONNECT_BACKOFF[min(attempt, len(_RECONNECT_BACKOFF) - 1)]
                # an outage is reported once by the store's availability, not per attempt
                level = logging.DEBUG if isinstance(exc, StoreUnavailableError) else logging.WARNING
                log.log(level, "listener reconnect failed (%s); retrying in %ss", exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            self.reconnects += 1
            with contextlib.suppress(Exception):
                await self._after_connect(self._conn_or_fail(), reconnected=True)
            return

    # --- iteration ----------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, _Closed):
            raise StopAsyncIteration
        return item

    async def close(self) -> None:
        """Stop listening and close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._store.wakes.unregister(self)
        self._lost.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2.0)
            if not conn.is_closed():
                conn.terminate()
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_CLOSED)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


S = TypeVar("S", bound=ListenSubscription[Any])


async def open_subscription(store: PgBase, cls: type[S]) -> S | None:
    """A started ``cls`` subscription of ``store`` (LISTEN live on return), or
    None when the store is poll-only.

    Raises:
        StoreError: the listening connection cannot be opened.
    """
    if store.config.poll_only:
        return None
    sub = cls(store)
    await sub.start()
    return sub
