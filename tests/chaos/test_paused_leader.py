"""A frozen maintenance leader (SIGSTOP) loses its leadership after its TTL:
another worker process takes over and reaps, and the old one, resumed, does not
act as leader."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, EnqueueParams, Source

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
QUEUE_LEADERSHIP = "azync_flow.maintenance.queue"
TTL = 2.0
TICK = 0.25
#: Process scheduling on a busy machine, on top of TTL + one tick.
SLACK = 0.75


class Proc:
    def __init__(self, tmp: Path, dsn: str, schema: str, name: str) -> None:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]),
            DSN=dsn,
            SCHEMA=schema,
            TICK=str(TICK),
            TTL=str(TTL),
        )
        self.log = tmp / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "azync_flow.cli", "worker", "_leader_app:make"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


async def leadership(store: PostgresStore) -> asyncpg.Record | None:
    return await store.pool.fetchrow(
        "SELECT holder, term, expires_at > now() AS held FROM azync_leaders WHERE name = $1",
        QUEUE_LEADERSHIP,
    )


async def leader_pid(store: PostgresStore, procs: list[Proc], within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    pids = {p.pid for p in procs}
    while time.monotonic() < deadline:
        row = await leadership(store)
        if row is not None and row["held"]:
            pid = int(row["holder"].rsplit(":", 1)[1])
            if pid in pids:
                return pid
        await asyncio.sleep(0.02)
    logs = "\n".join(p.text() for p in procs)
    pytest.fail(f"no worker took the queue leadership; logs:\n{logs}")


async def orphan(store: PostgresStore) -> uuid.UUID:
    """A queue job leased by a 'worker' that vanished: its lease expires at once."""
    job_id = uuid.uuid4()
    kind = f"orphan-{job_id}"  # nobody else leases it, reaped or not
    assert await store.enqueue(EnqueueParams(id=job_id, kind=kind, payload=b"{}"))
    (job,) = await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind=kind, limit=1, lease=timedelta(milliseconds=1))
    )
    assert job.id == job_id
    return job_id


async def reaped_after(store: PostgresStore, job_id: uuid.UUID, within: float) -> float:
    """Seconds until the job's expired lease was reaped (fails after ``within``)."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        n = await store.pool.fetchval("SELECT reap_count FROM azync_jobs WHERE id = $1", job_id)
        if n:
            return time.monotonic() - start
        await asyncio.sleep(0.02)
    pytest.fail(f"orphan {job_id} not reaped within {within}s")


async def test_frozen_leader_is_replaced_after_its_ttl_and_stays_fenced_out_when_resumed(
    store: PostgresStore, pg_dsn: str, schema: str, tmp_path: Path, procs: list[Proc]
) -> None:
    procs.extend(Proc(tmp_path, pg_dsn, schema, name) for name in ("w1", "w2"))
    first = await leader_pid(store, procs)
    old, new = sorted(procs, key=lambda p: p.pid != first)
    before = await leadership(store)
    assert before is not None

    os.kill(old.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    took = await reaped_after(store, await orphan(store), within=5 * TTL)
    # TTL, a tick, and at most TTL / 3 waiting on a session the frozen leader left open
    assert took <= TTL + TICK + TTL / 3 + SLACK, f"reaped {took:.2f}s after the leader froze"
    after = await leadership(store)
    assert after is not None
    assert after["holder"].endswith(f":{new.pid}")
    assert after["term"] == before["term"] + 1

    # recovery goes on while the old leader stays frozen (5 x its TTL in all)
    assert await reaped_after(store, await orphan(store), within=TTL) <= 2 * TICK + SLACK
    await asyncio.sleep(max(0.0, 5 * TTL - (time.monotonic() - frozen_at)))
    os.kill(old.pid, signal.SIGCONT)

    deadline = time.monotonic() + 5.0
    while "lost leadership 'azync_flow.maintenance.queue'" not in old.text():
        assert time.monotonic() < deadline, old.text()
        await asyncio.sleep(0.05)
    await asyncio.sleep(4 * TICK)  # several ticks of the resumed process
    assert old.text().count(f"acquired leadership '{QUEUE_LEADERSHIP}'") == 1
    still = await leadership(store)
    assert still is not None
    assert (still["holder"], still["term"], still["held"]) == (after["holder"], after["term"], True)
    assert await reaped_after(store, await orphan(store), within=TTL) <= 2 * TICK + SLACK
    assert old.proc.poll() is None
    assert new.proc.poll() is None
