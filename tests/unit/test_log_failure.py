"""Expected failures (store outage, lapsed leadership) log one DEBUG line; others their level."""

from __future__ import annotations

import logging

import pytest

from azync_flow._logging import log_failure
from azync_flow.errors import LeadershipLostError, NotFoundError, StoreUnavailableError

log = logging.getLogger("azync_flow.test_log_failure")


@pytest.mark.parametrize(
    "exc", [LeadershipLostError("term 3 is over"), StoreUnavailableError("refused")]
)
def test_an_expected_failure_is_one_debug_line(
    caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log_failure(log, exc, "woken dag tick failed", level=logging.WARNING)
    [record] = caplog.records
    assert record.levelno == logging.DEBUG
    assert record.exc_info is None
    assert str(exc) in record.getMessage()


def test_any_other_failure_keeps_the_asked_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log_failure(log, NotFoundError("gone"), "tick failed", level=logging.WARNING)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
