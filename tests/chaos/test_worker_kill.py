"""Real worker processes killed with SIGKILL and stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres._base import job_from_row
from azync_flow.store.queue import EnqueueParams, Job, JobState
from azync_flow.testing import MovableClock
from azync_flow.worker import JobContext, Worker

ROOT = Path(__file__).resolve().parents[2]
QUEUE_LEADERSHIP = "azync_flow.maintenance.queue"

APP = textwrap.dedent(
    """
    import asyncio, os, pathlib
    from datetime import datetime, timedelta
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store
    from azync_flow.worker import Worker

    MARKS = pathlib.Path(os.environ["MARKS"])

    async def make():
        store = await open_store(
            os.environ["DSN"], Config(schema=os.environ["SCHEMA"]), migrate=False
        )
        worker = Worker(
            store,
            lease=timedelta(seconds=float(os.environ["LEASE"])),
            shutdown_grace=timedelta(seconds=float(os.environ["GRACE"])),
            poll_interval=timedelta(milliseconds=100),
            maintenance_interval=timedelta(milliseconds=100),
        )

        @worker.register("slow")
        async def slow(payload, ctx):
            (MARKS / f"slow-start-{ctx.attempt}").touch()
            await asyncio.sleep(3600)

        @worker.register("quick")
        async def quick(payload, ctx):
            (MARKS / "quick-start").touch()
            await asyncio.sleep(payload["sleep"])
            (MARKS / "quick-done").touch()

        return worker
    """
)


class WorkerProcess:
    def __init__(self, tmp: Path, dsn: str, schema: str, *, lease: float, grace: float) -> None:
        self.marks = tmp / "marks"
        self.marks.mkdir()
        (tmp / "chaos_app.py").write_text(APP)
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp)]),
            DSN=dsn,
            SCHEMA=schema,
            MARKS=str(self.marks),
            LEASE=str(lease),
            GRACE=str(grace),
        )
        self.log = tmp / "worker.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "azync_flow.cli", "worker", "chaos_app:make"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def wait_mark(self, name: str, within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while not (self.marks / name).exists():
            if self.proc.poll() is not None:
                pytest.fail(f"worker exited early:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"mark {name} not seen; worker log:\n{self.log.read_text()}")
            await asyncio.sleep(0.02)

    async def wait_exit(self, within: float = 20.0) -> int:
        deadline = time.monotonic() + within
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"worker did not exit; log:\n{self.log.read_text()}")
            await asyncio.sleep(0.02)
        return self.proc.returncode

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def procs() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for p in started:
        p.stop()


async def enqueue(store: PostgresStore, kind: str, payload: Any) -> uuid.UUID:
    job_id = uuid.uuid4()
    raw = msgspec.json.encode(payload)
    assert await store.enqueue(EnqueueParams(id=job_id, kind=kind, payload=raw))
    return job_id


async def get(store: PostgresStore, job_id: uuid.UUID) -> Job:
    row = await store.pool.fetchrow("SELECT * FROM azync_jobs WHERE id = $1", job_id)
    assert row is not None
    return job_from_row(row)


async def leader_lease_until(store: PostgresStore) -> datetime | None:
    """Expiry of the queue maintenance leadership of this schema, None when not held."""
    until: datetime | None = await store.pool.fetchval(
        "SELECT expires_at FROM azync_leaders WHERE name = $1 AND expires_at > now()",
        QUEUE_LEADERSHIP,
    )
    return until


def rerun_worker(store: PostgresStore, ran: list[tuple[str, int]]) -> Worker:
    """A live worker of another identity (another host): it waits for the
    killed worker's leases (a restart under the killed one's identity would
    take them back at once: tests/chaos/test_worker_restart.py)."""
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=50),
        handle_signals=False,
        identity="another-host/0",
    )

    @worker.register("slow")
    async def slow(payload: Any, ctx: JobContext) -> None:
        ran.append(("slow", ctx.attempt))

    @worker.register("quick")
    async def quick(payload: Any, ctx: JobContext) -> None:
        ran.append(("quick", ctx.attempt))

    return worker


async def test_sigkilled_worker_job_is_reaped_after_lease_expiry_and_rerun(
    store: PostgresStore,
    pg_dsn: str,
    schema: str,
    clock: MovableClock,
    tmp_path: Path,
    procs: list[WorkerProcess],
) -> None:
    """a worker killed with -9 mid-job loses nothing; any live worker reaps its lease.

    The killed process was also the maintenance leader: its leadership lease
    outlives it until its TTL, then the fresh worker takes over and reaps.
    """
    proc = WorkerProcess(tmp_path, pg_dsn, schema, lease=2.0, grace=1.0)
    procs.append(proc)
    job_id = await enqueue(store, "slow", {})
    await proc.wait_mark("slow-start-1")
    for _ in range(250):
        if await leader_lease_until(store) is not None:
            break
        await asyncio.sleep(0.02)

    os.kill(proc.proc.pid, signal.SIGKILL)
    assert await proc.wait_exit() == -signal.SIGKILL
    leader_until = await leader_lease_until(store)
    assert leader_until is not None  # a lease, not a session lock: still held

    orphan = await get(store, job_id)
    assert orphan.state == JobState.ACTIVE
    assert orphan.attempt == 1

    ran: list[tuple[str, int]] = []
    fresh = rerun_worker(store, ran)
    # Before the lease expires nobody may take the job over.
    await fresh.run_until_idle()
    assert ran == []
    assert (await get(store, job_id)).state == JobState.ACTIVE

    # Past both leases (on the database clock the store uses) the fresh worker
    # leads and reaps it.
    clock.set(max(orphan.lease_until, leader_until) + timedelta(seconds=1))
    await fresh.run_until_idle()

    # Reaping gives the attempt back (a dead worker does not burn the budget).
    assert ran == [("slow", 1)]
    job = await get(store, job_id)
    assert job.state == JobState.SUCCEEDED
    assert job.attempt == 1
    assert job.reap_count == 1


async def test_sigterm_finishes_quick_job_and_releases_slow_one_for_a_later_run(
    store: PostgresStore,
    pg_dsn: str,
    schema: str,
    tmp_path: Path,
    procs: list[WorkerProcess],
) -> None:
    proc = WorkerProcess(tmp_path, pg_dsn, schema, lease=30.0, grace=1.5)
    procs.append(proc)
    slow_id = await enqueue(store, "slow", {})
    quick_id = await enqueue(store, "quick", {"sleep": 0.5})
    await proc.wait_mark("slow-start-1")
    await proc.wait_mark("quick-start")

    sent = time.monotonic()
    os.kill(proc.proc.pid, signal.SIGTERM)
    assert await proc.wait_exit() == 0
    took = time.monotonic() - sent

    assert (proc.marks / "quick-done").exists()
    assert took < 10.0
    quick = await get(store, quick_id)
    assert quick.state == JobState.SUCCEEDED
    slow = await get(store, slow_id)
    assert slow.state == JobState.PENDING  # released, not left to lease expiry
    assert slow.attempt == 0  # release gives the attempt back
    assert slow.reap_count == 0
    log = proc.log.read_text()
    assert "SIGTERM received" in log

    ran: list[tuple[str, int]] = []
    await rerun_worker(store, ran).run_until_idle()
    assert ran == [("slow", 1)]
    assert (await get(store, slow_id)).state == JobState.SUCCEEDED
