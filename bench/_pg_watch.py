"""Watches one database of the server while bench/workflows.py runs a workload.

    python bench/_pg_watch.py --dsn ADMIN_DSN --db NAME [--interval-ms 5]

Run by ``bench/workflows.py`` in its own process (so neither its CPU nor its event
loop falls on the bench's client), connected to the admin database (so its own
statements are not the watched database's). It prints ``{"ready": true}``, then
answers one JSON command per stdin line until EOF:

* ``{"cmd": "start"}``: begin a window; ``{"started": true}``.
* ``{"cmd": "stop"}``: end it; replies with

  - ``lock_wait_s``: backend-seconds spent waiting on a heavyweight lock. Every
    ``--interval-ms`` (5 ms) one query reads ``pg_stat_activity`` for the
    database's backends; a backend with ``wait_event_type = 'Lock'`` counts for
    the time since the previous sample (the actual gap, which load stretches), so
    the figure is the sum over samples of waiting backends x gap. Waits shorter
    than a gap are missed or counted whole: a sampled estimate, unbiased for
    waits spread over the window.
  - ``lock_events``: the same seconds per ``wait_event`` (``transactionid``,
    ``tuple``, ``relation``, ...).
  - ``backend_cpu_s``: user + system CPU of the database's backends, from
    ``/proc/<pid>/stat`` (``utime + stime``, in clock ticks): for a backend seen at
    the window's first sample, its ticks at the end minus those at the start; for
    one that appeared later (a new connection), all its ticks. Every backend is
    re-read every tenth sample and at the end, so one that exits in the window
    loses at most that stretch. ``None`` when the server's processes are not
    visible here (another machine or pid namespace: ``/proc/<pid>/comm`` is not
    ``postgres``).
  - ``cpu_busy``: the machine's busy share over the window from ``/proc/stat``
    (1 - (idle + iowait) / all ticks, every CPU), ``None`` without ``/proc``.
  - ``samples``: samples taken, and ``pids``: backends seen.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
from typing import Any

import asyncpg

#: The database's backends and what each waits on.
ACTIVITY = "SELECT pid, wait_event_type, wait_event FROM pg_stat_activity WHERE datid = $1"


def proc_ticks(pid: int) -> int | None:
    """utime + stime of ``pid`` in clock ticks, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()  # after "pid (comm) "
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)


def is_postgres(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == "postgres"
    except OSError:
        return False


def cpu_times() -> tuple[int, int] | None:
    """(busy, all) ticks of every CPU since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            values = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


class Window:
    """One start .. stop window of samples."""

    def __init__(self, conn: asyncpg.Connection, datid: int, interval: float) -> None:
        self.conn, self.datid, self.interval = conn, datid, interval
        self.lock_events: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.first: dict[int, int] = {}  # pid -> ticks at its first sighting (0 if new)
        self.last: dict[int, int] = {}
        self.samples = 0
        self.visible = True
        self.stopping = False
        self.cpu0 = cpu_times()
        self.task = asyncio.create_task(self.run())

    async def run(self) -> None:
        prev = time.perf_counter()
        while not self.stopping:
            rows = await self.conn.fetch(ACTIVITY, self.datid)
            now = time.perf_counter()
            gap, prev = now - prev, now
            for r in rows:
                if self.samples and r["wait_event_type"] == "Lock":
                    self.lock_events[r["wait_event"]] += gap
                pid = r["pid"]
                if pid not in self.first and self.visible:
                    ticks = proc_ticks(pid)
                    if ticks is None:  # exited since the query (or not on this machine)
                        continue
                    if not is_postgres(pid):  # another machine's or namespace's pid
                        self.visible = False
                        continue
                    self.first[pid] = ticks if self.samples == 0 else 0
                    self.last[pid] = ticks
            self.samples += 1
            if self.samples % 10 == 0:
                self.refresh()
            await asyncio.sleep(self.interval)

    def refresh(self) -> None:
        for pid in self.last:
            ticks = proc_ticks(pid)
            if ticks is not None:
                self.last[pid] = ticks

    async def stop(self) -> dict[str, Any]:
        self.stopping = True
        await self.task
        self.refresh()
        cpu1 = cpu_times()
        busy = None
        if self.cpu0 is not None and cpu1 is not None and cpu1[1] > self.cpu0[1]:
            busy = (cpu1[0] - self.cpu0[0]) / (cpu1[1] - self.cpu0[1])
        ticks = sum(self.last[p] - self.first[p] for p in self.first)
        self.visible = self.visible and bool(self.first)
        return {
            "lock_wait_s": sum(self.lock_events.values()),
            "lock_events": dict(self.lock_events),
            "backend_cpu_s": ticks / os.sysconf("SC_CLK_TCK") if self.visible else None,
            "cpu_busy": busy,
            "samples": self.samples,
            "pids": len(self.first),
        }


async def serve(dsn: str, db: str, interval: float) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        datid = await conn.fetchval("SELECT oid FROM pg_database WHERE datname = $1", db)
        if datid is None:
            raise SystemExit(f"no database {db!r}")
        print(json.dumps({"ready": True}), flush=True)
        window: Window | None = None
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)["cmd"]
            if cmd == "start" and window is None:
                window = Window(conn, datid, interval)
                reply: dict[str, Any] = {"started": True}
            elif cmd == "stop" and window is not None:
                reply, window = await window.stop(), None
            else:
                raise SystemExit(f"unexpected command {line!r}")
            print(json.dumps(reply), flush=True)
    finally:
        await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True, help="a database other than the watched one")
    ap.add_argument("--db", required=True, help="the watched database")
    ap.add_argument("--interval-ms", type=float, default=5.0)
    args = ap.parse_args()
    asyncio.run(serve(args.dsn, args.db, args.interval_ms / 1000))


if __name__ == "__main__":
    main()
