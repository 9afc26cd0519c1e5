"""The one sanitiser of free text (error messages, reasons, notes) before it is recorded."""

from __future__ import annotations

__all__ = ["clean_text", "escape_surrogates", "shorten"]

#: What marks a cut.
ELLIPSIS = "…"


def escape_surrogates(value: str) -> str:
    """``value`` with lone surrogates backslash-escaped (``\\udXXX``), so UTF-8 can encode it.

    Other text, NUL included, is unchanged (JSON escapes NUL itself).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def clean_text(value: str) -> str:
    """Make ``value`` storable in a Postgres ``text`` column.

    NUL (which ``text`` rejects) is shown as the four characters ``\\x00`` and
    lone surrogates are backslash-escaped, so recording a failure can never
    itself fail. Other text is unchanged.
    """
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    return escape_surrogates(value)


def shorten(text: str, limit: int, *, breaks_after: str = "") -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, ``…``
    marking the cut (it counts in ``limit``); ``text`` itself when it fits.

    The cut falls before a space, or after one of ``breaks_after`` (``","``
    for compact JSON, which has no spaces). When the last boundary that fits
    would leave less than half of ``limit``, a word that long is cut inside.
    """
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 0)
    head = text[:room]
    if not text[room].isspace():  # the cut falls inside a word: back to its start
        at = max(
            head.rfind(" "),
            head.rfind("\n"),
            *(head.rfind(c) + 1 for c in breaks_after),
        )
        if at >= room // 2:
            head = head[:at]
    return head.rstrip() + ELLIPSIS
