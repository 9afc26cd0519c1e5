"""The payload-encoding helper every client entry point shares (workflow and DAG).

Wraps :func:`azync_flow.replay.codec.encode_value` and turns the failures
msgspec reports outside its usual error types into :class:`PayloadEncodeError`:

* nesting deeper than the interpreter's recursion limit (``RecursionError``);
* a NaN or ±Infinity float, which msgspec writes as JSON ``null`` — silently
  losing the value. The check costs nothing unless the JSON contains ``null``:
  then the value is also msgpack-encoded (native code, floats kept bit for
  bit) and only when that output holds a float64 with an all-ones exponent is
  the decoded value walked to confirm.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from azync_flow.errors import PayloadEncodeError
from azync_flow.replay.codec import encode_value as _codec_encode

__all__ = ["encode_value"]

#: A msgpack float64 (0xcb) whose exponent bits are all ones: NaN or ±Inf.
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def _enc_hook(value: Any) -> Any:
    raise NotImplementedError(type(value).__name__)


_MSGPACK = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


def encode_value(value: Any, what: str = "payload", limit: int | None = None) -> bytes:
    """Encode ``value`` as JSON bytes (see :func:`azync_flow.replay.codec.encode_value`).

    Raises:
        PayloadEncodeError: the value is not encodable: unsupported type, lone
            surrogate, nesting deeper than ~1000 levels, or a NaN/±Inf float.
        PayloadTooLargeError: the encoding is over ``limit`` bytes.
    """
    try:
        data = _codec_encode(value, what, limit)
    except RecursionError as exc:
        raise PayloadEncodeError(
            f"{what} is not JSON-encodable: nested too deeply (over ~1000 levels)"
        ) from exc
    if b"null" in data and _has_non_finite(value):
        raise PayloadEncodeError(
            f"{what} is not JSON-encodable: it contains a NaN or infinite float, "
            "which JSON cannot represent (it would be stored as null)"
        )
    return data


def _has_non_finite(value: Any) -> bool:
    try:
        packed = _MSGPACK.encode(value)
    except (TypeError, NotImplementedError, OverflowError, RecursionError):
        return False
    if _NON_FINITE.search(packed) is None:
        return False
    stack = [msgspec.msgpack.decode(packed)]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
