"""The tracing sample, run as a user would: the real workflow runtime's trace reaches an
OTLP receiver, prints on the console without one, and a failed export is reported as such."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from azync_flow.testing import drop_schema, unique_schema
from azync_flow.testing_otel import OtlpHttpReceiver, nesting_violations

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "tracing" / "run_traced.py"
# the order's trace: nine spans besides its workflow passes, and how many
# passes a run may take (see the collector test for why it varies)
FIXED_SPANS = 9
PASSES = range(4, 8)


def run_sample(pg_dsn: str, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"AZYNC_DSN": pg_dsn, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(SAMPLE), "--schema", schema, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def test_tracing_sample_exports_the_workflow_runtimes_trace_for_the_order(
    pg_dsn: str,
) -> None:
    schema = unique_schema("trace_sample")
    try:
        with OtlpHttpReceiver() as rx:
            out = run_sample(pg_dsn, schema, "--endpoint", rx.endpoint)
            assert out.returncode == 0, out.stderr
            spans = rx.wait_for(lambda s: len(s) >= 13)
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
    assert start.attributes["azync.state"] == "succeeded"
    assert nesting_violations(spans) == []
    assert {s.trace_id for s in spans} == {checkout.trace_id}
    assert {s.service_name for s in spans} == {"azync-flow-orders"}
    passes = by_name["workflow.task order"]
    # one pass per step plus the one that completes; the signal, sent while the
    # first activity runs, may add a pass of its own that finds nothing to do,
    # and on a loaded machine a completion that misses the cached run's fold
    # gets a pass of its own: every pass is in the run's trace all the same
    assert len(passes) in PASSES
    assert all(p.parent_span_id == start.span_id for p in passes)
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
    assert len(spans) == FIXED_SPANS + len(passes)
    assert f"order run {run_id} finished" in out.stdout
    assert "%22azync.run_id%22%3A%20%22" + run_id in out.stdout
    assert f"spans delivered: {len(spans)}, failed: 0" in out.stdout


async def test_tracing_sample_reports_a_failed_export_and_exits_1(pg_dsn: str) -> None:
    schema = unique_schema("trace_sample")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        out = run_sample(pg_dsn, schema, "--endpoint", closed)
    finally:
        await drop_schema(pg_dsn, schema)
    assert out.returncode == 1, out.stdout + out.stderr
    # every span failed, none delivered; how many passes the run took depends on
    # when the signal lands (the span count itself is pinned by the test above)
    tally = re.search(r"spans delivered: 0, failed: (\d+)\b", out.stdout)
    assert tally is not None, out.stdout
    assert int(tally.group(1)) >= FIXED_SPANS + PASSES.start, out.stdout
    assert "export failed:" in out.stderr
    assert "True" not in out.stdout


async def test_tracing_sample_prints_spans_on_the_console_without_a_collector(
    pg_dsn: str,
) -> None:
    schema = unique_schema("trace_sample")
    try:
        out = run_sample(pg_dsn, schema, "--console")
    finally:
        await drop_schema(pg_dsn, schema)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("span ")]
    passes = [line for line in lines if line.startswith("span workflow.task order  ")]
    assert len(passes) in PASSES
    assert len(lines) == FIXED_SPANS + len(passes)
    run = next(line for line in lines if line.startswith("span workflow order  "))
    assert "azync.state=succeeded" in run
    assert any(line.startswith("span activity charge  ") for line in lines)
    assert len({line.split("trace=")[1].split()[0] for line in lines}) == 1  # one trace
    assert f"spans delivered: {len(lines)}, failed: 0" in out.stdout
