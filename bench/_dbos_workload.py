"""The bench/workflows.py workloads on DBOS Transact (DBOS 3.x, PyPI ``dbos``, the ``bench`` extra).

    python bench/_dbos_workload.py MODE --url postgresql://u@h:p/db [-n N] [--concurrency C]

Run by ``bench/workflows.py``; every reply is one JSON object on one stdout line.

Modes:

* ``serve``: launch DBOS once (dequeuing from no user queue), warm up, print
  ``{"ready": true}``, then answer one JSON command per stdin line until EOF:
  ``{"mode": M, "n": N}`` with M one of

  - ``throughput``: N three-step workflows started with ``DBOS.start_workflow``,
    then every result awaited; ``seconds``, ``cpu_s`` (this process's CPU time,
    ``time.process_time``, over the run), the workflow ``ids`` and ``t_submit``,
    the wall-clock time (``time.time()``) at which the start loop began: the
    bench reads each workflow's ``workflow_status`` timestamps itself (after its
    statement statistics, so that read is not counted in them). The process both
    starts and runs the workflows: DBOS has no separate worker.
  - ``sequential``: N three-step workflows one after the other (a direct call,
    DBOS's fastest path); client-side start-to-finish.
  - ``signal``: N runs of a workflow parked in ``DBOS.recv``: once it is
    recorded as waiting, ``DBOS.send`` and time send -> result.
  - ``gather``: N async workflows that each run 10 async steps concurrently
    (``asyncio.gather`` of steps inside the workflow), all started, then all
    awaited; ``seconds``.
* ``commits``: N three-step workflows one after the other, then exit; the caller
  reads ``pg_stat_database`` around this process (its exit flushes the stats).
* ``queue-worker``: launch DBOS dequeuing only from queue ``bench`` (polling
  every 0.1 s, ``--concurrency`` workflows at a time), print ``{"ready": true}``
  and run until stdin closes: one of the scale-out workers.
* ``enqueue``: a ``DBOSClient`` (no DBOS runtime in this process) enqueues N
  three-step workflows on queue ``bench`` and polls ``workflow_status`` every
  10 ms until all succeeded; ``seconds`` from the first enqueue to that.
* ``publish``: the publish row's DBOS equivalent (DBOS has no event ledger; a
  durable message to a consumer is a queued workflow): ``--producers`` threads
  share one ``DBOSClient`` and each enqueues its share of N no-op ``sink``
  workflows on queue ``bench`` (one transaction per enqueue), run by a
  ``queue-worker`` process; ``seconds_published`` once every thread is done,
  ``seconds_delivered`` once all succeeded (``workflow_status`` polled every 5 ms),
  both from the first enqueue. 20 warm-up enqueues run first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions

APP = "azync-bench"
QUEUE = "bench"


@DBOS.step()
def step_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


@DBOS.step()
def step_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


@DBOS.step()
def step_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


@DBOS.workflow(name="three")
def three(i: int) -> dict[str, int]:
    return step_c(step_b(step_a(i)))


@DBOS.workflow()
def waiter() -> Any:
    return DBOS.recv("go", timeout_seconds=30)


@DBOS.workflow(name="sink")
def sink(i: int) -> None:
    """The publish row's consumer: a no-op."""


@DBOS.step()
async def step(i: int) -> int:
    return i + 1


@DBOS.workflow()
async def fan(i: int) -> int:
    return sum(await asyncio.gather(*(step(i + k) for k in range(10))))


