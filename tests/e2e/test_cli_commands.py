"""The ``azync-flow`` command run for real (``python -m azync_flow.cli`` in a
subprocess) against the test database: tables and ``--json``, paging, export
and replay, a worker importing the user's module, one DSN rule, clean errors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import pytest

from azync_flow import Uncertain, WorkflowContext, activity, workflow
from azync_flow.cli import cli, main
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.store.events import PublishParams, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, EnqueueParams, JobState, Source
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]

SHOP = """
from azync_flow import WorkflowContext, activity, workflow


@activity(name="shop_price")
def price(n: int) -> int:
    return n * 10


@workflow(name="shop_order")
async def order(ctx: WorkflowContext, n: int) -> dict:
    total = await price(n)
    note = await ctx.wait_signal("approve")
    return {"total": total, "note": note}
"""


OTHER = """
from azync_flow import WorkflowContext, workflow


@workflow(name="other_flow")
async def other(ctx: WorkflowContext) -> None:
    return None
"""


@workflow(name="cli_big")
async def cli_big(ctx: WorkflowContext, data: dict[str, Any]) -> None:
    return None


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


class Cmd:
    """``azync-flow ARGS`` in a subprocess; the database from ``$AZYNC_DSN``/``$AZYNC_SCHEMA``."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AZYNC_DSN": dsn,
            "AZYNC_SCHEMA": schema,
            "COLUMNS": "220",
        }

    async def __call__(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> Run:
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "azync_flow.cli", *args],
            cwd=cwd or ROOT,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cmd(pg_dsn: str, store: PostgresStore) -> Cmd:
    return Cmd(pg_dsn, store.schema)


async def test_workflows_list_pages_with_a_cursor_and_previews_payloads(
    cmd: Cmd, store: PostgresStore
) -> None:
    client = Client(store)
    handles = [await client.start(cli_big, {"items": list(range(200))}) for _ in range(3)]
    first = (await cmd("workflows", "list", "--limit", "2", "--json")).json
    assert len(first["items"]) == 2
    assert first["next_cursor"]
    assert all(i["input_preview"].endswith("…") for i in first["items"])
    second = (await cmd("workflows", "list", "--limit", "2", "--cursor", first["next_cursor"],
                        "--json")).json  # fmt: skip
    assert second["next_cursor"] is None
    listed = [i["id"] for i in first["items"] + second["items"]]
    assert sorted(listed) == sorted(str(h.id) for h in handles)
    shown = await cmd("workflows", "list", "--limit", "2")
    assert shown.code == 0
    assert "cli_big" in shown.out
    assert f"next page: --cursor {first['next_cursor']}" in shown.out
    assert "198,199" not in shown.out  # a preview, never the whole payload
    whole = await cmd("workflows", "show", str(handles[0].id))
    assert whole.code == 0
    assert "199" in whole.out
    assert "running" in whole.out


async def test_worker_imports_the_users_module_and_export_is_what_replay_accepts(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "shop_flows.py").write_text(SHOP)
    await cmd("migrate")
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "shop_flows", "--log-level", "ERROR",
        cwd=tmp_path, env=cmd.env,
    )  # fmt: skip
    try:
        started = (await cmd("workflows", "start", "shop_order", "--input", "3", "--json")).json
        wid = started["id"]
        sent = await cmd("workflows", "signal", wid, "approve", "--payload", '"ok"')
        assert (sent.code, sent.out.strip()) == (0, "signal accepted")
        done = await cmd("workflows", "result", wid, "--timeout", "60", "--json")
        assert (done.code, done.json) == (0, {"total": 30, "note": "ok"})
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 30) == 0
    exported = await cmd("workflows", "export", wid)
    (tmp_path / "run.json").write_text(exported.out)
    for app in ("shop_flows", "shop_flows:order"):
        verdict = await cmd("replay", app, "run.json", cwd=tmp_path)
        assert (verdict.code, verdict.out.strip()) == (0, "ok    run.json")
    verdicts = (await cmd("replay", "shop_flows", "run.json", "--json", cwd=tmp_path)).json
    assert verdicts == [{"file": "run.json", "verdict": "ok", "error": None}]
    lines = await cmd("workflows", "history", wid, "--json")
    (tmp_path / "history.jsonl").write_text(lines.out)
    rejected = await cmd("replay", "shop_flows", "history.jsonl", cwd=tmp_path)
    assert rejected.code == 2
    assert rejected.err.startswith("azync-flow: error: malformed history history.jsonl")
    assert "azync-flow workflows export ID > run.json" in rejected.err
    (tmp_path / "other_flows.py").write_text(OTHER)
    foreign = await cmd("replay", "other_flows", "run.json", cwd=tmp_path)
    assert (foreign.code, "which 'other_flows' does not define" in foreign.err) == (2, True)
    table = await cmd("workflows", "history", wid)
    assert "ActivityScheduled" in table.out
    assert "SignalReceived" in table.out


