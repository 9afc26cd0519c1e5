"""`azync-flow ui` as a real subprocess, ready once it says it listens.

The command binds its socket, then prints ``azync-flow console on
http://HOST:PORT ...`` to stderr and serves: the line is the readiness event
(a request sent after it waits in the socket's backlog until uvicorn has
started, so one request tells that it serves, where polling with requests
would be a race against time)."""

from __future__ import annotations

import asyncio
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 10.0) -> int:
    """The status of a GET of ``url`` (an error status too)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


class UiProcess:
    """A running ``azync-flow ui`` whose stderr is read as it comes (kept in
    ``log``, so a chatty server never blocks on a full pipe)."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url
        self.log: list[str] = []
        self._listening: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            if line.startswith(f"azync-flow console on {self.url} ") and not self._listening.done():
                self._listening.set_result(None)
        if not self._listening.done():  # stderr closed: the process ended first
            self._listening.set_exception(
                AssertionError("azync-flow ui exited before listening:\n" + "\n".join(self.log))
            )

    async def ready(self, within: float = 60.0) -> str:
        """Wait for the line saying it listens, then for the answer to one
        request (it waits in the backlog until uvicorn serves, its signal
        handlers installed); the URL.

        Raises:
            AssertionError: the process ended without saying it, or the
                request was not answered 200.
            TimeoutError: it said nothing within ``within`` seconds.
        """
        await asyncio.wait_for(asyncio.shield(self._listening), within)
        status = await asyncio.to_thread(http_status, self.url + "/", within)
        assert status == 200, f"GET / answered {status}:\n" + "\n".join(self.log)
        return self.url

    async def stop(self) -> int:
        """SIGTERM, then its exit status."""
        if self.proc.returncode is None:
            self.proc.terminate()
        code = await asyncio.wait_for(self.proc.wait(), 60)
        await self._reader
        return code


async def start_ui(dsn: str, schema: str, *extra: str, env: Mapping[str, str]) -> UiProcess:
    """Start `azync-flow ui` on a free port of 127.0.0.1 (``env``: its whole
    environment)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "ui", "--dsn", dsn, "--schema", schema,
        "--port", str(port), *extra,
        env=dict(env), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return UiProcess(proc, f"http://127.0.0.1:{port}")
