"""`azync-flow schedules ...` driven as the real command in a subprocess
against the test database: create, list, show (next fires local and UTC),
pause, unpause, trigger, backfill, delete, --json, clean errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azync_flow import WorkflowContext, workflow
from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock, WorkflowEnvironment
from tests.e2e.test_cli_commands import Cmd, cmd

__all__ = ["cmd"]


@workflow(name="cli_nightly")
async def cli_nightly(ctx: WorkflowContext, kind: str) -> str:
    return kind


async def test_schedules_commands_create_show_operate_and_delete(
    cmd: Cmd,
    store: PostgresStore,
) -> None:
    made = await cmd(
        "schedules",
        "create",
        "nightly",
        "--cron",
        "30 1 * * *",
        "--tz",
        "Europe/London",
        "--workflow",
        "cli_nightly",
        "--input",
        '"daily"',
        "--overlap",
        "buffer_one",
        "--catchup-window",
        "2h",
    )
    assert made.code == 0, made.err
    assert "created schedule nightly; next fire" in made.out

    listed = await cmd("schedules", "list")
    assert "nightly" in listed.out
    assert "workflow cli_nightly" in listed.out
    shown = await cmd("schedules", "show", "nightly", "--json")
    assert shown.code == 0, shown.err
    data = shown.json
    assert data["policy"] == {
        "overlap": "buffer_one",
        "catchup_window": 7200.0,
        "buffer_limit": 100,
    }
    assert data["counts"] == {"started": 0, "skipped": 0, "missed": 0}
    assert len(data["next_fires"]) == 5
    assert {datetime.fromisoformat(f["local"]).strftime("%H:%M") for f in data["next_fires"]} == {
        "01:30"
    }
    moved = await cmd("schedules", "update", "nightly", "--cron", "0 2 * * *", "--note", "later")
    assert moved.code == 0, moved.err
    edits = (await cmd("schedules", "show", "nightly", "--json")).json["recent_changes"]
    assert [
        (e["verb"], e["old_spec"]["cron"], e["new_spec"]["cron"], e["note"]) for e in edits
    ] == [("update", ["30 1 * * *"], ["0 2 * * *"], "later")]
    table = await cmd("schedules", "show", "nightly")
    assert "started / skipped / missed" in table.out
    assert "later" in table.out
    assert "NEXT FIRE (LOCAL)" in table.out
    assert "Europe/London" in table.out

    assert (await cmd("schedules", "pause", "nightly", "--note", "db move")).code == 0
    assert (await cmd("schedules", "list", "--json")).json["items"][0]["paused"] is True
    (paused_row,) = [r for r in (await cmd("schedules", "list")).out.splitlines() if "nightly" in r]
    assert "none (paused)" in paused_row
    assert (await cmd("schedules", "unpause", "nightly")).code == 0

    triggered = await cmd("schedules", "trigger", "nightly", "--json")
    assert triggered.code == 0, triggered.err
    now = datetime.now(UTC)
    back = await cmd(
        "schedules",
        "backfill",
        "nightly",
        "--start",
        (now - timedelta(days=3)).isoformat(),
        "--end",
        now.isoformat(),
    )
    assert back.code == 0, back.err
    assert "requested 3 runs" in back.out

    # a worker's scheduler starts what was requested
    env = await WorkflowEnvironment(store, MovableClock()).start(workflows=[cli_nightly])
    await env.settle()
    runs = (await cmd("schedules", "show", "nightly", "--json")).json["recent_runs"]
    await env.close()
    assert len(runs) == 4
    assert {(r["outcome"], r["state"]) for r in runs} == {("started", "succeeded")}
    assert triggered.json["run_id"] in {r["run_id"] for r in runs}

    assert (await cmd("schedules", "delete", "nightly")).code == 0
    assert "no schedules" in (await cmd("schedules", "list")).out


async def test_schedules_bad_input_is_one_clear_line_and_a_nonzero_exit(
    cmd: Cmd,
) -> None:
    bad_cron = await cmd("schedules", "create", "x", "--cron", "every day", "--job", "k")
    assert bad_cron.code == 2
    assert "invalid cron expression" in bad_cron.err
    bad_tz = await cmd(
        "schedules", "create", "x", "--cron", "0 1 * * *", "--tz", "Mars/X", "--job", "k"
    )
    assert bad_tz.code == 2
    assert "unknown time zone" in bad_tz.err
    two = await cmd("schedules", "create", "x", "--every", "1h", "--job", "k", "--dag", "d")
    assert two.code == 2
    assert "exactly one of" in two.err
    assert (await cmd("schedules", "create", "x", "--every", "1h", "--job", "k")).code == 0
    again = await cmd("schedules", "create", "x", "--every", "1h", "--job", "k")
    assert again.code != 0
    assert "exists" in again.err
    # one time rule for every option, as for `events --since`: no zone = UTC
    naive = await cmd(
        "schedules", "backfill", "x", "--start", "2024-01-01T00:00", "--end", "2024-01-01T02:00"
    )
    assert (naive.code, naive.out.strip()) == (0, "requested 3 runs of schedule x"), naive.err
    later = await cmd("schedules", "create", "y", "--every", "1h", "--job", "k",
                      "--start", "2030-01-01T00:00", "--json")  # fmt: skip
    assert later.code == 0, later.err
    assert later.json["next_fires"][0]["nominal_at"].startswith("2030-01-01T00:00:00")
    vague = await cmd("schedules", "backfill", "x", "--start", "yesterday", "--end", "1h")
    assert vague.code == 2
    assert "--start 'yesterday' is neither an ISO time" in vague.err
    missing = await cmd("schedules", "show", "nope")
    assert missing.code != 0
    assert "nope" in missing.err


async def test_schedules_update_with_nothing_to_change_and_a_bad_id_exit_2(cmd: Cmd) -> None:
    assert (await cmd("schedules", "create", "u1", "--every", "1h", "--job", "k")).code == 0
    empty = await cmd("schedules", "update", "u1")
    assert empty.code == 2
    assert "nothing to change in schedule 'u1'" in empty.err
    bad = await cmd("schedules", "create", "a b/{x}", "--every", "1h", "--job", "k")
    assert bad.code == 2
    assert "may contain only letters, digits and" in bad.err


async def test_schedules_create_names_an_empty_target_and_a_paused_one_has_no_next_fire(
    cmd: Cmd,
) -> None:
    empty = await cmd("schedules", "create", "e1", "--every", "5s", "--workflow", "")
    assert empty.code == 2
    assert "scheduled workflow name must not be empty" in empty.err
    paused = await cmd("schedules", "create", "p1", "--every", "5s", "--job", "k", "--paused")
    assert (paused.code, paused.out.strip()) == (0, "created schedule p1; next fire none (paused)")
