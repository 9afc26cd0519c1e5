"""An activity's result type as an operation records it (a name and a JSON
schema), and the check a decision's result must pass against it.

The schema is what ``msgspec.json.schema`` derives from the activity's return
annotation; the check validates the decided JSON against it, so a client or
CLI that does not import the activity can still refuse a result the workflow
could not decode (docs/uncertain.md, "What a decision is checked against")."""

from __future__ import annotations

import datetime
import decimal
import math
import re
import uuid
from typing import Any

import msgspec

from azync_flow.codec import decode_value, type_name
from azync_flow.errors import DecisionError

__all__ = ["MAX_SCHEMA_BYTES", "ResultType", "check_result", "result_type_of"]

#: A schema larger than this (encoded) is not recorded: the operation payload
#: travels with every attempt, and such a result goes unchecked.
MAX_SCHEMA_BYTES = 8192

#: The longest the decided result is quoted in a DecisionError.
_GIVEN_CHARS = 200

_FORMATS: dict[str, Any] = {
    "uuid": uuid.UUID,
    "date-time": datetime.datetime,
    "date": datetime.date,
    "time": datetime.time,
    "duration": datetime.timedelta,
    "decimal": decimal.Decimal,
}


class ResultType(msgspec.Struct, frozen=True, kw_only=True):
    """An activity's result type, as recorded with its operation.

    Attributes:
        name: a short name for messages (``"str"``, ``"list[int]"``, ``"Charge"``).
        schema: the JSON schema of the result (``msgspec.json.schema``).
    """

    name: str
    schema: dict[str, Any]


def result_type_of(annotation: Any) -> ResultType | None:
    """The recordable result type of a return annotation.

    Args:
        annotation: the activity function's resolved return annotation
            (``str``, ``Charge``, ``list[int] | None``, ``NoneType`` for
            ``-> None``).

    Returns:
        Its name and JSON schema; None when nothing can be checked: ``Any``
        (or no annotation), a type msgspec cannot describe, or a schema over
        :data:`MAX_SCHEMA_BYTES` encoded.
    """
    try:
        schema = msgspec.json.schema(annotation)
    except Exception:  # any annotation msgspec cannot describe: leave it unchecked
        return None
    if not schema or len(msgspec.json.encode(schema)) > MAX_SCHEMA_BYTES:
        return None
    name = "None" if annotation is type(None) else type_name(annotation).replace("typing.", "")
    return ResultType(name=name, schema=schema)


def check_result(data: bytes, expected: ResultType) -> None:
    """Check decided result JSON against a recorded result type.

    Args:
        data: the result as stored: JSON bytes, or the payload codec's
            envelope of them (opened with the active codec).
        expected: the operation's recorded result type.

    Raises:
        DecisionError: ``data`` does not fit (``.expected`` is the type name,
            ``.given`` the JSON, cut to 200 characters).
        PayloadError: ``data`` is not JSON (or an envelope this process
            cannot open).
    """
    value = decode_value(data, Any, "decided result")
    problem = _check(value, expected.schema, expected.schema, "$")
    if problem is not None:
        raise DecisionError(expected.name, _given(value), problem)


