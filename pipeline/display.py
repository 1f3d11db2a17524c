"""Text from transcripts as a terminal may show it: control characters (an escape sequence, an OSC
title, a carriage return) and bidi overrides become symbols or escapes, so logged text never drives
the terminal. Every place that prints transcript text to a terminal goes through here."""

from __future__ import annotations

_CONTROL = {"\t": "⇥", "\r": "␍", "\x7f": "␡"}


def visible(text: str, *, newline: str = "↵\n") -> str:
    """Text as shown: a newline as `newline` (default ↵ followed by the line break), control and
    bidi-override characters as symbols or escapes, everything else as is."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append(newline)
        elif ch in _CONTROL:
            out.append(_CONTROL[ch])
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # ␀..␟
        elif 0x80 <= code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)  # other non-printables (zero-width, private use) are harmless to show
    return "".join(out)


def one_line(text: str) -> str:
    """`visible`, on one line: for messages that quote transcript text."""
    return visible(text, newline="↵")