async def test_a_worker_serving_a_task_queue_runs_the_runs_started_on_it(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "shop_flows.py").write_text(SHOP)
    await cmd("migrate")
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "shop_flows", "--log-level", "ERROR",
        "--task-queue", "shop", "--task-queue", "spare", cwd=tmp_path, env=cmd.env,
    )  # fmt: skip
    try:
        started = await cmd(
            "workflows", "start", "shop_order", "--input", "2", "--task-queue", "shop", "--json"
        )
        wid = started.json["id"]
        await cmd("workflows", "signal", wid, "approve", "--payload", '"ok"')
        done = await cmd("workflows", "result", wid, "--timeout", "60", "--json")
        assert (done.code, done.json) == (0, {"total": 20, "note": "ok"})
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 30) == 0
    shown = await cmd("workflows", "show", wid)
    assert "task queue" in shown.out
    assert "shop" in shown.out
    listed = (await cmd("jobs", "list", "--source", "workflow", "--json")).json
    assert {i["task_queue"] for i in listed["items"]} == {"shop"}


async def test_dsn_flag_beats_the_environment_which_beats_the_embedded_server(
    cmd: Cmd, pg_dsn: str, tmp_path: Path
) -> None:
    bad = {**cmd.env, "AZYNC_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    assert (await cmd("workflows", "list", env=bad)).code == 5
    assert (await cmd("workflows", "list", "--dsn", pg_dsn, env=bad)).code == 0
    assert (await cmd("workflows", "list")).code == 0  # $AZYNC_DSN
    embedded = {k: v for k, v in cmd.env.items() if k not in ("AZYNC_DSN", "AZYNC_SCHEMA")}
    embedded["AZYNC_EMBEDDED_DIR"] = str(tmp_path / "pgdata")
    assert (await cmd("migrate", env=embedded)).code == 0
    missing = await cmd("workflows", "signal", str(uuid.uuid4()), "go", env=embedded)
    assert missing.code == 3  # reached the embedded server: no such execution
    assert "no database" not in missing.err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["workflows", "show", "not-a-uuid"], 2, "not a valid UUID"),
        (["workflows", "show", str(uuid.UUID(int=7))], 3, "does not exist"),
        (["workflows", "signal", str(uuid.UUID(int=7)), "go", "--payload", "{bad"], 2, "JSON"),
        (["workflows", "start", "x", "--input", "NaN"], 2, "NaN"),
        (["workflows", "start", "x", "--input", "@/no/such/file.json"], 2, "cannot read"),
        (["workflows", "list", "--cursor", "garbage!"], 2, "not a cursor"),
        (["workflows", "list", "--state", "sleepy"], 2, "invalid choice"),
        (["jobs", "show", str(uuid.UUID(int=7))], 3, ""),
        (["dags", "show", str(uuid.UUID(int=7))], 3, ""),
        (["events", "show", str(uuid.UUID(int=7))], 3, ""),
        (["events", "replay"], 2, "--type"),
        (["workflows", "frobnicate"], 2, "No such command"),
        (["replay", "no_such_module_here", "x.json"], 2, "cannot import"),
        (["workflows", "start", "", "--input", "{}"], 2, "workflow name must not be empty"),
        (["workflows", "signal", str(uuid.UUID(int=7)), ""], 2, "signal name must not be empty"),
        (["workflows", "result", str(uuid.UUID(int=7)), "--timeout", "-1"], 2, "x>=0"),
        (["workflows", "start", "x", "--run-timeout", "soon"], 2, "not a duration"),
        (["workflows", "start", "x", "--execution-timeout", "0s"], 2, "must be positive"),
        (["workflows", "list", "--name", ""], 2, "--name must not be empty"),
        (["workflows", "update", str(uuid.UUID(int=7)), "u", "--timeout", "-1"], 2, "x>=0"),
    ],
    ids=[
        "malformed-id", "unknown-id", "bad-json", "nan", "missing-file", "bad-cursor",
        "bad-state", "unknown-job", "unknown-dag", "unknown-event", "replay-everything",
        "unknown-command", "bad-app", "empty-workflow-name", "empty-signal-name",
        "negative-timeout", "bad-run-timeout", "zero-execution-timeout", "empty-name-filter",
        "negative-update-timeout",
    ],
)  # fmt: skip
async def test_bad_input_is_one_clear_line_and_a_nonzero_exit(
    cmd: Cmd, argv: list[str], code: int, message: str
) -> None:
    got = await cmd(*argv)
    assert got.code == code
    (line,) = got.err.strip().splitlines()
    assert line.startswith("azync-flow: error: ")
    assert message in line


