"""Replay checks for CI: recorded histories against the current workflow code."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from azync_flow.errors import NonDeterminismError, PayloadCodecError
from azync_flow.payload_codec import PayloadCodec
from azync_flow.replay.replayer import Replayer

__all__ = ["recorded_histories", "replay_histories"]


def _history_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``; a directory stands for its ``*.json`` files, sorted."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        else:
            files.append(path)
    return files


def replay_histories(
    paths: str | Path | Iterable[str | Path],
    *,
    workflows: Iterable[Any],
    codec: PayloadCodec | Sequence[PayloadCodec] | None = None,
) -> int:
    """Replay every recorded history in ``paths`` against ``workflows``.

    Accepts the JSON the :class:`~azync_flow.replay.Replayer` reads, as written
    by ``handle.recorded_history().to_json()`` and ``azync-flow workflows export``.

    Args:
        paths: a history file, a folder (its ``*.json`` files), or several of them.
        workflows: the ``@workflow`` definitions (current code) to check.
        codec: the payload codec the histories were written with; None: the
            process codec (docs/codecs.md).

    Returns:
        How many histories were replayed.

    Raises:
        NonDeterminismError: the first history the code no longer agrees with;
            ``seq``, ``recorded`` and ``new`` name the position and both
            commands, and the message names the file.
        HistoryFileError: a file is not a valid recorded history.
        KeyError: a history's workflow is not among ``workflows``.
        OSError: a file cannot be read.
        PayloadCodecError: a history's payload cannot be decoded with the codec
            (its key is not configured); the message names the file.
    """
    replayer = Replayer(workflows, codec=codec)
    files = _history_files(paths)
    for path in files:
        try:
            error = replayer.replay(path).error
        except PayloadCodecError as exc:
            raise PayloadCodecError(
                f"{path}: {exc.args[0]}", codec=exc.codec, key_id=exc.key_id
            ) from None
        if error is not None:
            detail = f"{path}: {error.detail}" if error.detail else str(path)
            raise NonDeterminismError(error.seq, error.recorded, error.new, detail) from error
    return len(files)


def recorded_histories(folder: str | Path) -> list[Any]:
    """The ``*.json`` histories of ``folder`` as pytest parameters (one test each,
    named after the file). A relative ``folder`` is resolved against the
    current directory, not the calling file's (anchor it with
    ``Path(__file__).parent / "histories"`` to run pytest from anywhere)::

        @pytest.mark.parametrize("history", recorded_histories("tests/replay"))
        def test_replays(history: Path) -> None:
            replay_histories(history, workflows=[order_workflow])

    Raises:
        FileNotFoundError: ``folder`` does not exist or holds no ``*.json`` file
            (a typo would otherwise pass with no test at all).
    """
    import pytest

    root = Path(folder)
    files = sorted(root.glob("*.json")) if root.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no recorded histories (*.json) in {root}")
    return [pytest.param(path, id=path.stem) for path in files]
