"""Sanitising of free text (error messages, reasons) before it reaches a ``text`` column."""

from __future__ import annotations


def clean_text(value: str) -> str:
    """Make ``value`` storable in a Postgres ``text`` column.

    NUL (which ``text`` rejects) is shown as the four characters ``\\x00`` and
    lone surrogates are backslash-escaped, so recording a failure can never
    itself fail (peer scenario C26).
    """
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value
