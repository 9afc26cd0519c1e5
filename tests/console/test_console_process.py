"""The console as a process: ``azync-flow ui --metrics`` serves ``/metrics``
for Prometheus (the backlog gauges sampled from the store, the first sample
before it serves, a real HTTP scrape), without the flag there is no such
page; SIGTERM and SIGINT stop it gracefully with status 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import urllib.request

import pytest

from azync_flow import _metrics
from azync_flow.cli._ui import METRICS_INTERVAL
from azync_flow.client import Client
from azync_flow.console import ConsoleSettings, create_app
from azync_flow.store.postgres import PostgresStore
from tests.e2e.test_metrics_scrape import pending, scrape

from .ui_process import UiProcess, http_status, start_ui


def _final_url(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.geturl())


async def _ui(store: PostgresStore, pg_dsn: str, *extra: str) -> UiProcess:
    """A console over the store's schema, once it says it listens."""
    env = {k: v for k, v in os.environ.items() if k != "AZYNC_UI_TOKEN"}
    ui = await start_ui(pg_dsn, store.schema, *extra, env=env)
    await ui.ready()
    return ui


async def test_the_console_serves_the_backlog_gauges_only_with_metrics(
    store: PostgresStore, pg_dsn: str
) -> None:
    client = Client(store)
    for i in range(3):  # no worker runs this kind: the jobs wait, pending
        await client.enqueue("c.nobody", {"n": i})
    with_metrics = await _ui(store, pg_dsn, "--metrics")
    without = await _ui(store, pg_dsn)
    try:
        # the first sample is taken at startup, before anything is served
        samples = await asyncio.to_thread(scrape, with_metrics.url + "/metrics")
        assert pending(samples, "queue", "c.nobody") == 3
        assert await asyncio.to_thread(http_status, without.url + "/metrics") == 404
        # served at the exact path, without a redirect to /metrics/
        metrics_url = with_metrics.url + "/metrics"
        assert await asyncio.to_thread(_final_url, metrics_url) == metrics_url
    finally:
        for ui in (with_metrics, without):
            await ui.stop()


async def test_the_first_backlog_sample_is_taken_before_the_console_serves(
    store: PostgresStore,
) -> None:
    await Client(store).enqueue("c.early", {"n": 1})  # no worker: it waits, pending
    app = create_app(store, ConsoleSettings(metrics_interval=METRICS_INTERVAL))
    async with app.router.lifespan_context(app):  # startup done: serving would start now
        rows = [r for r in _metrics.BACKLOG.fresh() if r.kind == "c.early"]
    assert [(r.source, r.state, r.count) for r in rows] == [("queue", "pending", 1)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_the_console_stops_gracefully_on_sigterm_and_sigint(
    store: PostgresStore, pg_dsn: str, sig: signal.Signals
) -> None:
    ui = await _ui(store, pg_dsn)
    ui.proc.send_signal(sig)
    async with asyncio.timeout(30):
        assert await ui.stop() == 0


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
