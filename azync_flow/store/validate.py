"""Boundary checks for caller-supplied identifiers (one helper for every entry point).

Postgres ``text`` rejects NUL and text that is not valid UTF-8 (lone
surrogates), and ``pg_notify`` payloads are capped near 8000 bytes, so bad
identifiers are refused here with a ``ValueError`` naming the field instead
of surfacing as raw driver errors after partial work. Payloads
are JSON and keep round-tripping NUL (it is escaped as ``\\u0000``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping
from datetime import timedelta

from ..errors import IdempotencyConflictError
from ..payload_codec import payloads_equal
from .queue import DEFAULT_TASK_QUEUE, LimitSpec
from .workflows import WorkflowStartParams

__all__ = [
    "MAX_LIMIT_CAPACITY",
    "MAX_NAME_LENGTH",
    "MAX_PRIORITY",
    "MAX_TIMEOUT",
    "check_choice",
    "check_id",
    "check_identity_name",
    "check_limits",
    "check_max_attempts",
    "check_meta",
    "check_name",
    "check_priority",
    "check_same_start",
    "check_task_queue",
    "check_task_queue_limit",
    "check_text",
    "check_timeout",
]

#: Largest capacity of a limit (slots per key).
MAX_LIMIT_CAPACITY = 10_000

#: Longest accepted name (job kind, workflow/DAG name, signal name), in characters.
MAX_NAME_LENGTH = 255


def check_text(value: str, field: str) -> str:
    """Return ``value`` if a Postgres ``text`` column can store it.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` contains NUL (``\\x00``) or is not valid UTF-8 (a
            lone surrogate, e.g. an undecodable byte of a command-line argument).
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__} {value!r}")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain NUL (\\x00): {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{field} is not valid UTF-8 (lone surrogate {value[exc.start]!r} at "
                f"position {exc.start}): {value!r}"
            ) from None
    return value


def check_name(value: str, field: str, *, empty_ok: bool = False) -> str:
    """Return ``value`` if it is a storable name of at most :data:`MAX_NAME_LENGTH` characters.

    Args:
        value: the name.
        field: what it is, for the error message.
        empty_ok: accept ``""`` (a field where empty means "none").

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is empty (unless ``empty_ok``), contains NUL or is
            longer than :data:`MAX_NAME_LENGTH`.
    """
    check_text(value, field)
    if not value and not empty_ok:
        raise ValueError(f"{field} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{field} is {len(value)} characters long; at most {MAX_NAME_LENGTH} are allowed"
        )
    return value


def check_reason(value: str, field: str = "reason") -> str:
    """Return ``value`` when it says something: the why an operator gives for
    an action (terminate, reset, suspend, close, a decision's note).

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is empty or only whitespace.
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ValueError(f"{field} must not be empty: say why (it is recorded with the action)")
    return value


def check_task_queue(value: str, field: str = "task_queue") -> str:
    """Return the task queue ``value`` names: itself, or ``"default"`` for ``""``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: as :func:`check_name`.
    """
    return check_name(value, field, empty_ok=True) or DEFAULT_TASK_QUEUE


#: The priority range (a head start in minutes: 10,000 is about a week).
MAX_PRIORITY = 10_000


def check_priority(value: int, field: str = "priority") -> int:
    """Return ``value`` if it is a priority: an int within ±:data:`MAX_PRIORITY`.

    Raises:
        TypeError: ``value`` is not an int.
        ValueError: it is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, got {value!r}")
    if not -MAX_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(f"{field} must be within -{MAX_PRIORITY}..{MAX_PRIORITY}, got {value}")
    return value


def check_id(value: uuid.UUID | str, field: str) -> uuid.UUID:
    """Return ``value`` as a UUID: a UUID, or a str that parses as one.

    Raises:
        TypeError: ``value`` is neither a UUID nor a str.
        ValueError: ``value`` is a str that is not a UUID.
    """
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"{field} must be a UUID (or its str), got {type(value).__name__} {value!r}"
        )
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{field} {value!r} is not a valid UUID") from None


def check_choice(value: str, field: str, choices: Collection[str]) -> str:
    """Return ``value`` if it is one of ``choices`` (a state a verb may write:
    the schema's CHECK constraints refuse any other).

    Raises:
        ValueError: ``value`` is not one of ``choices`` (the message lists them).
    """
    if value not in choices:
        allowed = ", ".join(repr(c) for c in sorted(choices))
        raise ValueError(f"{field} must be one of {allowed}, got {value!r}")
    return value


def check_meta(meta: Mapping[str, str] | None, field: str = "meta") -> None:
    """Check every key and value of a string map with :func:`check_text`.

    Raises:
        ValueError: a key or value contains NUL.
    """
    for key, value in (meta or {}).items():
        check_text(key, f"{field} key")
        check_text(value, f"{field}[{key!r}]")


def check_max_attempts(value: int, field: str = "max_attempts") -> int:
    """Return an explicit attempt budget if it allows at least one attempt.

    Raises:
        ValueError: ``value`` is below 1 (it would retry forever, never dead-lettering).
    """
    if value < 1:
        raise ValueError(f"{field} must be >= 1 (the first try included), got {value}")
    return value


def check_same_start(
    existing_id: uuid.UUID, name: str, input: bytes, p: WorkflowStartParams
) -> None:
    """A start that found execution ``existing_id`` (of workflow ``name`` with
    ``input``) holding its id or key must ask for that same workflow and input
    (compared as JSON, codec layers undone: two encryptions of one value differ).

    Raises:
        IdempotencyConflictError: ``p`` names another workflow or input.
    """
    if name != p.name or not payloads_equal(input, p.input):
        raise IdempotencyConflictError(
            f"execution {existing_id} already holds this id/key with workflow "
            f"{name!r} and different input; nothing started"
        )


#: The longest timeout accepted (a deadline must stay a storable timestamp).
MAX_TIMEOUT = timedelta(days=36_500)


def check_timeout(value: timedelta | None, field: str) -> float | None:
    """A timeout as positive seconds (None stays None: no limit).

    Raises:
        TypeError: not a ``timedelta``.
        ValueError: zero or negative, or longer than :data:`MAX_TIMEOUT` (100 years).
    """
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(f"{field} must be a datetime.timedelta or None, not {type(value).__name__}")
    if value <= timedelta(0):
        raise ValueError(f"{field} must be positive, got {value}")
    if value > MAX_TIMEOUT:
        raise ValueError(f"{field} must be at most {MAX_TIMEOUT.days} days, got {value}")
    return value.total_seconds()


def check_limits(limits: Collection[LimitSpec], field: str = "limits") -> list[LimitSpec]:
    """Return ``limits`` as a list if each is a valid definition and no two share a name.

    Raises:
        TypeError: an item is not a :class:`LimitSpec`, or a capacity not an int.
        ValueError: a bad name, an unknown type, a capacity outside
            1..:data:`MAX_LIMIT_CAPACITY`, a rate limit without a positive
            period, a concurrency limit with one, or a repeated name.
    """
    seen: set[str] = set()
    out: list[LimitSpec] = []
    for spec in limits:
        if not isinstance(spec, LimitSpec):
            raise TypeError(f"{field}: expected LimitSpec, got {spec!r}")
        check_name(spec.name, f"{field} name")
        check_choice(spec.type, f"limit {spec.name!r} type", ("concurrency", "rate"))
        if isinstance(spec.capacity, bool) or not isinstance(spec.capacity, int):
            raise TypeError(f"limit {spec.name!r} capacity must be an int, got {spec.capacity!r}")
        if not 1 <= spec.capacity <= MAX_LIMIT_CAPACITY:
            raise ValueError(
                f"limit {spec.name!r} capacity must be within 1..{MAX_LIMIT_CAPACITY}, "
                f"got {spec.capacity}"
            )
        if spec.type == "rate" and (spec.period is None or spec.period.total_seconds() <= 0):
            raise ValueError(f"rate limit {spec.name!r} needs a positive period")
        if spec.type == "concurrency" and spec.period is not None:
            raise ValueError(f"concurrency limit {spec.name!r} takes no period")
        if spec.name in seen:
            raise ValueError(f"{field}: two limits named {spec.name!r}")
        seen.add(spec.name)
        out.append(spec)
    return out


def check_task_queue_limit(limit: LimitSpec | None) -> LimitSpec | None:
    """Return ``limit`` if it can bound a task queue: a valid, global
    concurrency limit (or None: no limit).

    Raises:
        TypeError: not a :class:`LimitSpec`, or a capacity not an int.
        ValueError: a bad name or capacity, a rate limit, or a per-key limit.
    """
    if limit is None:
        return None
    (spec,) = check_limits([limit], "task queue limit")
    if spec.type != "concurrency":
        raise ValueError(f"task queue limit {spec.name!r} must be a concurrency limit")
    if spec.per_key:
        raise ValueError(f"task queue limit {spec.name!r} cannot be per key")
    return spec


_IDENTITY = re.compile(r"[A-Za-z0-9._/@-]{1,200}")


def check_identity_name(name: str) -> str:
    """Return ``name`` when it is a valid worker identity, else raise ValueError."""
    if not isinstance(name, str) or not _IDENTITY.fullmatch(name):
        raise ValueError(
            f"invalid worker identity {name!r}: use 1-200 ASCII letters, digits and ._/@- "
            "(for example 'orders-worker-0')"
        )
    return name
