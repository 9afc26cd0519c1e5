"""Who may act: the access token, sessions and CSRF tokens.

Without a token the console is read-only: no action is shown and every POST
is refused. With one, a person signs in with the token and a name (the name is
recorded as *who* on every action); the session lives in this process's memory
(a restart signs everyone out) behind an HttpOnly, SameSite=Strict cookie, and
each action form carries the session's CSRF token.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["COOKIE", "Session", "Sessions"]

#: The session cookie's name.
COOKIE = "azync_console"
#: How long a session lasts (seconds) and how many are kept at most.
SESSION_TTL = 12 * 3600
MAX_SESSIONS = 1000


@dataclass(frozen=True)
class Session:
    """A signed-in person: ``who`` is recorded with each action."""

    who: str
    csrf: str
    expires: float


class Sessions:
    """The sessions of one console process.

    Args:
        token: the access token; None or '' turns actions off.
    """

    def __init__(self, token: str | None) -> None:
        self._token = token or ""
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """True when the console was started with a token (actions possible)."""
        return bool(self._token)

    def sign_in(self, token: str, who: str) -> str | None:
        """A new session id for ``who`` when ``token`` is the access token, else None."""
        if not self.enabled or not hmac.compare_digest(token.encode(), self._token.encode()):
            return None
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = Session(who, secrets.token_urlsafe(32), time.time() + SESSION_TTL)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return sid

    def get(self, sid: str | None) -> Session | None:
        """The live session of cookie value ``sid`` (None: none, expired, or actions off)."""
        if not self.enabled or not sid:
            return None
        session = self._sessions.get(sid)
        if session is None or session.expires < time.time():
            self._sessions.pop(sid, None)
            return None
        return session

    def sign_out(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(session: Session, value: str) -> bool:
        """True when ``value`` is the session's CSRF token (constant-time)."""
        return bool(value) and hmac.compare_digest(value.encode(), session.csrf.encode())
