"""``azync-flow uncertain list`` through ``main([...])`` against a real
PostgreSQL, on a wide terminal: the execution key an operator asks the provider
with, and the reconcile hook's verdict when it left the operation undecided."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from azync_flow import Reconciled, Uncertain, WorkflowContext, activity, workflow
from azync_flow.cli import main
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

LOOKUPS: list[str] = []


def psp_lookup(amount: int, execution_key: str) -> Reconciled:
    LOOKUPS.append(execution_key)
    return Reconciled.unknown(f"PSP lookup down (try {len(LOOKUPS)})")


@activity(name="cli_list_charge", idempotent=False, reconcile=psp_lookup)
def cli_list_charge(amount: int) -> str:
    raise Uncertain("PSP timed out")


@activity(name="cli_list_wire", idempotent=False)
def cli_list_wire(amount: int) -> str:
    raise Uncertain("bank timed out")


@workflow(name="cli_list_checkout")
async def cli_list_checkout(ctx: WorkflowContext, amount: int) -> str:
    return await cli_list_charge(amount)


@workflow(name="cli_list_payout")
async def cli_list_payout(ctx: WorkflowContext, amount: int) -> str:
    return await cli_list_wire(amount)


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    LOOKUPS.clear()


async def _list(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(
        main, ["uncertain", "list", "--dsn", pg_dsn, "--schema", store.schema, *extra]
    )
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out


async def _park_both(store: PostgresStore) -> tuple[LocalRuntime, Any, Any]:
    runtime = LocalRuntime(
        store,
        Registry([cli_list_checkout, cli_list_payout], [cli_list_charge, cli_list_wire]),
    )
    client = Client(store)
    checkout = await client.start(cli_list_checkout, 12)
    payout = await client.start(cli_list_payout, 70)
    await runtime.run_until_idle()
    for handle in (checkout, payout):
        assert (await handle.describe()).state == WorkflowState.SUSPENDED
    return runtime, checkout, payout


def _line_of(out: str, text: str) -> str:
    (line,) = [line for line in out.splitlines() if text in line]
    return line


async def test_uncertain_list_shows_the_execution_key_and_the_hooks_verdict_at_200_columns(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _, checkout, _ = await _park_both(store)
    ops = {op.activity: op for op in await Client(store).list_uncertain()}
    charge, wire = ops["cli_list_charge"], ops["cli_list_wire"]
    assert charge.execution_key.startswith(f"{checkout.id}/")
    code, out = await _list(pg_dsn, store, capsys)
    assert code == 0
    assert "EXECUTION KEY" in out
    assert "RECONCILE" in out
    hooked = _line_of(out, str(charge.operation_id))
    assert charge.execution_key in hooked  # whole, on the operation's line
    assert "unknown: PSP" in hooked  # free text: cut with "…" to fit 200 columns
    plain = _line_of(out, str(wire.operation_id))
    assert wire.execution_key in plain
    assert "unknown" not in plain  # no hook: no verdict
    assert [charge.execution_key] == LOOKUPS


async def test_uncertain_list_shows_the_whole_verdict_and_reason_where_they_fit(
    pg_dsn: str,
    store: PostgresStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _park_both(store)
    (charge,) = [
        op for op in await Client(store).list_uncertain() if op.reason.endswith("PSP timed out")
    ]
    monkeypatch.setenv("COLUMNS", "240")
    code, out = await _list(pg_dsn, store, capsys)
    assert code == 0
    line = _line_of(out, str(charge.operation_id))
    assert "unknown: PSP lookup down (try 1)" in line
    assert charge.reason in line
    assert charge.execution_key in line


async def test_uncertain_list_json_carries_the_verdict_and_an_empty_one_without_a_hook(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str]
) -> None:
    await _park_both(store)
    code, out = await _list(pg_dsn, store, capsys, "--json")
    assert code == 0
    rows = {row["activity"]: row for row in json.loads(out)}
    assert rows["cli_list_charge"]["reconcile_verdict"] == "unknown: PSP lookup down (try 1)"
    assert rows["cli_list_wire"]["reconcile_verdict"] == ""
    assert rows["cli_list_charge"]["execution_key"].endswith("/1")


async def test_uncertain_list_shows_the_verdict_of_the_current_attempt_after_a_retry(
    pg_dsn: str,
    store: PostgresStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    runtime, checkout, _ = await _park_both(store)
    client = Client(store)
    (op,) = await client.list_uncertain(workflow_id=checkout.id)
    await client.resolve_uncertain(op, "retry", note="nothing at the PSP", decided_by="ann")
    await runtime.run_until_idle()  # runs again, uncertain again, the hook asked again
    (again,) = await client.list_uncertain(workflow_id=checkout.id)
    assert again.attempt == op.attempt + 1
    code, out = await _list(pg_dsn, store, capsys, "--workflow", str(checkout.id))
    assert code == 0
    line = _line_of(out, str(op.operation_id))
    assert "unknown: PSP lookup down (try 2)" in line
    assert "(try 1)" not in out
