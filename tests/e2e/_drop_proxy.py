"""A TCP proxy in front of PostgreSQL that can lose a reply after its COMMIT.

Armed with a marker, the proxy forwards the first client message carrying it,
lets the server run it to its end (ReadyForQuery: a one-statement transaction
has committed), then drops the client's connection without passing the reply
on: the client sees a connection lost mid-call although its write committed.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["DropProxy"]

#: ReadyForQuery header: the server has finished the request (committed).
_READY = b"Z\x00\x00\x00\x05"


class DropProxy:
    """Forwards 127.0.0.1:<ephemeral port> to the DSN's server (over TCP, or its
    Unix socket when the DSN names a socket directory as ``host``).

    Attributes:
        dropped: replies dropped so far.
    """

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        query = dict(parse_qsl(parts.query))
        host = query.pop("host", None) or parts.hostname or "127.0.0.1"
        port = int(query.pop("port", None) or parts.port or 5432)
        # a host that is a directory is a Unix socket's (the embedded server's)
        self._socket = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None
        self._upstream = (host, port)
        self._parts = parts._replace(query=urlencode(query))
        self._server: asyncio.Server | None = None
        self._marker: bytes | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0

    async def __aenter__(self) -> DropProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def dsn(self) -> str:
        """The DSN through the proxy (no TLS, so the proxy can read the messages)."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        netloc = f"{self._parts.username or 'postgres'}@127.0.0.1:{port}"
        query = "&".join(q for q in [self._parts.query, "sslmode=disable"] if q)
        return urlunsplit((self._parts.scheme, netloc, self._parts.path, query, ""))

    def drop_reply_to(self, marker: bytes) -> None:
        """Lose the reply of the next request whose bytes contain ``marker`` (once)."""
        self._marker = marker

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        if self._socket is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self._socket)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        cut = asyncio.Event()

        async def down() -> None:  # server -> client
            while not cut.is_set():
                data = await up_reader.read(65536)
                if not data or cut.is_set():
                    break
                writer.write(data)
                await writer.drain()
            if not cut.is_set():  # the server ended the session: end the client's
                writer.close()

        pump = asyncio.create_task(down())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                marker = self._marker
                if marker is not None and marker in data:
                    self._marker = None
                    cut.set()  # the down pump forwards nothing from here on
                    pump.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pump
                    up_writer.write(data)
                    await up_writer.drain()
                    reply = b""
                    while _READY not in reply[-6:]:
                        chunk = await up_reader.read(65536)
                        if not chunk:
                            break
                        reply += chunk
                    self.dropped += 1
                    break
                up_writer.write(data)
                await up_writer.drain()
        finally:
            pump.cancel()
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)
