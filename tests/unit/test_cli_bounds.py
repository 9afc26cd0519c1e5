"""Numbers, durations and times a person types are bounded: a value past what
the store or the clock can hold is a usage error (exit 2) naming the option,
never an overflow from the driver or the standard library."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from azync_flow._display import MAX_DURATION, duration_or_none, time_or_age
from azync_flow.cli import main

DSN = "postgresql://nobody@127.0.0.1:1/never"  # never reached: the options fail first


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["workflows", "list", "--limit", "9223372036854775807"], "--limit"),
        (["jobs", "list", "--limit", "99999999999999999999"], "--limit"),
        (["events", "list", "--limit", "99999999999999999999"], "--limit"),
        (["events", "list", "--since", "1000000d"], "--since"),
        (["events", "list", "--since", "99999999999d"], "--since"),
        (["workflows", "stalled", "--older-than", "nan"], "--older-than"),
        (["workflows", "stalled", "--older-than", "inf"], "--older-than"),
        (["worker", "app", "--lease", "nan"], "--lease"),
        (["worker", "app", "--lease", "inf"], "--lease"),
    ],
)
def test_an_out_of_range_option_is_a_usage_error_naming_it(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--dsn", DSN]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "unexpected error" not in err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", ["1000000d", "99999999999d", "1e300s", "nans", "-5m", "infh"])
def test_a_duration_past_the_longest_or_not_finite_is_not_a_duration(value: str) -> None:
    assert duration_or_none(value) is None


def test_the_longest_duration_is_a_duration() -> None:
    assert duration_or_none(f"{MAX_DURATION.days}d") == MAX_DURATION


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_time_past_what_can_be_stored_is_not_a_time(value: str) -> None:
    assert time_or_age(value) is None


def test_an_offset_time_is_read_in_utc() -> None:
    assert time_or_age("2026-01-31T12:00:00+02:00") == datetime(2026, 1, 31, 10, tzinfo=UTC)
