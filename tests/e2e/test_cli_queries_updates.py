"""`azync-flow workflows query` / `update` in a subprocess against a real worker
process (the shopping cart sample)."""

from __future__ import annotations

import asyncio
import signal
import sys

from azync_flow.store.postgres import PostgresStore

from .test_cli_commands import ROOT, Cmd, cmd

__all__ = ["cmd"]  # the fixture, re-used


async def test_workflows_query_and_update_verbs(cmd: Cmd, store: PostgresStore) -> None:
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "shopping_cart", "--log-level", "ERROR",
        cwd=ROOT / "samples", env=cmd.env,
    )  # fmt: skip
    try:
        started = await cmd("workflows", "start", "shopping_cart", "--input", '"ann"', "--json")
        wid = started.json["id"]
        added = await cmd(
            "workflows", "update", wid, "add_item", '["sku-1", 2]', "--update-id", "l1", "--json"
        )
        assert (added.code, added.json) == (0, 1)
        again = await cmd(
            "workflows", "update", wid, "add_item", '["sku-1", 2]', "--update-id", "l1"
        )
        assert again.code == 0
        assert "1" in again.out
        rejected = await cmd("workflows", "update", wid, "add_item", '["sku-2", 0]', "--json")
        assert rejected.code == 1
        assert rejected.json["error"] == "ValueError"
        assert rejected.json["code"] == "update_rejected"
        refused = await cmd("workflows", "update", wid, "add_item", '["sku-2", 0]')
        assert (refused.code, refused.out) == (1, "")
        assert refused.err.startswith("azync-flow: error:")
        summary = await cmd("workflows", "query", wid, "summary", "--json")
        assert summary.code == 0
        assert summary.json["lines"] == [
            {"sku": "sku-1", "quantity": 2, "reservation": "rsv-sku-1x2"}
        ]
        table = await cmd("workflows", "query", wid, "summary")
        assert "sku-1" in table.out
        unknown = await cmd("workflows", "query", wid, "nope")
        assert unknown.code == 3
        assert "no query handler of that name" in unknown.err
        failed = await cmd("workflows", "query", wid, "summary", "[1, 2]")
        assert (failed.code, failed.out) == (1, "")
        (line,) = failed.err.strip().splitlines()
        assert line.startswith("azync-flow: error: [query_failed] ")
        assert "TypeError" in line
        failed_json = await cmd("workflows", "query", wid, "summary", "[1, 2]", "--json")
        assert failed_json.code == 1
        assert (failed_json.json["code"], failed_json.json["error"]) == (
            "query_failed",
            "TypeError",
        )
        bad = await cmd("workflows", "query", wid, "summary", '{"not": "an array"}')
        assert bad.code == 2
        assert "ARGS must be a JSON array" in bad.err
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 30) == 0
    late = await cmd("workflows", "query", wid, "summary", "--timeout", "0.5")
    assert late.code == 6
    assert "no worker answered within 0.5s" in late.err
    queued = await cmd("workflows", "update", wid, "add_item", '["sku-3", 1]',
                       "--update-id", "l9", "--timeout", "0.5")  # fmt: skip
    assert queued.code == 6
    assert "still queued or in progress" in queued.err
    assert "running the same command (same NAME and ARGS) with --update-id l9" in queued.err
    history = await cmd("workflows", "history", wid)
    assert history.out.count("UpdateAccepted") == 1
