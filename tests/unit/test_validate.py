"""Workspace ids: one Unicode form, no invisible or reordering characters."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgsearch.errors import ConfigError
from pgsearch.tools import check_arguments
from pgsearch.types import Scope
from pgsearch.validate import check_workspace

NFC = "caf\u00e9"
NFD = "cafe\u0301"


def test_both_forms_of_an_accented_id_are_one_workspace() -> None:
    assert NFC != NFD
    assert check_workspace(NFD) == check_workspace(NFC) == NFC
    assert check_workspace("Ångström-東京") == unicodedata.normalize("NFC", "Ångström-東京")
    assert check_workspace("acme/prod team") == "acme/prod team"


@pytest.mark.parametrize(
    ("workspace", "shown"),
    [
        ("acme\u202egnp", "U+202E RIGHT-TO-LEFT OVERRIDE at position 4"),
        ("acme\u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE at position 4"),
        ("ac\u200bme", "U+200B ZERO WIDTH SPACE at position 2"),
        ("\ufeffacme", "U+FEFF ZERO WIDTH NO-BREAK SPACE at position 0"),
        ("acme\x1b[2J", "U+001B control at position 4"),
        ("acme\x85", "U+0085 control at position 4"),
        ("acme\x7f", "U+007F control at position 4"),
        ("a\tb", "U+0009 control at position 1"),
        ("a\u2028b", "U+2028 LINE SEPARATOR at position 1"),
    ],
)
def test_control_format_and_bidi_characters_are_refused(workspace: str, shown: str) -> None:
    with pytest.raises(ConfigError, match="must not contain control, format or bidirectional"):
        check_workspace(workspace)
    with pytest.raises(ConfigError) as refused:
        check_workspace(workspace)
    assert shown in str(refused.value)


def test_other_bad_ids_keep_their_errors() -> None:
    for bad in ("", "   ", None, 5):
        with pytest.raises(ConfigError, match="non-empty string"):
            check_workspace(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="valid Unicode"):
        check_workspace("a\udcff")
    with pytest.raises(ConfigError, match="at most 200"):
        check_workspace("x" * 201)


@given(st.text(min_size=1, max_size=50))
def test_accepted_ids_are_nfc_and_stable(text: str) -> None:
    try:
        workspace = check_workspace(text)
    except ConfigError:
        return
    assert unicodedata.is_normalized("NFC", workspace)
    assert check_workspace(workspace) == workspace
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in workspace)


def test_a_tool_call_naming_the_workspace_in_another_form_is_in_scope() -> None:
    args = check_arguments(
        "session_search", {"query": "x", "workspace_id": NFD}, Scope(workspace=NFC)
    )
    assert args["query"] == "x"
