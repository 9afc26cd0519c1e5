"""The one sanitiser of free text (error messages, reasons, notes) before it is recorded."""

from __future__ import annotations

__all__ = ["clean_text", "escape_surrogates"]


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
