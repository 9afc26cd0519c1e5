"""Jinja filters of the console's templates: times, durations, payloads.
They return plain text; the templates' autoescaping escapes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2

from azync_flow._display import age, payload_json, to_plain, when
from azync_flow.schedules import describe_action

__all__ = ["install_filters"]

#: Characters of a payload shown whole on a page before it is cut.
MAX_SHOWN = 64 * 1024


def pretty(data: Any) -> str:
    """A payload (JSON bytes or a value) as indented JSON, cut past :data:`MAX_SHOWN`."""
    if data is None:
        return "null"
    value = payload_json(bytes(data)) if isinstance(data, bytes | bytearray) else to_plain(data)
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > MAX_SHOWN:
        return text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters)"
    return text


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``value`` was (``3m 2s ago``; ``in 5s`` when ahead)."""
    if value is None:
        return ""
    delta = (now or datetime.now(UTC)) - value
    if delta < timedelta(0):
        return f"in {age(-delta) or '0s'}"
    return f"{age(delta) or '0s'} ago"


def duration(value: timedelta | float | None) -> str:
    return age(value) or ("0s" if value is not None else "")


def local(value: datetime | None) -> str:
    """A zoned time as ``YYYY-MM-DD HH:MM:SS TZ`` (its own zone, e.g. a schedule's)."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S %Z")


def install_filters(env: jinja2.Environment) -> None:
    env.filters.update(
        when=when,
        ago=ago,
        age=duration,
        pretty=pretty,
        local=local,
        action_text=describe_action,
    )
