"""A malformed history file is reported as HistoryFileError naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from azync_flow import workflow
from azync_flow.cli import main
from azync_flow.errors import HistoryFileError
from azync_flow.replay import Replayer
from azync_flow.workflow import WorkflowContext


@workflow(name="hf_noop")
async def noop(ctx: WorkflowContext, n: int) -> int:
    return n


GOOD = b'{"workflow_name": "hf_noop", "input": [1], "events": []}'


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"workflow_name": 5, "events": []}', "not a recorded history"),
        (
            b'{"workflow_name": "hf_noop", "events": [{"seq": 1, "type": "Nope", "payload": {}}]}',
            "event seq 1",
        ),
        (
            b'{"workflow_name": "hf_noop", "events": '
            b'[{"seq": 1, "type": "TimerFired", "payload": {"timer_seq": "y"}}]}',
            "event seq 1",
        ),
    ],
    ids=["not-json", "wrong-shape", "unknown-event", "bad-payload"],
)
def test_malformed_history_file_names_the_file_and_the_problem(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "history.json"
    path.write_bytes(content)
    with pytest.raises(HistoryFileError) as caught:
        Replayer([noop]).replay(path)
    assert caught.value.source == str(path)
    assert str(path) in str(caught.value)
    assert problem in caught.value.problem


def test_well_formed_history_file_still_replays(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_bytes(GOOD)
    assert Replayer([noop]).replay(path).ok


def test_cli_refuses_a_malformed_or_missing_file_as_bad_input_after_replaying_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[]")
    good = tmp_path / "good.json"
    good.write_bytes(GOOD)
    assert main(["replay", f"{__name__}:noop", str(bad), str(good)]) == 2
    out, err = capsys.readouterr()
    assert out == f"ok    {good}\n"
    (line,) = err.splitlines()
    assert line.startswith(f"azync-flow: error: malformed history {bad}: ")
    missing = tmp_path / "nofile.json"
    assert main(["replay", f"{__name__}:noop", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"azync-flow: error: cannot read {str(missing)!r}: No such file or directory\n"
