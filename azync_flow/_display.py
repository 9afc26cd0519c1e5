"""How values read to a person and back: payload previews, JSON of structs, UTC
times, short durations, and times or ages typed by a person (the CLI's
tables and options, the console's pages and filters)."""

from __future__ import annotations

import enum
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from azync_flow._text import shorten
from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import PayloadCodecError, PayloadError
from azync_flow.payload_codec import MAGIC, describe_envelope, is_envelope

__all__ = [
    "PREVIEW_CHARS",
    "age",
    "duration_or_none",
    "json_from_text",
    "json_line",
    "payload_json",
    "preview",
    "time_or_age",
    "to_plain",
    "when",
]

#: Characters of a payload shown in a list (`show` prints it whole).
PREVIEW_CHARS = 48


def to_plain(value: Any) -> Any:
    """msgspec Structs, UUIDs, times, enums and JSON bytes as plain JSON-able values."""
    if isinstance(value, msgspec.Struct):
        return {f: to_plain(getattr(value, f)) for f in value.__struct_fields__}
    if hasattr(value, "_asdict"):
        return to_plain(value._asdict())
    if hasattr(value, "__dataclass_fields__"):
        return {f: to_plain(getattr(value, f)) for f in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview, msgspec.Raw)):
        return payload_json(bytes(value))
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def payload_json(data: bytes | None) -> Any:
    """Decode stored JSON bytes for display (None stays None); a payload whose
    codec or key is not configured shows as ``<undecodable payload (...)>``."""
    if data is None:
        return None
    try:
        return decode_value(data)
    except PayloadCodecError as exc:  # encoded with a codec or key not configured here
        return f"<undecodable payload ({describe_envelope(data)}): {exc.args[0]}>"
    except PayloadError:
        return data.decode("utf-8", "replace")


#: An envelope as a decoded JSON string starts with this text.
_ENVELOPE_TEXT: str = json.loads(MAGIC + b'"')


def open_payloads(value: Any) -> Any:
    """``value`` (decoded JSON: a history event) with every codec envelope in
    it replaced by the payload it holds (:func:`payload_json`)."""
    if isinstance(value, str) and value.startswith(_ENVELOPE_TEXT):
        return payload_json(json.dumps(value).encode())
    if isinstance(value, dict):
        return {k: open_payloads(v) for k, v in value.items()}
    if isinstance(value, list):
        return [open_payloads(v) for v in value]
    return value


def opened_event(event: Any) -> Any:
    """A history event (a msgspec Struct) with each envelope field (``input``,
    ``result``, ``payload`` ...) replaced by the JSON it holds, for display."""
    changes: dict[str, msgspec.Raw] = {}
    for name in event.__struct_fields__:
        raw = getattr(event, name)
        if isinstance(raw, msgspec.Raw) and is_envelope(raw):
            changes[name] = msgspec.Raw(json_line(payload_json(bytes(raw))).encode())
    return msgspec.structs.replace(event, **changes) if changes else event


def json_line(value: Any) -> str:
    """`value` as one compact JSON line."""
    return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))


def preview(data: bytes | Any | None, limit: int = PREVIEW_CHARS) -> str:
    """A payload as compact JSON cut after a comma to at most `limit` characters
    (`…` marks the cut)."""
    if data is None:
        return ""
    value = payload_json(bytes(data)) if isinstance(data, (bytes, bytearray)) else data
    text = json_line(value)
    return shorten(text, limit, breaks_after=",")


def when(value: datetime | None) -> str:
    """A time as `YYYY-MM-DD HH:MM:SS` UTC (empty for None)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def age(value: timedelta | float | None) -> str:
    """A duration as `3d 4h`, `5m 2s` or `0.4s` (empty for None or zero)."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds <= 0:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.1f}s"
    out: list[str] = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (out and len(out) < 2):
            out.append(f"{rest // size}{unit}")
            rest %= size
        if len(out) == 2:
            break
    return " ".join(out)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The largest row count or offset a person may ask for (a 32-bit count, as
#: the store's).
MAX_ROWS = 2**31 - 1
#: The longest duration a person may type (an age, an interval, a lease).
MAX_DURATION = timedelta(days=36_500)
#: The times a person may type: what PostgreSQL and Python both represent,
#: with room for a time zone.
MIN_TIME = datetime(1, 1, 2, tzinfo=UTC)
MAX_TIME = datetime(9999, 12, 30, tzinfo=UTC)


def duration_or_none(value: str) -> timedelta | None:
    """`90s`, `15m`, `2h`, `3d` as a timedelta; None when `value` is not one
    (or is negative, not finite, or longer than :data:`MAX_DURATION`)."""
    if value[-1:] not in _UNITS:
        return None
    try:
        amount = float(value[:-1])
    except ValueError:
        return None
    seconds = amount * _UNITS[value[-1]]
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DURATION.total_seconds():
        return None
    return timedelta(seconds=seconds)


def time_or_age(value: str) -> datetime | None:
    """An ISO-8601 time (naive: UTC) or a relative age like ``90s``, ``15m``,
    ``2h``, ``3d`` (that long ago), aware; None when ``value`` is neither."""
    age = duration_or_none(value)
    if age is not None:
        return datetime.now(UTC) - age
    try:
        when = datetime.fromisoformat(value)
        when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None
    return when if MIN_TIME <= when <= MAX_TIME else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (JSON has no NaN or infinite numbers)")


def json_from_text(value: str, what: str) -> Any:
    """Decode JSON a person typed (a CLI option, a console form field).

    NaN and ±Infinity are refused (JSON cannot carry them), and the decoded
    value must pass the payload encoder every client entry point uses.

    Raises:
        ValueError: not JSON, nested over ~1000 levels, or NaN/Infinity; the
            message names ``what``.
        PayloadEncodeError: a value JSON cannot round-trip.
    """
    try:
        decoded = json.loads(value, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply (over ~1000 levels)") from None
    except ValueError as exc:  # NaN / Infinity
        raise ValueError(f"{what}: {exc}") from None
    encode_value(decoded, what)  # PayloadEncodeError for what JSON cannot round-trip
    return decoded
