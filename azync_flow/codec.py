"""The one JSON payload codec for user values: workflow and activity inputs and
results, signal, query and update arguments, queue job, event and DAG task
payloads. Every payload is encoded by :func:`encode_value` and decoded by
:func:`decode_value`, so a bad one gets the same :class:`PayloadError` family
wherever it shows up.

Both go through the configured payload codec (compression, encryption:
:mod:`azync_flow.payload_codec`, docs/codecs.md) when there is one: the JSON
is sealed in an envelope after encoding and opened before decoding; plain JSON
(no codec, or written before one was configured) is read as it is.

:func:`encode_value` also turns the failures msgspec reports outside its usual
error types into :class:`PayloadEncodeError`:

* nesting deeper than the interpreter's recursion limit (``RecursionError``);
* a NaN or ±Infinity float, which msgspec writes as JSON ``null`` — silently
  losing the value. The check costs nothing unless the JSON contains ``null``:
  then the value is also msgpack-encoded (native code, floats kept bit for
  bit) and only when that output holds a float64 with an all-ones exponent is
  the decoded value walked to confirm.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any

import msgspec

from azync_flow.errors import (
    PayloadCodecError,
    PayloadEncodeError,
    PayloadError,
    PayloadTooLargeError,
)
from azync_flow.payload_codec import (
    MAGIC,
    CodecChain,
    active_codec,
    is_envelope,
    open_envelope,
)

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "check_payload_type",
    "decode_value",
    "encode_value",
    "type_name",
]

#: Default per-payload limit (bytes) that :func:`encode_value` applies to the
#: bytes stored, after the payload codec (so compression counts).
DEFAULT_MAX_PAYLOAD_BYTES: int = 64 * 1024 * 1024

_ENCODER = msgspec.json.Encoder()


def _enc_hook(value: Any) -> Any:
    raise NotImplementedError(f"cannot encode {type(value).__name__} as JSON")


_HOOKED = msgspec.json.Encoder(enc_hook=_enc_hook)

#: A msgpack float64 (0xcb) whose exponent bits are all ones: NaN or ±Inf.
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def _msgpack_hook(value: Any) -> Any:
    raise NotImplementedError(type(value).__name__)


_MSGPACK = msgspec.msgpack.Encoder(enc_hook=_msgpack_hook)


def encode_value(
    value: Any, what: str = "payload", limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES
) -> bytes:
    """Encode ``value`` as JSON bytes, through the payload codec when one is
    configured (:func:`azync_flow.payload_codec.active_codec`).

    ``bytes`` values are encoded by msgspec as base64 strings (decode them with a
    ``bytes`` annotation to get them back).

    Args:
        value: the value.
        what: names the payload in errors.
        limit: the most bytes the stored payload may take (after the codec);
            None: no limit.

    Raises:
        PayloadEncodeError: the value is not encodable: unsupported type, lone
            surrogate, nesting deeper than ~1000 levels, or a NaN/±Inf float.
            Not retryable.
        PayloadTooLargeError: the stored bytes are over ``limit``.
        PayloadCodecError: the codec named by ``AZYNC_PAYLOAD_CODEC`` cannot be
            loaded.
    """
    try:
        data = _HOOKED.encode(value)
    except (TypeError, NotImplementedError, UnicodeEncodeError, OverflowError) as exc:
        raise _encode_error(what, value, str(exc)) from exc
    except RecursionError as exc:
        raise PayloadEncodeError(
            f"{what} is not JSON-encodable: nested too deeply (over ~1000 levels)"
        ) from exc
    if b"null" in data and _has_non_finite(value):
        raise _encode_error(
            what,
            value,
            "it contains a NaN or infinite float, which JSON cannot represent "
            "(it would be stored as null)",
        )
    chain = active_codec()
    if data.startswith(MAGIC):  # rare: an envelope passed on, or a look-alike string
        data = _passed_on(value, data, chain, what)
    elif chain is not None:
        data = chain.seal(data)
    if limit is not None and len(data) > limit:
        raise PayloadTooLargeError(what, len(data), limit)
    return data


def _passed_on(value: Any, data: bytes, chain: CodecChain | None, what: str) -> bytes:
    """The stored bytes of a value whose JSON starts like an envelope: an
    encoded payload passed on as ``msgspec.Raw`` (a schedule's input) is kept
    as it is; a string that merely looks like one is sealed, or refused when
    there is no codec (stored plain it would be read as an envelope)."""
    if isinstance(value, msgspec.Raw):
        return data
    if chain is None:
        raise PayloadEncodeError(
            f"{what} is a string starting with NUL + 'azc1 ', which marks an encoded "
            "payload: stored plain it would be read as one"
        )
    return chain.seal(data)


def _encode_error(what: str, value: Any, why: str) -> PayloadEncodeError:
    """The error naming the path of ``value``'s first unencodable part."""
    path = _bad_path(value)
    where = f" at {path}" if path else ""
    return PayloadEncodeError(f"{what} is not JSON-encodable{where}: {why}", path)


def _bad_leaf(leaf: Any) -> bool:
    if isinstance(leaf, float):
        return not math.isfinite(leaf)
    try:
        _HOOKED.encode(leaf)
    except (TypeError, NotImplementedError, UnicodeEncodeError, OverflowError, RecursionError):
        return True
    return False


def _children(value: Any) -> list[tuple[str, Any]] | None:
    """``(path step, child)`` of a container msgspec walks into; None for a leaf."""
    if isinstance(value, dict):
        return [(f"[{k!r}]", v) for k, v in value.items()]
    if isinstance(value, list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, msgspec.Struct):
        return [(f".{f}", getattr(value, f)) for f in value.__struct_fields__]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    return None


def _bad_path(value: Any, max_depth: int = 500) -> str:
    """Path of the first part of ``value`` that cannot be encoded ("" when it is
    the value itself, or none is found within ``max_depth`` levels)."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        children = _children(item)
        if children is None:
            if _bad_leaf(item):
                return path
            continue
        if isinstance(item, dict):
            for key in item:
                if _bad_leaf({key: None}):  # a key JSON cannot hold
                    return f"{path}[{key!r}]"
        if depth < max_depth:
            stack.extend((path + step, child, depth + 1) for step, child in reversed(children))
    return ""


def decode_value(data: bytes | msgspec.Raw, type: Any = Any, what: str = "payload") -> Any:
    """Decode JSON bytes into ``type`` (``Any``/None: plain JSON values; unknown
    Struct fields are ignored).

    Args:
        data: the stored bytes: JSON, or a codec envelope (opened with the
            active payload codec).
        type: what to decode into (a class, a Struct, ``list[int]``, ...).
        what: names the payload in the error (``"payload of kind 'order'"``).

    Raises:
        PayloadCodecError: an envelope whose codec or key is not configured
            here (or corrupt); the message names the payload and the key id.
        PayloadError: ``data`` is not JSON, is nested deeper than ~1000
            levels, or does not match ``type``. Not retryable: the same bytes
            fail the same way.
    """
    if data.startswith(MAGIC) if isinstance(data, bytes) else is_envelope(data):
        data = _open(data, what)
    try:
        return _decoder(type).decode(data)
    except msgspec.ValidationError as exc:
        raise PayloadError(f"{what} does not match {type_name(type)}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise PayloadError(f"{what} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise PayloadError(f"{what} is nested too deeply (over ~1000 levels)") from exc


def _open(data: bytes | msgspec.Raw, what: str) -> bytes:
    try:
        return open_envelope(bytes(data))
    except PayloadCodecError as exc:
        raise PayloadCodecError(
            f"{what} cannot be decoded: {exc.args[0]}", codec=exc.codec, key_id=exc.key_id
        ) from None


def check_payload_type(type: Any) -> None:
    """Check at registration that values can be decoded into ``type``.

    Raises:
        TypeError: msgspec cannot decode into ``type`` (e.g. a union of a
            class with other types).
    """
    _decoder(type)


def _decoder(type: Any) -> msgspec.json.Decoder[Any]:
    type = Any if type is None else type
    try:
        return _cached_decoder(type)
    except TypeError:  # an unhashable annotation: build one for this call
        return msgspec.json.Decoder(type)


@functools.lru_cache(maxsize=1024)
def _cached_decoder(type: Any) -> msgspec.json.Decoder[Any]:
    """One decoder per type (building one walks the type; decoding reuses it)."""
    return msgspec.json.Decoder(type)


def type_name(type: Any) -> str:
    """A short name of a payload type for messages (``Order``, ``list[int]``)."""
    name = getattr(type, "__name__", None)
    return name if isinstance(name, str) and "[" not in repr(type) else repr(type)


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
