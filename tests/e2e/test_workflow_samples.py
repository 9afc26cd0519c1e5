"""The samples run as users run them: quickstart (approve, decline, approval
timeout, a second run seeing the first) and crash recovery (SIGKILL + new worker)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from azync_flow.client import Client
from azync_flow.embedded import start_embedded, stop_embedded
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.workflows import WorkflowStartParams
from azync_flow.testing import drop_schema, unique_schema

from ..unit.test_docs_snippets import BLOCKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def sample_schema(pg_dsn: str) -> AsyncIterator[str]:
    schema = unique_schema("sample")
    yield schema
    await drop_schema(pg_dsn, schema)


async def run_sample(pg_dsn: str, schema: str | None, script: str, *args: str) -> str:
    """Run a sample as a user would; ``schema=None`` leaves ``AZYNC_SCHEMA`` unset."""
    env = {**os.environ, "AZYNC_DSN": pg_dsn, "PYTHONPATH": str(ROOT)}
    env.pop("ORDER_LEDGER", None)
    env.pop("AZYNC_SCHEMA", None)
    if schema is not None:
        env["AZYNC_SCHEMA"] = schema
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "samples" / script),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode() + err.decode()
    return out.decode()


def history_events(stdout: str) -> list[str]:
    """The event column of the printed history table."""
    rows = stdout.split("  ---  ------")[1].splitlines()[1:]
    return [line.split()[2] for line in rows if line.strip()]


async def test_quickstart_ships_an_approved_order_and_a_second_run_sees_the_first(
    pg_dsn: str, sample_schema: str
) -> None:
    first = await run_sample(pg_dsn, sample_schema, "quickstart.py")
    assert "earlier executions of workflow 'order': 0 (none)" in first
    assert "result:    shipped" in first
    assert "approved_by = quickstart" in first
    events = history_events(first)
    assert events[-1] == "WorkflowCompleted"
    assert "SignalReceived" in events
    assert events.count("ActivityCompleted") == 3  # reserve, charge, ship

    second = await run_sample(pg_dsn, sample_schema, "quickstart.py")
    assert "earlier executions of workflow 'order': 1 (1 shipped)" in second


async def test_quickstart_counts_another_apps_order_results_without_decoding_them(
    pg_dsn: str, sample_schema: str
) -> None:
    store = await open_store(pg_dsn, Config(schema=sample_schema))
    try:
        params = WorkflowStartParams(id=uuid.uuid4(), name="order", input=b'"x"')
        assert (await store.start_workflow(params))[0]
        await store.pool.execute(
            "UPDATE azync_workflow_executions SET state = 'succeeded', result = $2,"
            " completed_at = now() WHERE id = $1",
            params.id,
            b'{"total": 5}',
        )
    finally:
        await store.close()
    out = await run_sample(pg_dsn, sample_schema, "quickstart.py")
    assert "earlier executions of workflow 'order': 1 (1 succeeded (not a sample receipt))" in out
    assert "result:    shipped" in out


async def test_quickstart_decline_releases_the_reserved_stock(
    pg_dsn: str, sample_schema: str
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "quickstart.py", "--decline")
    assert "result:    payment failed: card declined" in out
    events = history_events(out)
    assert "ActivityFailed" in events
    assert "release_stock," in out.split("ActivityFailed")[1]
    assert "refund," not in out
    assert events[-1] == "WorkflowCompleted"


async def test_quickstart_approval_timeout_refunds_then_releases(
    pg_dsn: str, sample_schema: str
) -> None:
    out = await run_sample(
        pg_dsn, sample_schema, "quickstart.py", "--no-approve", "--approval-timeout", "1"
    )
    assert "result:    approval timed out" in out, out
    after_timeout = out.split("TimerFired")[1]
    assert after_timeout.index("refund,") < after_timeout.index("release_stock,"), out
    assert "SignalReceived" not in history_events(out), out


async def test_shopping_cart_sample_adds_items_by_update_and_reads_them_by_query(
    pg_dsn: str, sample_schema: str
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "shopping_cart.py")
    assert "items:     1\nitems:     2\nretried:   2\n" in out
    assert "rejected:  [update_rejected]" in out
    assert "quantity must be 1..10, got 99" in out
    assert "status='open'" in out.split("summary:")[1].split("\n")[0]
    assert "status='checked out'" in out.split("result:")[1].split("\n")[0]
    history = out.split("history:")[1]
    assert history.count("UpdateAccepted") == history.count("UpdateCompleted") == 2


async def test_crash_recovery_sample_runs_each_completed_activity_exactly_once(
    pg_dsn: str, sample_schema: str
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "crash_recovery.py")
    assert "worker 1:  killed by SIGKILL; execution running" in out
    assert "ledger so far: {'reserve_stock': 1, 'charge_card': 1}" in out
    assert "result:    shipped" in out
    table = out.split("  -------------- ----------\n")[1].split("\n\n")[0].splitlines()
    assert [line.split() for line in table] == [
        ["reserve_stock", "1"],
        ["charge_card", "1"],
        ["ship", "1"],
    ], out
    assert "every completed activity executed exactly once: yes" in out


async def test_crash_recovery_ignores_an_unfinished_order_in_the_same_schema(
    pg_dsn: str, sample_schema: str
) -> None:
    sys.path.insert(0, str(ROOT / "samples"))
    from order import Order, order_workflow

    store = await open_store(pg_dsn, Config(schema=sample_schema))
    try:
        async with Client(store) as client:
            other = Order("o-leftover", "sku-1", 1, 500, "4242424242424242", 3600.0)
            leftover = await client.start(order_workflow, other)
        out = await run_sample(pg_dsn, sample_schema, "crash_recovery.py")
        assert "every completed activity executed exactly once: yes" in out, out
        assert "ledger so far: {'reserve_stock': 1, 'charge_card': 1}" in out, out
        # Still unfinished (no approval came). Suspended when worker 1 died holding its
        # non-idempotent charge: that charge is parked uncertain, never re-run blindly.
        state = (await store.get_workflow_execution(leftover.id)).state
        assert state in ("running", "suspended"), state
    finally:
        await store.close()


async def test_crash_recovery_uses_and_drops_a_fresh_schema_by_default(pg_dsn: str) -> None:
    out = await run_sample(pg_dsn, None, "crash_recovery.py")
    assert "every completed activity executed exactly once: yes" in out, out
    schema = re.search(r"schema:    (crash_[0-9a-f]{12}) \(fresh", out)
    assert schema is not None, out
    conn = await asyncpg.connect(pg_dsn)
    try:
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema.group(1)
        )
    finally:
        await conn.close()
    assert found == 0, f"{schema.group(1)} left behind"


DOC_PROGRAMS = {where: source for where, source in BLOCKS if "asyncio.run(main())" in source}


@pytest.fixture(scope="module")
def embedded_dir() -> Iterator[Path]:
    """A user's embedded server, already running (as after a first program run)."""
    data_dir = Path(tempfile.mkdtemp(prefix="azync-docs-")) / "pgdata"
    start_embedded(data_dir, keep_running=True)
    yield data_dir
    stop_embedded(data_dir, force=True)
    shutil.rmtree(data_dir.parent, ignore_errors=True)


