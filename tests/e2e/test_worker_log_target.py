"""The worker's log says which database and schema it serves, never the password."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.postgres._base import redact_dsn
from azync_flow.worker import Worker

SECRET = "s3cr3t-pw"


def _with_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = (parts.username or "postgres") + f":{SECRET}"
    return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, ""))


async def test_the_worker_logs_the_database_and_schema_it_serves_without_the_password(
    pg_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(_with_password(pg_dsn), Config(schema=schema))
    try:
        worker = Worker(store, handle_signals=False, poll_interval=timedelta(milliseconds=50))
        with caplog.at_level(logging.INFO, logger="azync_flow.worker"):
            await worker.run_until_idle()
    finally:
        await store.close()
    (line,) = [r.getMessage() for r in caplog.records if "worker serving" in r.getMessage()]
    assert redact_dsn(_with_password(pg_dsn)) in line  # host, port, database; no password
    assert f'schema "{schema}"' in line
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:pw@db:5432/prod", "postgresql://app@db:5432/prod"),
        ("postgresql://app@db/prod?password=pw&sslmode=require",
         "postgresql://app@db/prod?sslmode=require"),
        ("host=db user=app password='p w' dbname=prod", "host=db user=app dbname=prod"),
        ("postgresql://db/prod", "postgresql://db/prod"),
    ],
)  # fmt: skip
def test_a_dsn_is_shown_without_its_password(dsn: str, shown: str) -> None:
    assert redact_dsn(dsn) == shown
