"""Payload codecs: compression and encryption applied to every stored user value.

Every user value (workflow and activity inputs and results, signal, query and
update arguments and answers, event, queue job and DAG task payloads, child
inputs, schedule actions' inputs) is encoded as JSON by
:func:`azync_flow.codec.encode_value`; when a codec is configured, the JSON
then goes through it and is stored in an *envelope*: a JSON string (so it can
still sit inside a history event as it did before) of the form::

    "\\u0000azc1 gzip,aesgcm <base64 of the coded bytes>"

a NUL and ``azc1`` (the magic and format version), the ids of the codecs
applied in order, and the coded bytes. The AES-GCM layer starts with the id of
the key that encrypted it. A reader undoes the layers from the last; a value
that is not an envelope is plain JSON (written without codecs, or before they
were configured) and is read as it is. Without a codec nothing changes: the
JSON is stored as it is.

Configure one codec for the process (every client, worker, the CLI, the
Replayer and the testing kit of the process use it):

* :func:`set_payload_codec` at start-up, or
* the environment variable ``AZYNC_PAYLOAD_CODEC=module:attr`` naming a codec
  or a function returning one, loaded on first use (how the CLI and worker
  processes started by ``azync-flow`` get it);
* :func:`use_payload_codec` overrides it for the code inside a ``with`` block
  (the current task and the tasks it starts).

Key rotation: give :class:`AesGcmCodec` every key still needed to read old
payloads and name the one new payloads are encrypted with (``current``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import gzip
import importlib
import os
import re
import secrets
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

import msgspec

from azync_flow.errors import PayloadCodecError

__all__ = [
    "CODEC_ENV",
    "UNDECODABLE_RETRY",
    "AesGcmCodec",
    "CodecChain",
    "GzipCodec",
    "PayloadCodec",
    "ZstdCodec",
    "active_codec",
    "describe_envelope",
    "is_envelope",
    "open_envelope",
    "payloads_equal",
    "seal",
    "set_payload_codec",
    "use_payload_codec",
]

#: Environment variable naming the process codec: ``module:attr`` (a codec, a
#: list of codecs, or a function of no argument returning either).
CODEC_ENV = "AZYNC_PAYLOAD_CODEC"

#: How long a worker that cannot decode a queue job's, event delivery's or
#: activity's payload (its codec or key is not configured there) leaves it
#: before it can be leased again, by this worker or one that has the key.
UNDECODABLE_RETRY = timedelta(seconds=30)

#: The start of every envelope: a JSON string opening with NUL, ``azc1``, a space.
MAGIC = b'"\\u0000azc1 '
_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}\Z")
_KEY_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")


@runtime_checkable
class PayloadCodec(Protocol):
    """One layer applied to stored payload bytes.

    ``id`` (lower-case letters, digits, ``_.-``; at most 32 characters) is
    written in each envelope, so a reader knows which layer to undo; never
    reuse an id for another format. ``decode(encode(b)) == b`` for any bytes.
    Raise :class:`~azync_flow.errors.PayloadCodecError` from ``decode`` for
    bytes that cannot be decoded (a missing key, corrupt data).
    """

    @property
    def id(self) -> str:
        """The codec's id in envelopes."""
        ...

    def encode(self, data: bytes) -> bytes:
        """Return ``data`` transformed (compressed, encrypted, ...)."""
        ...

    def decode(self, data: bytes) -> bytes:
        """Undo :meth:`encode`."""
        ...


class GzipCodec:
    """gzip compression (the standard library's ``zlib``).

    Args:
        level: compression level 1 (fastest) to 9 (smallest).
    """

    id = "gzip"

    def __init__(self, level: int = 6) -> None:
        if not 1 <= level <= 9:
            raise ValueError(f"gzip level must be 1..9, got {level}")
        self.level = level

    def encode(self, data: bytes) -> bytes:
        return gzip.compress(data, compresslevel=self.level, mtime=0)

    def decode(self, data: bytes) -> bytes:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise PayloadCodecError(f"payload is not valid gzip: {exc}", codec=self.id) from None


