"""The bench/workflows.py workloads on Absurd (PyPI ``absurd-sdk``, the ``bench`` extra).

    python bench/_absurd_workload.py serve --url postgresql://u@h:p/db [--concurrency C]
                                           [--poll-ms 5]

Run by ``bench/workflows.py``; every reply is one JSON object on one stdout line.

``serve`` applies the schema ``absurdctl`` bundles (``absurdctl.BUNDLED_SCHEMA_SQL``,
its ``init``) to a database without it, creates queue ``bench``, warms up, prints
``{"ready": true}``, then answers one JSON command per stdin line until EOF:
``{"mode": M, "n": N}``. Absurd has no separate worker process or push: this
process runs the SDK's own worker loop (``AsyncAbsurd.start_worker``, one
connection shared by ``--concurrency`` concurrent tasks, idle poll ``--poll-ms``)
beside a client on a second connection. The worker loop runs only while a
command runs, so it does not poll during the other sides' measurements.

* ``throughput``: N ``three`` tasks (three ``ctx.step`` checkpoints) spawned one
  after another, then awaited by one count query over their task ids every
  ``--poll-ms``; ``seconds``, ``cpu_s`` (this process, worker and client), the
  task ``ids`` and ``t_submit`` (``time.time()`` before the first spawn): the
  bench reads each task's ``enqueue_at`` and its last run's ``completed_at``.
* ``sequential``: N ``three`` tasks one at a time, spawn -> result seen by
  polling ``fetch_task_result`` every ``--poll-ms``.
* ``signal``: N ``waiter`` tasks parked in ``ctx.await_event``: once the task is
  sleeping, ``emit_event`` and time emit -> result (polled as above).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from absurd_sdk import AsyncAbsurd

QUEUE = "bench"


async def _step_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


async def _step_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


async def _step_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


async def three(params: Any, ctx: Any) -> dict[str, int]:
    a = await ctx.step("step_a", lambda: _step_a(params))
    b = await ctx.step("step_b", lambda: _step_b(a))
    return await ctx.step("step_c", lambda: _step_c(b))


async def waiter(params: Any, ctx: Any) -> Any:
    return await ctx.await_event(params["event"], timeout=30)


async def install(url: str) -> None:
    """The bundled schema (once per database) and the bench queue."""
    from absurdctl import BUNDLED_SCHEMA_SQL

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT to_regnamespace('absurd') IS NOT NULL")
        row = await cur.fetchone()
        if not (row and row[0]):
            await conn.execute(BUNDLED_SCHEMA_SQL)  # type: ignore[arg-type]
        await conn.execute("SELECT absurd.create_queue(%s)", (QUEUE,))


class Side:
    """The worker loop (own connection) and the client (another one)."""

    def __init__(self, worker: AsyncAbsurd, client: AsyncAbsurd, concurrency: int, poll_s: float):
        self.worker, self.client = worker, client
        self.concurrency, self.poll_s = concurrency, poll_s
        self.loop: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str, concurrency: int, poll_s: float) -> Side:
        worker = AsyncAbsurd(
            await psycopg.AsyncConnection.connect(url, autocommit=True), queue_name=QUEUE
        )
        worker.register_task("three")(three)
        worker.register_task("waiter")(waiter)
        client = AsyncAbsurd(
            await psycopg.AsyncConnection.connect(url, autocommit=True), queue_name=QUEUE
        )
        return cls(worker, client, concurrency, poll_s)

    def start(self) -> None:
        self.loop = asyncio.create_task(
            self.worker.start_worker(
                worker_id="bench", concurrency=self.concurrency, poll_interval=self.poll_s
            )
        )

    async def stop(self) -> None:
        self.worker.stop_worker()
        if self.loop is not None:
            await self.loop
            self.loop = None

    async def result(self, task_id: str) -> Any:
        while True:
            snap = await self.client.fetch_task_result(task_id)
            if snap is not None and snap.state == "completed":
                return snap.result
            if snap is not None and snap.state in ("failed", "cancelled"):
                raise RuntimeError(f"task {task_id} {snap.state}")
            await asyncio.sleep(self.poll_s)

    async def sql(self, query: str, *args: Any) -> Any:
        conn = self.client._conn
        assert conn is not None
        cur = await conn.execute(query, args)  # type: ignore[arg-type]
        row = await cur.fetchone()
        return None if row is None else row[0]

    async def throughput(self, n: int) -> dict[str, Any]:
        cpu0, t_submit, t0 = time.process_time(), time.time(), time.perf_counter()
        ids = [(await self.client.spawn("three", i, queue=QUEUE))["task_id"] for i in range(n)]
        query = (
            "SELECT count(*) FROM absurd.t_bench WHERE task_id = any(%s) AND state = 'completed'"
        )
        while await self.sql(query, ids) < n:  # noqa: ASYNC110 - server state, polled
            await asyncio.sleep(self.poll_s)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        assert await self.result(ids[-1]) == {"i": n - 1, "a": 1, "b": 2, "c": 3}
        ids_text = [str(x) for x in ids]
        return {"seconds": seconds, "cpu_s": cpu, "ids": ids_text, "t_submit": t_submit}

    async def sequential(self, n: int) -> dict[str, Any]:
        lat = []
        for i in range(n):
            a = time.perf_counter()
            spawned = await self.client.spawn("three", i, queue=QUEUE)
            assert (await self.result(spawned["task_id"]))["c"] == 3
            lat.append((time.perf_counter() - a) * 1000)
        return {"latencies_ms": lat}

    async def signal(self, n: int) -> dict[str, Any]:
        lat = []
        for i in range(n):
            event = f"go-{uuid.uuid4()}"
            task_id = (await self.client.spawn("waiter", {"event": event}, queue=QUEUE))["task_id"]
            await self.parked(task_id)
            await asyncio.sleep(0.005)
            a = time.perf_counter()
            await self.client.emit_event(event, {"k": i})
            assert await self.result(task_id) == {"k": i}
            lat.append((time.perf_counter() - a) * 1000)
        return {"latencies_ms": lat}

    async def parked(self, task_id: str) -> None:
        query = "SELECT state FROM absurd.t_bench WHERE task_id = %s"
        for _ in range(10_000):
            if await self.sql(query, task_id) == "sleeping":
                return
            await asyncio.sleep(0.001)
        raise TimeoutError(f"{task_id} never parked in await_event")


async def _commands() -> AsyncIterator[dict[str, Any]]:
    while line := await asyncio.to_thread(sys.stdin.readline):
        yield json.loads(line)


def reply(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


async def serve(args: argparse.Namespace) -> None:
    await install(args.url)
    side = await Side.open(args.url, args.concurrency, args.poll_ms / 1000)
    side.start()
    await side.throughput(20)  # warm-up
    await side.stop()
    reply({"ready": True})
    async for cmd in _commands():
        mode, n = cmd["mode"], int(cmd["n"])
        side.start()
        try:
            if mode == "throughput":
                reply(await side.throughput(n))
            elif mode == "sequential":
                reply(await side.sequential(n))
            elif mode == "signal":
                reply(await side.signal(n))
            else:
                raise SystemExit(f"unknown mode {mode!r}")
        finally:
            await side.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--poll-ms", type=float, default=5.0)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
