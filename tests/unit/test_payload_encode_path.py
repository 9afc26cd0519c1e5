"""PayloadEncodeError names where in the value the bad part is: the path of keys,
indexes and attributes from the top, so a large input's one bad field is found."""

from __future__ import annotations

import dataclasses
import math
import pickle

import msgspec
import pytest

from azync_flow.codec import encode_value
from azync_flow.errors import PayloadEncodeError


class Line(msgspec.Struct):
    sku: str
    price: object


@dataclasses.dataclass
class Order:
    lines: list[Line]


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"items": [1, 2, {"price": complex(1, 2)}]}, "['items'][2]['price']"),
        ({"note": "ok", "who": "bad \ud800 text"}, "['who']"),
        ([0.5, [math.nan]], "[1][0]"),
        (Order([Line("a", 1), Line("b", object())]), ".lines[1].price"),
        ({"tags": {"x": {1: {object()}}}}, "['tags']['x'][1][0]"),
    ],
)
def test_an_unencodable_value_names_the_path_of_its_bad_field(value: object, path: str) -> None:
    with pytest.raises(PayloadEncodeError) as info:
        encode_value(value, "workflow input")
    assert info.value.path == path
    assert f"workflow input is not JSON-encodable at {path}: " in str(info.value)
    again = pickle.loads(pickle.dumps(info.value))
    assert (str(again), again.path) == (str(info.value), path)


def test_a_bad_top_level_value_has_an_empty_path() -> None:
    with pytest.raises(PayloadEncodeError) as info:
        encode_value(object(), "activity result")
    assert info.value.path == ""
    assert str(info.value).startswith("[payload_encode] activity result is not JSON-encodable: ")
