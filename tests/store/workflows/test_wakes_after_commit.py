"""Wake-ups of the hot workflow statements travel after their commit.

A start and a pass commit send no NOTIFY inside their own transaction (which
would hold the database-wide notify lock until their WAL flush): every
notification they imply comes from the store's one notifier backend, after
the commit, and this process's listeners get each once, at once.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from tests.store.workflow_helpers import finish, started


class _Heard:
    """Notifications a plain LISTEN connection received, as (sender pid, payload)."""

    def __init__(self) -> None:
        self.got: list[tuple[int, str]] = []
        self._arrived = asyncio.Condition()

    def on_notify(self, _conn: object, pid: int, _channel: str, payload: str) -> None:
        self.got.append((pid, payload))
        asyncio.get_running_loop().create_task(self._signal())

    async def _signal(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    async def until(self, payload: str) -> None:
        async with asyncio.timeout(10), self._arrived:
            await self._arrived.wait_for(lambda: any(p == payload for _, p in self.got))


async def _listening(dsn: str, channel: str) -> tuple[asyncpg.Connection, _Heard]:
    heard = _Heard()
    conn = await asyncpg.connect(dsn)
    await conn.add_listener(channel, heard.on_notify)
    return conn, heard


async def test_a_start_and_a_finishing_pass_notify_only_from_the_notifier_after_commit(
    store: PostgresStore, azync_dsn: str
) -> None:
    listener, heard = await _listening(azync_dsn, store.channel)
    try:
        wid = await started(store)
        await heard.until("workflow:$wft")
        start_senders = {pid for pid, _ in heard.got}
        heard.got.clear()
        # (the helper makes the task due through the plain, notifying path first)
        await finish(store, wid, ("complete", b"1"))
        await heard.until(f"workflow.done:{wid}")
        done_senders = {pid for pid, p in heard.got if p == f"workflow.done:{wid}"}
        assert start_senders == done_senders == {store.wakes.sender_pid}
    finally:
        await listener.close()


async def test_listeners_of_the_committing_store_get_its_wakes_once_and_others_by_notify(
    store: PostgresStore, azync_dsn: str, schema: str
) -> None:
    other = await open_store(azync_dsn, Config(schema=schema), migrate=False)
    try:
        mine, theirs = await store.workflow_done_events(), await other.workflow_done_events()
        assert mine is not None
        assert theirs is not None
        async with mine, theirs:
            ended = [await started(store) for _ in range(3)]
            for wid in ended:
                await finish(store, wid, ("complete", b"1"))
            seen_here = [await _next(mine) for _ in ended]
            seen_there = [await _next(theirs) for _ in ended]
            assert seen_here == ended
            assert sorted(seen_there) == sorted(ended)
            # nothing more: the notifier's own NOTIFY is not delivered twice here
            await asyncio.sleep(0.5)
            assert await _pending(mine) == []
    finally:
        await other.close()


async def _next(sub: object) -> uuid.UUID:
    async with asyncio.timeout(10):
        return await anext(sub)  # type: ignore[call-overload,no-any-return]


async def _pending(sub: object) -> list[uuid.UUID]:
    out: list[uuid.UUID] = []
    while True:
        try:
            async with asyncio.timeout(0.05):
                out.append(await anext(sub))  # type: ignore[call-overload]
        except TimeoutError:
            return out
