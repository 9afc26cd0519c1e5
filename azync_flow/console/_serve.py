"""Serving the console with uvicorn until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

__all__ = ["bind", "serve"]


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


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, bound before anything is
    served so that an address in use is an error of its own.

    Raises:
        OSError: the address cannot be bound (in use, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(app: Any, sock: socket.socket) -> None:
    """Serve the ASGI ``app`` on the bound ``sock`` (see :func:`bind`) until
    SIGTERM or SIGINT, then return after a graceful shutdown."""
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    await _Server(config).serve(sockets=[sock])
