"""No line of any format, however it is shaped, ends a run with a traceback.

Hypothesis replaces one field (at any depth) of a real-shaped line of each format
with an arbitrary JSON value, deep nesting included, and reads the result the way
ingest does: format detection, the header scan, the adapter. Agent logs may only
skip a line with a `file:line` warning; pgsearch's own format may only refuse the
file with an `IngestError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsearch import adapters
from pgsearch.errors import IngestError
from pgsearch.ingest.prepare import prepare
from pgsearch.ingest.targets import FileJob
from pgsearch.settings import Settings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TEMPLATES: dict[str, list[dict[str, Any]]] = {}


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


TEMPLATES["claude-code"] = (
    _lines(FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl")
    + _lines(FIXTURES / "claude-code" / "commands" / "9b1d4e7a-2c3f-4a5b-8c6d-7e8f9a0b1c2d.jsonl")
    + _lines(FIXTURES / "claude-code" / "sidechains" / "5e0c3b7d-8a9f-4e1d-b2c3-4d5e6f708192.jsonl")
)
TEMPLATES["codex"] = _lines(
    FIXTURES / "codex" / "rollout-2025-09-14T10-21-07-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
)
TEMPLATES["gemini"] = _lines(
    next((FIXTURES / "gemini").rglob("session-2025-10-02T14-05-7c1e9b2a.jsonl"))
)
TEMPLATES["openai"] = [
    {"role": "user", "content": "hello", "created_at": "2026-01-01T00:00:00Z", "title": "t"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "grep", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "x"}]},
]
OPENCODE = json.loads(
    (FIXTURES / "opencode" / "export" / "ses_60b1d4e2cffeZz9Yy8Xx7Ww6Vv.json").read_text()
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if len(prefix) > 12:
        return found  # a value nested deeper was put there by an earlier draw
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value), parse_constant=str) if _depth(value) < 60 else value
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


def _depth(value: Any) -> int:
    """How deep `value` nests (counted up to 60)."""
    depth = 0
    while isinstance(value, dict | list) and value and depth < 60:
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        depth += 1
    return depth


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, fmt: str) -> bytes:
    lines = [dict(line) for line in TEMPLATES[fmt]]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        paths = _paths(lines[i])
        path = draw(st.sampled_from(paths)) if paths else ()
        new = draw(JSON | st.integers(200, 900).map(_deep))
        lines[i] = _replace(lines[i], path, new)
    text = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    cut = draw(st.sampled_from([None, -1, -7]))
    return text if cut is None else text[:cut]


def _read(fmt: str, data: bytes, tmp: Path) -> None:
    """Read `data` forced to `fmt` and detected: a clear `IngestError` at worst."""
    path = tmp / "fuzz.jsonl"
    path.write_bytes(data)
    for forced in (fmt, adapters.AUTO):
        job = FileJob(workspace="w", given=path, real=path, format=forced)
        try:
            prepared = prepare(job, None, Settings())
        except IngestError as exc:
            assert exc.reason, exc
            continue
        except Exception as exc:  # what the property forbids
            raise AssertionError(f"{forced}: {type(exc).__name__}: {str(exc)[:300]}") from None
        for warning in prepared.parsed.problems:
            assert warning.path == str(path) and warning.reason


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(data=mutated("claude-code"))
def test_claude_code_lines_of_any_shape_never_crash_a_run(data: bytes, tmp_path: Path) -> None:
    _read("claude-code", data, tmp_path)


@SETTINGS
@given(data=mutated("codex"))
def test_codex_lines_of_any_shape_never_crash_a_run(data: bytes, tmp_path: Path) -> None:
    _read("codex", data, tmp_path)


@SETTINGS
@given(data=mutated("gemini"))
def test_gemini_lines_of_any_shape_never_crash_a_run(data: bytes, tmp_path: Path) -> None:
    _read("gemini", data, tmp_path)


@SETTINGS
@given(data=mutated("openai"))
def test_pgsearch_lines_of_any_shape_are_an_error_at_worst(data: bytes, tmp_path: Path) -> None:
    _read("openai", data, tmp_path)


@SETTINGS
@given(path=st.sampled_from(_paths(OPENCODE)), new=JSON)
def test_opencode_sessions_of_any_shape_never_crash_a_run(
    path: tuple[Any, ...], new: Any, tmp_path: Path
) -> None:
    _read("opencode", json.dumps(_replace(OPENCODE, path, new)).encode(), tmp_path)


# --- the agents added after the first four -------------------------------------------

from pgsearch.sources import read_source  # noqa: E402
from tests.agent_cases import CASES, DOCUMENT_FORMATS  # noqa: E402

for _case in CASES:
    if _case.format not in DOCUMENT_FORMATS and _case.format != "aider":
        TEMPLATES[_case.id] = _lines(_case.path)
#: Each added format's fixture as a document (read whole, assembled where ingest does).
DOCUMENTS = {
    c.id: (c.format, json.loads(read_source(c.path, shown=str(c.path)).data))
    for c in CASES
    if c.format in DOCUMENT_FORMATS and c.format != "vscode-copilot"
}
LINE_IDS = sorted(k for k in TEMPLATES if k not in ("claude-code", "codex", "gemini", "openai"))
SOME = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("name", LINE_IDS)
@SOME
@given(data=st.data())
def test_added_agents_lines_of_any_shape_never_crash_a_run(
    name: str, data: st.DataObject, tmp_path: Path
) -> None:
    fmt = next(c.format for c in CASES if c.id == name)
    _read(fmt, data.draw(mutated(name)), tmp_path)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
@SOME
@given(data=st.data())
def test_added_agents_documents_of_any_shape_never_crash_a_run(
    name: str, data: st.DataObject, tmp_path: Path
) -> None:
    fmt, document = DOCUMENTS[name]
    path = data.draw(st.sampled_from(_paths(document)))
    new = data.draw(JSON)
    _read(fmt, json.dumps(_replace(document, path, new)).encode(), tmp_path)
