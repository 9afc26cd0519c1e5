"""A stored schedule record <-> its spec, action and policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import msgspec

from azync_flow.store.schedules import ScheduleRecord

from ._model import Action, SchedulePolicy
from ._spec import Fire, ScheduleSpec

__all__ = ["Decoded", "decode", "decode_policy", "decode_spec", "encode", "fire_of"]

_encoder = msgspec.json.Encoder()
_spec = msgspec.json.Decoder(ScheduleSpec)
_action: msgspec.json.Decoder[Action] = msgspec.json.Decoder(Action)
_policy = msgspec.json.Decoder(SchedulePolicy)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A schedule record with its spec, action and policy decoded."""

    record: ScheduleRecord
    spec: ScheduleSpec
    action: Action
    policy: SchedulePolicy

    @property
    def id(self) -> str:
        return self.record.id


def decode(record: ScheduleRecord) -> Decoded:
    return Decoded(
        record,
        _spec.decode(record.spec),
        _action.decode(record.action),
        _policy.decode(record.policy),
    )


def decode_spec(data: bytes | None) -> ScheduleSpec | None:
    """A stored spec (None stays None)."""
    return None if data is None else _spec.decode(data)


def decode_policy(data: bytes | None) -> SchedulePolicy | None:
    """A stored policy (None stays None)."""
    return None if data is None else _policy.decode(data)


def encode(value: ScheduleSpec | Action | SchedulePolicy) -> bytes:
    return _encoder.encode(value)


def fire_of(spec: ScheduleSpec, nominal_at: datetime, fire_at: datetime) -> Fire:
    """Rebuild a :class:`Fire` from a ledger row's instants."""
    return Fire(nominal_at, fire_at, nominal_at.astimezone(spec.zone()))
