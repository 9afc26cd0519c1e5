"""Serving the console with uvicorn until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import uvicorn

__all__ = ["serve"]


class _Server(uvicorn.Server):
    """uvicorn's server, stopped gracefully by SIGTERM/SIGINT.

    uvicorn re-raises a captured signal once it has shut down, which would end
    the process before the caller closes its store (and detaches from an
    embedded server); here the signal only asks the server to exit.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self._exit)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _exit(self) -> None:
        # a second signal while shutting down cuts the wait for open connections
        self.force_exit = self.should_exit
        self.should_exit = True


async def serve(app: Any, host: str, port: int) -> None:
    """Serve the ASGI ``app`` on ``host:port`` until SIGTERM or SIGINT, then
    return after a graceful shutdown.

    Raises:
        OSError: the address cannot be bound.
    """
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    await _Server(config).serve()
