"""Which files under a directory are sessions, and the bytes of an OpenCode session."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pgsearch.errors import IngestError
from pgsearch.sources import find_sources, read_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_directories_yield_the_session_files_of_every_format(tmp_path: Path) -> None:
    for name in ("gemini", "opencode"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    storage = tmp_path / "opencode" / "storage"
    (storage / "todo").mkdir()
    (storage / "todo" / "ses_5f0a3c21effeq8Rk2Lm9Np4Tv6Wx.json").write_text("[]")
    (tmp_path / "settings.json").write_text("{}")
    found = sorted(p.relative_to(tmp_path).as_posix() for p in find_sources([tmp_path]))
    gemini = "gemini/tmp/3c9e41b7d2a85f60c1e4b9a7d3f28e50c6a1b4d7e9f20a83c5b6d1e4f7a9b2c3"
    project = "opencode/storage/session/4e8d2c1b9a7f6e5d4c3b2a1908f7e6d5c4b3a291"
    assert found == [
        f"{gemini}/chats/7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40/a4b5c6d7-e8f9-4a0b-8c1d-2e3f4a5b6c7d.jsonl",
        f"{gemini}/chats/session-2025-08-11T09-30-4f2a6c1d.json",
        f"{gemini}/chats/session-2025-10-02T14-05-7c1e9b2a.jsonl",
        f"{gemini}/checkpoint-before%20refactor.json",
        "opencode/export/ses_60b1d4e2cffeZz9Yy8Xx7Ww6Vv.json",
        f"{project}/ses_5f0a3b07dffe1Aa2Bb3Cc4Dd5Ee6.json",
        f"{project}/ses_5f0a3c21effeq8Rk2Lm9Np4Tv6Wx.json",
    ]  # not logs.json, settings.json, todos, or OpenCode's message and part files
    # A file named directly is read whatever its name.
    assert find_sources([tmp_path / "settings.json"]) == [tmp_path / "settings.json"]


def test_an_opencode_session_file_reads_as_its_whole_session() -> None:
    path = next((FIXTURES / "opencode" / "storage" / "session").rglob("ses_5f0a3c21*.json"))
    doc = json.loads(read_source(path, shown=str(path)).data)
    assert doc["info"]["id"] == "ses_5f0a3c21effeq8Rk2Lm9Np4Tv6Wx"
    assert [len(m["parts"]) for m in doc["messages"]] == [3, 8, 1, 1, 1]
    assert doc == json.loads(read_source(path, shown=str(path)).data)  # deterministic


def test_a_directory_that_cannot_be_read_is_a_warning_not_silence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "a.jsonl").write_text("{}\n")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "b.jsonl").write_text("{}\n")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    problems: list[IngestError] = []
    assert find_sources([tmp_path], problems) == [tmp_path / "ok" / "a.jsonl"]
    [problem] = problems
    assert str(problem) == f"{tmp_path / 'locked'}: cannot read directory: Permission denied"
