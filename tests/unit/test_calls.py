"""Tool calls shown as name(key=value, ...), with the newlines of their values real."""

from __future__ import annotations

import json

from pgsearch.calls import readable_call, readable_calls


def test_a_call_reads_as_keywords() -> None:
    line = 'grep({"pattern": "register_job", "path": "scheduler/", "max": 3})'
    assert readable_call(line) == 'grep(pattern="register_job", path="scheduler/", max=3)'


def test_a_value_with_newlines_is_shown_on_lines_of_its_own() -> None:
    args = json.dumps({"path": "a.py", "content": "def f():\n    return 1\n"})
    shown = readable_call(f"write_file({args})")
    assert shown.split("\n") == [
        'write_file(path="a.py", content="""',
        "    def f():",
        "        return 1",
        "    ",
        '    """)',
    ]
    assert "\\n" not in shown


def test_other_lines_are_left_alone() -> None:
    text = "I will run it.\nbash(not json)\nls([1, 2])"
    assert readable_calls(text) == text
