"""Search attributes: typed values an execution carries so it can be found.

A start sets them (``client.start(..., search_attributes={...})``), workflow
code changes them (``ctx.upsert_search_attributes({...})``, recorded in the
history), and ``client.list(where=[...])`` / ``azync-flow workflows list
--where`` filters executions by them. A value is one of:

=============  ===========================================  =====================
type           stored as                                    filters
=============  ===========================================  =====================
``str``        a keyword (compared whole, by code point)    = != < <= > >= in
``int``        a number                                     = != < <= > >= in
``float``      a number (finite; compares with ints)        = != < <= > >= in
``bool``       a boolean                                    = != in
``datetime``   an instant (timezone-aware, kept in UTC)     = != < <= > >= in
=============  ===========================================  =====================

A filter matches an execution whose attribute of that name has a value of the
filter's kind (a number for an int or float, an instant for a datetime, ...)
that satisfies the comparison; an execution without the attribute, or with a
value of another kind, never matches (``!=`` included). Filters combine with AND.

Build filters with :class:`SearchAttr` (``SearchAttr("amount") > 1000``) or
parse the CLI's text form with :func:`parse_search_filter`
(``'customer = "c-17"'``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias

from .errors import SearchAttributeError
from .store.validate import check_name
from .store.workflows import SearchFilter

__all__ = [
    "DATETIME_KEY",
    "MAX_KEYWORD_LENGTH",
    "MAX_SEARCH_ATTRIBUTES",
    "SEARCH_OPERATORS",
    "SearchAttr",
    "SearchFilter",
    "SearchValue",
    "check_search_attributes",
    "decode_search_attributes",
    "encode_search_attributes",
    "parse_search_assignment",
    "parse_search_filter",
    "parse_search_value",
    "search_jsonpath",
    "split_search_filters",
]

#: A search attribute's value.
SearchValue: TypeAlias = str | int | float | bool | datetime

#: The most attributes one start or one upsert sets.
MAX_SEARCH_ATTRIBUTES = 64
#: The longest keyword value, in characters.
MAX_KEYWORD_LENGTH = 1024
#: The comparisons a filter can make.
SEARCH_OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "in")
_ORDERED = frozenset({"<", "<=", ">", ">="})
_INT_RANGE = 2**63
#: The key of the stored form of a datetime (a JSON object, never a keyword).
DATETIME_KEY = "$datetime"


def _check_attribute_name(name: Any) -> str:
    try:
        return check_name(name, "search attribute name")
    except (TypeError, ValueError) as exc:
        raise SearchAttributeError(str(exc)) from None


def _encode_value(name: str, value: Any) -> Any:
    """The stored (JSON) form of one value; SearchAttributeError when not a SearchValue."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT_RANGE <= value < _INT_RANGE:
            raise SearchAttributeError(
                f"search attribute {name!r}: int {value} is outside the signed 64-bit range"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SearchAttributeError(f"search attribute {name!r}: float {value} is not finite")
        return value
    if isinstance(value, str):
        if "\x00" in value or len(value) > MAX_KEYWORD_LENGTH:
            raise SearchAttributeError(
                f"search attribute {name!r}: a keyword must not contain NUL and holds at "
                f"most {MAX_KEYWORD_LENGTH} characters"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SearchAttributeError(
                f"search attribute {name!r}: keyword {value!r} is not valid UTF-8"
            ) from None
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise SearchAttributeError(
                f"search attribute {name!r}: datetime {value.isoformat()} is naive; "
                "give a timezone-aware datetime"
            )
        utc = value.astimezone(UTC).replace(tzinfo=None)
        return {DATETIME_KEY: utc.isoformat(timespec="microseconds") + "Z"}
    raise SearchAttributeError(
        f"search attribute {name!r}: {type(value).__name__} {value!r} is not a search "
        "attribute type (str, int, float, bool or timezone-aware datetime)"
    )


def encode_search_attributes(
    attributes: Mapping[str, SearchValue | None], *, allow_unset: bool = False
) -> dict[str, Any]:
    """Check ``attributes`` and return their stored (JSON-ready) form.

    Args:
        attributes: name -> value. Names pass the product's name check
            (non-empty, no NUL, valid UTF-8, at most 255 characters).
        allow_unset: accept None as a value (an upsert that removes the name).

    Returns:
        name -> stored value (a datetime becomes ``{"$datetime": "...Z"}``).

    Raises:
        SearchAttributeError: not a mapping, a bad name, a value of another
            type, a naive datetime, a non-finite float, an int outside 64 bits,
            a keyword over :data:`MAX_KEYWORD_LENGTH` characters, or more than
            :data:`MAX_SEARCH_ATTRIBUTES` names. Also a ``ValueError``.
    """
    if not isinstance(attributes, Mapping):
        raise SearchAttributeError(
            f"search attributes must be a mapping of name to value, got {type(attributes).__name__}"
        )
    if len(attributes) > MAX_SEARCH_ATTRIBUTES:
        raise SearchAttributeError(
            f"{len(attributes)} search attributes given; at most "
            f"{MAX_SEARCH_ATTRIBUTES} are allowed"
        )
    out: dict[str, Any] = {}
    for name, value in attributes.items():
        checked = _check_attribute_name(name)
        if value is None:
            if not allow_unset:
                raise SearchAttributeError(
                    f"search attribute {checked!r}: None only removes an attribute in an upsert"
                )
            out[checked] = None
        else:
            out[checked] = _encode_value(checked, value)
    return out


def check_search_attributes(attributes: Mapping[str, SearchValue]) -> dict[str, SearchValue]:
    """Return ``attributes`` as a plain dict after checking them as a start does.

    Raises:
        SearchAttributeError: as :func:`encode_search_attributes`.
    """
    encode_search_attributes(attributes)
    return dict(attributes)


def _decode_value(value: Any) -> SearchValue:
    if isinstance(value, dict) and DATETIME_KEY in value:
        return datetime.fromisoformat(str(value[DATETIME_KEY])).replace(tzinfo=UTC)
    if isinstance(value, str | int | float | bool):
        return value
    raise SearchAttributeError(f"stored search attribute value {value!r} has no known type")


def decode_search_attributes(stored: Mapping[str, Any]) -> dict[str, SearchValue]:
    """The Python values of a stored map (the inverse of :func:`encode_search_attributes`).

    Raises:
        SearchAttributeError: a stored value of no known form.
    """
    return {name: _decode_value(value) for name, value in sorted(stored.items())}


def _filter(name: str, op: str, values: Iterable[Any]) -> SearchFilter:
    checked = _check_attribute_name(name)
    items = tuple(values)
    if op not in SEARCH_OPERATORS:
        raise SearchAttributeError(
            f"unknown search operator {op!r}; use one of {' '.join(SEARCH_OPERATORS)}"
        )
    if not items:
        raise SearchAttributeError(f"search filter on {checked!r}: 'in' needs at least one value")
    for value in items:
        _encode_value(checked, value)
        if op in _ORDERED and isinstance(value, bool):
            raise SearchAttributeError(
                f"search filter on {checked!r}: a bool compares only with = != in, not {op}"
            )
    return SearchFilter(name=checked, op=op, values=items)


class SearchAttr:
    """A search attribute in a filter: ``SearchAttr("amount") > 1000``.

    The comparison operators return a :class:`SearchFilter` (``==`` too), to
    pass in ``client.list(where=[...])``.

    Raises:
        SearchAttributeError: (on construction or comparison) a bad name, a
            value that is not a search attribute type, or an ordering
            comparison of a bool.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = _check_attribute_name(name)

    def __repr__(self) -> str:
        return f"SearchAttr({self.name!r})"

    def __eq__(self, value: object) -> SearchFilter:  # type: ignore[override]
        return _filter(self.name, "=", [value])

    def __ne__(self, value: object) -> SearchFilter:  # type: ignore[override]
        return _filter(self.name, "!=", [value])

    def __lt__(self, value: SearchValue) -> SearchFilter:
        return _filter(self.name, "<", [value])

    def __le__(self, value: SearchValue) -> SearchFilter:
        return _filter(self.name, "<=", [value])

    def __gt__(self, value: SearchValue) -> SearchFilter:
        return _filter(self.name, ">", [value])

    def __ge__(self, value: SearchValue) -> SearchFilter:
        return _filter(self.name, ">=", [value])

    __hash__ = None  # type: ignore[assignment]

    def in_(self, values: Iterable[SearchValue]) -> SearchFilter:
        """A filter matching any of ``values``."""
        return _filter(self.name, "in", values)


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_INSTANT = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})"
)
_FILTER = re.compile(
    r"\s*(?P<name>\"(?:[^\"\\]|\\.)*\"|[^\s=!<>]+)\s*(?P<op>!=|<=|>=|=|<|>|\bin\b)\s*"
)


def parse_search_value(text: str, *, bare_words: bool = False) -> SearchValue:
    """Parse a value written as text: ``"c-17"`` (a JSON string), ``4999``,
    ``49.5``, ``true``/``false``, or an ISO-8601 instant with its offset
    (``2026-12-02T12:00:00Z``). With ``bare_words`` other unquoted text is a
    keyword (``customer=c-17`` on the command line).

    Raises:
        SearchAttributeError: text that is none of these.
    """
    raw = text.strip()
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise SearchAttributeError(f"bad quoted keyword {raw}") from None
        if not isinstance(value, str):
            raise SearchAttributeError(f"bad quoted keyword {raw}")
        return value
    if raw in ("true", "false"):
        return raw == "true"
    if _NUMBER.fullmatch(raw):
        is_float = any(c in raw for c in ".eE")
        return float(raw) if is_float else int(raw)
    if _INSTANT.fullmatch(raw):
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise SearchAttributeError(f"bad instant {raw!r}") from None
    if bare_words and raw:
        return raw
    raise SearchAttributeError(
        f'cannot read search value {text!r}: quote a keyword ("c-17"), or give a '
        "number, true/false or an ISO-8601 instant with its offset"
    )


def _split_list(text: str) -> list[str]:
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise SearchAttributeError(f"'in' takes a parenthesised list, e.g. (1, 2), got {text!r}")
    items: list[str] = []
    current, quoted, escaped = "", False, False
    for ch in body[1:-1]:
        if quoted:
            current += ch
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted, current = True, current + ch
        elif ch == ",":
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return [i for i in items if i.strip()]


def parse_search_filter(text: str) -> SearchFilter:
    """Parse one filter in text form: ``NAME OP VALUE``.

    ``OP`` is one of ``= != < <= > >=`` or ``in`` with a parenthesised list
    (``customer in ("c-17", "c-18")``); ``VALUE`` as
    :func:`parse_search_value` reads it (keywords quoted). ``NAME`` may be
    quoted as a JSON string when it holds spaces or operator characters.

    Raises:
        SearchAttributeError: text of another shape, or a value or name the
            filter refuses.
    """
    m = _FILTER.match(text)
    if m is None:
        raise SearchAttributeError(
            f"cannot read search filter {text!r}: expected NAME OP VALUE with OP one of "
            f"{' '.join(SEARCH_OPERATORS)}, e.g. 'amount > 1000'"
        )
    name = m.group("name")
    if name.startswith('"'):
        name = str(parse_search_value(name))
    op, rest = m.group("op"), text[m.end() :]
    if op == "in":
        return _filter(name, op, [parse_search_value(v) for v in _split_list(rest)])
    return _filter(name, op, [parse_search_value(rest)])


def parse_search_assignment(text: str) -> tuple[str, SearchValue]:
    """Parse ``NAME=VALUE`` (the CLI's ``--search-attr``); the value as
    :func:`parse_search_value` reads it with bare words as keywords.

    Raises:
        SearchAttributeError: no ``=``, or a name or value refused.
    """
    name, sep, value = text.partition("=")
    if not sep:
        raise SearchAttributeError(f"expected NAME=VALUE, got {text!r}")
    checked = _check_attribute_name(name.strip())
    parsed = parse_search_value(value, bare_words=True)
    _encode_value(checked, parsed)
    return checked, parsed


_JSONPATH_OPS = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _literal(value: Any) -> str:
    """A jsonpath literal: JSON scalars are valid jsonpath (strings escaped as JSON)."""
    return json.dumps(value, ensure_ascii=False)


def _comparison(f: SearchFilter, value: Any) -> str:
    stored = encode_search_attributes({f.name: value})[f.name]
    path = "$." + _literal(f.name)
    if isinstance(stored, dict):  # a datetime: compare its fixed-width UTC text
        path += "." + _literal(DATETIME_KEY)
        stored = stored[DATETIME_KEY]
    op = "==" if f.op == "in" else _JSONPATH_OPS[f.op]
    return f"{path} {op} {_literal(stored)}"


def search_jsonpath(filters: Sequence[SearchFilter]) -> str:
    """One jsonpath predicate that holds when every filter does.

    Values are checked and encoded by :func:`azync_flow.search.encode_search_attributes`
    and written as JSON literals, names as quoted keys, so no caller text is
    read as jsonpath syntax. A comparison of values of two JSON types is
    unknown in jsonpath, so a value of another kind never matches.

    Raises:
        SearchAttributeError: a filter of a bad name, operator or value.
    """
    parts = []
    for f in filters:
        if f.op not in _JSONPATH_OPS and f.op != "in":
            raise SearchAttributeError(f"unknown search operator {f.op!r}")
        terms = [_comparison(f, v) for v in f.values]
        if not terms:
            raise SearchAttributeError(f"search filter on {f.name!r} has no value")
        parts.append("(" + " || ".join(terms) + ")")
    return " && ".join(parts)


def split_search_filters(text: str) -> list[SearchFilter]:
    """Parse filters written as one text joined by ``and`` (outside quotes):
    ``'customer = "c-17" and amount > 1000'`` (the console's search box).

    Raises:
        SearchAttributeError: as :func:`parse_search_filter`, for any part.
    """
    parts: list[str] = []
    current, quoted, escaped, i = "", False, False, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif text[i : i + 5].lower() == " and ":
            parts.append(current)
            current, i = "", i + 5
            continue
        current += ch
        i += 1
    parts.append(current)
    return [parse_search_filter(p) for p in parts if p.strip()]
