"""The hand-written agent-log fixtures of the agents added after the first four, and
what each must yield: shared by the unit tests and the tests on a real server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True, kw_only=True)
class Case:
    """One agent's fixture: the file ingest reads and facts about its main session."""

    format: str
    path: Path
    session_id: str
    #: A word the person typed, found as ``user_text`` in that session.
    user_word: str
    #: Words of a failed tool result, found as ``tool_error``.
    error_words: str
    #: The tool the error came from.
    error_tool: str
    title: str | None = None
    #: A sub-agent (or branch) session of the file, and a word found in it.
    child_session: str | None = None
    child_word: str | None = None
    cwd: str | None = None

    @property
    def id(self) -> str:
        return self.format


COPILOT_SID = "6d1f0c2e-93a4-4b7e-8c15-2f9e0a7b3d48"

CASES = (
    Case(
        format="copilot-cli",
        path=FIXTURES / "copilot-cli" / "session-state" / COPILOT_SID / "events.jsonl",
        session_id=COPILOT_SID,
        user_word="southern hemisphere",
        error_words="KeyError winter",
        error_tool="bash",
        title="Southern hemisphere tide charts",
        child_session=f"{COPILOT_SID}/agent-call_task_31",
        child_word="almanac",
        cwd="/home/dev/projects/tidepool",
    ),
)
