"""Replay checks in CI: a history recorded on the real store replays against the
same code and fails, naming the file, the seq and both commands, against changed code."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from azync_flow import NonDeterminismError, WorkflowContext, activity, workflow
from azync_flow.errors import HistoryFileError
from azync_flow.testing import WorkflowEnvironment, recorded_histories, replay_histories

ROOT = Path(__file__).resolve().parents[2]


@activity(name="greet")
async def greet(name: str) -> str:
    return f"hello {name}"


@activity(name="shout")
async def shout(name: str) -> str:
    return f"HELLO {name}"


@workflow(name="greeting")
async def greeting(ctx: WorkflowContext, name: str) -> str:
    return await greet(name)


@workflow(name="greeting")
async def greeting_changed(ctx: WorkflowContext, name: str) -> str:
    return await shout(name)  # a different command at the same seq


async def record(env: WorkflowEnvironment, folder: Path, names: list[str]) -> list[Path]:
    paths = []
    for name in names:
        handle = await env.client.start(greeting, name)
        await handle.result(timeout=10)
        path = folder / f"greeting-{name}.json"
        path.write_bytes((await handle.recorded_history()).to_json())
        paths.append(path)
    return paths


async def test_recorded_histories_replay_against_the_code_that_made_them(
    workflow_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = await workflow_env.start([greeting], [greet])
    paths = await record(env, tmp_path, ["ann", "bob"])
    assert replay_histories(tmp_path, workflows=[greeting]) == 2
    assert replay_histories(paths, workflows=[greeting]) == 2
    assert replay_histories(str(paths[0]), workflows=[greeting]) == 1


async def test_changed_code_raises_nondeterminism_with_the_file_the_seq_and_both_commands(
    workflow_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = await workflow_env.start([greeting], [greet])
    [path] = await record(env, tmp_path, ["ann"])
    with pytest.raises(NonDeterminismError) as caught:
        replay_histories(tmp_path, workflows=[greeting_changed])
    err = caught.value
    assert err.seq == 1
    assert "greet" in err.recorded
    assert "shout" not in err.recorded
    assert "shout" in err.new
    assert str(path) in str(err)


def test_an_export_file_with_a_bad_event_is_reported_not_replayed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"workflow_name": "greeting", "events": [{"seq": 1, "type": "Nope", "payload": {}}]}'
    )
    with pytest.raises(HistoryFileError):
        replay_histories(bad, workflows=[greeting])


def test_recorded_histories_makes_one_parameter_per_file_and_refuses_an_empty_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    params = recorded_histories(tmp_path)
    assert [p.id for p in params] == ["a", "b"]
    assert [p.values[0] for p in params] == [tmp_path / "a.json", tmp_path / "b.json"]
    with pytest.raises(FileNotFoundError):
        recorded_histories(tmp_path / "missing")


async def test_a_history_written_by_the_cli_export_is_accepted_as_it_is(
    workflow_env: WorkflowEnvironment, azync_dsn: str, azync_schema: str, tmp_path: Path
) -> None:
    env = await workflow_env.start([greeting], [greet])
    handle = await env.client.start(greeting, "cli")
    await handle.result(timeout=10)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "azync_flow.cli",
        "workflows",
        "export",
        str(handle.id),
        "--dsn",
        azync_dsn,
        "--schema",
        azync_schema,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    exported = tmp_path / "exported.json"
    exported.write_bytes(out)
    assert replay_histories(exported, workflows=[greeting]) == 1
    with pytest.raises(NonDeterminismError):
        replay_histories(exported, workflows=[greeting_changed])
