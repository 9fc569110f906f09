"""The shared text rules (`app/text.py`): what may enter, and how values are shown."""

from __future__ import annotations

import pytest

from app.text import check_label, check_utf8, printable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, ünïcode, 😀", "plain text, ünïcode, 😀"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),
        ("abc\u202edcba\u2066x\u2069", "abc\\u202edcba\\u2066x\\u2069"),
        ("line\u2028sep\u2029", "line\\u2028sep\\u2029"),
        ("\ud800:1", "\\ud800:1"),
        ("back\\slash", "back\\\\slash"),
    ],
)
def test_printable_escapes_what_a_terminal_or_a_log_would_act_on(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(raw).isprintable() or raw == shown


def test_an_escape_shown_cannot_be_confused_with_one_sent() -> None:
    assert printable("\\n") != printable("\n")


@pytest.mark.parametrize("label", ["worker-1", "mcp server (eu) ü", "progress/notification"])
def test_plain_labels_pass(label: str) -> None:
    assert check_label(label) == label


@pytest.mark.parametrize(
    "label", ["a\x00b", "a\nb", "\x1b[2J", "tab\there", "\x9b31m", "x\u202ey", "x\u200fy", "\ud800"]
)
def test_labels_refuse_control_bidi_and_surrogates(label: str) -> None:
    with pytest.raises(ValueError, match="must"):
        check_label(label)


def test_utf8_text_refuses_only_lone_surrogates() -> None:
    assert check_utf8("any\x00text\n\x1b") == "any\x00text\n\x1b"
    assert check_utf8("😀") == "😀"
    with pytest.raises(ValueError, match="UTF-8"):
        check_utf8("\udc00")
