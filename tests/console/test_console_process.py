"""The console as a process: ``azync-flow ui --metrics`` serves ``/metrics``
for Prometheus (the backlog gauges sampled from the store, a real HTTP
scrape), without the flag there is no such page; SIGTERM and SIGINT stop it
gracefully with status 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import urllib.error
import urllib.request

import pytest

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from tests.e2e.test_metrics_scrape import Samples, pending, scrape


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def _final_url(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.geturl())


async def _ui(
    store: PostgresStore, pg_dsn: str, *extra: str
) -> tuple[asyncio.subprocess.Process, str]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "ui", "--dsn", pg_dsn, "--schema", store.schema,
        "--port", str(port), *extra,
        env={k: v for k, v in os.environ.items() if k != "AZYNC_UI_TOKEN"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    async with asyncio.timeout(60):
        while await asyncio.to_thread(_status, url + "/") != 200:
            assert proc.returncode is None, "azync-flow ui exited"
            await asyncio.sleep(0.1)
    return proc, url


async def test_the_console_serves_the_backlog_gauges_only_with_metrics(
    store: PostgresStore, pg_dsn: str
) -> None:
    client = Client(store)
    for i in range(3):  # no worker runs this kind: the jobs wait, pending
        await client.enqueue("c.nobody", {"n": i})
    with_metrics, url = await _ui(store, pg_dsn, "--metrics")
    without, plain_url = await _ui(store, pg_dsn)
    try:
        samples: Samples = {}
        async with asyncio.timeout(60):
            while pending(samples, "queue", "c.nobody") != 3:
                samples = await asyncio.to_thread(scrape, url + "/metrics")
                await asyncio.sleep(0.2)
        assert await asyncio.to_thread(_status, plain_url + "/metrics") == 404
        # served at the exact path, without a redirect to /metrics/
        assert await asyncio.to_thread(_final_url, url + "/metrics") == url + "/metrics"
    finally:
        for proc in (with_metrics, without):
            proc.terminate()
            await proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_the_console_stops_gracefully_on_sigterm_and_sigint(
    store: PostgresStore, pg_dsn: str, sig: signal.Signals
) -> None:
    proc, _url = await _ui(store, pg_dsn)
    proc.send_signal(sig)
    async with asyncio.timeout(30):
        assert await proc.wait() == 0


async def test_a_port_in_use_is_a_usage_error_before_anything_is_served(
    store: PostgresStore, pg_dsn: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "azync_flow.cli", "ui", "--dsn", pg_dsn,
            "--schema", store.schema, "--port", str(port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _, err = await proc.communicate()
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err.decode()
    assert "console on" not in err.decode()
