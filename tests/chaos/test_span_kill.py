"""Spans of a SIGKILLed worker: with configure_otlp's 200 ms batch delay, a
workflow task and an activity attempt that ended reach the real OTLP receiver
within a fraction of the SDK's 5 s default, with no flush, so a kill right
after loses only what ended in the last delay."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.testing_otel import OtlpHttpReceiver, ReceivedSpan
from tests.chaos._span_kill_app import span_order

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_span_kill_app.py")


async def test_spans_that_ended_before_a_sigkill_reached_the_receiver(
    store: PostgresStore, schema: str, pg_dsn: str
) -> None:
    handle = await Client(store).start(span_order, "o-1")
    run_id = str(handle.id)

    def ended(spans: list[ReceivedSpan]) -> bool:
        names = [s.name for s in spans if s.attributes.get("azync.run_id") == run_id]
        # the second pass is the one the activity's completion woke
        return "activity span_charge" in names and names.count("workflow.task span_order") >= 2

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with OtlpHttpReceiver() as rx:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(APP), pg_dsn, schema, rx.endpoint,
            env={**env, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        try:
            # the SDK's 5 s default delay would miss this deadline
            await asyncio.to_thread(rx.wait_for, ended, 4.0)
        finally:
            proc.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
        mine = [s for s in rx.spans() if s.attributes.get("azync.run_id") == run_id]
        [charge] = [s for s in mine if s.name == "activity span_charge"]
        assert charge.attributes["azync.outcome"] == "succeeded"
