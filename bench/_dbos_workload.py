"""The bench/workflows.py workloads on DBOS Transact, one mode per process.

    python bench/_dbos_workload.py MODE --url postgresql://u@h:p/db -n N

Run by ``bench/workflows.py`` (DBOS 3.x, PyPI ``dbos``, the ``bench`` extra);
prints one JSON object on stdout. Modes mirror the azync_flow side:

* ``throughput``: N three-step workflows started with ``DBOS.start_workflow``,
  then every result awaited; wf/s, and start-to-finish per workflow from DBOS's
  own ``workflow_status`` timestamps (created_at -> updated_at, ms).
* ``sequential``: N three-step workflows one after the other (a direct call,
  DBOS's fastest path); client-side start-to-finish.
* ``signal``: N runs of a workflow parked in ``DBOS.recv``: once it is
  recorded as waiting, ``DBOS.send`` and time send -> result.
* ``commits``: N three-step workflows one after the other; the caller reads
  ``pg_stat_database`` around this process (its exit flushes the stats).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig


@DBOS.step()
def step_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


@DBOS.step()
def step_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


@DBOS.step()
def step_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


@DBOS.workflow()
def three(i: int) -> dict[str, int]:
    return step_c(step_b(step_a(i)))


@DBOS.workflow()
def waiter() -> Any:
    return DBOS.recv("go", timeout_seconds=30)


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["throughput", "sequential", "signal", "commits"])
    ap.add_argument("--url", required=True)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    config: DBOSConfig = {
        "name": "azync-bench",
        "system_database_url": args.url,
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    DBOS(config=config)
    DBOS.launch()
    out: dict[str, Any] = {"mode": args.mode, "n": args.n}
    if args.mode != "commits":
        for i in range(args.warmup):
            three(-i - 1)
    engine = sa.create_engine(args.url.replace("postgresql://", "postgresql+psycopg://"))

    if args.mode == "throughput":
        t0 = time.perf_counter()
        handles = [DBOS.start_workflow(three, i) for i in range(args.n)]
        results = [h.get_result() for h in handles]
        elapsed = time.perf_counter() - t0
        assert results[-1] == {"i": args.n - 1, "a": 1, "b": 2, "c": 3}
        ids = [h.get_workflow_id() for h in handles]
        with engine.connect() as c:
            rows = c.execute(
                sa.text(
                    "select updated_at - created_at from dbos.workflow_status"
                    " where workflow_uuid = any(:ids)"
                ),
                {"ids": ids},
            ).all()
        out.update(seconds=elapsed, latencies_ms=[float(r[0]) for r in rows])
    elif args.mode == "sequential":
        lat = []
        for i in range(args.n):
            a = time.perf_counter()
            three(i)
            lat.append((time.perf_counter() - a) * 1000)
        out.update(latencies_ms=lat)
    elif args.mode == "signal":
        lat = []
        for i in range(args.n):
            handle = DBOS.start_workflow(waiter)
            wait_parked(engine, handle.get_workflow_id())
            time.sleep(0.005)
            a = time.perf_counter()
            DBOS.send(handle.get_workflow_id(), {"k": i}, "go")
            assert handle.get_result() == {"k": i}
            lat.append((time.perf_counter() - a) * 1000)
        out.update(latencies_ms=lat)
    else:
        for i in range(args.n):
            three(i)
    engine.dispose()
    DBOS.destroy()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
