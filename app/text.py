"""Text a client sends, checked once: what may enter the service, and how it is shown.

Three rules, shared by every place a string comes in or goes out:

- `check_utf8`: any string a client sends must be encodable as UTF-8 (no lone surrogates,
  which JSON's `\\ud800` escape can smuggle into Python). The front door applies it to
  every string of every JSON body; routes that read headers or query parameters of their own
  (the live route's `Last-Event-ID`) use it as a pydantic `AfterValidator`.
- `check_label`: a short label that ends up in a table or a log (`producer`, an event type)
  holds no control character (C0, DEL, C1) and no bidirectional override: it is shown to
  operators, and an ANSI/OSC escape or a right-to-left override there would forge output.
- `printable`: how a client-controlled value is shown in a log line or on a terminal,
  whatever it holds: control, bidi, line-breaking and unencodable characters escaped
  (`\\x1b`, `\\u202e`, `\\n`), everything else as it is, so one value is always one line.
"""

from __future__ import annotations

import re
from typing import Final

# C0 controls, DEL and C1 controls.
_CONTROL: Final = "\x00-\x1f\x7f-\x9f"
# Bidirectional formatting (embeddings, overrides, isolates, marks) and the line and
# paragraph separators, which terminals and editors may treat as line breaks.
_BIDI_AND_BREAKS: Final = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_SURROGATE: Final = "\ud800-\udfff"

_UNPRINTABLE = re.compile(f"[{_CONTROL}{_BIDI_AND_BREAKS}{_SURROGATE}\\\\]")
_NOT_A_LABEL = re.compile(f"[{_CONTROL}{_BIDI_AND_BREAKS}]")
_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def check_utf8(value: str) -> str:
    """`value` itself when it is valid UTF-8 (no lone surrogate); else `ValueError` (a 422)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError("must be valid UTF-8 (no lone surrogates)") from None
    return value


def check_label(value: str) -> str:
    """`value` itself when it is text without control or bidi characters; else `ValueError`."""
    check_utf8(value)
    found = _NOT_A_LABEL.search(value)
    if found is not None:
        raise ValueError(
            f"must not contain control or bidirectional characters "
            f"(found {printable(found.group())} at {found.start()})"
        )
    return value


def printable(value: str) -> str:
    """`value` with control, bidi, line-breaking and unencodable characters escaped.

    Backslashes are doubled too, so an escape shown can not be confused with one sent.
    """
    if _UNPRINTABLE.search(value) is None:
        return value
    return _UNPRINTABLE.sub(_escape, value)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
