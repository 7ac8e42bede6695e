"""Kinds of entries, the tool-error rule, and what text of each kind is indexed.

Pure functions. The index holds user and assistant text, tool *names* (never their
arguments), tool errors and bookkeeping text; ordinary tool output and system text
are stored (windows show them) but never indexed. Secret-looking strings are
scrubbed from indexed text of every kind, so they can neither be found nor appear in
an excerpt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from pgsearch.settings import IndexPolicy

USER_TEXT = "user_text"
ASSISTANT_TEXT = "assistant_text"
TOOL_INPUT = "tool_input"
TOOL_OUTPUT = "tool_output"
TOOL_ERROR = "tool_error"
SYSTEM = "system"
SUMMARY = "summary"
GOAL = "goal"
TOOL_DISABLE = "tool_disable"

MESSAGE_KINDS = (USER_TEXT, ASSISTANT_TEXT, TOOL_INPUT, TOOL_OUTPUT, TOOL_ERROR, SYSTEM)
BOOKKEEPING_KINDS = (SUMMARY, GOAL, TOOL_DISABLE)
ALL_KINDS = MESSAGE_KINDS + BOOKKEEPING_KINDS
#: What a search covers when the request names no kinds.
DEFAULT_SEARCH_KINDS = (USER_TEXT, ASSISTANT_TEXT, TOOL_INPUT, TOOL_ERROR)
ROLES = ("user", "assistant", "tool", "system")

#: An entry with several tool calls stores their names in `tool_name` joined by this.
TOOL_NAME_SEPARATOR: Final = ", "

_ERROR_PREFIXES = ("error:", "blocked:")
#: Programs whose exit status 1 means "nothing found", not a failure.
SEARCH_PROGRAMS = frozenset(
    {"grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "find", "fd", "fdfind", "locate"}
)
#: Words that, in what such a program printed, mean it did fail.
_FAILURE_RE = re.compile(
    r"(?i)\b(?:error|no such file|not found|permission denied|invalid|unrecognized|usage:|"
    r"illegal|cannot|can't|failed)\b"
)
#: Lines shell tools add around a command's output (Codex, Claude Code, Gemini CLI).
_SHELL_HEADER_RE = re.compile(
    r"(?im)^\s*(?:error:\s*)?(?:exit code:?\s*-?\d+|wall time:.*|output:|process group pgid:.*|"
    r"command:.*|directory:.*|error: \(none\)|signal: \(none\)|background pids: \(none\))\s*$"
)
_COMMAND_SPLIT_RE = re.compile(r"\|\||&&|[|;\n]")


def is_tool_error(content: str, *, marked: bool = False) -> bool:
    """The reference rule: marked by the source, or text starting with ``error:`` or
    ``blocked:``, or containing ``permission denied`` (all case-insensitive)."""
    if marked:
        return True
    head = content.lstrip()[:16].lower()
    if head.startswith(_ERROR_PREFIXES):
        return True
    return "permission denied" in content.lower()


def _last_program(command: str) -> tuple[str, str]:
    """The program (and its first argument) of the last command of a command line."""
    parts = [p.strip() for p in _COMMAND_SPLIT_RE.split(command) if p.strip()]
    if not parts:
        return "", ""
    words = parts[-1].split()
    while words and ("=" in words[0] or words[0] in ("sudo", "command", "time", "exec", "env")):
        words.pop(0)
    if not words:
        return "", ""
    program = words[0].rsplit("/", 1)[-1]
    return program, words[1] if len(words) > 1 else ""


def is_search_miss(command: str | None, exit_code: int | None, output: str) -> bool:
    """Whether a shell tool "failed" only because a search program found nothing.

    ``grep``, ``rg``, ``find`` and the like exit with status 1 when nothing matched;
    a source that marks every non-zero exit as failed would make each of those a
    tool error. It is one when the program printed anything that reads as a failure.
    """
    if exit_code != 1 or not command:
        return False
    program, first = _last_program(command)
    if program == "git" and first == "grep":
        program = "grep"
    if program not in SEARCH_PROGRAMS:
        return False
    rest = _SHELL_HEADER_RE.sub("", output)
    return not _FAILURE_RE.search(rest)


def tool_result_kind(
    output: str, *, marked: bool = False, command: str | None = None, exit_code: int | None = None
) -> str:
    """`TOOL_ERROR` or `TOOL_OUTPUT` for a tool result: `is_tool_error`, except that a
    search program that found nothing (`is_search_miss`) is not an error."""
    if is_search_miss(command, exit_code, output):
        return TOOL_OUTPUT
    return TOOL_ERROR if is_tool_error(output, marked=marked) else TOOL_OUTPUT


def scrub_secrets(text: str) -> str:
    """`text` with secret-looking strings replaced by ``[redacted]`` (`pgsearch.secrets`)."""
    # Imported on first use: the kinds and roles here are read by every command,
    # the secret rules only by those that scrub text.
    from pgsearch import secrets

    return secrets.scrub(text)


def indexable_text(
    kind: str,
    content: str,
    *,
    tool_names: list[str] | tuple[str, ...] = (),
    arguments: str = "",
    policy: IndexPolicy | None = None,
) -> str:
    """The text of an entry that reaches the index, secrets scrubbed.

    For a tool call that is the assistant's text plus the tool names (arguments only
    when the policy says so); for an ordinary tool result and system text, nothing
    unless the policy says so.
    """
    return scrub_secrets(
        indexable_raw(kind, content, tool_names=tool_names, arguments=arguments, policy=policy)
    )


def indexable_raw(
    kind: str,
    content: str,
    *,
    tool_names: list[str] | tuple[str, ...] = (),
    arguments: str = "",
    policy: IndexPolicy | None = None,
) -> str:
    """`indexable_text` before secrets are scrubbed: scrub what of it is shown."""
    policy = policy or IndexPolicy()
    if kind == TOOL_INPUT:
        parts = [content, *tool_names]
        if policy.tool_arguments and arguments:
            parts.append(arguments)
        text = "\n".join(p for p in parts if p)
    elif kind == TOOL_OUTPUT:
        text = content if policy.tool_output else ""
    elif kind == SYSTEM:
        text = content if policy.system else ""
    else:
        text = content
    return text


def join_tool_names(names: Iterable[str]) -> str:
    """The stored `tool_name` of an entry calling these tools."""
    return TOOL_NAME_SEPARATOR.join(names)


def split_tool_names(tool_name: str | None) -> list[str]:
    """The tool names of a stored `tool_name` (none for None or empty)."""
    if not tool_name:
        return []
    return [name for name in tool_name.split(TOOL_NAME_SEPARATOR) if name]
