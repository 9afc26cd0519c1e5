"""Running the CLI in-process against the test's store: ``Cli`` and its fixture."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from azync_flow.cli import main
from azync_flow.store.postgres import PostgresStore


class Cli:
    def __init__(self, dsn: str, schema: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--dsn", dsn, "--schema", schema]
        self.capsys = capsys

    async def __call__(
        self, *argv: str, db: bool = True, as_json: bool = True
    ) -> tuple[int, Any, str]:
        """``main(argv + --dsn/--schema [+ --json])``: (status, parsed JSON or text, stderr)."""
        args = list(argv) + (self.base if db else []) + (["--json"] if db and as_json else [])
        self.capsys.readouterr()
        code = await asyncio.to_thread(main, args)
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        try:
            parsed = json.loads(out) if out.strip() else None
        except json.JSONDecodeError:
            parsed = out
        return code, parsed, err


@pytest.fixture
def cli(
    pg_dsn: str,
    store: PostgresStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    # Tables take their width from COLUMNS when it is set (pytest-xdist workers
    # inherit COLUMNS=80, too narrow for a row with a full id): piped, 160.
    monkeypatch.delenv("COLUMNS", raising=False)
    return Cli(pg_dsn, store.schema, capsys)
