"""The hand-written agent-log fixtures of the agents added after the first four, and
what each must yield: shared by the unit tests and the tests on a real server."""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The agents' SQLite stores, built from their hand-written SQL (``<store>.sql``
#: beside where the store lives) once per test process.
STORES = Path(tempfile.mkdtemp(prefix="pgsearch-agent-stores-"))
atexit.register(shutil.rmtree, STORES, ignore_errors=True)


def build_store(sql: Path, target: Path) -> Path:
    """The SQLite store `sql` describes, written at `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(target)
    try:
        conn.executescript(sql.read_text(encoding="utf-8"))
        conn.commit()
    finally:
        conn.close()
    return target


for _sql in sorted(FIXTURES.rglob("*.sql")):
    build_store(_sql, STORES / _sql.relative_to(FIXTURES).with_suffix(""))
#: Formats whose files are documents rewritten whole (not logs that grow).
DOCUMENT_FORMATS = frozenset(
    {"cline", "roo-code", "amp", "crush", "cursor-store", "vscode-copilot"}
)


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
    #: Tells apart two cases of one format.
    name: str = ""

    @property
    def id(self) -> str:
        return self.name or self.format

    @property
    def base(self) -> Path:
        """Where the case's fixture tree is: the fixtures, or the stores built from them."""
        return STORES if self.path.is_relative_to(STORES) else FIXTURES

    @property
    def root(self) -> Path:
        """The top directory of the case's fixture tree."""
        return self.base / self.path.relative_to(self.base).parts[0]

    def session_at(self, path: Path) -> str:
        """The main session's id when the fixture is read at `path` (Aider's session ids
        name the file they come from)."""
        if self.format != "aider":
            return self.session_id
        from pgsearch import adapters

        header = adapters.ADAPTERS["aider"].header(b"", default_session="", path=path.resolve())
        return header.session_id