def engine_for(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def wait_parked(engine: sa.Engine, workflow_id: str) -> None:
    """Until the workflow has recorded its recv (it is then blocked on the notification)."""
    deadline = time.time() + 10
    with engine.connect() as c:
        while time.time() < deadline:
            n = c.execute(
                sa.text("select count(*) from dbos.operation_outputs where workflow_uuid = :w"),
                {"w": workflow_id},
            ).scalar()
            c.commit()
            if n:
                return
            time.sleep(0.001)
    raise TimeoutError(f"{workflow_id} never parked in recv")


def throughput(n: int) -> dict[str, Any]:
    cpu0, t_submit, t0 = time.process_time(), time.time(), time.perf_counter()
    handles = [DBOS.start_workflow(three, i) for i in range(n)]
    results = [h.get_result() for h in handles]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert results[-1] == {"i": n - 1, "a": 1, "b": 2, "c": 3}
    ids = [h.get_workflow_id() for h in handles]
    return {"seconds": seconds, "cpu_s": cpu, "ids": ids, "t_submit": t_submit}


def sequential(n: int) -> dict[str, Any]:
    lat = []
    for i in range(n):
        a = time.perf_counter()
        three(i)
        lat.append((time.perf_counter() - a) * 1000)
    return {"latencies_ms": lat}


def signal(engine: sa.Engine, n: int) -> dict[str, Any]:
    lat = []
    for i in range(n):
        handle = DBOS.start_workflow(waiter)
        wait_parked(engine, handle.get_workflow_id())
        time.sleep(0.005)
        a = time.perf_counter()
        DBOS.send(handle.get_workflow_id(), {"k": i}, "go")
        assert handle.get_result() == {"k": i}
        lat.append((time.perf_counter() - a) * 1000)
    return {"latencies_ms": lat}


def gather(n: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    handles = [DBOS.start_workflow(fan, i) for i in range(n)]
    results = [h.get_result() for h in handles]
    seconds = time.perf_counter() - t0
    assert results[-1] == sum(n - 1 + k + 1 for k in range(10))
    return {"seconds": seconds}


def enqueue(url: str, n: int) -> dict[str, Any]:
    client = DBOSClient(system_database_url=url, application_name=APP)
    engine = engine_for(url)
    options: EnqueueOptions = {"queue_name": QUEUE, "workflow_name": "three"}

    def run(count: int, base: int) -> float:
        t0 = time.perf_counter()
        ids = [client.enqueue(options, base + i).get_workflow_id() for i in range(count)]
        query = sa.text(
            "select count(*) from dbos.workflow_status"
            " where workflow_uuid = any(:ids) and status = 'SUCCESS'"
        )
        with engine.connect() as c:
            for _ in range(60_000):
                done = c.execute(query, {"ids": ids}).scalar()
                c.commit()
                if done == count:
                    return time.perf_counter() - t0
                time.sleep(0.01)
        raise TimeoutError("queued workflows did not finish in 10 min")

    run(20, -1000)  # warm-up: both workers' pools and threads
    seconds = run(n, 0)
    engine.dispose()
    client.destroy()
    return {"seconds": seconds}


def publish(url: str, n: int, producers: int) -> dict[str, Any]:
    client = DBOSClient(system_database_url=url, application_name=APP)
    engine = engine_for(url)
    options: EnqueueOptions = {"queue_name": QUEUE, "workflow_name": "sink"}
    query = sa.text(
        "select count(*) from dbos.workflow_status"
        " where workflow_uuid = any(:ids) and status = 'SUCCESS'"
    )

    def run(count: int, base: int) -> tuple[float, float]:
        ids: list[str] = []

        def produce(k: int) -> None:
            for i in range(k, count, producers):
                ids.append(client.enqueue(options, base + i).get_workflow_id())

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        published = time.perf_counter() - t0
        with engine.connect() as c:
            for _ in range(120_000):
                done = c.execute(query, {"ids": ids}).scalar()
                c.commit()
                if done == count:
                    return published, time.perf_counter() - t0
                time.sleep(0.005)
        raise TimeoutError("queued workflows did not finish in 10 min")

    run(20, -1000)  # warm-up: the client's pool and the worker's threads
    published, delivered = run(n, 0)
    engine.dispose()
    client.destroy()
    return {"seconds_published": published, "seconds_delivered": delivered}


def reply(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve", "commits", "queue-worker", "enqueue", "publish"])
    ap.add_argument("--url", required=True)
    ap.add_argument("-n", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--producers", type=int, default=8, help="publish: producer threads")
    args = ap.parse_args()
    if args.mode == "enqueue":
        reply(enqueue(args.url, args.n))
        return
    if args.mode == "publish":
        reply(publish(args.url, args.n, args.producers))
        return
    config: DBOSConfig = {
        "name": APP,
        "system_database_url": args.url,
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    DBOS(config=config)
    DBOS.listen_queues([QUEUE] if args.mode == "queue-worker" else [])
    DBOS.launch()
    if args.mode == "commits":
        for i in range(args.n):
            three(i)
        DBOS.destroy()
        return
    if args.mode == "queue-worker":
        DBOS.register_queue(QUEUE, worker_concurrency=args.concurrency, polling_interval_sec=0.1)
        reply({"ready": True})
        sys.stdin.read()  # until the bench closes our stdin
        DBOS.destroy()
        return
    engine = engine_for(args.url)  # the signal mode's polling
    for i in range(args.warmup):
        three(-i - 1)
    [h.get_result() for h in [DBOS.start_workflow(fan, -100 * i) for i in range(5)]]
    reply({"ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        mode, n = cmd["mode"], int(cmd["n"])
        if mode == "throughput":
            reply(throughput(n))
        elif mode == "sequential":
            reply(sequential(n))
        elif mode == "signal":
            reply(signal(engine, n))
        elif mode == "gather":
            reply(gather(n))
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    engine.dispose()
    DBOS.destroy()


if __name__ == "__main__":
    main()
