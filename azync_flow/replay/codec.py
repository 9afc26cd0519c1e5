"""JSON payload codec for user values (inputs, results, signal payloads)."""

from __future__ import annotations

from typing import Any

import msgspec

from azync_flow.errors import PayloadEncodeError, PayloadError, PayloadTooLargeError

__all__ = ["DEFAULT_MAX_PAYLOAD_BYTES", "decode_value", "encode_value"]

#: Default per-payload limit (bytes). ``None`` disables the check.
DEFAULT_MAX_PAYLOAD_BYTES: int | None = 64 * 1024 * 1024

_ENCODER = msgspec.json.Encoder()


def _enc_hook(value: Any) -> Any:
    raise NotImplementedError(f"cannot encode {type(value).__name__} as JSON")


_HOOKED = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode_value(value: Any, what: str = "payload", limit: int | None = None) -> bytes:
    """Encode ``value`` as JSON bytes.

    ``bytes`` values are encoded by msgspec as base64 strings (decode them with a
    ``bytes`` annotation to get them back).

    Raises:
        PayloadEncodeError: the value is not encodable (unsupported type, lone
            surrogate in a string, ...). Not retryable.
        PayloadTooLargeError: the encoding is over ``limit`` bytes.
    """
    try:
        data = _HOOKED.encode(value)
    except (TypeError, NotImplementedError, UnicodeEncodeError, OverflowError) as exc:
        raise PayloadEncodeError(f"{what} is not JSON-encodable: {exc}") from exc
    if limit is not None and len(data) > limit:
        raise PayloadTooLargeError(what, len(data), limit)
    return data


def decode_value(data: bytes | msgspec.Raw, type: Any = Any, what: str = "payload") -> Any:
    """Decode JSON bytes into ``type`` (unknown Struct fields are ignored).

    Raises:
        PayloadError: the JSON does not match ``type``.
    """
    try:
        if type is Any or type is None:
            return msgspec.json.decode(data)
        return msgspec.json.decode(data, type=type)
    except msgspec.ValidationError as exc:
        raise PayloadError(f"{what} does not match {type!r}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise PayloadError(f"{what} is not valid JSON: {exc}") from exc
