"""The payload codecs themselves: layers, the envelope, keys and rotation, the
process codec and its environment variable, the payload limit."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import PayloadCodecError, PayloadEncodeError, PayloadTooLargeError
from azync_flow.payload_codec import (
    CODEC_ENV,
    MAGIC,
    AesGcmCodec,
    CodecChain,
    GzipCodec,
    PayloadCodec,
    ZstdCodec,
    active_codec,
    describe_envelope,
    is_envelope,
    open_envelope,
    payloads_equal,
    use_payload_codec,
)

K1, K2 = os.urandom(32), os.urandom(16)
VALUE = {"card": "4111-1111", "items": list(range(50))}


@pytest.mark.parametrize("codec", [GzipCodec(), GzipCodec(level=9), ZstdCodec()])
def test_compression_layers_round_trip_and_shrink_repetitive_json(codec: PayloadCodec) -> None:
    data = encode_value(["same words again"] * 200)
    coded = codec.encode(data)
    assert codec.decode(coded) == data
    assert len(coded) < len(data) // 10


def test_aes_gcm_records_the_key_id_and_uses_a_fresh_nonce_each_time() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    a, b = codec.encode(b"secret"), codec.encode(b"secret")
    assert a != b
    assert a[:3] == b"\x02k1"
    assert b"secret" not in a
    assert codec.decode(a) == codec.decode(b) == b"secret"


def test_aes_gcm_refuses_tampered_bytes_and_a_tampered_key_id() -> None:
    codec = AesGcmCodec({"k1": K1, "k2": K2}, "k1")
    coded = bytearray(codec.encode(b"secret"))
    flipped = bytes(coded[:-1]) + bytes([coded[-1] ^ 1])
    with pytest.raises(PayloadCodecError, match="does not decrypt"):
        codec.decode(flipped)
    renamed = bytes(coded[:2]) + b"2" + bytes(coded[3:])  # k1 -> k2: the id is authenticated
    with pytest.raises(PayloadCodecError, match="does not decrypt"):
        codec.decode(renamed)
    with pytest.raises(PayloadCodecError, match="truncated"):
        codec.decode(bytes(coded[:10]))


def test_aes_gcm_checks_its_keys_at_construction() -> None:
    with pytest.raises(ValueError, match="not among the keys"):
        AesGcmCodec({"k1": K1}, "k2")
    with pytest.raises(ValueError, match="16, 24 or 32"):
        AesGcmCodec({"k1": b"short"}, "k1")
    with pytest.raises(ValueError, match="key id"):
        AesGcmCodec({"bad id": K1}, "bad id")


def test_a_chain_writes_a_self_describing_envelope_that_is_a_json_string() -> None:
    chain = CodecChain([GzipCodec(), AesGcmCodec({"k1": K1}, "k1")])
    with use_payload_codec(chain):
        data = encode_value(VALUE)
    assert data.startswith(MAGIC + b"gzip,aesgcm ")
    assert isinstance(msgspec.json.decode(data), str)  # embeddable in a history event
    assert describe_envelope(data) == "gzip,aesgcm (key 'k1')"
    with use_payload_codec(chain):
        assert decode_value(data) == VALUE
        assert decode_value(msgspec.Raw(data)) == VALUE
    assert open_envelope(data, chain) == encode_value(VALUE)


def test_rotation_decrypts_with_any_configured_key_and_encrypts_with_the_current() -> None:
    with use_payload_codec(AesGcmCodec({"k1": K1}, "k1")):
        old = encode_value(VALUE)
    with use_payload_codec(AesGcmCodec({"k1": K1, "k2": K2}, "k2")):
        new = encode_value(VALUE)
        assert decode_value(old) == decode_value(new) == VALUE
    assert describe_envelope(old) == "aesgcm (key 'k1')"
    assert describe_envelope(new) == "aesgcm (key 'k2')"


def test_a_missing_key_or_codec_is_a_payload_codec_error_naming_it() -> None:
    with use_payload_codec([GzipCodec(), AesGcmCodec({"k1": K1}, "k1")]):
        data = encode_value(VALUE)
    with use_payload_codec(AesGcmCodec({"k2": K2}, "k2")), pytest.raises(PayloadCodecError) as e:
        decode_value(data, what="input of workflow 'order'")
    assert str(e.value) == (
        "[payload_codec] input of workflow 'order' cannot be decoded: payload encrypted with "
        "key 'k1' which is not configured (configured: 'k2')"
    )
    assert (e.value.codec, e.value.key_id) == ("aesgcm", "k1")
    again = pickle.loads(pickle.dumps(e.value))
    assert (str(again), again.key_id) == (str(e.value), "k1")
    with use_payload_codec(None), pytest.raises(PayloadCodecError, match="no AesGcmCodec"):
        decode_value(data)


def test_compressed_payloads_read_without_configuring_the_compressor() -> None:
    with use_payload_codec(ZstdCodec()):
        data = encode_value(VALUE)
    with use_payload_codec(None):
        assert decode_value(data) == VALUE


def test_without_a_codec_payloads_are_the_plain_json_bytes() -> None:
    with use_payload_codec(None):
        assert active_codec() is None
        assert encode_value(VALUE) == msgspec.json.encode(VALUE)
        assert not is_envelope(encode_value(VALUE))


def test_plain_json_written_before_a_codec_stays_readable_with_one() -> None:
    plain = msgspec.json.encode(VALUE)
    with use_payload_codec([GzipCodec(), AesGcmCodec({"k1": K1}, "k1")]):
        assert decode_value(plain) == VALUE


def test_a_string_that_looks_like_an_envelope_is_refused_when_stored_plain() -> None:
    lookalike = "\x00azc1 gzip AAAA"
    with use_payload_codec(None), pytest.raises(PayloadEncodeError, match="marks an encoded"):
        encode_value(lookalike)
    with use_payload_codec(GzipCodec()):
        assert decode_value(encode_value(lookalike)) == lookalike


def test_an_encoded_payload_passed_on_as_raw_is_not_encoded_twice() -> None:
    with use_payload_codec(AesGcmCodec({"k1": K1}, "k1")):
        data = encode_value(VALUE)
        assert encode_value(msgspec.Raw(data)) == data
        assert decode_value(encode_value(msgspec.Raw(data))) == VALUE


def test_payloads_compare_equal_as_json_across_encryptions() -> None:
    with use_payload_codec(AesGcmCodec({"k1": K1}, "k1")):
        a, b = encode_value(VALUE), encode_value(VALUE)
        assert a != b
        assert payloads_equal(a, b)
        assert payloads_equal(a, msgspec.json.encode(VALUE))
        assert not payloads_equal(a, encode_value({"other": 1}))


def test_the_payload_limit_applies_to_the_stored_bytes_after_the_codec() -> None:
    big = ["x" * 100] * 1000  # ~104 kB of JSON, a few hundred bytes gzipped
    with use_payload_codec(None), pytest.raises(PayloadTooLargeError) as e:
        encode_value(big, "input of workflow 'w'", limit=50_000)
    assert e.value.limit == 50_000
    with use_payload_codec(GzipCodec()):
        assert len(encode_value(big, limit=50_000)) < 50_000
    with pytest.raises(PayloadTooLargeError):
        encode_value("y" * (64 * 1024 * 1024))  # DEFAULT_MAX_PAYLOAD_BYTES by default


def test_malformed_envelopes_are_codec_errors() -> None:
    with pytest.raises(PayloadCodecError, match="closing quote"):
        decode_value(MAGIC + b"gzip AAAA")
    with pytest.raises(PayloadCodecError, match="bad base64"):
        decode_value(MAGIC + b'gzip !!!"')
    with pytest.raises(PayloadCodecError, match="not valid gzip"):
        decode_value(MAGIC + b'gzip AAAA"')
    with pytest.raises(PayloadCodecError, match="'rot13' is not configured"):
        decode_value(MAGIC + b'rot13 AAAA"')
    assert describe_envelope(MAGIC + b"gzip") == "malformed envelope"


def test_a_chain_refuses_malformed_or_repeated_ids() -> None:
    with pytest.raises(ValueError, match="twice"):
        CodecChain([GzipCodec(), GzipCodec()])

    class Bad:
        id = "Not OK"

        def encode(self, data: bytes) -> bytes:
            return data

        def decode(self, data: bytes) -> bytes:
            return data

    with pytest.raises(ValueError, match="codec id"):
        CodecChain([Bad()])


APP = """
from azync_flow.payload_codec import AesGcmCodec, GzipCodec

def make():
    return [GzipCodec(), AesGcmCodec({"k1": b"k" * 32}, "k1")]
"""

PROBE = """
from azync_flow.codec import decode_value, encode_value
from azync_flow.payload_codec import describe_envelope
data = encode_value({"a": 1})
print(describe_envelope(data) if data[:1] == b'"' else data.decode(), decode_value(data))
"""


def _probe(tmp_path: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, CODEC_ENV: target, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_environment_variable_names_the_process_codec_factory(tmp_path: Path) -> None:
    (tmp_path / "codecapp.py").write_text(APP)
    done = _probe(tmp_path, "codecapp:make")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gzip,aesgcm (key 'k1') {'a': 1}"
    done = _probe(tmp_path, "")
    assert done.stdout.strip() == "{\"a\":1} {'a': 1}"
    done = _probe(tmp_path, "codecapp:nothing")
    assert done.returncode != 0
    assert (
        "PayloadCodecError: [payload_codec] cannot load the payload codec 'codecapp:nothing'"
        in (done.stderr)
    )
