"""An activity's result type as an operation records it (a name and a JSON
schema), and the check a decision's result must pass against it.

The schema is what ``msgspec.json.schema`` derives from the activity's return
annotation; the check validates the decided JSON against it with
``jsonschema`` (draft 2020-12, formats checked by msgspec's own decoders), so a client or
CLI that does not import the activity can still refuse a result the workflow
could not decode (docs/uncertain.md, "What a decision is checked against")."""

from __future__ import annotations

import datetime
import decimal
import functools
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError, best_match

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
    error = best_match(
        _Validator(expected.schema, format_checker=_FORMAT_CHECKER).iter_errors(value)
    )
    if error is not None:
        raise DecisionError(
            expected.name, _cut(value), _cut_text(f"{error.json_path}: {_json_message(error)}")
        )


def _json_message(error: ValidationError) -> str:
    """``error`` told in JSON (``true``, ``"id"``), not in Python reprs."""
    instance, wanted = error.instance, error.validator_value
    if error.validator == "type":
        kinds = wanted if isinstance(wanted, list) else [wanted]
        return f"{_json(instance)} is not of type {' or '.join(_json(k) for k in kinds)}"
    if error.validator == "required" and isinstance(instance, dict):
        missing = [p for p in wanted if p not in instance]
        return f"{', '.join(_json(p) for p in missing)} is a required property"
    if error.validator == "enum":
        return f"{_json(instance)} is not one of {_json(wanted)}"
    if error.validator == "const":
        return f"{_json(instance)} is not {_json(wanted)}"
    return f"{_json(instance)} does not satisfy {error.validator} {_json(wanted)}"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _cut(value: Any) -> str:
    return _cut_text(_json(value))


def _cut_text(text: str) -> str:
    return text if len(text) <= _GIVEN_CHARS else text[: _GIVEN_CHARS - 1] + "…"


def _decodes_as(target: Any, instance: Any) -> bool:
    """Whether msgspec's decoder (the workflow's) takes ``instance`` as ``target``."""
    if not isinstance(instance, str | int | float) or isinstance(instance, bool):
        return True  # a format only constrains what it describes; "type" checks the rest
    msgspec.json.decode(msgspec.json.encode(instance), type=target)
    return True


_FORMAT_CHECKER = FormatChecker(formats=())
for _name, _target in _FORMATS.items():
    _FORMAT_CHECKER.checks(_name, raises=msgspec.ValidationError)(
        functools.partial(_decodes_as, _target)
    )

_TYPE = Draft202012Validator.VALIDATORS["type"]


def _type(
    validator: Any, types: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if schema.get("format") == "decimal" and isinstance(instance, int | float):
        return  # the decoder takes a Decimal from a JSON number too
    kinds = types if isinstance(types, list) else [types]
    if isinstance(instance, float) and "integer" in kinds and "number" not in kinds:
        # JSON Schema counts 1.0 as an integer; the decoder refuses a float for an int
        yield ValidationError(f"{instance!r} is not of type 'integer'")
        return
    yield from _TYPE(validator, types, instance, schema)


def _content_encoding(
    validator: Any, encoding: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    # msgspec describes bytes as a base64 string; the decoder refuses bad base64
    if encoding == "base64" and isinstance(instance, str):
        try:
            msgspec.json.decode(msgspec.json.encode(instance), type=bytes)
        except msgspec.ValidationError:
            yield ValidationError(f"{_cut_text(repr(instance))} is not valid base64")


_Validator = validators.extend(
    Draft202012Validator, validators={"type": _type, "contentEncoding": _content_encoding}
)
