"""The uncertain-payment sample's charge activity and reconcile hook, tested in
isolation with ActivityEnvironment against the sample's provider table."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import asyncpg
import pytest

from azync_flow.testing import ActivityEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples"))

from payment_uncertain import Payment, charge_card, find_charge


@pytest.fixture
async def provider(azync_dsn: str, azync_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample's fake provider: a table in the test's schema."""
    monkeypatch.setenv("AZYNC_DSN", azync_dsn)
    monkeypatch.setenv("AZYNC_SCHEMA", azync_schema)
    conn = await asyncpg.connect(azync_dsn)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{azync_schema}"')
        await conn.execute(
            f'CREATE TABLE "{azync_schema}".provider_charges '
            "(idempotency_key text PRIMARY KEY, charge_id text, amount_cents int)"
        )
    finally:
        await conn.close()


async def test_the_charge_is_keyed_by_the_attempts_execution_key(provider: None) -> None:
    run_id = uuid.uuid4()
    env = ActivityEnvironment(workflow_id=run_id, seq=1)
    payment = Payment("p-9", 1200, "4242")
    assert await env.run(charge_card, payment) == "ch_p-9_1200"
    # what the reconcile hook finds later under the same execution key
    found = await find_charge(payment, f"{run_id}/1")
    assert (found.outcome, found.result) == ("completed", "ch_p-9_1200")
    assert (await find_charge(payment, f"{run_id}/2")).outcome == "retry"