def _given(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= _GIVEN_CHARS else text[: _GIVEN_CHARS - 1] + "…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value: Any, wanted: str) -> bool:
    got = _json_type(value)
    return got == wanted or (wanted == "number" and got == "integer")


def _check(value: Any, schema: Any, root: dict[str, Any], path: str) -> str | None:
    """The first way ``value`` breaks ``schema`` (with its JSON path), or None.

    Covers the keywords ``msgspec.json.schema`` emits; others are ignored (a
    result is then accepted rather than refused on a guess)."""
    if schema is True or schema == {}:
        return None
    if schema is False:
        return f"{path}: no value is allowed here"
    if not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        if target is not None and (problem := _check(value, target, root, path)):
            return problem
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            if all(_check(value, s, root, path) is not None for s in options):
                return f"{path}: {_short(value)} matches none of {_names(options, root)}"
    for sub in schema.get("allOf", ()):
        if problem := _check(value, sub, root, path):
            return problem
    if "const" in schema and not _same(value, schema["const"]):
        return f"{path}: expected {schema['const']!r}, got {_short(value)}"
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        return f"{path}: expected one of {schema['enum']!r}, got {_short(value)}"
    wanted = schema.get("type")
    if schema.get("format") == "decimal" and _json_type(value) in ("integer", "number"):
        wanted = None  # the decoder takes a Decimal from a JSON number too
    if wanted is not None:
        kinds = wanted if isinstance(wanted, list) else [wanted]
        if not any(_type_ok(value, k) for k in kinds):
            return f"{path}: expected {' or '.join(kinds)}, got {_json_type(value)}"
    if isinstance(value, str):
        return _check_string(value, schema, path)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _check_number(value, schema, path)
    if isinstance(value, list):
        return _check_array(value, schema, root, path)
    if isinstance(value, dict):
        return _check_object(value, schema, root, path)
    return None


def _check_string(value: str, schema: dict[str, Any], path: str) -> str | None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        return f"{path}: shorter than {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{path}: longer than {schema['maxLength']} characters"
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        return f"{path}: does not match the pattern {schema['pattern']!r}"
    target = _FORMATS.get(schema.get("format", ""))
    if schema.get("contentEncoding") == "base64":
        target = bytes
    if target is not None:
        try:
            msgspec.json.decode(msgspec.json.encode(value), type=target)
        except msgspec.ValidationError:
            what = schema.get("format") or schema.get("contentEncoding")
            return f"{path}: {_short(value)} is not a valid {what}"
    return None


def _check_number(value: float, schema: dict[str, Any], path: str) -> str | None:
    for key, op in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("exclusiveMinimum", ">"),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema and not _compare(value, op, schema[key]):
            return f"{path}: {value!r} is not {op} {schema[key]!r}"
    step = schema.get("multipleOf")
    if step and not math.isclose(value / step, round(value / step)):
        return f"{path}: {value!r} is not a multiple of {step!r}"
    return None


def _compare(value: float, op: str, bound: float) -> bool:
    if op == ">=":
        return value >= bound
    if op == "<=":
        return value <= bound
    return value > bound if op == ">" else value < bound


def _check_array(
    value: list[Any], schema: dict[str, Any], root: dict[str, Any], path: str
) -> str | None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        return f"{path}: fewer than {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{path}: more than {schema['maxItems']} items"
    prefix = schema.get("prefixItems", [])
    for i, item in enumerate(value):
        sub = prefix[i] if i < len(prefix) else schema.get("items", True)
        if problem := _check(item, sub, root, f"{path}[{i}]"):
            return problem
    return None


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str
) -> str | None:
    for name in schema.get("required", ()):
        if name not in value:
            return f"{path}: missing required field {name!r}"
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        sub = props.get(key, extra)
        if problem := _check(item, sub, root, f"{path}.{key}"):
            return problem
    return None


def _resolve(ref: Any, root: dict[str, Any]) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _names(options: list[Any], root: dict[str, Any]) -> str:
    names = []
    for s in options:
        target = _resolve(s.get("$ref"), root) if isinstance(s, dict) else None
        if isinstance(target, dict) and "title" in target:
            names.append(str(target["title"]))
        elif isinstance(s, dict) and "type" in s:
            names.append(str(s["type"]))
        else:
            names.append("a variant")
    return ", ".join(names)


def _same(a: Any, b: Any) -> bool:
    # JSON equality: True is not 1
    numbers = ("integer", "number")
    kinds = (_json_type(a), _json_type(b))
    return (kinds[0] == kinds[1] or (kinds[0] in numbers and kinds[1] in numbers)) and a == b


def _short(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 60 else text[:59] + "…"
