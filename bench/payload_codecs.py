"""What payload codecs cost per payload, and that no codec costs nothing.

    python bench/payload_codecs.py [--rounds 7] [--number 20000]

For three payloads (small: an order of ~100 bytes of JSON; medium: ~5 kB;
large: ~500 kB), encode (``encode_value``) then decode (``decode_value``) on
each side, in rounds that alternate the order of the sides; per side the
median over rounds of microseconds per encode+decode and the stored size:

* ``json only``: ``encode_value``/``decode_value`` as they were before codecs
  (copied below, error paths aside), the floor;
* ``no codec``: ``encode_value``/``decode_value`` with no codec configured
  (what every application without codecs runs: must match the floor);
* ``gzip``, ``aesgcm``, ``gzip+aesgcm``: with those codecs.

No database. The machine's load shows in every figure; compare sides of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from azync_flow import codec as codec_module
from azync_flow.codec import decode_value, encode_value
from azync_flow.payload_codec import AesGcmCodec, CodecChain, GzipCodec, use_payload_codec

ORDER = {"id": "o-1042", "customer": "c-77", "cents": 129_900, "items": ["sku-1", "sku-9"]}
PAYLOADS: dict[str, Any] = {
    "small": ORDER,
    "medium": {"rows": [dict(ORDER, n=i) for i in range(50)]},
    "large": {"rows": [dict(ORDER, n=i, note="x" * 300) for i in range(1200)]},
}
KEY = os.urandom(32)
SIDES: dict[str, CodecChain | None] = {
    "json only": None,
    "no codec": None,
    "gzip": CodecChain([GzipCodec()]),
    "aesgcm": CodecChain([AesGcmCodec({"k1": KEY}, "k1")]),
    "gzip+aesgcm": CodecChain([GzipCodec(), AesGcmCodec({"k1": KEY}, "k1")]),
}


def main_encode_value(value: Any, what: str = "payload", limit: int | None = None) -> bytes:
    """``encode_value`` as it was before codecs (main's body, error paths aside)."""
    try:
        data = codec_module._HOOKED.encode(value)
    except (TypeError, NotImplementedError, UnicodeEncodeError, OverflowError) as exc:
        raise ValueError(what) from exc
    if limit is not None and len(data) > limit:
        raise ValueError(what)
    if b"null" in data and codec_module._has_non_finite(value):
        raise ValueError(what)
    return data


def main_decode_value(data: bytes, type: Any = Any, what: str = "payload") -> Any:
    """``decode_value`` as it was before codecs (main's body, error paths aside)."""
    try:
        return codec_module._decoder(type).decode(data)
    except msgspec.ValidationError as exc:
        raise ValueError(what) from exc


def json_only(value: Any) -> Any:
    return main_decode_value(main_encode_value(value))


def through_codec(value: Any) -> Any:
    return decode_value(encode_value(value))


def per_op_us(fn: Callable[[Any], Any], value: Any, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(value)
    return (time.perf_counter() - start) / number * 1e6


def run_side(side: str, value: Any, number: int) -> tuple[float, int]:
    fn = json_only if side == "json only" else through_codec
    with use_payload_codec(SIDES[side]):
        fn(value)  # warm the decoder cache
        us = per_op_us(fn, value, number)
        size = len(encode_value(value))
    return us, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000, help="ops per round, small")
    args = parser.parse_args()
    print(f"{'payload':8} {'side':12} {'us/op':>9} {'vs floor':>9} {'stored B':>9}")
    for name, value in PAYLOADS.items():
        number = max(20, args.number * 100 // len(encode_value(value)))
        times: dict[str, list[float]] = {s: [] for s in SIDES}
        sizes: dict[str, int] = {}
        order = list(SIDES)
        for r in range(args.rounds):
            for side in order if r % 2 == 0 else reversed(order):
                us, sizes[side] = run_side(side, value, number)
                times[side].append(us)
        floor = statistics.median(times["json only"])
        for side in SIDES:
            med = statistics.median(times[side])
            print(f"{name:8} {side:12} {med:9.2f} {med / floor:8.2f}x {sizes[side]:9d}")


if __name__ == "__main__":
    main()
