"""Stored text made safe to print: no control sequence reaches a terminal.

Agent logs hold whatever a tool printed, including escape sequences that move the
cursor, erase lines, retitle the window or write the clipboard (OSC 52), and
bidirectional-override characters that make text display in an order other than
the one stored. Text output shows each such character as a visible escape instead:

- C0 controls and DEL, except newline and tab: ``\\x1b``, ``\\x07``, ``\\r``, ``\\x7f``;
- C1 controls (U+0080 to U+009F, e.g. the single-character CSI ``\\u009b``);
- bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to
  U+2069) and the line and paragraph separators U+2028 and U+2029.

Newlines and tabs stay as they are, so text stays readable. A stored field printed
inside a line of text that people or agents read (a session id, a title, a tool
name, an excerpt) must not break that line or impersonate another field: `inline`
writes such a value bare when it is plain and as a JSON string literal otherwise,
and `flat` folds every line break of running text into a space. JSON output already
escapes C0 controls (``\\u001b``); `json_safe` escapes the rest of the set the same
way, so that viewing JSON in a terminal is safe too, and the parsed JSON holds the
stored text exactly.
"""

from __future__ import annotations

import re

_SHORT = {0x09: None, 0x0A: None, 0x0D: "\\r", 0x08: "\\b", 0x0C: "\\f", 0x0B: "\\v"}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_SEPARATORS = (0x2028, 0x2029)

#: Every character `terminal_safe` escapes.
UNSAFE = frozenset([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, *_SEPARATORS]) - {
    0x09,
    0x0A,
}


def _escape(cp: int) -> str:
    if cp in _SHORT and _SHORT[cp] is not None:
        return str(_SHORT[cp])
    return f"\\x{cp:02x}" if cp < 0x80 else f"\\u{cp:04x}"


_TERMINAL = {cp: _escape(cp) for cp in UNSAFE}
#: Characters json.dumps leaves raw (it escapes C0 itself), as JSON escapes.
_JSON = {cp: f"\\u{cp:04x}" for cp in UNSAFE if cp >= 0x7F}


def terminal_safe(text: str) -> str:
    """`text` with every control, C1 and bidi character shown as an escape."""
    return text.translate(_TERMINAL)


def json_safe(encoded: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with DEL, C1 and bidi
    characters written as ``\\uXXXX`` escapes; it parses to the same value."""
    return encoded.translate(_JSON)


#: What a stored value may hold to be printed bare inside a line: letters, digits
#: and the punctuation of ids and paths, nothing that separates fields.
_BARE = re.compile(r"[\w.:/@+~#%-]+")
#: What `inline` escapes inside quotes: every `UNSAFE` character, newline and tab.
_INLINE = {**_TERMINAL, 0x0A: "\\n", 0x09: "\\t"}
#: Every character a reader may take for the end of a line.
_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")


def inline(value: str) -> str:
    """A stored value as one field of a line: bare when it is plain (``cron-refactor``),
    else in double quotes with backslash escapes (``"Cron refactor"``,
    ``"a\\nSYSTEM: b"``, ``"\\x1b]52;"``), so that no value can end the line, close
    its quotes or pass for another field."""
    return value if _BARE.fullmatch(value) else quoted(value)


def quoted(value: str) -> str:
    """`value` in double quotes, its quotes, backslashes, line breaks and control
    characters escaped: one field of a line, whatever it holds."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').translate(_INLINE) + '"'


def flat(text: str) -> str:
    """Running text (an excerpt) on one line: line breaks become spaces, and the
    other characters `terminal_safe` escapes are escaped."""
    return terminal_safe(_BREAKS.sub(" ", text)).replace("\t", " ")


def key_problem(name: str, value: object, *, max_chars: int) -> str | None:
    """Why `value` cannot be stored as a key that is printed (a session id, a tool
    name), or None: it must be 1 to `max_chars` characters of valid Unicode with no
    control character (newline and tab included), line or paragraph separator or
    bidirectional control, which could forge lines or reorder what is shown."""
    if not isinstance(value, str) or not 0 < len(value) <= max_chars:
        return f"{name} must be a string of 1 to {max_chars} characters"
    if value.isascii() and value.isprintable():
        # Every character passes the first test below (most keys): checked in C.
        return None
    for position, char in enumerate(value):
        if char.isascii() and char.isprintable():
            continue
        code = ord(char)
        if code in UNSAFE or char in "\n\t":
            return (
                f"{name} must not contain control, separator or bidirectional characters "
                f"(U+{code:04X} at position {position})"
            )
        if 0xD800 <= code <= 0xDFFF:
            return (
                f"{name} contains a lone surrogate (U+{code:04X} at position {position}), "
                "which is not valid Unicode"
            )
    return None
