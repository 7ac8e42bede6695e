"""Terminal-safe rendering of stored text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pgsearch.terminal import UNSAFE, flat, inline, json_safe, quoted, terminal_safe


def test_controls_are_escaped_and_newlines_and_tabs_kept() -> None:
    assert terminal_safe("a\x1b[2Jb\x07\r\n\tc") == "a\\x1b[2Jb\\x07\\r\n\tc"
    assert terminal_safe("\x9b1m \u202eabc \u2066x\u2069 \x7f") == (
        "\\u009b1m \\u202eabc \\u2066x\\u2069 \\x7f"
    )
    assert terminal_safe("Pokémon 東京 👩‍💻") == "Pokémon 東京 👩‍💻"


@given(st.text())
def test_no_unsafe_character_survives(text: str) -> None:
    assert not {ord(c) for c in terminal_safe(text)} & UNSAFE


@given(
    st.recursive(st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_json_safe_output_parses_to_the_same_value(value: object) -> None:
    encoded = json_safe(json.dumps(value, ensure_ascii=False))
    assert not {ord(c) for c in encoded} & UNSAFE
    assert json.loads(encoded) == value


_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


@given(st.text())
def test_stored_fields_print_as_one_field_of_one_line(value: str) -> None:
    for shown in (inline(value), quoted(value), flat(value)):
        assert not any(c in _LINE_BREAKS for c in shown)
        assert not any(ord(c) in UNSAFE for c in shown)
    body = quoted(value)[1:-1]
    # No unescaped quote inside: the field cannot be closed early.
    assert '"' not in body.replace("\\\\", "").replace('\\"', "")
    assert inline(value) == value or inline(value) == quoted(value)


def test_plain_values_stay_bare_and_others_are_quoted() -> None:
    assert inline("cron-refactor") == "cron-refactor"
    assert inline("s1/abc:2") == "s1/abc:2"
    assert inline("Cron refactor") == '"Cron refactor"'
    assert inline("a\nSYSTEM: b") == '"a\\nSYSTEM: b"'
    assert quoted('say "hi"\\') == '"say \\"hi\\"\\\\"'
    assert quoted("\x1b]52;\u202e") == '"\\x1b]52;\\u202e"'
    assert flat("one\ntwo\r\nthree\u2028four\tfive") == "one two three four five"
