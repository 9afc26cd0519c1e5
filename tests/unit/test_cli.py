"""The ``azync-flow`` CLI through ``main([...])`` against a real PostgreSQL: every
subcommand's happy path, and clear errors with exit codes (never tracebacks)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from azync_flow import Uncertain, WorkflowContext, activity, workflow
from azync_flow.cli import main
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import EnqueueParams, JobState, Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry
from tests.cli_runner import Cli
from tests.local_runtime import LocalRuntime


@activity(name="cli_wire", idempotent=False)
def cli_wire(amount: int) -> str:
    raise Uncertain("bank timed out")


@workflow(name="cli_payout")
async def cli_payout(ctx: WorkflowContext, amount: int) -> dict[str, Any]:
    receipt = await cli_wire(amount)
    return {"receipt": receipt, "amount": amount}


@workflow(name="cli_greeter")
async def cli_greeter(ctx: WorkflowContext, name: str) -> str:
    greeting = await ctx.wait_signal("greeting")
    return f"{greeting}, {name}"


@workflow(name="cli_greeter")
async def cli_greeter_changed(ctx: WorkflowContext, name: str) -> str:
    await ctx.sleep(1)  # inserted before the recorded signal: non-deterministic
    greeting = await ctx.wait_signal("greeting")
    return f"{greeting}, {name}"


async def _uncertain_run(store: PostgresStore) -> tuple[Any, LocalRuntime]:
    runtime = LocalRuntime(store, Registry([cli_payout], [cli_wire]))
    handle = await Client(store).start(cli_payout, 70)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    return handle, runtime


async def test_migrate_says_which_migrations_it_applied_then_that_it_is_up_to_date(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from azync_flow.store.postgres._migrate import migration_files
    from azync_flow.testing import drop_schema, unique_schema

    schema = unique_schema("cli")
    versions = [v for v, _, _ in migration_files()]
    try:
        code = await asyncio.to_thread(
            main, ["migrate", "--json", "--dsn", pg_dsn, "--schema", schema]
        )
        assert code == 0
        assert json.loads(capsys.readouterr().out) == {
            "schema": schema,
            "applied": versions,
            "migrated": True,
        }
        again = await asyncio.to_thread(main, ["migrate", "--dsn", pg_dsn, "--schema", schema])
        assert again == 0
        assert "already up to date" in capsys.readouterr().out
        code = await asyncio.to_thread(
            main, ["migrate", "--json", "--dsn", pg_dsn, "--schema", schema]
        )
        assert json.loads(capsys.readouterr().out) == {
            "schema": schema,
            "applied": [],
            "migrated": False,
        }
    finally:
        await drop_schema(pg_dsn, schema)


async def test_uncertain_list_and_resolve_complete_resumes_the_run(
    cli: Cli, store: PostgresStore
) -> None:
    handle, runtime = await _uncertain_run(store)
    code, ops, _ = await cli("uncertain", "list")
    assert code == 0
    (op,) = ops
    assert (op["workflow_name"], op["activity"], op["input"]) == ("cli_payout", "cli_wire", [70])
    assert op["reason"].endswith("bank timed out")
    assert op["since"]
    code, out, _ = await cli(
        "uncertain", "resolve", op["operation_id"], "--decision", "complete",
        "--result", '"wired-70"', "--note", "bank statement shows it", "--by", "ann",
    )  # fmt: skip
    assert code == 0
    assert (out["decision"], out["state"], out["decided_by"]) == ("complete", "succeeded", "ann")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == {"receipt": "wired-70", "amount": 70}
    code, _, err = await cli(
        "uncertain", "resolve", op["operation_id"], "--decision", "fail",
        "--error", "x", "--note", "n", "--by", "bob",
    )  # fmt: skip
    assert code == 4
    assert "already resolved 'complete' by ann" in err
    code, ops, _ = await cli("uncertain", "list")
    assert (code, ops) == (0, [])


async def test_uncertain_resolve_fail_and_retry_paths(cli: Cli, store: PostgresStore) -> None:
    handle, runtime = await _uncertain_run(store)
    (op,) = await Client(store).list_uncertain()
    code, out, _ = await cli(
        "uncertain", "resolve", str(op.operation_id), "--decision", "retry",
        "--note", "nothing arrived", "--by", "cy",
    )  # fmt: skip
    assert (code, out["state"]) == (0, "pending")
    await runtime.run_until_idle()  # the retry raises Uncertain again: parked again
    (again,) = await Client(store).list_uncertain()
    assert (again.operation_id, again.attempt) == (op.operation_id, 2)
    code, out, _ = await cli(
        "uncertain", "resolve", str(op.operation_id), "--decision", "fail",
        "--error", "bank refused", "--note", "called the bank", "--by", "cy",
    )  # fmt: skip
    assert (code, out["state"]) == (0, "dead")
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.FAILED
    code, out, _ = await cli("workflows", "result", str(handle.id), "--timeout", "2")
    assert code == 1
    assert out["state"] == "failed"
    assert "bank refused" in out["error"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--decision", "complete", "--result", "{nope", "--note", "n", "--by", "b"], 2, "JSON"),
        (["--decision", "complete", "--note", "n", "--by", "b"], 2, "needs --result"),
        (["--decision", "fail", "--note", "n", "--by", "b"], 2, "needs --error"),
        (["--decision", "maybe", "--note", "n", "--by", "b"], 2, "invalid choice"),
        (["--decision", "retry", "--by", "b"], 2, "--note"),
        (["--decision", "retry", "--note", "", "--by", "b"], 2, "note must not be empty"),
        (["--decision", "retry", "--note", "   ", "--by", "b"], 2, "note must not be empty"),
    ],
    ids=["bad-json", "no-result", "no-error", "bad-decision", "no-note", "empty-note", "blank"],
)
async def test_resolve_rejects_bad_input_and_changes_nothing(
    cli: Cli, store: PostgresStore, argv: list[str], code: int, message: str
) -> None:
    _, _ = await _uncertain_run(store)
    (op,) = await Client(store).list_uncertain()
    got, _, err = await cli("uncertain", "resolve", str(op.operation_id), *argv)
    assert got == code
    assert message in err
    (still,) = await Client(store).list_uncertain()
    assert still.operation_id == op.operation_id


async def test_unknown_and_malformed_ids_are_clear_errors(cli: Cli) -> None:
    missing = str(uuid.uuid4())
    resolve = ["--decision", "retry", "--note", "n", "--by", "b"]
    code, _, err = await cli("uncertain", "resolve", missing, *resolve)
    assert code == 3
    assert "does not exist" in err
    code, _, err = await cli("uncertain", "resolve", "not-a-uuid", *resolve)
    assert code == 2
    assert "not a valid UUID" in err
    code, _, err = await cli("workflows", "show", missing)
    assert code == 3
    code, _, err = await cli("workflows", "history", missing)
    assert code == 3


async def test_unreachable_dsn_or_unmigrated_schema_is_exit_5_without_traceback(
    pg_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZYNC_DSN", "postgresql://nobody@127.0.0.1:1/none")
    for argv in (
        ["uncertain", "list", "--dsn", "postgresql://nobody@127.0.0.1:1/none"],
        ["stats"],  # no --dsn: $AZYNC_DSN is the one used
        ["uncertain", "list", "--dsn", pg_dsn, "--schema", "no_such_schema_here"],
    ):
        assert await asyncio.to_thread(main, argv) == 5
        err = capsys.readouterr().err
        assert err.startswith("azync-flow: error: ")
        assert "Traceback" not in err
    assert "run `azync-flow migrate` first" in err
    assert await asyncio.to_thread(main, ["uncertain", "list", "--dsn", "this is not a dsn"]) == 2
    assert "is not a PostgreSQL URI" in capsys.readouterr().err


async def test_workflow_start_signal_describe_history_result_list(
    cli: Cli, store: PostgresStore
) -> None:
    code, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"ann"', "--key", "k1")
    assert code == 0
    assert out["started"] is True
    wid = out["id"]
    code, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"ann"', "--key", "k1")
    assert (code, out) == (0, {"id": wid, "started": False})
    code, _, err = await cli("workflows", "start", "cli_greeter", "--input", '"bo"', "--key", "k1")
    assert code == 4
    assert "different input" in err
    code, _, err = await cli("workflows", "start", "cli_greeter", "--input", "{bad")
    assert code == 2
    assert "--input is not valid JSON" in err
    runtime = LocalRuntime(store, Registry([cli_greeter], []))
    await runtime.run_until_idle()
    code, out, _ = await cli("workflows", "signal", wid, "greeting", "--payload", '"hello"')
    assert (code, out) == (0, {"accepted": True})
    await runtime.run_until_idle()
    code, out, _ = await cli("workflows", "result", wid, "--timeout", "5")
    assert (code, out) == (0, "hello, ann")
    code, out, _ = await cli("workflows", "show", wid)
    assert (out["state"], out["input"], out["result"]) == ("succeeded", "ann", "hello, ann")
    code, out, _ = await cli("workflows", "history", wid)
    lines = [json.loads(line) for line in out.splitlines()] if isinstance(out, str) else [out]
    assert [e["type"] for e in lines] == ["SignalReceived", "WorkflowCompleted"]
    code, out, _ = await cli("workflows", "list", "--state", "succeeded")
    assert code == 0
    assert [str(e["id"]) for e in out["items"]] == [wid]


async def test_describe_and_list_show_why_a_run_is_suspended(
    cli: Cli, store: PostgresStore
) -> None:
    handle, _ = await _uncertain_run(store)
    (op,) = await Client(store).list_uncertain()
    code, out, _ = await cli("workflows", "show", str(handle.id))
    assert (code, out["state"]) == (0, "suspended")
    assert "bank timed out" in out["suspend_reason"]
    assert out["suspend_operation_id"] == str(op.operation_id)
    assert out["suspend_seq"] >= 1
    code, out, _ = await cli("workflows", "list", "--state", "suspended")
    assert [e["id"] for e in out["items"]] == [str(handle.id)]
    assert "bank timed out" in out["items"][0]["suspend_reason"]


async def test_describe_and_history_show_signals_left_undelivered(
    cli: Cli, store: PostgresStore
) -> None:
    handle = await Client(store).start(cli_greeter, "ann")
    await handle.signal("greeting", "hello", message_id="g1")
    await handle.signal("greeting", "hi again", message_id="g2")  # never consumed
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    code, out, _ = await cli("workflows", "show", str(handle.id))
    assert (code, out["state"], out["signals_undelivered"]) == (0, "succeeded", 1)
    code, out, _ = await cli("workflows", "history", str(handle.id))
    last = json.loads(out.splitlines()[-1])
    assert last["type"] == "SignalsUndelivered"
    assert [(s["name"], s["message_id"]) for s in last["event"]["signals"]] == [("greeting", "g2")]


async def test_workflow_cancel_and_result_timeout(cli: Cli, store: PostgresStore) -> None:
    code, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"zed"')
    wid = out["id"]
    code, _, err = await cli("workflows", "result", wid, "--timeout", "0.1")
    assert code == 6
    assert "still" in err
    code, out, _ = await cli("workflows", "cancel", wid)
    assert (code, out) == (0, {"cancel_requested": True})
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    code, out, _ = await cli("workflows", "result", wid, "--timeout", "5")
    assert code == 1
    assert out["state"] == "cancelled"


@pytest.mark.parametrize("reason", ["", "   "])
async def test_terminate_and_reset_refuse_an_empty_reason_and_change_nothing(
    cli: Cli, store: PostgresStore, reason: str
) -> None:
    code, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"ann"')
    wid = out["id"]
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    code, before, _ = await cli("workflows", "show", wid)
    history = (await cli("workflows", "history", wid))[1]
    code, _, err = await cli("workflows", "terminate", wid, "--reason", reason)
    assert code == 2
    assert "reason must not be empty" in err
    code, _, err = await cli("workflows", "reset", wid, "--last-task", "--reason", reason)
    assert code == 2
    assert "reason must not be empty" in err
    code, after, _ = await cli("workflows", "show", wid)
    assert (after["state"], after.get("run_no")) == (before["state"], before.get("run_no"))
    assert (await cli("workflows", "history", wid))[1] == history


async def test_workflow_terminate_ends_a_run_no_worker_can_run(
    cli: Cli, store: PostgresStore
) -> None:
    code, out, _ = await cli("workflows", "start", "cli_not_registered", "--input", '"x"')
    wid = out["id"]
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    code, out, _ = await cli("workflows", "show", wid)
    assert out["state"] == "running"
    describe_reason = out["blocked_reason"]
    assert "no live worker serves workflow 'cli_not_registered'" in out["blocked_reason"]
    code, out, _ = await cli("workflows", "list")
    assert [i["blocked_reason"] for i in out["items"]] == [describe_reason]
    code, out, _ = await cli("workflows", "list", as_json=False)
    (row,) = [line for line in out.splitlines() if wid in line]
    assert "no live worker serve" in row  # cut to the column's width
    code, _, err = await cli("workflows", "terminate", wid)
    assert code == 2  # --reason is required
    code, out, _ = await cli(
        "workflows", "terminate", wid, "--reason", "typo in the name", "--by", "ann"
    )
    assert (code, out) == (
        0,
        {"state": "terminated", "reason": "terminated by ann: typo in the name"},
    )
    code, out, _ = await cli("workflows", "result", wid, "--timeout", "5")
    assert code == 1
    assert out["state"] == "terminated"
    assert "typo in the name" in out["error"]
    code, out, _ = await cli("workflows", "history", wid)
    event = json.loads(out) if isinstance(out, str) else out
    assert (event["type"], event["event"]["terminated_by"]) == ("WorkflowTerminated", "ann")
    code, out, _ = await cli("workflows", "list", "--state", "terminated")
    assert [str(e["id"]) for e in out["items"]] == [wid]
    code, _, err = await cli("workflows", "terminate", wid, "--reason", "again")
    assert code == 3
    assert "terminated (finished); cannot terminate" in err


async def test_history_detail_cuts_a_long_reason_at_a_word_boundary_with_an_ellipsis(
    cli: Cli, store: PostgresStore
) -> None:
    reason = "the customer asked twice on the phone to stop the order before it was packed"
    handle = await Client(store).start(cli_greeter, "ann")
    await cli("workflows", "terminate", str(handle.id), "--reason", reason, "--by", "ann")
    code, out, _ = await cli("workflows", "history", str(handle.id), as_json=False)
    assert code == 0
    (row,) = [line for line in out.splitlines() if "WorkflowTerminated" in line]
    detail = row.split("by ann: ", 1)[1].rstrip(" │|")
    assert detail.endswith("…"), row
    cut = detail.removesuffix("…")
    assert reason.startswith(cut), row
    assert reason[len(cut)] == " ", row  # the last word shown is whole


async def test_workflow_stalled_lists_a_run_whose_task_was_lost(
    cli: Cli, store: PostgresStore
) -> None:
    _, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"ann"')
    lost = out["id"]
    _, out, _ = await cli("workflows", "start", "cli_greeter", "--input", '"bo"')
    waiting = out["id"]
    await store.pool.execute("DELETE FROM azync_jobs WHERE run_id = $1", uuid.UUID(lost))
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    code, out, _ = await cli("workflows", "stalled")
    assert code == 0
    assert [(e["id"], e["name"]) for e in out] == [(lost, "cli_greeter")]
    assert waiting not in {e["id"] for e in out}  # it waits for its signal: healthy
    code, out, _ = await cli("workflows", "stalled", "--older-than", "3600")
    assert (code, out) == (0, [])
    code, _, err = await cli("workflows", "stalled", "--limit", "0")
    assert code == 2
    assert "--limit" in err


async def test_stats_jobs_dead_and_retry(cli: Cli, store: PostgresStore) -> None:
    from datetime import timedelta

    from azync_flow.store.queue import DequeueParams

    await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind="email", payload=b'{"to":"a"}'))
    (job,) = await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind="email", limit=1, lease=timedelta(seconds=30))
    )
    await store.dead(job.id, job.lease_token, "smtp down")  # type: ignore[arg-type]
    code, out, _ = await cli("stats", "--source", "queue")
    assert (code, out["dead_letters"]) == (0, {"queue": {"email": 1}})
    code, out, _ = await cli("jobs", "dead", "--kind", "email")
    assert [(j["id"], j["last_error"]) for j in out["items"]] == [(str(job.id), "smtp down")]
    code, out, _ = await cli("jobs", "retry", str(job.id))
    assert (code, out) == (0, {"retried": 1})
    assert (await store.get_job(Source.QUEUE, job.id)).state == JobState.PENDING
    code, _, _ = await cli("jobs", "retry", str(job.id))
    assert code in (3, 4)
    code, _, err = await cli("jobs", "retry")
    assert code == 2
    assert "give a job id, or --all" in err


async def test_replay_subcommand_reuses_the_replay_cli(
    cli: Cli, store: PostgresStore, tmp_path: Any
) -> None:
    handle = await Client(store).start(cli_greeter, "rp")
    await handle.signal("greeting", "hi")
    await LocalRuntime(store, Registry([cli_greeter], [])).run_until_idle()
    path = tmp_path / "h.json"
    path.write_bytes((await handle.recorded_history()).to_json())
    target = "tests.unit.test_cli:cli_greeter"
    code, out, _ = await cli("replay", target, str(path), db=False)
    assert code == 0
    assert "ok" in out
    changed = "tests.unit.test_cli:cli_greeter_changed"
    code, out, _ = await cli("replay", changed, str(path), db=False)
    assert code == 1
    assert "FAIL" in out
    code, _, err = await cli("replay", "tests.unit.test_cli:cli_payout", str(path), db=False)
    assert code == 2  # bad input: the APP lacks the history's workflow
    assert "cli_greeter" in err


async def test_events_list_and_show_give_the_key_of_an_event_without_aggregate_type(
    cli: Cli, store: PostgresStore
) -> None:
    keyed = await Client(store).publish("onboarding.started", {"step": 1}, key="ob-1")
    code, out, _ = await cli("events", "list", as_json=False)
    assert code == 0
    (row,) = [line for line in out.splitlines() if str(keyed) in line]
    assert "ob-1" in row
    code, out, _ = await cli("events", "show", str(keyed), as_json=False)
    assert code == 0
    assert any(line.split()[:2] == ["aggregate", "ob-1"] for line in out.splitlines()), out


async def test_dsn_and_schema_before_the_command_are_used_and_the_commands_own_win(
    pg_dsn: str,
    store: PostgresStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = await Client(store).start(cli_greeter, "dsn")
    monkeypatch.setenv("AZYNC_DSN", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("AZYNC_SCHEMA", "no_such_schema")

    async def listed(*argv: str) -> tuple[int, list[str]]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, [*argv])
        out = capsys.readouterr().out
        return code, [i["id"] for i in json.loads(out)["items"]] if code == 0 else []

    group = ["--dsn", pg_dsn, "--schema", store.schema, "--json"]
    assert await listed(*group, "workflows", "list") == (0, [str(handle.id)])
    wrong = ["--dsn", "postgresql://nobody@127.0.0.1:1/none", "--schema", "nope", "--json"]
    own = ["--dsn", pg_dsn, "--schema", store.schema]
    assert await listed(*wrong, "workflows", "list", *own) == (0, [str(handle.id)])
    assert (await listed(*wrong, "workflows", "list"))[0] == 5


async def test_jobs_show_of_a_workflow_operation_without_source_names_the_source(
    cli: Cli, store: PostgresStore
) -> None:
    await _uncertain_run(store)
    (op,) = await Client(store).list_uncertain()
    code, _, err = await cli("jobs", "show", str(op.operation_id))
    assert code == 3
    assert err.strip() == (
        f"azync-flow: error: [not_found] no queue job {op.operation_id}; "
        "it is a workflow job: pass --source workflow"
    )
    code, out, _ = await cli("jobs", "show", str(op.operation_id), "--source", "workflow")
    assert (code, out["id"], out["state"]) == (0, str(op.operation_id), "uncertain")
    code, _, err = await cli("jobs", "show", str(uuid.UUID(int=9)))
    assert (code, err.strip()) == (
        3,
        f"azync-flow: error: [not_found] no queue job {uuid.UUID(int=9)}",
    )


def test_record_prints_cells_as_data_and_starts_without_a_blank_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from azync_flow.cli._output import record, table

    record([], payloads=[("result", {"ok": 1})])
    shown = capsys.readouterr().out
    assert shown.startswith("result\n"), repr(shown)
    reason = "PayloadError: [payload] input of workflow 'w' does not match"
    record([("reason", reason)])
    assert reason in capsys.readouterr().out
    table([reason], [("REASON", lambda r: r)])
    assert "[payload] input" in capsys.readouterr().out
