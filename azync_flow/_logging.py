"""How components log a failure they caught and will retry or leave to recovery."""

from __future__ import annotations

import logging

from azync_flow.errors import LeadershipLostError, StoreUnavailableError

__all__ = ["log_failure"]


def log_failure(
    logger: logging.Logger,
    exc: BaseException,
    msg: str,
    *args: object,
    level: int = logging.ERROR,
    traceback: bool = True,
) -> None:
    """Log ``msg % args`` for a caught ``exc`` at ``level``, with its traceback
    when ``traceback``, else followed by ``: <exc>``.

    A :class:`StoreUnavailableError` is one DEBUG line instead: the store logs
    one WARNING per outage, not one per retry. So is a
    :class:`LeadershipLostError`: a fenced write of a lapsed leadership term is
    expected when leadership moves, and the new leader does the work.
    """
    if isinstance(exc, StoreUnavailableError | LeadershipLostError):
        logger.debug(msg + ": %s", *args, exc)
    elif traceback:
        logger.log(level, msg, *args, exc_info=exc)
    else:
        logger.log(level, msg + ": %s", *args, exc)
