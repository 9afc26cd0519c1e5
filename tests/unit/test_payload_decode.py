"""decode_value is the one decoder of user payloads: every way a payload can be
bad is a PayloadError naming the payload, never a raw msgspec error."""

from __future__ import annotations

import pickle
from typing import Annotated, Any

import msgspec
import pytest

from azync_flow.codec import check_payload_type, decode_value
from azync_flow.errors import PayloadError


class Order(msgspec.Struct):
    id: int


@pytest.mark.parametrize(
    ("data", "type", "message"),
    [
        (b"{bad", Any, "payload of kind 'order' is not valid JSON: "),
        (b'{"id": "seven"}', Order, "payload of kind 'order' does not match Order: "),
        (b"[1, 2]", list[str], "payload of kind 'order' does not match list[str]: "),
        (b"[" * 5000 + b"]" * 5000, Any, "payload of kind 'order' is nested too deeply"),
    ],
    ids=["not-json", "wrong-struct", "wrong-generic", "too-deep"],
)
def test_a_bad_payload_is_a_payload_error_naming_it(data: bytes, type: Any, message: str) -> None:
    with pytest.raises(PayloadError) as info:
        decode_value(data, type, "payload of kind 'order'")
    assert str(info.value).startswith(f"[payload] {message}")
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


def test_decodes_into_the_type_and_none_means_plain_json() -> None:
    assert decode_value(b'{"id": 7, "extra": 1}', Order) == Order(id=7)
    assert decode_value(b'{"id": 7}', None) == {"id": 7}
    assert decode_value(msgspec.Raw(b"[1]"), list[int]) == [1]
    # an annotation that cannot be cached (unhashable metadata) still decodes
    assert decode_value(b"3", Annotated[int, {"unhashable": []}]) == 3


def test_a_type_no_payload_can_decode_into_is_refused_up_front() -> None:
    class Opaque:
        pass

    check_payload_type(Order)
    with pytest.raises(TypeError, match="not supported"):
        check_payload_type(Opaque | dict[str, int])
