"""The testing kit with a payload codec: the environment's worker and client
write and read through it (time skipping included), and recorded
histories replay with it, or fail naming the file when its key is missing."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from azync_flow import WorkflowContext, activity, workflow
from azync_flow.errors import PayloadCodecError
from azync_flow.payload_codec import MAGIC, AesGcmCodec, GzipCodec, use_payload_codec
from azync_flow.testing import WorkflowEnvironment, replay_histories

KEY = os.urandom(32)
CODEC = [GzipCodec(), AesGcmCodec({"kit": KEY}, "kit")]


@activity(name="kit_codec_greet")
async def greet(name: str) -> dict[str, str]:
    return {"hello": name}


@workflow(name="kit_codec_remind")
async def remind(ctx: WorkflowContext, name: str) -> dict[str, str]:
    await ctx.sleep(timedelta(days=7))
    return await greet(name)


async def test_the_environment_writes_and_reads_through_the_codec_and_histories_replay(
    workflow_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    with use_payload_codec(CODEC):
        env = await workflow_env.start([remind], [greet])
        handle = await env.client.start(remind, "ada-secret")
        assert await handle.result(timeout=30) == {"hello": "ada-secret"}
        history = tmp_path / "remind.json"
        history.write_bytes((await handle.recorded_history()).to_json())
    stored = await env.store.pool.fetchval(  # type: ignore[attr-defined]
        "SELECT input FROM azync_workflow_executions WHERE id = $1", handle.id
    )
    assert bytes(stored).startswith(MAGIC)
    assert b"ada-secret" not in history.read_bytes()
    assert replay_histories(history, workflows=[remind], codec=CODEC) == 1
    with use_payload_codec(None), pytest.raises(PayloadCodecError, match=r"remind\.json: "):
        replay_histories(history, workflows=[remind])
