"""Schedule specs: when a schedule fires, as pure logic (no I/O, no clock).

A spec is cron expressions and/or fixed intervals. Cron expressions are read
in a time zone (IANA name, ``zoneinfo``): croniter enumerates *naive local
wall times* and this module turns each into UTC instants under the explicit
DST policies:

* a repeated wall time (clocks go back) -> its first occurrence (default),
  its last, or both;
* a missing wall time (clocks go forward) -> the first valid instant after it,
  that is the transition itself (default), or no fire at all.

Intervals are plain UTC arithmetic (``every`` from the Unix epoch plus
``offset``), so DST never changes them. Every fire has a *nominal* instant (its
identity: the run started for it is derived from the schedule id and this
instant) and a *fire* instant (nominal plus a deterministic jitter).
"""

from __future__ import annotations

import enum
import hashlib
import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from croniter import CroniterError, croniter

from azync_flow.errors import ScheduleSpecError

__all__ = ["Fire", "Interval", "MissingTime", "RepeatedTime", "ScheduleSpec", "aware_utc"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


class RepeatedTime(enum.StrEnum):
    """Which occurrence of a repeated local time (clocks go back) fires."""

    FIRST = "first"
    LAST = "last"
    BOTH = "both"


class MissingTime(enum.StrEnum):
    """What a missing local time (clocks go forward) does."""

    #: fire once at the first valid instant after it (the transition)
    NEXT_VALID = "next_valid"
    #: no fire for it
    SKIP = "skip"


class Interval(msgspec.Struct, frozen=True, kw_only=True):
    """Fire every ``every``, at ``epoch + offset + k * every`` (UTC, DST-free).

    Attributes:
        every: the period (positive).
        offset: phase from the Unix epoch, ``0 <= offset < every``.
    """

    every: timedelta
    offset: timedelta = timedelta(0)


class Fire(msgspec.Struct, frozen=True):
    """One fire of a schedule.

    Attributes:
        nominal_at: the nominal UTC instant (identity of the run).
        fire_at: when it is due: ``nominal_at`` plus the schedule's jitter (UTC).
        local: ``nominal_at`` in the spec's time zone.
    """

    nominal_at: datetime
    fire_at: datetime
    local: datetime


def aware_utc(value: datetime, what: str) -> datetime:
    """``value`` in UTC.

    Raises:
        ScheduleSpecError: ``value`` is naive (which zone it meant is unknown).
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleSpecError(
            f"{what} must be a timezone-aware datetime, got naive {value.isoformat()}; "
            "attach a zone, e.g. datetime(..., tzinfo=ZoneInfo('Europe/London'))"
        )
    return value.astimezone(UTC)


class ScheduleSpec(msgspec.Struct, frozen=True, kw_only=True):
    """When a schedule fires.

    Every field is checked at construction (and again by :meth:`validated`).

    Attributes:
        cron: cron expressions (5 fields, or 6 with seconds last, croniter
            syntax) read as local wall times in ``tz``; a single string is
            taken as one expression.
        intervals: fixed periods (see :class:`Interval`).
        tz: IANA time zone name of the cron expressions (``"UTC"`` default).
        start_at: no nominal time before it (aware; stored in UTC).
        end_at: no nominal time after it (inclusive; aware; stored in UTC).
        jitter: each fire is delayed by a deterministic fraction of this,
            derived from the schedule id and the nominal time (keep it below
            the spacing of the fires).
        repeated: repeated local time policy (:class:`RepeatedTime`).
        missing: missing local time policy (:class:`MissingTime`).
    """

    #: A ``str`` given here is stored as a one-expression tuple.
    cron: tuple[str, ...] | str = ()
    intervals: tuple[Interval, ...] = ()
    tz: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: timedelta = timedelta(0)
    repeated: RepeatedTime = RepeatedTime.FIRST
    missing: MissingTime = MissingTime.NEXT_VALID

    def __post_init__(self) -> None:
        """Take a lone cron string as one expression, then check the spec.

        Raises:
            ScheduleSpecError: as :meth:`validated`.
        """
        if isinstance(self.cron, str):
            msgspec.structs.force_setattr(self, "cron", (self.cron,))
        self._check()

    def validated(self) -> ScheduleSpec:
        """This spec with datetimes in UTC, once checked.

        Raises:
            ScheduleSpecError: no cron nor interval, a bad cron expression, an
                unknown zone, a naive start/end, end before start, an interval
                that is not positive or an offset outside ``[0, every)``, or a
                negative jitter.
        """
        start, end = self._check()
        return msgspec.structs.replace(
            self,
            cron=tuple(self.cron),
            intervals=tuple(self.intervals),
            start_at=start,
            end_at=end,
            repeated=RepeatedTime(self.repeated),
            missing=MissingTime(self.missing),
        )

    def _check(self) -> tuple[datetime | None, datetime | None]:
        """Raise ScheduleSpecError for a bad spec; return start/end in UTC."""
        if not self.cron and not self.intervals:
            raise ScheduleSpecError(
                "a schedule spec needs at least one cron expression or interval"
            )
        self.zone()
        for expr in self.cron:
            if not _cron_shape_ok(expr):
                raise ScheduleSpecError(
                    f"invalid cron expression {expr!r}: use 5 fields 'minute hour "
                    "day-of-month month day-of-week', or 6 with the seconds field LAST "
                    "('minute hour day-of-month month day-of-week second'; not seconds "
                    "first as in Quartz or Spring)"
                )
        for iv in self.intervals:
            if iv.every <= timedelta(0) or not timedelta(0) <= iv.offset < iv.every:
                raise ScheduleSpecError(
                    f"interval every={iv.every} offset={iv.offset}: every must be positive "
                    "and 0 <= offset < every"
                )
        if self.jitter < timedelta(0):
            raise ScheduleSpecError(f"jitter must not be negative, got {self.jitter}")
        start = None if self.start_at is None else aware_utc(self.start_at, "start_at")
        end = None if self.end_at is None else aware_utc(self.end_at, "end_at")
        if start is not None and end is not None and end < start:
            raise ScheduleSpecError(
                f"end_at {end.isoformat()} is before start_at {start.isoformat()}"
            )
        return start, end

    def zone(self) -> ZoneInfo:
        """The spec's time zone.

        Raises:
            ScheduleSpecError: ``tz`` is not an IANA zone name known here.
        """
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise ScheduleSpecError(
                f"unknown time zone {self.tz!r}: use an IANA name such as 'Europe/London'"
            ) from None

    def fires_after(self, after: datetime, *, seed: str) -> Iterator[Fire]:
        """The fires whose nominal instant is strictly after ``after``, in order.

        Nominal instants are distinct (two cron expressions or a missing time
        landing on the same instant give one fire). Endless unless ``end_at``.

        Args:
            after: an aware datetime (exclusive bound).
            seed: the schedule id (seeds the jitter).
        """
        after = aware_utc(after, "after")
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - timedelta(microseconds=1)
        zone = self.zone()
        sources = [self._cron_instants(expr, zone, after) for expr in self.cron]
        sources += [_interval_instants(iv, after) for iv in self.intervals]
        last: datetime | None = None
        for instant in heapq.merge(*sources):
            if instant == last:
                continue
            if self.end_at is not None and instant > self.end_at:
                return
            last = instant
            fire_at = instant + _jitter(self.jitter, seed, instant)
            yield Fire(instant, fire_at, instant.astimezone(zone))

    def count_fires(
        self, after: datetime, until: datetime, *, cap: int = 10_000
    ) -> tuple[int, bool]:
        """How many nominal instants lie in ``(after, until]``.

        A spec of one interval is counted by arithmetic (any range, O(1));
        otherwise the instants are listed, at most ``cap`` of them.

        Returns:
            ``(count, exact)``: ``exact`` is False when the listing stopped at
            ``cap`` (the range holds more).
        """
        lo, hi = aware_utc(after, "after"), aware_utc(until, "until")
        if self.start_at is not None:
            lo = max(lo, self.start_at - timedelta(microseconds=1))
        if self.end_at is not None:
            hi = min(hi, self.end_at)
        if hi <= lo:
            return 0, True
        if not self.cron and len(self.intervals) == 1:
            iv = self.intervals[0]
            anchor = _EPOCH + iv.offset
            return (hi - anchor) // iv.every - (lo - anchor) // iv.every, True
        count = 0
        for fire in self.fires_after(lo, seed=""):
            if fire.nominal_at > hi:
                return count, True
            if count >= cap:
                return count, False
            count += 1
        return count, True

    def last_fire_in(self, after: datetime, until: datetime, *, seed: str) -> Fire | None:
        """The last fire whose nominal instant lies in ``(after, until]``.

        Searches back from ``until`` over doubling spans, so the work depends
        on the spacing of the fires near ``until``, not on how far back
        ``after`` is.
        """
        span = _SECOND
        while True:
            lo = max(after, until - span)
            found: Fire | None = None
            for fire in self.fires_after(lo, seed=seed):
                if fire.nominal_at > until:
                    break
                found = fire
            if found is not None or lo <= after:
                return found
            span *= 2

    def _cron_instants(self, expr: str, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
        # Start a day of wall time early: the first occurrence of a wall time
        # can lie before ``after`` in local terms (a fold) and is filtered below.
        start_wall = after.astimezone(zone).replace(tzinfo=None) - timedelta(days=1)
        it = croniter(expr, start_wall)
        # The first occurrences are non-decreasing in wall time (and so are the
        # last ones), so an instant below the current wall time's earliest can
        # no longer be overtaken: a heap merges the two sequences of "both".
        pending: list[datetime] = []
        while True:
            try:
                wall: datetime = it.get_next(datetime)
            except CroniterError:  # no further match (``0 0 30 2 *``): no more fires
                yield from sorted(i for i in pending if i > after)
                return
            instants = resolve_wall_time(wall, zone, self.repeated, self.missing)
            if not instants:
                continue
            floor = instants[0]
            while pending and pending[0] < floor:
                instant = heapq.heappop(pending)
                if instant > after:
                    yield instant
            for instant in instants:
                heapq.heappush(pending, instant)


def resolve_wall_time(
    wall: datetime, zone: ZoneInfo, repeated: RepeatedTime, missing: MissingTime
) -> list[datetime]:
    """The UTC instants a naive local wall time fires at under the DST policies.

    Returns:
        One instant, two (a repeated time under ``BOTH``, earlier first), or
        none (a missing time under ``SKIP``).
    """
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if not _exists(first, wall):
        if missing is MissingTime.SKIP:
            return []
        return [_transition(first.astimezone(UTC), second.astimezone(UTC), zone)]
    a, b = first.astimezone(UTC), second.astimezone(UTC)
    if a == b:
        return [a]
    if repeated is RepeatedTime.FIRST:
        return [a]
    if repeated is RepeatedTime.LAST:
        return [b]
    return [a, b]


def _cron_shape_ok(expr: object) -> bool:
    """Whether ``expr`` is a cron expression of 5 or 6 fields (or an ``@`` alias).

    croniter also takes a seventh (year) field, which the 6-field seconds-last
    form makes ambiguous to read: refused.
    """
    if not isinstance(expr, str) or not croniter.is_valid(expr):
        return False
    return expr.startswith("@") or len(expr.split()) in (5, 6)


def _exists(local: datetime, wall: datetime) -> bool:
    return local.astimezone(UTC).astimezone(local.tzinfo).replace(tzinfo=None) == wall


def _transition(high: datetime, low: datetime, zone: ZoneInfo) -> datetime:
    """The instant clocks jumped forward over a missing wall time: the first
    instant in ``(low, high]`` whose offset is the one after the jump."""
    after_offset = zone.utcoffset(high.astimezone(zone).replace(tzinfo=None))
    lo, hi = low, high
    while hi - lo > _SECOND:
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == after_offset:
            hi = mid
        else:
            lo = mid
    return hi


def _interval_instants(iv: Interval, after: datetime) -> Iterator[datetime]:
    anchor = _EPOCH + iv.offset
    k = (after - anchor) // iv.every + 1
    while True:
        yield anchor + k * iv.every
        k += 1


def _jitter(jitter: timedelta, seed: str, nominal: datetime) -> timedelta:
    if jitter <= timedelta(0):
        return timedelta(0)
    digest = hashlib.sha256(f"{seed}|{nominal.isoformat()}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return timedelta(microseconds=int(jitter / timedelta(microseconds=1) * fraction))
