"""An unreachable database is described in the product's words; the driver's own
text (protocol states, asyncpg internals) is only the cause, never the message."""

from __future__ import annotations

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
