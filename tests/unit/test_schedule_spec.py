"""Schedule specs as pure logic: cron in a time zone with explicit DST policies,
intervals, start/end, jitter, catch-up selection."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from azync_flow.errors import ScheduleSpecError
from azync_flow.schedules import (
    Interval,
    MissingTime,
    RepeatedTime,
    SchedulePolicy,
    ScheduleSpec,
    StartWorkflow,
)
from azync_flow.schedules._codec import Decoded, encode
from azync_flow.schedules._model import run_key
from azync_flow.schedules._plan import plan
from azync_flow.store.schedules import ScheduleRecord


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def nominals(spec: ScheduleSpec, after: datetime, until: datetime) -> list[datetime]:
    out = []
    for fire in spec.validated().fires_after(after, seed="s"):
        if fire.nominal_at > until:
            return out
        out.append(fire.nominal_at)
    return out


LONDON = ScheduleSpec(cron=("30 1 * * *",), tz="Europe/London")
NEW_YORK = ScheduleSpec(cron=("30 2 * * *",), tz="America/New_York")


@pytest.mark.parametrize(
    ("night", "instant"),
    [
        # clocks go forward at 01:00 GMT: 01:30 is missing -> the transition (02:00 BST)
        (utc(2024, 3, 31), utc(2024, 3, 31, 1, 0)),
        (utc(2025, 3, 30), utc(2025, 3, 30, 1, 0)),
        # clocks go back at 02:00 BST: 01:30 happens twice -> the first (BST)
        (utc(2024, 10, 27), utc(2024, 10, 27, 0, 30)),
        (utc(2025, 10, 26), utc(2025, 10, 26, 0, 30)),
    ],
)
def test_london_0130_fires_once_on_transition_nights_at_the_documented_instant(
    night: datetime, instant: datetime
) -> None:
    fires = nominals(LONDON, night - timedelta(days=1), night + timedelta(days=1))
    assert [f for f in fires if f.date() == night.date()] == [instant]
    assert len(fires) == 2  # one per local day on either side


@pytest.mark.parametrize(
    ("night", "instant"),
    [
        # 02:00 EST -> 03:00 EDT: 02:30 is missing -> 03:00 EDT
        (utc(2024, 3, 10), utc(2024, 3, 10, 7, 0)),
        (utc(2025, 3, 9), utc(2025, 3, 9, 7, 0)),
        # 02:00 EDT -> 01:00 EST: 01:00-02:00 repeats, 02:30 exists once (EST)
        (utc(2024, 11, 3), utc(2024, 11, 3, 7, 30)),
        (utc(2025, 11, 2), utc(2025, 11, 2, 7, 30)),
    ],
)
def test_new_york_0230_fires_once_on_transition_nights_at_the_documented_instant(
    night: datetime, instant: datetime
) -> None:
    fires = nominals(NEW_YORK, night - timedelta(hours=12), night + timedelta(hours=23))
    assert fires == [instant]


def test_repeated_time_policies_pick_first_last_or_both() -> None:
    night = (utc(2024, 10, 26, 12), utc(2024, 10, 27, 12))
    first = utc(2024, 10, 27, 0, 30)
    last = utc(2024, 10, 27, 1, 30)
    for policy, expected in [
        (RepeatedTime.FIRST, [first]),
        (RepeatedTime.LAST, [last]),
        (RepeatedTime.BOTH, [first, last]),
    ]:
        spec = ScheduleSpec(cron=("30 1 * * *",), tz="Europe/London", repeated=policy)
        assert nominals(spec, *night) == expected, policy


def test_both_keeps_fires_of_a_repeated_hour_in_instant_order() -> None:
    spec = ScheduleSpec(cron=("*/20 1 * * *",), tz="Europe/London", repeated="both")  # type: ignore[arg-type]
    fires = nominals(spec, utc(2024, 10, 26, 12), utc(2024, 10, 27, 12))
    assert fires == [utc(2024, 10, 27, h, m) for h in (0, 1) for m in (0, 20, 40)]


def test_missing_time_skip_policy_drops_the_fire() -> None:
    spec = ScheduleSpec(cron=("30 1 * * *",), tz="Europe/London", missing=MissingTime.SKIP)
    assert nominals(spec, utc(2024, 3, 30, 12), utc(2024, 3, 31, 12)) == []


def test_missing_times_landing_on_one_instant_fire_once() -> None:
    spec = ScheduleSpec(cron=("0,30 1 * * *", "0 2 * * *"), tz="Europe/London")
    # 01:00 and 01:30 are missing -> 02:00 BST, which is also the 02:00 fire
    assert nominals(spec, utc(2024, 3, 30, 12), utc(2024, 3, 31, 12)) == [utc(2024, 3, 31, 1)]


def test_intervals_are_elapsed_time_and_ignore_dst() -> None:
    spec = ScheduleSpec(
        intervals=(Interval(every=timedelta(hours=6), offset=timedelta(hours=1)),),
        tz="Europe/London",
    )
    fires = nominals(spec, utc(2024, 10, 26, 12), utc(2024, 10, 28))
    assert fires[0] == utc(2024, 10, 26, 13)
    assert {b - a for a, b in itertools.pairwise(fires)} == {timedelta(hours=6)}


def test_cron_and_interval_merge_in_order_without_duplicates() -> None:
    spec = ScheduleSpec(cron=("0 */12 * * *",), intervals=(Interval(every=timedelta(hours=6)),))
    assert nominals(spec, utc(2024, 1, 1), utc(2024, 1, 2)) == [
        utc(2024, 1, 1, 6),
        utc(2024, 1, 1, 12),
        utc(2024, 1, 1, 18),
        utc(2024, 1, 2, 0),
    ]


def test_six_field_cron_has_seconds() -> None:
    spec = ScheduleSpec(cron=("0 * * * * 15",))
    assert nominals(spec, utc(2024, 1, 1), utc(2024, 1, 1, 2)) == [
        utc(2024, 1, 1, 0, 0, 15),
        utc(2024, 1, 1, 1, 0, 15),
    ]


def test_start_and_end_bound_the_nominal_times() -> None:
    spec = ScheduleSpec(
        cron=("0 9 * * *",),
        start_at=datetime(2024, 5, 2, 9, tzinfo=ZoneInfo("UTC")),
        end_at=utc(2024, 5, 4, 9),
    )
    assert nominals(spec, utc(2024, 5, 1), utc(2024, 6, 1)) == [
        utc(2024, 5, 2, 9),
        utc(2024, 5, 3, 9),
        utc(2024, 5, 4, 9),
    ]


def test_jitter_is_deterministic_per_nominal_time_and_bounded() -> None:
    spec = ScheduleSpec(cron=("0 * * * *",), jitter=timedelta(minutes=10)).validated()
    a = list(itertools.islice(spec.fires_after(utc(2024, 1, 1), seed="a"), 50))
    again = list(itertools.islice(spec.fires_after(utc(2024, 1, 1), seed="a"), 50))
    other = list(itertools.islice(spec.fires_after(utc(2024, 1, 1), seed="b"), 50))
    assert a == again
    assert [f.fire_at for f in a] != [f.fire_at for f in other]
    assert all(timedelta(0) <= f.fire_at - f.nominal_at < timedelta(minutes=10) for f in a)
    assert len({f.fire_at - f.nominal_at for f in a}) > 40


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "at least one"),
        ({"cron": ("61 * * * *",)}, "invalid cron"),
        ({"cron": "0 30 1 * * *"}, "6 with the seconds field LAST"),
        ({"cron": "0 0 1 1 * 0 2030"}, "use 5 fields"),
        ({"cron": ("0 1 * * *",), "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": ("0 1 * * *",), "start_at": datetime(2024, 1, 1)}, "naive"),  # noqa: DTZ001
        ({"cron": "0 1 * * *", "end_at": datetime(2024, 1, 1)}, "naive"),  # noqa: DTZ001
        (
            {"cron": ("0 1 * * *",), "start_at": utc(2024, 2, 1), "end_at": utc(2024, 1, 1)},
            "before start_at",
        ),
        ({"intervals": (Interval(every=timedelta(0)),)}, "positive"),
        ({"cron": ("0 1 * * *",), "jitter": timedelta(seconds=-1)}, "jitter"),
    ],
)
def test_invalid_specs_raise_a_schedule_spec_error_at_construction(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScheduleSpecError, match=message) as info:
        ScheduleSpec(**fields)
    assert isinstance(info.value, ValueError)


def test_a_lone_cron_string_is_one_expression() -> None:
    spec = ScheduleSpec(cron="30 1 * * *", tz="Europe/London").validated()
    assert spec.cron == ("30 1 * * *",)
    (fire,) = itertools.islice(spec.fires_after(utc(2024, 1, 1), seed="s"), 1)
    assert fire.local.replace(tzinfo=None) == datetime(2024, 1, 1, 1, 30)  # noqa: DTZ001


def test_id_template_must_name_the_nominal_time() -> None:
    with pytest.raises(ScheduleSpecError, match="nominal"):
        StartWorkflow.of("w", id_template="{schedule_id}")
    with pytest.raises(ScheduleSpecError, match="unknown"):
        StartWorkflow.of("w", id_template="{nominal}-{oops}")


def test_run_id_is_derived_from_schedule_and_nominal_time() -> None:
    spec = LONDON.validated()
    one, two = itertools.islice(spec.fires_after(utc(2024, 1, 1), seed="x"), 2)
    action = StartWorkflow.of("w")
    assert run_key(action, "s", one) == run_key(action, "s", one)
    assert run_key(action, "s", one)[1] != run_key(action, "s", two)[1]
    assert run_key(action, "s", one)[1] != run_key(action, "t", one)[1]
    assert run_key(action, "s", one)[0] == "s@2024-01-01T01:30:00+00:00"


def _decoded(spec: ScheduleSpec, policy: SchedulePolicy, cursor: datetime) -> Decoded:
    spec = spec.validated()
    action = StartWorkflow.of("w")
    record = ScheduleRecord(
        id="s",
        spec=encode(spec),
        action=encode(action),
        policy=encode(policy),
        note="",
        paused=False,
        cursor_at=cursor,
        next_fire_at=None,
        created_at=cursor,
        updated_at=cursor,
    )
    return Decoded(record, spec, action, policy)


@pytest.mark.parametrize(
    ("window", "expected_days"),
    [(None, [4]), (timedelta(days=10), [2, 3, 4]), (timedelta(hours=1), [])],
)
def test_catch_up_after_three_days_down_runs_what_the_window_allows(
    window: timedelta | None, expected_days: list[int]
) -> None:
    daily = ScheduleSpec(cron=("0 9 * * *",))
    item = _decoded(daily, SchedulePolicy(catchup_window=window), utc(2024, 5, 1, 12))
    todo = plan(item, utc(2024, 5, 4, 20))
    assert [f.nominal_at for f in todo.fires] == [utc(2024, 5, d, 9) for d in expected_days]
    assert utc(2024, 5, 4, 9) <= todo.cursor <= utc(2024, 5, 4, 20)
    assert todo.next_fire_at == utc(2024, 5, 5, 9)


def test_a_backlog_is_decided_in_one_plan_as_one_counted_missed_range() -> None:
    every_minute = ScheduleSpec(cron=("* * * * *",))
    item = _decoded(every_minute, SchedulePolicy(), utc(2024, 5, 1))
    todo = plan(item, utc(2024, 5, 1, 2))  # 120 due; the last minute is within the grace
    assert [f.nominal_at for f in todo.fires] == [utc(2024, 5, 1, 1, 59), utc(2024, 5, 1, 2)]
    assert todo.missed == (utc(2024, 5, 1, 0, 1), utc(2024, 5, 1, 1, 58), 118, True)
    assert todo.cursor == utc(2024, 5, 1, 2)
    assert todo.next_fire_at == utc(2024, 5, 1, 2, 1)


def test_thirty_days_down_for_a_one_second_interval_is_counted_not_listed() -> None:
    every_second = ScheduleSpec(intervals=(Interval(every=timedelta(seconds=1)),))
    t0 = utc(2024, 5, 1)
    item = _decoded(every_second, SchedulePolicy(), t0)
    todo = plan(item, t0 + timedelta(days=30))
    # the grace (a minute) runs; everything before it is one range with its count
    assert len(todo.fires) == 61
    assert todo.missed == (
        t0 + timedelta(seconds=1),
        t0 + timedelta(days=30, seconds=-61),
        30 * 86400 - 61,
        True,
    )
    assert todo.next_fire_at == t0 + timedelta(days=30, seconds=1)


def test_a_cron_that_never_matches_has_no_fires() -> None:
    assert nominals(ScheduleSpec(cron=("0 0 30 2 *",)), utc(2024, 1, 1), utc(2030, 1, 1)) == []


ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"]


@settings(max_examples=40, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    hour=st.integers(0, 23),
    minute=st.sampled_from([0, 15, 30, 45]),
    start=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2027, 1, 1)),  # noqa: DTZ001
)
def test_daily_cron_fires_once_per_local_day_in_increasing_order(
    zone: str, hour: int, minute: int, start: datetime
) -> None:
    spec = ScheduleSpec(cron=(f"{minute} {hour} * * *",), tz=zone).validated()
    fires = list(itertools.islice(spec.fires_after(start.replace(tzinfo=UTC), seed="p"), 200))
    instants = [f.nominal_at for f in fires]
    assert instants == sorted(set(instants))
    days = Counter(f.local.date() for f in fires)
    # a missing time fires at the transition, which may be the next local day
    # only when the gap spans midnight; never twice on one day
    assert max(days.values()) == 1
    both = ScheduleSpec(cron=(f"{minute} {hour} * * *",), tz=zone, repeated="both").validated()  # type: ignore[arg-type]
    two = list(itertools.islice(both.fires_after(start.replace(tzinfo=UTC), seed="p"), 200))
    assert [f.nominal_at for f in two] == sorted({f.nominal_at for f in two})
    assert max(Counter(f.local.date() for f in two).values()) <= 2


def test_schedules_package_exports_are_pinned() -> None:
    import azync_flow
    import azync_flow.schedules as schedules_pkg

    assert schedules_pkg.__all__ == [
        "DEFAULT_ID_TEMPLATE",
        "SCHEDULE_LEADERSHIP",
        "Action",
        "EnqueueJob",
        "Fire",
        "Interval",
        "MissingTime",
        "Overlap",
        "RepeatedTime",
        "RunStarter",
        "ScheduleClient",
        "ScheduleDescription",
        "SchedulePolicy",
        "ScheduleRun",
        "ScheduleRuntimeStore",
        "ScheduleSpec",
        "ScheduleSummary",
        "Scheduler",
        "StartDAG",
        "StartWorkflow",
        "aware_utc",
        "declared_schedule_id",
        "describe_action",
    ]
    assert azync_flow.ScheduleSpec is ScheduleSpec
    assert azync_flow.StartWorkflow is StartWorkflow