async def test_an_app_with_a_syntax_error_or_a_failing_body_is_one_usage_line(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "typo_flows.py").write_text("def f(:\n")
    (tmp_path / "raising_flows.py").write_text("raise RuntimeError('no config')\n")
    for app, why in (("typo_flows", "SyntaxError"), ("raising_flows", "RuntimeError")):
        got = await cmd("replay", app, "x.json", cwd=tmp_path)
        assert got.code == 2
        (line,) = got.err.strip().splitlines()
        assert line.startswith(f"azync-flow: error: cannot import '{app}'")
        assert why in line


async def test_an_unparseable_dsn_is_one_usage_line_and_exit_2_for_every_command(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "other_flows.py").write_text(OTHER)
    commands = [
        ["workflows", "list"], ["jobs", "list"], ["stats"], ["migrate"], ["ui"],
        ["worker", "other_flows"],
    ]  # fmt: skip
    for argv in commands:
        for dsn in ("notadsn", "postgresql://u:secret@127.0.0.1:99999/x"):
            got = await cmd(*argv, "--dsn", dsn, cwd=tmp_path)
            assert got.code == 2, (argv, got.err)
            (line,) = got.err.strip().splitlines()
            assert line.startswith("azync-flow: error: --dsn ")
            assert "is not a PostgreSQL URI" in line
            assert "postgresql://user@host:5432/db" in line
            assert "secret" not in line
    from_env = await cmd("stats", env={**cmd.env, "AZYNC_DSN": "notadsn"})
    assert from_env.code == 2
    assert "$AZYNC_DSN 'notadsn' is not a PostgreSQL URI: it has no scheme" in from_env.err


async def test_a_dsn_setting_the_driver_refuses_is_one_usage_line_and_exit_2(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "other_flows.py").write_text(OTHER)
    dsn = cmd.env["AZYNC_DSN"]
    bogus = dsn + ("&" if "?" in dsn else "?") + "sslmode=bogus"
    for argv in (["workflows", "list"], ["stats"], ["migrate"], ["worker", "other_flows"]):
        got = await cmd(*argv, "--dsn", bogus, cwd=tmp_path)
        assert got.code == 2, (argv, got.err)
        (line,) = got.err.strip().splitlines()
        assert line.startswith("azync-flow: error: [bad_dsn] the driver refused the DSN: "), line
        assert "sslmode" in line
        assert "ClientConfigurationError" not in line


async def test_a_dsn_to_a_closed_port_is_one_cannot_connect_line_and_exit_5(
    cmd: Cmd, tmp_path: Path
) -> None:
    (tmp_path / "other_flows.py").write_text(OTHER)
    closed = "postgresql://postgres@127.0.0.1:1/x"
    for argv in (["workflows", "list"], ["worker", "other_flows"]):
        got = await cmd(*argv, "--dsn", closed, cwd=tmp_path)
        assert got.code == 5, (argv, got.err)
        (line,) = got.err.strip().splitlines()
        assert line.startswith("azync-flow: error: [store_unavailable] cannot connect")


async def test_workflows_start_sets_timeouts_that_show_displays(cmd: Cmd) -> None:
    await cmd("migrate")
    started = await cmd(
        "workflows", "start", "shop_order", "--input", "1", "--execution-timeout", "2h",
        "--run-timeout", "30m", "--json",
    )  # fmt: skip
    wid = started.json["id"]
    shown = (await cmd("workflows", "show", wid, "--json")).json
    assert (shown["execution_timeout"], shown["run_timeout"]) == (7200.0, 1800.0)
    assert shown["timeout_at"] is not None
    text = (await cmd("workflows", "show", wid)).out
    (line,) = [x for x in text.splitlines() if x.startswith("timeouts")]
    assert "execution 7200s, run 1800s, deadline " in line


