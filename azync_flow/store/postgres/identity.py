"""Worker identities of the PostgreSQL driver (contract ``IdentityClaimer``).

An identity is a name fenced by a session advisory lock on a dedicated
connection: two live processes never hold it, and it is free again the moment
its process dies (the server ends the session). While it is held, every
pooled connection carries the identity's token prefix in the session setting
``azync.holder``, so every lease token the store draws (``azync_lease_token()``,
migration 0034) names it. A process that claims the name after a crash expires
the leases and leaderships still marked with it, and the reaper hands them
back at its next tick instead of after the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import socket

import asyncpg

from ...errors import IdentityInUseError, StoreError
from ..validate import check_identity_name
from ._base import PgBase
from ._listen import connect_dedicated

__all__ = ["IdentityMixin", "PgWorkerIdentity", "identity_lock_key", "token_prefix"]

log = logging.getLogger("azync_flow.store")

#: Default identities tried per host: ``<host>/0`` .. ``<host>/255``.
_DEFAULT_SLOTS = 256


def token_prefix(name: str) -> str:
    """The 8 hex digits every lease token taken under identity ``name`` starts with."""
    return hashlib.blake2b(name.encode(), digest_size=4).hexdigest()


def identity_lock_key(schema: str, name: str) -> int:
    """The session advisory lock key that fences identity ``name`` in ``schema``."""
    digest = hashlib.blake2b(f"azync_flow.identity\0{schema}\0{name}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class PgWorkerIdentity:
    """A claimed identity (contract ``WorkerIdentity``, documented there)."""

    def __init__(
        self,
        store: IdentityMixin,
        name: str,
        conn: asyncpg.Connection,
        taken_back: tuple[int, int],
    ) -> None:
        self._store = store
        self.name = name
        self.holder = f"{name}:{os.getpid()}"
        self.taken_back = taken_back
        self._conn: asyncpg.Connection | None = conn
        self._users = 1
        self._released = False
        self._checking = asyncio.Lock()

    async def check(self) -> bool:
        """Implements ``WorkerIdentity.check`` (documented there)."""
        async with self._checking:  # workers sharing the store share this session
            return await self._check()

    async def _check(self) -> bool:
        if self._released:
            return False
        if self._conn is not None and not self._conn.is_closed():
            try:  # the session may have ended without this process noticing yet
                await asyncio.wait_for(self._conn.execute("SELECT 1"), 5)
                return True
            except Exception:  # any failure of a dead session (driver state errors too)
                await _close(self._conn)
        self._conn = None
        try:
            conn = await connect_dedicated(self._store)
        except StoreError:
            return True  # unreachable: nobody else can claim it either
        try:
            held = await conn.fetchval(
                "SELECT pg_try_advisory_lock($1)", identity_lock_key(self._store.schema, self.name)
            )
        except Exception:  # reconnected but could not lock: retried at the next check
            await _close(conn)
            return True
        if not held:
            await _close(conn)
            log.error("worker identity %r was claimed by another process", self.name)
            return False
        self._conn = conn
        log.info("worker identity %r: session lost and claimed again", self.name)
        return True

    async def release(self) -> None:
        """Implements ``WorkerIdentity.release`` (documented there)."""
        if self._released:
            return
        self._users -= 1
        if self._users <= 0:
            await self.drop()

    async def drop(self) -> None:
        """Give the identity up whoever still uses it (the store is closing)."""
        if self._released:
            return
        self._released = True
        self._store.holder_setting.prefix = ""
        self._store._identity = None
        if self._conn is not None:
            await _close(self._conn)
            self._conn = None


async def _close(conn: asyncpg.Connection) -> None:
    with contextlib.suppress(Exception):  # a dead session has released its lock anyway
        await asyncio.wait_for(conn.close(), 5)


class IdentityMixin(PgBase):
    """The store's worker identity (at most one per store)."""

    _identity: PgWorkerIdentity | None = None
    _identity_lock: asyncio.Lock | None = None

    async def drop_identity(self) -> None:
        """Give up the store's identity, if any (:meth:`close` calls it)."""
        if self._identity is not None:
            await self._identity.drop()

    async def claim_worker_identity(self, name: str | None = None) -> PgWorkerIdentity:
        """Implements ``IdentityClaimer.claim_worker_identity`` (documented there)."""
        if name is not None:
            check_identity_name(name)
        if self._identity_lock is None:
            self._identity_lock = asyncio.Lock()
        async with self._identity_lock:
            held = self._identity
            if held is not None:
                if name is not None and name != held.name:
                    raise ValueError(
                        f"this store already holds worker identity {held.name!r}; "
                        f"open another store to run as {name!r}"
                    )
                held._users += 1
                return held
            self._identity = await self._claim(name)
            return self._identity

    async def _claim(self, name: str | None) -> PgWorkerIdentity:
        host = re.sub(r"[^A-Za-z0-9._@-]", "-", socket.gethostname())[:190] or "host"
        names = [name] if name is not None else [f"{host}/{n}" for n in range(_DEFAULT_SLOTS)]
        conn = await connect_dedicated(self)
        try:
            for candidate in names:
                key = identity_lock_key(self.schema, candidate)
                try:
                    locked = await conn.fetchval("SELECT pg_try_advisory_lock($1)", key)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    raise (self.pool.fail(exc) or StoreError(str(exc))) from exc
                if locked:
                    break
            else:
                raise IdentityInUseError(
                    f"worker identity {names[0]!r} is held by another live process"
                    if name is not None
                    else f"all {_DEFAULT_SLOTS} identities of host {host!r} are held"
                )
            prefix = token_prefix(candidate)
            row = await self._fetchrow("identity_take_back", prefix, candidate)
        except BaseException:
            await _close(conn)
            raise
        taken = (int(row["jobs"]), int(row["leaderships"])) if row is not None else (0, 0)
        self.holder_setting.prefix = prefix
        if taken != (0, 0):
            log.info(
                "worker identity %r: took back %d lease(s) and %d leadership(s) "
                "of its previous process",
                candidate,
                *taken,
            )
        return PgWorkerIdentity(self, candidate, conn, taken)
