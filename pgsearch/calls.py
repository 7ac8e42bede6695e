"""Tool calls as people read them: ``name(key=value, ...)`` with real newlines.

A stored tool call is ``name(<JSON arguments>)``, one per line (`pgsearch.messages`):
exact, but JSON escapes every newline of a command or a file it writes. For text
output, a call whose arguments are a JSON object is shown as ``name(key=value, ...)``:
a one-line string value in double quotes, a string holding newlines on lines of its
own (indented, its newlines real), anything else as JSON. A line that is not such a
call is left as it is. JSON output keeps the stored form.
"""

from __future__ import annotations

import json
import re

_CALL = re.compile(r"^(?P<name>[^\s(){}]+)\((?P<args>\{.*\})\)$")
_INDENT = "    "


def _value(value: object) -> str:
    if isinstance(value, str):
        if "\n" not in value:
            return json.dumps(value, ensure_ascii=False)
        body = "\n".join(_INDENT + line for line in value.split("\n"))
        return f'"""\n{body}\n{_INDENT}"""'
    return json.dumps(value, ensure_ascii=False)


def readable_call(line: str) -> str:
    """One stored call line as ``name(key=value, ...)``; `line` itself if not a call."""
    match = _CALL.match(line)
    if match is None:
        return line
    try:
        args = json.loads(match["args"])
    except ValueError:
        return line
    if not isinstance(args, dict):
        return line
    parts = [f"{key}={_value(value)}" for key, value in args.items()]
    return f"{match['name']}({', '.join(parts)})"


def readable_calls(text: str) -> str:
    """Every call line of `text` made readable (`readable_call`)."""
    return "\n".join(readable_call(line) for line in text.split("\n"))