async def test_stats_shows_depths_oldest_pending_dead_letters_and_only_busy_days(
    cmd: Cmd, store: PostgresStore
) -> None:
    for _ in range(2):
        await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind="email", payload=b"{}"))
    (job,) = await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind="email", limit=1, lease=timedelta(seconds=30))
    )
    await store.dead(job.id, job.lease_token, "smtp down")  # type: ignore[arg-type]
    out = (await cmd("stats", "--json")).json
    email = out["depths"]["queue"]["email"]
    assert (email["pending"], email["dead"]) == (1, 1)
    assert email["oldest_pending_age"] >= 0
    assert out["dead_letters"] == {"queue": {"email": 1}}
    assert (await cmd("--json", "stats")).json["dead_letters"] == out["dead_letters"]
    (day,) = out["daily"]["queue"]  # the window has many days; only the busy one shows
    assert day["enqueued"] == 2
    table = await cmd("stats")
    assert table.code == 0
    for title in ("Depths per kind", "Daily counts", "Dead letters"):
        assert title in table.out
    assert table.out.count("email") == 2  # a depth row and a dead-letter row


async def test_jobs_list_show_pause_resume_archive_retry_delete(
    cmd: Cmd, store: PostgresStore
) -> None:
    jid = uuid.uuid4()
    await store.enqueue(EnqueueParams(id=jid, kind="report", payload=b'{"rows": 12}'))
    listed = (await cmd("jobs", "list", "--kind", "report", "--json")).json
    assert ([i["id"] for i in listed["items"]], listed["total"]) == ([str(jid)], 1)
    shown = await cmd("jobs", "show", str(jid))
    assert '"rows": 12' in shown.out
    for verb, state in (
        ("pause", JobState.PAUSED),
        ("resume", JobState.PENDING),
        ("archive", JobState.DEAD),
        ("retry", JobState.PENDING),
    ):
        got = await cmd("jobs", verb, str(jid))
        assert got.code == 0, got.err
        assert (await store.get_job(Source.QUEUE, jid)).state == state
    dead = (await cmd("jobs", "dead", "--json")).json
    assert dead["items"] == []
    assert (await cmd("jobs", "delete", str(jid))).code == 0
    assert (await cmd("jobs", "show", str(jid))).code == 3
    await store.enqueue(EnqueueParams(id=jid, kind="report", payload=b"{}"))
    await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind="report", limit=1, lease=timedelta(seconds=30))
    )
    running = await cmd("jobs", "delete", str(jid))
    assert (running.code, "running now" in running.err) == (3, True)
    assert (await store.get_job(Source.QUEUE, jid)).state == JobState.ACTIVE


saga = DAG("cli_saga")


@saga.task
async def reserve(ctx: TaskContext) -> dict[str, bool]:
    return {"ok": True}


saga.signal("approved", after=[reserve])


async def test_dags_list_show_tasks_signal_pause_retry_cancel_compensate(
    cmd: Cmd, store: PostgresStore
) -> None:
    client = DAGClient(store)
    run = await client.run(saga, {"order": 1})
    listed = (await cmd("dags", "list", "--json")).json
    assert [i["id"] for i in listed["items"]] == [str(run.id)]
    assert "cli_saga" in (await cmd("dags", "show", str(run.id))).out
    tasks = (await cmd("dags", "tasks", str(run.id), "--json")).json
    assert sorted(t["key"] for t in tasks) == ["approved", "reserve"]
    sent = (await cmd("dags", "signal", str(run.id), "approved", "--payload", "{}",
                      "--message-id", "m1", "--json")).json  # fmt: skip
    assert sent == {"delivered": 0, "deduplicated": False}  # buffered: reserve has not run
    for verb, state in (("pause", "paused"), ("retry", "running"), ("cancel", "cancelled")):
        assert (await cmd("dags", verb, str(run.id))).code == 0
        assert (await client.get(run.id)).state == state
    other = await client.run(saga, {"order": 2})
    assert (await cmd("dags", "compensate", str(other.id))).code == 0
    assert (await client.get(other.id)).state != "running"


async def test_events_list_show_subscribers_and_replay(cmd: Cmd, store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="mailer", event_type="order.placed"))
    eid = uuid.uuid4()
    await store.publish(PublishParams(id=eid, type="order.placed", payload=b'{"order": 7}'))
    listed = (await cmd("events", "list", "--type", "order.placed", "--json")).json
    assert ([i["id"] for i in listed["items"]], listed["items"][0]["deliveries"]) == (
        [str(eid)],
        1,
    )
    assert '"order": 7' in (await cmd("events", "show", str(eid))).out
    assert "mailer" in (await cmd("events", "subscribers")).out
    replayed = (await cmd("events", "replay", "--type", "order.placed", "--json")).json
    assert replayed == {"replayed": 1}
    deliveries = (await cmd("jobs", "list", "--source", "event", "--json")).json
    assert deliveries["total"] == 2