@pytest.mark.parametrize("where", sorted(DOC_PROGRAMS))
async def test_complete_programs_in_the_docs_run_as_written_without_a_database(
    embedded_dir: Path, where: str, tmp_path: Path
) -> None:
    script = tmp_path / "program.py"
    script.write_text(DOC_PROGRAMS[where])
    # a newcomer's shell: no AZYNC_DSN, so the program falls back to the embedded server
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZYNC_")}
    env["AZYNC_EMBEDDED_DIR"] = str(embedded_dir)
    env["AZYNC_SCHEMA"] = unique_schema("doc")
    env["PYTHONPATH"] = str(ROOT)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, f"{where}:\n{out.decode()}"
    expected = {
        "docs/workflows.md": "ch_o-1_1999",
        "docs/dags.md": "succeeded {'tracking': 'TRK-1'}",
        "docs/queue.md": "dead: {'customer': 'bad', 'cents': -1} ValueError: negative amount -1",
        "docs/events.md": "mail for o-1 (event ",
    }[where.split(":")[0]]
    assert expected in out.decode(), out.decode()


def test_the_docs_contain_the_four_complete_programs() -> None:
    assert sorted(w.split(":")[0] for w in DOC_PROGRAMS) == [
        "docs/dags.md",
        "docs/events.md",
        "docs/queue.md",
        "docs/workflows.md",
    ]