class ZstdCodec:
    """zstd compression (the optional ``zstandard`` package:
    ``pip install 'azync-flow[zstd]'``).

    Args:
        level: compression level 1 to 22.

    Raises:
        PayloadCodecError: ``zstandard`` is not installed.
    """

    id = "zstd"

    def __init__(self, level: int = 3) -> None:
        zstd = _zstandard()
        self.level = level
        self._compressor = zstd.ZstdCompressor(level=level)
        self._decompressor = zstd.ZstdDecompressor()

    def encode(self, data: bytes) -> bytes:
        out: bytes = self._compressor.compress(data)
        return out

    def decode(self, data: bytes) -> bytes:
        try:
            out: bytes = self._decompressor.decompress(data)
        except Exception as exc:  # zstandard.ZstdError
            raise PayloadCodecError(f"payload is not valid zstd: {exc}", codec=self.id) from None
        return out


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        raise PayloadCodecError(
            "the zstd codec needs the zstandard package: pip install 'azync-flow[zstd]'",
            codec="zstd",
        ) from None
    return zstandard


class AesGcmCodec:
    """AES-GCM encryption (the ``cryptography`` package:
    ``pip install 'azync-flow[crypto]'``), the key id recorded with each payload.

    Each payload is encrypted with the ``current`` key and a fresh random
    96-bit nonce; the layer is ``[key id length][key id][nonce][ciphertext +
    tag]``, the key id authenticated with it. A payload decrypts with whichever
    configured key its id names, so rotating is: add the new key, make it
    ``current``, keep the old ones as long as payloads written with them live.

    Args:
        keys: key id -> key (16, 24 or 32 bytes: AES-128/192/256). Key ids:
            letters, digits, ``_.:-``, at most 64 characters.
        current: the id of the key new payloads are encrypted with.

    Raises:
        ValueError: no keys, a bad key id or key length, or ``current`` not in ``keys``.
        PayloadCodecError: ``cryptography`` is not installed.
    """

    id = "aesgcm"

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise PayloadCodecError(
                "the aesgcm codec needs the cryptography package: pip install 'azync-flow[crypto]'",
                codec=self.id,
            ) from None
        if current not in keys:
            raise ValueError(f"current key {current!r} is not among the keys {sorted(keys)}")
        self._ciphers: dict[str, Any] = {}
        for key_id, key in keys.items():
            if not _KEY_ID.match(key_id):
                raise ValueError(f"key id {key_id!r}: use 1-64 letters, digits or _.:-")
            if len(key) not in (16, 24, 32):
                raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES needs 16, 24 or 32")
            self._ciphers[key_id] = AESGCM(bytes(key))
        self.current = current
        self._prefix = bytes([len(current)]) + current.encode()
        self._invalid_tag: type[Exception] = _invalid_tag()

    @property
    def key_ids(self) -> list[str]:
        """The ids of the configured keys."""
        return list(self._ciphers)

    def encode(self, data: bytes) -> bytes:
        nonce = secrets.token_bytes(12)
        sealed: bytes = self._ciphers[self.current].encrypt(nonce, data, self._prefix)
        return self._prefix + nonce + sealed

    def decode(self, data: bytes) -> bytes:
        key_id = _key_id(data)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise PayloadCodecError(
                f"payload encrypted with key {key_id!r} which is not configured "
                f"(configured: {', '.join(map(repr, self._ciphers))})",
                codec=self.id,
                key_id=key_id,
            )
        start = 1 + len(key_id)
        try:
            out: bytes = cipher.decrypt(data[start : start + 12], data[start + 12 :], data[:start])
        except self._invalid_tag:
            raise PayloadCodecError(
                f"payload encrypted with key {key_id!r} does not decrypt with the configured "
                "key of that id (another key under the same id, or corrupt bytes)",
                codec=self.id,
                key_id=key_id,
            ) from None
        return out


def _invalid_tag() -> type[Exception]:
    from cryptography.exceptions import InvalidTag

    return InvalidTag


def _key_id(layer: bytes) -> str:
    """The key id at the start of an AES-GCM layer."""
    size = layer[0] if layer else 0
    if not size or len(layer) < 1 + size + 12 + 16:
        raise PayloadCodecError("encrypted payload is truncated", codec=AesGcmCodec.id)
    try:
        return layer[1 : 1 + size].decode("ascii")
    except UnicodeDecodeError:
        raise PayloadCodecError("encrypted payload has a corrupt key id", codec="aesgcm") from None


