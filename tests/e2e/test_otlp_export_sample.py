"""The tracing sample, run as a user would, exports the order's trace to an OTLP receiver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from azync_flow.testing import drop_schema, unique_schema
from azync_flow.testing_otel import OtlpHttpReceiver, nesting_violations

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "tracing" / "run_traced.py"


async def test_tracing_sample_exports_one_trace_for_the_order(pg_dsn: str) -> None:
    schema = unique_schema("trace_sample")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"AZYNC_DSN": pg_dsn, "PYTHONPATH": str(REPO)}
    try:
        with OtlpHttpReceiver() as rx:
            out = subprocess.run(  # noqa: ASYNC221 - the sample is a separate process
                [sys.executable, str(SAMPLE), "--endpoint", rx.endpoint, "--schema", schema],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
            assert out.returncode == 0, out.stderr
            spans = rx.wait_for(lambda s: len(s) >= 9)
    finally:
        await drop_schema(pg_dsn, schema)

    by_name: dict[str, list] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    [checkout] = by_name["POST /checkout"]
    [start] = by_name["workflow order"]
    run_id = start.attributes["azync.run_id"]
    assert start.parent_span_id is None
    assert start.links == [(checkout.trace_id, checkout.span_id)]
    assert nesting_violations(spans) == []
    assert {s.trace_id for s in spans} == {checkout.trace_id}
    assert {s.service_name for s in spans} == {"azync-flow-orders"}
    attempts = [s for s in spans if s.name.startswith("activity ")]
    assert sorted(a.name for a in attempts) == [
        "activity charge",
        "activity reserve",
        "activity ship",
    ]
    for a in attempts:
        assert a.parent_span_id == start.span_id
        assert a.attributes["azync.run_id"] == run_id
        assert a.attributes["azync.outcome"] == "succeeded"
        assert a.attributes["azync.attempt"] == 1
        [call] = [s for s in spans if s.parent_span_id == a.span_id]
        assert call.name == f"{a.name.split()[1]} API call"
    [signal] = by_name["signal delivered"]
    assert signal.parent_span_id == start.span_id
    assert len(spans) == 9
    assert f"order run {run_id} finished" in out.stdout
    assert "%22azync.run_id%22%3A%20%22" + run_id in out.stdout
