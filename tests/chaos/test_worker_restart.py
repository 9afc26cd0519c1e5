"""A worker restarted under its identity after a SIGKILL takes back what its
killed predecessor held at once, not after the lease (30 s here): the
interrupted idempotent activity re-runs, the non-idempotent one becomes
uncertain, and the run goes on, within a few maintenance ticks."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from tests.chaos.test_workflow_kill import APP_MODULE, done_steps, lines, run_worker

#: Far longer than the restarted run may take: without the take-back the
#: restarted worker would wait this long for the killed attempt's lease.
LEASE = {"LEASE_S": "30"}


async def test_a_worker_restarted_under_its_identity_retries_the_killed_attempt_at_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-21")
    env = {**LEASE, "WORKER_IDENTITY": f"restart-{schema}"}
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "during:charge", **env)
    assert code == -signal.SIGKILL
    assert lines(ledger)[-1] == "start:charge:o-21"
    started = time.monotonic()
    assert await run_worker(pg_dsn, schema, handle.id, ledger, **env) == 0
    assert time.monotonic() - started < 15  # the lease alone is 30 s
    assert await handle.result(timeout=5) == ["reserve-done", "charge-done", "ship-done"]
    assert lines(ledger).count("start:charge:o-21") == 2
    assert done_steps(ledger) == ["done:reserve:o-21", "done:charge:o-21", "done:ship:o-21"]


async def test_a_restarted_identity_makes_the_killed_non_idempotent_attempt_uncertain_at_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.wire_order, "o-22")
    env = {**LEASE, "WORKER_IDENTITY": f"restart-{schema}"}
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "during:wire", **env)
    assert code == -signal.SIGKILL
    started = time.monotonic()
    assert await run_worker(pg_dsn, schema, handle.id, ledger, UNTIL="suspended", **env) == 0
    assert time.monotonic() - started < 15
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    assert lines(ledger).count("start:wire:o-22") == 1  # never re-run blindly