COPILOT_SID = "6d1f0c2e-93a4-4b7e-8c15-2f9e0a7b3d48"
PI_SID = "019c44a1-7e2b-7d90-b3f4-5a6c7d8e9f01"
OPENCLAW_SID = "3b0e6f52-2c71-4d89-a0b4-97e1c5d2f6a8"
CODEX_DRIFT_SID = "019d7e31-44a2-7b10-9c6e-3f2a1b0c9d8e"
DROID_SID = "5c9a1e7d-2f40-4b83-96d1-0e7a3b8c4f25"
QWEN_SID = "8a2f6c10-3b7e-4d95-a1c4-6e0f9b2d7a53"
AIDER_HISTORY = (
    FIXTURES / "aider" / "home" / "dev" / "projects" / "kestrel" / ".aider.chat.history.md"
)
CLINE_TASK = "1761903842117"
ROO_PARENT = "9b3e27c4-51a0-4f6d-8e2b-7c1d0a4f9e63"
ROO_CHILD = "2f6d8a1b-0c3e-4b57-9a24-e5f1c7d3b802"
CURSOR_SID = "7d2e9c41-8b35-4f06-a1d7-3c9e5b0f2a84"
AMP_THREAD = "T-3e1c9a57-0b2d-4f86-9c14-7a5e2d8b6f10"
CRUSH_SID = "8c0f3e2a-5d71-4b96-a2e4-1f9d7c6b3a05"
CRUSH_PROJECT = STORES / "crush" / "home" / "dev" / "projects" / "ferryman"
CURSOR_CHAT = "4f1a7c2e-9b30-4d58-8e61-2c7b5a9d0f13"
VSCODE_SESSION = "0c9e4b71-3d2a-4f85-b6e0-7a1d2c9f4e38"
VSCODE_CHATS = (
    FIXTURES
    / "vscode-copilot"
    / ".config"
    / "Code"
    / "User"
    / "workspaceStorage"
    / "5f2b8e0c41d9a7631e4b2c8f9a0d7e65"
    / "chatSessions"
)
KIMI_SID = "0e8d4c7a-5b21-4f36-9a0c-d18e7b64f2a3"
KIMI_CODE_SID = "41c7e0b2-6d8a-4f19-b3e5-02a9c8d7f614"
KIMI_CODE_AGENTS = (
    FIXTURES
    / "kimi"
    / ".kimi-code"
    / "sessions"
    / "wd_harbor_5be0c41a9d27"
    / f"session_{KIMI_CODE_SID}"
    / "agents"
)

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
    Case(
        format="pi",
        path=FIXTURES
        / "pi"
        / "sessions"
        / "--home-dev-projects-quill--"
        / f"2026-03-02T10-14-07-512Z_{PI_SID}.jsonl",
        session_id=PI_SID,
        user_word="exporter drops footnotes",
        error_words="test_footnote_with_code missing",
        error_tool="bash",
        title="Footnotes with inline code",
        cwd="/home/dev/projects/quill",
    ),
    Case(
        format="openclaw",
        path=FIXTURES
        / "openclaw"
        / ".openclaw"
        / "agents"
        / "main"
        / "sessions"
        / f"{OPENCLAW_SID}.jsonl",
        session_id=OPENCLAW_SID,
        user_word="greenhouse",
        error_words="permission denied sensors.log",
        error_tool="read",
        title="Greenhouse sensor cron",
        cwd="/home/dev/.openclaw/workspace",
    ),
    Case(
        format="kimi",
        name="kimi-cli",
        path=FIXTURES
        / "kimi"
        / ".kimi"
        / "sessions"
        / "9f3c2b71d04e8a65c1b7e2f09a4d3c58"
        / KIMI_SID
        / "wire.jsonl",
        session_id=KIMI_SID,
        user_word="invoice export",
        error_words="offset-naive datetimes",
        error_tool="Shell",
        child_session=f"{KIMI_SID}/agent-7f2c",
        child_word="Auckland",
    ),
    Case(
        format="kimi",
        name="kimi-code",
        path=KIMI_CODE_AGENTS / "main" / "wire.jsonl",
        session_id=KIMI_CODE_SID,
        user_word="berth scheduler",
        error_words="slot 14 booked twice",
        error_tool="Bash",
        cwd="/home/dev/projects/harbor",
    ),
    Case(
        format="codex",
        name="codex-drift",
        path=FIXTURES / "codex" / "drift" / f"rollout-2026-06-03T08-00-01-{CODEX_DRIFT_SID}.jsonl",
        session_id=CODEX_DRIFT_SID,
        user_word="upside down",
        error_words="frame map-tile not found",
        error_tool="figma.get_frame",
        cwd="/home/dev/projects/atlas",
    ),
    Case(
        format="droid",
        path=FIXTURES
        / "droid"
        / "sessions"
        / "-home-dev-projects-ledgerline"
        / f"{DROID_SID}.jsonl",
        session_id=DROID_SID,
        user_word="duplicate ledger rows",
        error_words="test_refund_is_single_row",
        error_tool="Execute",
        title="Reconcile duplicate ledger rows",
        cwd="/home/dev/projects/ledgerline",
    ),
    Case(
        format="qwen",
        path=FIXTURES
        / "qwen"
        / "projects"
        / "-home-dev-projects-orchard"
        / "chats"
        / f"{QWEN_SID}.jsonl",
        session_id=QWEN_SID,
        user_word="irrigation planner",
        error_words="test_pears_watered_after_thaw",
        error_tool="run_shell_command",
        title="Pear rows skipped after frost",
        cwd="/home/dev/projects/orchard",
    ),
    Case(
        format="aider",
        path=AIDER_HISTORY,
        session_id="",  # named after the file: see `Case.session_at`
        user_word="barometer drift",
        error_words="unable to write file mission.py",
        error_tool="aider",
        cwd=str(AIDER_HISTORY.parent),
    ),
    Case(
        format="cline",
        path=FIXTURES
        / "cline"
        / "saoudrizwan.claude-dev"
        / "tasks"
        / CLINE_TASK
        / "ui_messages.json",
        session_id=CLINE_TASK,
        user_word="invoice pdf renderer",
        error_words="search block does not match",
        error_tool="editedExistingFile",
    ),
    Case(
        format="roo-code",
        path=FIXTURES
        / "cline"
        / "rooveterinaryinc.roo-cline"
        / "tasks"
        / ROO_PARENT
        / "ui_messages.json",
        session_id=ROO_PARENT,
        user_word="weather station importer",
        error_words="blocked by the .rooignore",
        error_tool="readFile",
        cwd="/home/dev/projects/barometer",
    ),
    Case(
        format="cursor",
        path=FIXTURES
        / "cursor"
        / ".cursor"
        / "projects"
        / "home-dev-projects-lumen"
        / "agent-transcripts"
        / CURSOR_SID
        / f"{CURSOR_SID}.jsonl",
        session_id=CURSOR_SID,
        user_word="bloom pass",
        error_words="test_hud_after_bloom",
        error_tool="Shell",
    ),
    Case(
        format="amp",
        path=FIXTURES / "amp" / ".local" / "share" / "amp" / "threads" / f"{AMP_THREAD}.json",
        session_id=AMP_THREAD,
        user_word="websocket reconnect",
        error_words="no pong within",
        error_tool="Bash",
        title="Flaky websocket reconnect test",
        cwd="/home/dev/projects/tidewire",
    ),
    Case(
        format="crush",
        path=CRUSH_PROJECT / ".crush" / "crush.db",
        session_id=CRUSH_SID,
        user_word="ferry timetable",
        error_words="test_overnight_sailing",
        error_tool="bash",
        title="Overnight ferry sailings dropped",
        child_session="call_sub_7QmT",
        child_word="arrive after midnight",
        cwd=str(CRUSH_PROJECT),
    ),
    Case(
        format="cursor-store",
        path=STORES
        / "cursor-store"
        / ".config"
        / "Cursor"
        / "User"
        / "globalStorage"
        / "state.vscdb",
        session_id=CURSOR_CHAT,
        user_word="minimap flicker",
        error_words="redraws at most once per frame",
        error_tool="run_terminal_cmd",
        title="Minimap flicker on fast scroll",
    ),
    Case(
        format="vscode-copilot",
        path=VSCODE_CHATS / f"{VSCODE_SESSION}.jsonl",
        session_id=VSCODE_SESSION,
        user_word="tide almanac",
        error_words="test_hobart_june_moonrise",
        error_tool="run_in_terminal",
        title="Hobart moonrise off by an hour",
    ),
)
