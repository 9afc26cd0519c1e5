"""The session setting that marks lease tokens with the store's worker identity."""

from __future__ import annotations

import asyncpg

__all__ = ["HolderSetting"]


class HolderSetting:
    """The token prefix the pool's connections carry (``azync.holder``).

    :meth:`apply` is the pool's ``setup`` hook: it sets the session setting
    on a connection the first time it is handed out under a new prefix, and
    costs nothing otherwise.
    """

    def __init__(self) -> None:
        #: Current prefix ("" while no identity is held).
        self.prefix = ""
        self._applied: dict[int, str] = {}

    async def apply(self, conn: asyncpg.Connection) -> None:
        """Bring ``conn``'s ``azync.holder`` up to :attr:`prefix`."""
        pid = conn.get_server_pid()
        if self._applied.get(pid, "") == self.prefix:
            return
        await conn.execute("SELECT set_config('azync.holder', $1, false)", self.prefix)
        if len(self._applied) > 4096:  # server pids of long-closed connections
            self._applied.clear()
        self._applied[pid] = self.prefix
