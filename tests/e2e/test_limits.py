"""Limits seen from the outside (real worker, real PostgreSQL): an activity
call waiting for its per-key limit shows in ``describe().blocked_reason`` and
in ``azync-flow limits list``; the limit is stored by the worker at start."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

from azync_flow import ConcurrencyLimit, RateLimit, WorkflowContext, activity, workflow
from azync_flow.cli import main
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import EnqueueParams, Source
from azync_flow.testing import MovableClock
from azync_flow.worker import JobContext, Retention, Worker
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

GATE: asyncio.Event | None = None
STARTED: list[str] = []


@activity(
    name="lookup_customer",
    limits=[ConcurrencyLimit("per-customer", 1, per_key=True)],
    limit_key=lambda customer, n: customer,
)
async def lookup_customer(customer: str, n: int) -> str:
    STARTED.append(f"{customer}-{n}")
    assert GATE is not None
    await GATE.wait()
    return f"{customer}-{n}"


@workflow(name="two_lookups")
async def two_lookups(ctx: WorkflowContext, customer: str) -> list[str]:
    return list(await asyncio.gather(lookup_customer(customer, 1), lookup_customer(customer, 2)))


async def _until(check: Any, within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_call_waiting_for_its_limit_says_so_and_the_cli_counts_it(
    store: PostgresStore, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    global GATE
    GATE = asyncio.Event()
    STARTED.clear()
    runtime = LocalRuntime(store, Registry([two_lookups], [lookup_customer]))
    stop = asyncio.Event()
    running = asyncio.create_task(runtime.run(stop))
    try:
        handle = await Client(store).start(two_lookups, "acme")

        async def one_waits() -> bool:
            view = await handle.describe()
            return "waits for" in view.blocked_reason and len(STARTED) == 1

        await _until(one_waits)
        view = await handle.describe()
        assert view.blocked_reason == "waits for concurrency limit 'per-customer' (key 'acme')"
        capsys.readouterr()
        code = await asyncio.to_thread(
            main, ["limits", "list", "--dsn", pg_dsn, "--schema", store.schema, "--json"]
        )
        assert code == 0
        (item,) = json.loads(capsys.readouterr().out)["items"]
        assert item["spec"]["name"] == "per-customer"
        assert (item["in_flight"], item["waiting"], item["keys"]) == (1, 1, 1)
        assert item["kinds"] == ["workflow:$op:lookup_customer@1"]
        GATE.set()
        assert sorted(await handle.result(timeout=30)) == ["acme-1", "acme-2"]
        assert (await handle.describe()).blocked_reason == ""
    finally:
        GATE.set()
        stop.set()
        await running


async def test_the_cli_table_lists_each_limit(
    store: PostgresStore,
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: wide enough for one line a row
    await store.declare_limits(
        Source.QUEUE,
        "email.send",
        [RateLimit("smtp", 50, timedelta(minutes=1)).spec()],
    )
    capsys.readouterr()
    code = await asyncio.to_thread(
        main, ["limits", "list", "--dsn", pg_dsn, "--schema", store.schema]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "smtp" in out
    assert "50 per 1m 0s" in out
    assert "queue:email.send" in out


def test_limits_are_checked_where_they_are_declared() -> None:
    with pytest.raises(ValueError, match="capacity"):
        ConcurrencyLimit("x", 0)
    with pytest.raises(ValueError, match="two limits"):
        activity(limits=[ConcurrencyLimit("x", 1), RateLimit("x", 1, timedelta(seconds=1))])(_plain)
    with pytest.raises(TypeError):
        activity(limits=["x"])(_plain)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="not per call"):
        lookup_customer.with_options(limits=[ConcurrencyLimit("y", 1)])


def _plain(x: int) -> int:
    return x


def test_one_worker_refuses_two_settings_for_one_limit_name(store: PostgresStore) -> None:
    worker = Worker(store)
    worker.register("mail.send", _handler, limits=[ConcurrencyLimit("smtp", 5, per_key=True)])
    worker.register("mail.bulk", _handler, limits=[ConcurrencyLimit("smtp", 5, per_key=True)])
    with pytest.raises(ValueError, match="'smtp' is declared with different settings"):
        worker.register("mail.digest", _handler, limits=[ConcurrencyLimit("smtp", 15)])
    assert (Source.QUEUE, "mail.digest") not in worker.limits
    assert "mail.digest" not in worker.handlers


async def _handler(payload: Any) -> None:
    return None


async def test_the_leader_vacuums_the_slots_of_idle_limit_keys(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    worker = Worker(
        store,
        handle_signals=False,
        retention=Retention(limit_slots=timedelta(hours=1)),
    )
    sent: list[str] = []

    @worker.register("mail.send", limits=[ConcurrencyLimit("per-user", 2, per_key=True)])
    async def send(payload: Any, ctx: JobContext) -> None:
        sent.append(payload["to"])

    for to in ("u1", "u2"):
        params = EnqueueParams(
            id=uuid.uuid4(), kind="mail.send", payload=json.dumps({"to": to}).encode(),
            limit_key=to,
        )  # fmt: skip
        assert await store.enqueue(params)
    await worker.run_until_idle()
    assert sorted(sent) == ["u1", "u2"]
    slots = "SELECT count(*) FROM azync_limit_slots WHERE limit_name = 'per-user'"
    assert await store.pool.fetchval(slots) == 4
    clock.advance(timedelta(minutes=59))
    await worker.run_until_idle()
    assert await store.pool.fetchval(slots) == 4  # not idle for an hour yet
    clock.advance(timedelta(minutes=2))
    await worker.run_until_idle()
    assert await store.pool.fetchval(slots) == 0