class CodecChain:
    """Codecs applied in order on write (e.g. compress, then encrypt) and undone
    in reverse on read.

    Reading resolves each layer by the id written in the envelope, so a chain
    reads payloads written by another chain (or with no codec at all) as long
    as it has every layer's codec; gzip and zstd are always readable, an
    encrypted layer needs an :class:`AesGcmCodec` holding its key.

    Args:
        codecs: the codecs, applied first to last.

    Raises:
        ValueError: a codec id that is malformed or appears twice.
    """

    def __init__(self, codecs: Iterable[PayloadCodec]) -> None:
        self.codecs = list(codecs)
        ids = [c.id for c in self.codecs]
        for codec_id in ids:
            if not _ID.match(codec_id):
                raise ValueError(f"codec id {codec_id!r}: use 1-32 of a-z, 0-9, _.-")
        if len(set(ids)) != len(ids):
            raise ValueError(f"codec ids appear twice in {ids}")
        self._by_id = {c.id: c for c in self.codecs}
        self._header = MAGIC + ",".join(ids).encode() + b" "

    def __repr__(self) -> str:
        return f"CodecChain([{', '.join(c.id for c in self.codecs)}])"

    def seal(self, data: bytes) -> bytes:
        """Apply the codecs to JSON ``data`` and wrap the result in an envelope."""
        for codec in self.codecs:
            data = codec.encode(data)
        return self._header + base64.b64encode(data) + b'"'

    def codec(self, codec_id: str) -> PayloadCodec:
        """The codec that undoes the layer ``codec_id``.

        Raises:
            PayloadCodecError: no such codec is configured.
        """
        codec = self._by_id.get(codec_id)
        if codec is not None:
            return codec
        if codec_id == GzipCodec.id:
            return _GZIP
        if codec_id == ZstdCodec.id:
            return _zstd()
        if codec_id == AesGcmCodec.id:
            raise PayloadCodecError(
                "payload is encrypted (aesgcm) but no AesGcmCodec is configured", codec=codec_id
            )
        raise PayloadCodecError(f"payload codec {codec_id!r} is not configured", codec=codec_id)


_GZIP = GzipCodec()
_PLAIN = CodecChain([])
_ZSTD: list[ZstdCodec] = []


def _zstd() -> ZstdCodec:
    """A shared zstd reader (built on first use: the package is optional)."""
    if not _ZSTD:
        _ZSTD.append(ZstdCodec())
    return _ZSTD[0]


def is_envelope(data: bytes | bytearray | memoryview | msgspec.Raw) -> bool:
    """True when ``data`` is a codec envelope (not plain JSON)."""
    if isinstance(data, bytes):
        return data.startswith(MAGIC)
    return bytes(memoryview(data)[: len(MAGIC)]) == MAGIC


def _split(data: bytes) -> tuple[list[str], bytes]:
    """``(codec ids, coded bytes)`` of an envelope."""
    head, _, body = data[len(MAGIC) :].partition(b" ")
    if not body.endswith(b'"'):
        raise PayloadCodecError("payload envelope is malformed (no closing quote)")
    try:
        coded = base64.b64decode(body[:-1], validate=True)
    except (binascii.Error, ValueError):
        raise PayloadCodecError("payload envelope is malformed (bad base64)") from None
    ids = head.decode("ascii", "replace").split(",") if head else []
    return ids, coded


def open_envelope(data: bytes, codec: CodecChain | None = None) -> bytes:
    """The JSON inside envelope ``data``, every layer undone.

    Args:
        data: an envelope (see :func:`is_envelope`).
        codec: the chain to read with (default: :func:`active_codec`).

    Raises:
        PayloadCodecError: a layer's codec or key is not configured, or the
            bytes are corrupt.
    """
    ids, coded = _split(data)
    chain = codec or active_codec() or _PLAIN
    for codec_id in reversed(ids):
        coded = chain.codec(codec_id).decode(coded)
    return coded


