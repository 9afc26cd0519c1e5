"""What a ``reconcile=`` hook of a non-idempotent activity returns: :class:`Reconciled`."""

from __future__ import annotations

from typing import Any

__all__ = ["Reconciled"]


class Reconciled:
    """What a reconcile hook found out about an uncertain operation.

    Build it with the class methods::

        Reconciled.completed(result)   # it took effect; ``result`` is what the activity returns
        Reconciled.failed("declined")  # it did not and must not be retried: ActivityError
        Reconciled.retry()             # it did not take effect: run it again
        Reconciled.unknown("no answer") # cannot tell: wait for a person

    Attributes:
        outcome: "completed", "failed", "retry" or "unknown".
        result: the activity's result for ``completed`` (any JSON-encodable value).
        error: the failure message for ``failed``.
        note: free text kept in the audit trail.
    """

    __slots__ = ("error", "note", "outcome", "result")

    def __init__(self, outcome: str, result: Any = None, error: str = "", note: str = "") -> None:
        if outcome not in ("completed", "failed", "retry", "unknown"):
            raise ValueError(f"unknown reconcile outcome {outcome!r}")
        self.outcome = outcome
        self.result = result
        self.error = error
        self.note = note

    @classmethod
    def completed(cls, result: Any = None, note: str = "") -> Reconciled:
        """The operation took effect; the workflow gets ``result`` as its return value."""
        return cls("completed", result=result, note=note)

    @classmethod
    def failed(cls, error: str, note: str = "") -> Reconciled:
        """The operation did not (and will not) take effect; the workflow sees ActivityError."""
        return cls("failed", error=error or "reconciled as failed", note=note)

    @classmethod
    def retry(cls, note: str = "") -> Reconciled:
        """The operation did not take effect; running it again is safe."""
        return cls("retry", note=note)

    @classmethod
    def unknown(cls, note: str = "") -> Reconciled:
        """Cannot tell: leave the operation for a person."""
        return cls("unknown", note=note)

    @property
    def decision(self) -> str | None:
        """The ``resolve_uncertain`` decision, None for unknown."""
        return {"completed": "complete", "failed": "fail", "retry": "retry"}.get(self.outcome)

    def __repr__(self) -> str:
        return f"Reconciled.{self.outcome}(result={self.result!r}, error={self.error!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reconciled) and (
            self.outcome,
            self.result,
            self.error,
        ) == (other.outcome, other.result, other.error)

    __hash__ = None  # type: ignore[assignment]
