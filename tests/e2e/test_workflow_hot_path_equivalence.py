"""Property: for random workflow programs (sequences and gathers of activities,
durable sleeps, signals), the hot path (activities leased in the pass's commit,
completions folded into the next pass, eager start) records the same history as
the plain path (every operation dequeued, every completion alone, every pass
carried by a workflow task) — on a real Worker and PostgreSQL.

Completions of one ``gather`` are recorded in the order the activities finish
on either path, so histories are compared with each run of consecutive
completions ordered by the seq they answer.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.replay.events import ActivityCompleted, HistoryEntry
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext


@activity(name="add")
async def add(x: int) -> int:
    await asyncio.sleep(0.001 * (x % 3))  # gathered activities finish out of order
    return x + 1


@workflow(name="program")
async def program(ctx: WorkflowContext, steps: list[list[Any]]) -> list[Any]:
    out: list[Any] = []
    for kind, arg in steps:
        if kind == "act":
            out.append(await add(arg))
        elif kind == "gather":
            out.append(list(await asyncio.gather(*(add(x) for x in arg))))
        elif kind == "sleep":
            await ctx.sleep(timedelta(milliseconds=arg))
            out.append("slept")
        else:
            out.append(await ctx.wait_signal(f"s{arg}"))
    return out


step = st.one_of(
    st.tuples(st.just("act"), st.integers(0, 50)),
    st.tuples(st.just("gather"), st.lists(st.integers(0, 50), min_size=1, max_size=4)),
    st.tuples(st.just("sleep"), st.integers(1, 20)),
    st.tuples(st.just("signal"), st.integers(0, 2)),
)


def normalized(history: list[HistoryEntry]) -> list[bytes]:
    """Events as bytes, each run of consecutive completions ordered by its seq."""
    events = [e.event for e in history]
    out: list[Any] = []
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and isinstance(events[j], ActivityCompleted):
            j += 1
        if j > i:
            out.extend(sorted(events[i:j], key=lambda e: e.scheduled_seq))  # type: ignore[attr-defined]
            i = j
        else:
            out.append(events[i])
            i += 1
    return [type(e).__name__.encode() + msgspec.json.encode(e) for e in out]


async def run_program(
    dsn: str, schema: str, steps: list[list[Any]], *, hot: bool
) -> tuple[list[bytes], list[Any]]:
    """Start ``program`` (eagerly on the hot path), send its signals, run it to the end."""
    store = await open_store(dsn, Config(schema=schema))
    try:
        worker = Worker(
            store,
            poll_interval=timedelta(milliseconds=20),
            maintenance_interval=timedelta(milliseconds=50),
            maintain=(),
            handle_signals=False,
        )
        attach_workflows(worker, [program], [add], local_dispatch=hot)
        signals = [arg for kind, arg in steps if kind == "signal"]
        async with worker:
            client = Client.for_worker(worker) if hot else Client(store)
            handle = await client.start(program, steps)
            for n, arg in enumerate(signals):
                await handle.signal(f"s{arg}", n)
            result = await handle.result(timeout=30)
        return normalized(await handle.history()), result
    finally:
        await store.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, min_size=1, max_size=6))
def test_hot_path_and_plain_path_record_the_same_history(
    pg_dsn: str, steps: list[tuple[str, Any]]
) -> None:
    program_steps = [list(s) for s in steps]

    async def both() -> None:
        schema = unique_schema("hp")
        store = await open_store(pg_dsn, Config(schema=schema), migrate=True)
        await store.close()
        try:
            plain = await run_program(pg_dsn, schema, program_steps, hot=False)
            hot = await run_program(pg_dsn, schema, program_steps, hot=True)
        finally:
            await drop_schema(pg_dsn, schema)
        assert hot[1] == plain[1]
        assert hot[0] == plain[0]

    asyncio.run(both())


def test_normalized_orders_only_runs_of_completions() -> None:
    """The comparison keeps every event in place except within a run of completions."""
    entries = [
        HistoryEntry(1, ActivityCompleted(scheduled_seq=3, result=msgspec.Raw(b"1"), attempts=1)),
        HistoryEntry(2, ActivityCompleted(scheduled_seq=2, result=msgspec.Raw(b"2"), attempts=1)),
    ]
    swapped = [entries[1], entries[0]]
    assert normalized(entries) == normalized(swapped)
    assert normalized(entries)[0].startswith(b"ActivityCompleted")
    assert b'"scheduled_seq":2' in normalized(entries)[0]