def describe_envelope(data: bytes) -> str:
    """What was applied to envelope ``data``: ``"gzip,aesgcm (key 'k1')"``
    (``"malformed envelope"`` when it cannot be parsed)."""
    try:
        ids, coded = _split(data)
    except PayloadCodecError:
        return "malformed envelope"
    text = ",".join(ids)
    if ids and ids[-1] == AesGcmCodec.id:
        with contextlib.suppress(PayloadCodecError):
            text += f" (key {_key_id(coded)!r})"
    return text


def seal(data: bytes) -> bytes:
    """JSON ``data`` through the active codec (unchanged when none is configured)."""
    chain = active_codec()
    return data if chain is None else chain.seal(data)


def payloads_equal(a: bytes | msgspec.Raw, b: bytes | msgspec.Raw) -> bool:
    """Whether two stored payloads hold the same JSON, whatever codec wrote
    them (an encrypted payload is never byte-identical to another encryption).

    Raises:
        PayloadCodecError: one of them cannot be decoded here.
    """
    left, right = bytes(a), bytes(b)
    if left == right:
        return True
    if is_envelope(left):
        left = open_envelope(left)
    if is_envelope(right):
        right = open_envelope(right)
    return left == right


# --- the process codec --------------------------------------------------------

_UNSET: Any = object()
_process: Any = _UNSET
_override: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "azync_payload_codec", default=_UNSET
)
_env_error: PayloadCodecError | None = None


def _chain(codec: PayloadCodec | Iterable[PayloadCodec] | None) -> CodecChain | None:
    if codec is None or isinstance(codec, CodecChain):
        return codec
    if isinstance(codec, PayloadCodec):
        return CodecChain([codec])
    return CodecChain(codec)


def set_payload_codec(codec: PayloadCodec | Iterable[PayloadCodec] | None) -> None:
    """Set the codec of the process: every payload written from now on goes
    through it, and every reader decodes through it.

    Args:
        codec: a codec, a list of codecs (a :class:`CodecChain`), or None for
            plain JSON (payloads already written with codecs then cannot be read
            unless they only used gzip/zstd).
    """
    global _process
    _process = _chain(codec)


@contextlib.contextmanager
def use_payload_codec(
    codec: PayloadCodec | Iterable[PayloadCodec] | None,
) -> Iterator[CodecChain | None]:
    """Use ``codec`` instead of the process codec inside the block (in this task
    and the tasks and threads it starts with the context copied).

    Yields:
        The chain in force inside the block.
    """
    chain = _chain(codec)
    token = _override.set(chain)
    try:
        yield chain
    finally:
        _override.reset(token)


def active_codec() -> CodecChain | None:
    """The chain in force here: :func:`use_payload_codec`'s, else the process
    codec, else the one ``AZYNC_PAYLOAD_CODEC`` names; None for plain JSON.

    Raises:
        PayloadCodecError: ``AZYNC_PAYLOAD_CODEC`` cannot be loaded.
    """
    chain = _override.get()
    if chain is _UNSET:
        chain = _process
        if chain is _UNSET:
            chain = _from_env()
    return chain  # type: ignore[no-any-return]


def _from_env() -> CodecChain | None:
    global _process, _env_error
    if _env_error is not None:
        raise _env_error
    target = os.environ.get(CODEC_ENV, "").strip()
    if not target:
        _process = None
        return None
    try:
        _process = _chain(load_codec(target))
    except PayloadCodecError as exc:
        _env_error = exc
        raise
    return _process  # type: ignore[no-any-return]


def load_codec(target: str) -> PayloadCodec | Iterable[PayloadCodec] | None:
    """Import ``module:attr`` (the current directory first on the import path,
    as with ``python -m``) and return the codec it names (calling it when it is
    a function or a class, not a codec).

    Raises:
        PayloadCodecError: malformed target, import failure, no such attribute,
            or the factory failed.
    """
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise PayloadCodecError(f"{CODEC_ENV} must be module:attr, got {target!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:  # as `python -m` and the CLI's APP
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, type) or not isinstance(obj, PayloadCodec | CodecChain | list | tuple):
            obj = obj()  # a factory
    except Exception as exc:
        raise PayloadCodecError(f"cannot load the payload codec {target!r}: {exc!r}") from exc
    return obj  # type: ignore[no-any-return]
