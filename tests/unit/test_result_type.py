"""The result type an operation records from its activity's return annotation,
and the check a decided result must pass against it: every result that the
workflow can decode passes, every one it cannot is refused with DecisionError."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest

from azync_flow import activity
from azync_flow._operations import decode_operation, operation_params
from azync_flow._result_type import MAX_SCHEMA_BYTES, ResultType, check_result, result_type_of
from azync_flow.codec import decode_value
from azync_flow.errors import DecisionError, PayloadError
from azync_flow.replay.outcome import ScheduleActivity


class Charge(msgspec.Struct):
    id: str
    amount: int = 0


@dataclasses.dataclass
class Receipt:
    number: int
    lines: list[str]


class Order(TypedDict):
    sku: str


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Cat(msgspec.Struct, tag=True):
    name: str


class Dog(msgspec.Struct, tag=True):
    name: str


def _recorded(annotation: Any) -> ResultType:
    found = result_type_of(annotation)
    assert found is not None
    return found


def _fits(annotation: Any, value: Any) -> bool:
    """Whether the check accepts ``value``; asserts it agrees with the decoder
    the workflow uses on the same JSON."""
    data = msgspec.json.encode(value)
    try:
        check_result(data, _recorded(annotation))
        accepted = True
    except DecisionError:
        accepted = False
    try:
        decode_value(data, annotation)
        decodes = True
    except PayloadError:
        decodes = False
    assert accepted == decodes, (annotation, value)
    return accepted


CASES: list[tuple[Any, list[Any], list[Any]]] = [
    (str, ["ch_1", ""], [12345, None, True, ["ch_1"]]),
    (int, [0, -7, 12345], ["12345", 1.5, True, None]),
    (float, [1.5, 2], ["1.5", False]),
    (bool, [True, False], [1, "true"]),
    (Charge, [{"id": "ch_1"}, {"id": "ch_1", "amount": 5, "extra": 1}], [{}, {"id": 5}, "ch_1"]),
    (Receipt, [{"number": 1, "lines": ["a"]}], [{"number": 1}, {"number": 1, "lines": [2]}]),
    (str | None, ["x", None], [3, ["x"]]),
    (list[int], [[], [1, 2]], [[1, "a"], {"a": 1}, 1]),
    (dict[str, int], [{}, {"a": 1}], [{"a": "b"}, [1]]),
    (tuple[int, str], [[1, "a"]], [[1], [1, "a", 3], ["a", 1]]),
    (type(None), [None], [0, "", {}]),
    (Literal["ok", "retry"], ["ok"], ["maybe", 1]),
    (Color, ["red"], ["green", 0]),
    (Cat | Dog, [{"type": "Cat", "name": "tom"}], [{"type": "Cow", "name": "x"}, {"name": "x"}]),
    (uuid.UUID, [str(uuid.uuid4())], ["not-a-uuid", 5]),
    (bytes, ["aGk="], ["not base64!", 5]),
    (Annotated[int, msgspec.Meta(ge=0)], [0, 3], [-1]),
    (Annotated[str, msgspec.Meta(max_length=2)], ["ab"], ["abc"]),
    (datetime.datetime, ["2026-12-06T12:00:00Z"], [5]),
    (datetime.date, ["2026-12-06"], ["06/12/2026", 5]),
    (datetime.timedelta, ["P1D"], ["a day"]),
    (decimal.Decimal, ["1.50", 1.5, 3], ["one", None]),
    (Order, [{"sku": "a"}], [{"sku": 1}, {}]),
    (Annotated[str, msgspec.Meta(pattern="^ch_")], ["ch_1"], ["tx_1"]),
]


@pytest.mark.parametrize(("annotation", "good", "bad"), CASES, ids=[repr(c[0]) for c in CASES])
def test_results_the_workflow_decodes_pass_and_others_are_refused(
    annotation: Any, good: list[Any], bad: list[Any]
) -> None:
    for value in good:
        assert _fits(annotation, value), value
    for value in bad:
        assert not _fits(annotation, value), value


def test_a_refusal_names_the_expected_type_and_the_given_result() -> None:
    with pytest.raises(DecisionError) as info:
        check_result(b"12345", _recorded(str))
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.expected, err.given) == ("str", "12345")
    assert '$: 12345 is not of type "string"' in str(err)
    assert str(err).startswith("[decision_invalid] ")


def test_an_integral_float_is_refused_for_an_int_as_the_decoder_refuses_it() -> None:
    for given in (b"1.0", b"1e2"):
        with pytest.raises(DecisionError, match='is not of type "integer"'):
            check_result(given, _recorded(int))
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(given, type=int)  # what the workflow would do with it
    with pytest.raises(DecisionError, match=r'\$\[0\]: 2\.0 is not of type "integer"'):
        check_result(b"[2.0]", _recorded(list[int]))
    check_result(b"1", _recorded(float))  # a JSON integer still fits a float


def test_a_refusal_points_at_the_field_that_does_not_fit() -> None:
    with pytest.raises(DecisionError, match=r'\$\.id: 5 is not of type "string"') as info:
        check_result(b'{"id": 5}', _recorded(Charge))
    assert info.value.expected == "Charge"
    with pytest.raises(DecisionError, match=r'"id" is a required property'):
        check_result(b"{}", _recorded(Charge))
    with pytest.raises(DecisionError, match=r'\$\[1\]: "a" is not of type "integer"'):
        check_result(b'[1, "a"]', _recorded(list[int]))


def test_a_refusal_tells_values_in_json_not_in_python() -> None:
    with pytest.raises(DecisionError) as info:
        check_result(b"[1, true]", _recorded(list[int]))
    assert '$[1]: true is not of type "integer"' in str(info.value)
    assert "True" not in str(info.value)
    with pytest.raises(DecisionError, match=r'\$: "maybe" is not one of \["no","yes"\]'):
        check_result(b'"maybe"', _recorded(Literal["yes", "no"]))


def test_type_names_are_short() -> None:
    assert _recorded(str).name == "str"
    assert _recorded(Charge).name == "Charge"
    assert _recorded(list[int]).name == "list[int]"
    assert _recorded(type(None)).name == "None"


def test_a_long_given_result_is_cut() -> None:
    with pytest.raises(DecisionError) as info:
        check_result(msgspec.json.encode(list(range(500))), _recorded(str))
    assert len(info.value.given) == 200
    assert info.value.given.endswith("…")


def test_any_and_types_msgspec_cannot_describe_record_nothing() -> None:
    assert result_type_of(Any) is None
    assert result_type_of(object) is None


def test_a_schema_over_the_size_limit_records_nothing() -> None:
    fields = [(f"field_number_{i:04}", int) for i in range(MAX_SCHEMA_BYTES // 20)]
    wide = msgspec.defstruct("Wide", fields)
    assert result_type_of(wide) is None


def test_not_json_is_a_payload_error() -> None:
    with pytest.raises(PayloadError):
        check_result(b"{not json", _recorded(str))


def test_an_activity_records_its_return_annotation() -> None:
    @activity(name="rt_charge")
    def charge(amount: int) -> Charge:
        return Charge(id="x")

    @activity(name="rt_nothing")
    def nothing() -> None:
        return None

    @activity(name="rt_unannotated")
    def unannotated(x):  # type: ignore[no-untyped-def]
        return x

    @activity(name="rt_any")
    def anything(x: int) -> Any:
        return x

    assert charge.recorded_result_type == result_type_of(Charge)
    assert nothing.recorded_result_type == ResultType(name="None", schema={"type": "null"})
    assert unannotated.recorded_result_type is None
    assert anything.recorded_result_type is None


def test_the_operation_payload_carries_the_result_type() -> None:
    recorded = _recorded(str)
    params = operation_params(
        uuid.uuid4(), "wf", ScheduleActivity(1, "act", "1", b"[]", None, recorded)
    )
    assert decode_operation(params.payload).result_type == recorded


def test_a_payload_without_a_result_type_decodes_to_none() -> None:
    # operations scheduled before the result type was recorded
    old = b'{"seq":1,"activity":"act","version":"1","input":[]}'
    assert decode_operation(old).result_type is None
