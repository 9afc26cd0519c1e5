"""Payloads through history events: byte-for-byte round trips and the
cross-process check (replays in fresh processes with different PYTHONHASHSEEDs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.codec import encode_value
from azync_flow.errors import PayloadEncodeError, PayloadTooLargeError
from azync_flow.replay import (
    ActivityCompleted,
    ActivityScheduled,
    PassStatus,
    RecordedHistory,
    SignalReceived,
    decode_event,
    encode_event,
    run_pass,
)
from azync_flow.workflow import WorkflowContext
from tests.unit.test_replay_c03_child import c03_gather, c03_set_order, c03_wait, c3
from tests.unit.test_replay_sim import MODES, Sim


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@activity(name="echo")
def echo(x: Any) -> Any:
    return x


@activity(name="raw_bytes")
def raw_bytes(x: int) -> bytes:
    return b"\x00\xff"


@workflow(name="echo_wf")
async def echo_wf(ctx: WorkflowContext, value: Any) -> Any:
    got = await echo(value)
    sig = await ctx.wait_signal("s")
    return [got, sig]


TRICKY = [
    {"s": "a\u0000b"},
    "emoji 🎉 and astral 𝄞",
    [[[[[[[[[[["deep"]]]]]]]]]]],
    {"z": 1, "a": 2, "\u0000key": None},
]


@pytest.mark.parametrize("value", TRICKY)
def test_values_round_trip_exactly_through_events_input_and_signals(value: Any, mode: str) -> None:
    """NUL, emoji, nesting and key order survive input, result and signal payloads."""
    sim = Sim(echo_wf, value, mode=mode, activities={"echo": echo})
    sim.signal("s", value)
    sim.run()
    assert sim.result() == [value, value]
    encoded = msgspec.json.encode(value)
    completed = next(e.event for e in sim.history if isinstance(e.event, ActivityCompleted))
    assert bytes(completed.result) == encoded
    received = next(e.event for e in sim.history if isinstance(e.event, SignalReceived))
    assert bytes(received.payload) == encoded


def test_ten_mib_value_round_trips_byte_for_byte() -> None:
    """a 10 MiB value is stored and decoded unchanged."""
    big = msgspec.Raw(b'"' + b"x\\u0000" * (10 * 1024 * 1024 // 7) + b'"')
    event = ActivityCompleted(scheduled_seq=1, result=big)
    type_name, payload = encode_event(event)
    assert len(payload) > 10 * 1024 * 1024 // 7 * 7
    back = decode_event(type_name, payload)
    assert bytes(back.result) == bytes(big)
    sched = ActivityScheduled(seq=1, name="big", input=msgspec.Raw(b"[" + bytes(big) + b"]"))
    assert bytes(decode_event(*encode_event(sched)).input) == b"[" + bytes(big) + b"]"


def test_bytes_results_round_trip_as_base64() -> None:
    """a bytes result with NUL/0xff decodes back to the same bytes."""

    @workflow(name="bytes_wf")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        data = await raw_bytes(1)
        assert data == b"\x00\xff"
        return data.hex()

    sim = Sim(wf, None, activities={"raw_bytes": raw_bytes})
    sim.run()
    assert sim.result() == "00ff"


def test_lone_surrogate_is_a_typed_encode_error_not_a_stuck_run() -> None:
    """a value that cannot be encoded fails at once with a typed error."""
    with pytest.raises(PayloadEncodeError):
        encode_value("\ud800")

    @workflow(name="surrogate")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        return "\ud800"

    out = Sim(wf, None).run_pass()
    assert out.status is PassStatus.FAILED
    assert out.error.error_type == "PayloadEncodeError"
    assert out.new_events[-1][1] == "WorkflowFailed"


def test_oversized_activity_input_raises_at_the_call_site() -> None:
    """a value over the limit is rejected when written, with a typed error."""

    @workflow(name="oversize")
    async def wf(ctx: WorkflowContext, size: int) -> str:
        try:
            await echo("x" * size)
        except PayloadTooLargeError as err:
            return f"too large: {err.size} > {err.limit}"
        return "sent"

    info_kwargs = {"max_payload_bytes": 1000}
    from azync_flow.replay import WorkflowInfo

    info = WorkflowInfo(execution_id=__import__("uuid").UUID(int=1), name="oversize")
    out = run_pass(wf, b"5000", [], info=info, **info_kwargs)
    assert out.status is PassStatus.COMPLETED
    assert msgspec.json.decode(out.result) == "too large: 5004 > 1000"
    assert out.commands == []


# --- replay in fresh processes -------------------------------------------------------


def test_c03_replay_in_twenty_fresh_processes_gives_the_same_verdict(tmp_path: Path) -> None:
    """FIRST_COMPLETED over three near-simultaneous completions, the gather
    control, and code iterating the *set* asyncio.wait returns all replay cleanly in
    20 processes with different PYTHONHASHSEEDs (workflow tasks and futures hash by
    creation order, so set order does not depend on memory addresses)."""
    paths = []
    for defn in (c03_wait, c03_gather, c03_set_order):
        sim = Sim(defn, None, activities={"C3": c3})
        first = sim.run_pass()
        for seq in (2, 3, 1, *range(4, len(first.commands) + 1)):  # all land before a pass
            sim.complete(seq, "xyzwvu"[seq - 1])
        sim.run()
        assert sim.status is PassStatus.COMPLETED
        path = tmp_path / f"{defn.name}.json"
        path.write_bytes(RecordedHistory.from_rows(defn.name, sim.input, sim.history).to_json())
        paths.append(str(path))
    root = Path(__file__).resolve().parents[2]
    code = f"from tests.unit.test_replay_c03_child import main; main({paths!r})"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for seed in range(20)
    ]
    verdicts = [p.communicate(timeout=120)[0].decode().split() for p in procs]
    assert verdicts == [["OK", "OK", "OK"]] * 20
