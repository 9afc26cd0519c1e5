"""The leadership fence of the running task: fenced maintenance writes.

While a :class:`LeaderFence` is current (``PgLeadershipLease.fenced()``), every
statement the store runs for this task goes through a transaction whose first
statement is ``leader_fence``: it succeeds only while the lease's term still
holds on the backend clock, and it keeps a ``FOR KEY SHARE`` lock on the
lease row until commit. A takeover (``leader_acquire``) locks that row
``FOR UPDATE``, so it waits until such a transaction ends: a stale holder's
write either commits inside its own term or not at all.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ...errors import LeadershipLostError
from ._queries import QUERIES


@dataclass(frozen=True, slots=True)
class LeaderFence:
    """One leadership term as a fencing token.

    Attributes:
        name: leadership name.
        term: the term this holder was elected with.
        idle_ms: idle-in-transaction limit of fenced transactions (milliseconds);
            a holder frozen inside one is cut off by the server after this.
    """

    name: str
    term: int
    idle_ms: int

    async def check(self, conn: asyncpg.Connection, now: datetime | None) -> None:
        """Run the fence as the current statement of ``conn``'s open transaction.

        Raises:
            LeadershipLostError: the term no longer holds the leadership.
        """
        ok = await conn.fetchval(
            QUERIES["leader_fence"], now, self.name, self.term, f"{self.idle_ms}ms"
        )
        if ok is None:
            raise LeadershipLostError(
                f"leadership {self.name!r} term {self.term} is no longer held; "
                "the maintenance write was not made"
            )


#: The fence of the running task (None: statements are not fenced).
CURRENT_FENCE: ContextVar[LeaderFence | None] = ContextVar("azync_leader_fence", default=None)