def _commands(group: click.Group, path: list[str]) -> list[list[str]]:
    found = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        found.append([*path, name])
        if isinstance(command, click.Group):
            found += _commands(command, [*path, name])
    return found


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    paths = _commands(cli, [])
    assert len(paths) > 40
    for path in [[], *paths]:
        assert main([*path, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Example:" in out, path
        assert "  azync-flow " in out.split("Example:")[1], path


async def test_workflows_cancel_terminate_and_resume_verbs(cmd: Cmd) -> None:
    first = (await cmd("workflows", "start", "nobody_runs_this", "--json")).json["id"]
    second = (await cmd("workflows", "start", "nobody_runs_this", "--input", "2", "--json")).json
    ended = await cmd("workflows", "terminate", first, "--reason", "typo", "--by", "ann", "--json")
    assert ended.json == {"state": "terminated", "reason": "terminated by ann: typo"}
    listed = (await cmd("workflows", "list", "--state", "terminated", "--json")).json
    assert [i["id"] for i in listed["items"]] == [first]
    not_suspended = await cmd("workflows", "resume", second["id"])
    assert not_suspended.code == 3
    cancelled = await cmd("workflows", "cancel", second["id"])
    assert (cancelled.code, cancelled.out.strip()) == (0, "cancellation requested")


@activity(name="cli_transfer", idempotent=False)
def cli_transfer(amount: int) -> str:
    raise Uncertain("bank timed out")


@workflow(name="cli_payout_e2e")
async def cli_payout_e2e(ctx: WorkflowContext, amount: int) -> str:
    return str(await cli_transfer(amount))


async def test_uncertain_list_and_resolve_as_tables(cmd: Cmd, store: PostgresStore) -> None:
    handle = await Client(store).start(cli_payout_e2e, 70)
    await LocalRuntime(store, Registry([cli_payout_e2e], [cli_transfer])).run_until_idle()
    (op,) = await Client(store).list_uncertain()
    listed = await cmd("uncertain", "list")
    assert str(op.operation_id) in listed.out
    # the reason as stored, its type named once, cut to fit
    assert "Uncertain: bank timed" in listed.out
    suspended = await cmd("workflows", "show", str(handle.id))
    assert "suspended" in suspended.out
    assert str(op.operation_id) in suspended.out
    decided = await cmd("uncertain", "resolve", str(op.operation_id), "--decision", "complete",
                        "--result", '"wired"', "--note", "statement", "--by", "ann")  # fmt: skip
    assert decided.code == 0
    assert decided.out.startswith(f"complete: operation {op.operation_id} is succeeded")


async def test_tables_fit_the_terminal_with_one_line_per_row(
    cmd: Cmd, store: PostgresStore
) -> None:
    client = Client(store)
    handles = [await client.start(cli_big, {"note": "x" * 300, "n": n}) for n in range(3)]
    narrow = {**cmd.env, "COLUMNS": "110"}
    shown = await cmd("workflows", "list", env=narrow)
    lines = shown.out.splitlines()
    assert max(len(line) for line in lines) <= 110
    rows = [line for line in lines if "cli_big" in line]
    assert sorted(line.split()[1] for line in rows) == sorted(str(h.id) for h in handles)
    assert all("…" in line for line in rows)  # the input preview was cut to fit


async def test_worker_help_shows_the_app_forms_as_a_list(cmd: Cmd) -> None:
    shown = await cmd("worker", "--help")
    lines = [line.strip() for line in shown.out.splitlines()]
    assert sum(line.startswith("* ") for line in lines) == 2
    assert any(line.startswith("* what to register on a new worker") for line in lines)


@pytest.mark.parametrize("bad", ["a b", "it's", "x" * 201, "héllo"])
async def test_worker_refuses_a_bad_identity_before_loading_the_app(cmd: Cmd, bad: str) -> None:
    shown = await cmd("worker", "no_such_app_module", "--identity", bad)
    assert shown.code == 2
    assert "--identity: invalid worker identity" in shown.err
    assert "1-200 ASCII letters" in shown.err
    assert "no_such_app_module" not in shown.err


async def test_the_help_states_what_an_identity_and_an_execution_id_may_be(cmd: Cmd) -> None:
    worker = await cmd("worker", "--help")
    assert "1-200 ASCII letters, digits and ._/@-" in " ".join(worker.out.split())
    start = await cmd("workflows", "start", "--help")
    assert "Execution id, a UUID" in " ".join(start.out.split())
