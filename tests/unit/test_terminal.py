"""Terminal-safe rendering of stored text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pgsearch.terminal import UNSAFE, json_safe, terminal_safe


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
