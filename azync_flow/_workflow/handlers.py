"""Query and update handlers registered from workflow code (``@ctx.query``,
``@ctx.update``): argument decoding by annotation and result encoding."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from azync_flow.codec import decode_value, encode_value
from azync_flow.replay import UpdateHandler

__all__ = ["HandlerSignature", "decode_args", "query_handler", "update_handler"]


def decode_args(data: bytes, types: list[Any], what: str) -> list[Any]:
    """Decode a JSON array of positional arguments, each to its annotation
    (the last annotation covers ``*args``)."""
    raws = decode_value(data, list[msgspec.Raw], f"input of {what}")
    args = []
    for index, raw in enumerate(raws):
        hint = types[min(index, len(types) - 1)] if types else Any
        args.append(decode_value(raw, hint, f"argument {index} of {what}"))
    return args


class HandlerSignature:
    """The positional parameter types and return type of a handler function."""

    def __init__(self, fn: Callable[..., Any], what: str) -> None:
        self.what = what
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolved forward refs: fall back to untyped decoding
            hints = {}
        self.signature = inspect.signature(fn)
        params = self.signature.parameters.values()
        self.param_types: list[Any] = [
            hints.get(p.name, Any)
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
        self.return_type: Any = hints.get("return", Any)

    def args(self, data: bytes) -> list[Any]:
        return decode_args(data, self.param_types, self.what)

    def bound_args(self, data: bytes) -> list[Any]:
        """The arguments decoded to their annotations and checked against the
        signature (count, required ones).

        Raises:
            PayloadError: ``data`` is not a JSON array, or an argument does not
                decode to its annotation.
            TypeError: the arguments do not fit the signature (too many, a
                required one missing).
        """
        args = self.args(data)
        try:
            self.signature.bind(*args)
        except TypeError as exc:
            names = ", ".join(
                n if p.default is p.empty else f"{n}=..."
                for n, p in self.signature.parameters.items()
            )
            raise TypeError(
                f"{self.what} takes ({names}), got {len(args)} argument(s): {exc}"
            ) from None
        return args

    def encode(self, value: Any) -> bytes:
        return encode_value(value, f"result of {self.what}")


def query_handler(name: str, fn: Callable[..., Any]) -> Callable[[bytes], bytes]:
    """Wrap a plain function as the engine's query handler.

    Raises:
        TypeError: ``fn`` is an ``async def`` (a query cannot wait on anything).
    """
    if inspect.iscoroutinefunction(fn):
        raise TypeError(f"query handler {name!r} must be a plain def, not async def")
    sig = HandlerSignature(fn, f"query {name!r}")

    def handle(data: bytes) -> bytes:
        result = fn(*sig.args(data))
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise TypeError(f"query handler {name!r} returned an awaitable; it must not wait")
        return sig.encode(result)

    return handle


def update_handler(
    name: str, fn: Callable[..., Any], validator: Callable[..., Any] | None
) -> UpdateHandler:
    """Wrap an update function (async or plain) and its optional validator.

    Raises:
        TypeError: ``validator`` is an ``async def`` (it must decide at once).
    """
    if validator is not None and inspect.iscoroutinefunction(validator):
        raise TypeError(f"validator of update {name!r} must be a plain def, not async def")
    sig = HandlerSignature(fn, f"update {name!r}")

    async def run(data: bytes) -> bytes:
        result = fn(*sig.args(data))
        if inspect.isawaitable(result):
            result = await result
        return sig.encode(result)

    def validate(data: bytes) -> None:
        # arguments the handler could not take are a rejection, never a failure
        args = sig.bound_args(data)
        if validator is not None:
            validator(*args)

    return UpdateHandler(run=run, validate=validate)
