"""An unreachable database is described in the product's words; the driver's own
text (protocol states, asyncpg internals) is only the cause, never the message."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from azync_flow import StoreUnavailableError
from azync_flow.store.postgres._guard import describe_outage, outage_cause, translate

DRIVER_ERRORS = [
    (
        asyncpg.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        ),
        "the connection to the server was lost while a statement was in progress",
    ),
    (
        asyncpg.InterfaceError(
            "cannot call Transaction.__aexit__(): the underlying connection is closed"
        ),
        "the connection to the server was lost while a statement was in progress",
    ),
    (
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        "the connection to the server was lost while a statement was in progress",
    ),
    (ConnectionRefusedError(111, "Connect call failed"), "the server refused the connection"),
    (asyncpg.CannotConnectNowError("the database system is starting up"), "starting up"),
    (asyncpg.AdminShutdownError("terminating connection due to administrator command"),
     "the server ended the session"),
    (asyncpg.TooManyConnectionsError("sorry, too many clients already"), "no connection slots"),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "words"), DRIVER_ERRORS, ids=lambda v: type(v).__name__)
def test_an_outage_says_what_happened_and_keeps_the_driver_text_as_the_cause(
    exc: BaseException, words: str
) -> None:
    assert words in describe_outage(exc)
    err = translate(exc, "s", in_body=True)
    assert isinstance(err, StoreUnavailableError)
    assert words in str(err)
    driver_text = str(exc)
    assert driver_text not in str(err)
    assert outage_cause(exc) == f"{type(exc).__name__}: {driver_text}"


def _pool_floor_warning() -> None:
    """What asyncpg's pool logs when it cannot reconnect its minimum connections."""
    try:
        raise ConnectionRefusedError(111, "Connect call failed")
    except ConnectionRefusedError:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor", exc_info=True
        )


def test_the_pools_reconnect_warnings_in_an_outage_are_dropped_below_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        _pool_floor_warning()
    assert [r for r in caplog.records if r.name == "asyncpg.pool"] == []
    with caplog.at_level(logging.DEBUG, logger="asyncpg.pool"):
        _pool_floor_warning()
    (record,) = [r for r in caplog.records if r.name == "asyncpg.pool"]
    assert record.levelname == "DEBUG"
    assert record.exc_info is None
    assert "ConnectionRefusedError" in record.getMessage()
