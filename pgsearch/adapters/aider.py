"""Aider chat histories: ``.aider.chat.history.md`` at the root of each repository.

Aider appends every run to one Markdown file in the repository it works in. A run
starts with ``# aider chat started at YYYY-MM-DD HH:MM:SS``; what the person typed
is written as lines starting ``#### ``; notices and command output (``> Applied edit
to …``, ``> Tokens: …``, the output of ``/run``) as a block quote line ``> …``,
whose further lines follow it unquoted; the model's replies as plain Markdown after
a blank line. Each run is a session, ``aider-<file>-<n>`` (``<file>`` a digest of
the file's path, ``n`` the run's number in it), whose working directory is the
file's directory. Mapping:

- ``#### `` lines -> ``user_text`` (``/run``, ``/add`` and other commands included);
- a ``> `` block -> ``tool_output``, or ``tool_error`` when it reads as an error
  (Aider writes errors and output alike, so the text decides);
- the rest -> ``assistant_text``.

The history has no times but each run's start (Aider's local time, read as UTC):
its entries take that time. The file only grows, so it is read on from where the
last pass stopped; a block is read once the line after it shows it is complete (a
reply is followed by Aider's ``> Tokens:`` line or the next prompt), so a reply
still being written waits for the next pass.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import PurePath

from pgsearch import policy
from pgsearch.adapters.common import Adapter, FileHeader, LineEntries, Parsed, quiet_time
from pgsearch.messages import clean

NAME = "aider"
VERSION = 1
LABEL = "Aider"
#: Aider writes its history into the repository it runs in; there is no one place.
LOCATIONS = (
    "~/.aider.chat.history.md",
    "~/*/.aider.chat.history.md",
    "~/*/*/.aider.chat.history.md",
)
FILE_NAME = ".aider.chat.history.md"
HEADER = b"# aider chat started at "
_USER = "#### "


def looks_like(data: bytes) -> bool:
    """Whether a file's text is an Aider chat history (it starts with a run header)."""
    return data.removeprefix(b"\xef\xbb\xbf").lstrip(b"\r\n").startswith(HEADER)


def _file_key(path: PurePath | None, default: str) -> str:
    source = str(path) if path is not None else default
    return hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The first run's session; the working directory is the file's directory."""
    key = _file_key(path, default_session)
    started = None
    at = data.find(HEADER)
    if at >= 0:
        stop = data.find(b"\n", at)
        started = _run_time(data[at + len(HEADER) : stop if stop >= 0 else len(data)])
    cwd = str(path.parent) if path is not None and path.name.endswith(FILE_NAME) else None
    return FileHeader(session_id=f"aider-{key}-1", cwd=cwd, started_at=started)


def _run_time(raw: bytes) -> datetime | None:
    return quiet_time(raw.decode("utf-8", "replace").strip().replace(" ", "T", 1))


def _kind(line: str) -> str:
    if line.startswith(HEADER.decode()):
        return "header"
    if line.startswith("#### ") or line.rstrip() == "####":
        return "user"
    if line.startswith("> ") or line.rstrip() == ">":
        return "tool"
    return "blank" if not line.strip() else "text"


def _fence(line: str) -> bool:
    return line.lstrip().startswith(("```", "~~~"))


class _Parser:
    """Lines into blocks: a block becomes entries once the line after it closes it."""

    def __init__(self, data: bytes, start: int, first_line: int, *, path: str, key: str) -> None:
        self.data = data
        self.key = key
        self.parsed = Parsed(consumed=start, lines=first_line)
        # The run `start` is in, and its number, from the part read before.
        before = data[:start]
        self.run = before.count(b"\n" + HEADER) + int(before.startswith(HEADER))
        last = max(before.rfind(b"\n" + HEADER), -1)
        self.started: datetime | None = None
        if self.run:
            at = last + 1 if last >= 0 else 0
            stop = data.find(b"\n", at)
            self.started = _run_time(data[at + len(HEADER) : stop])
        self.block: list[str] = []
        self.block_kind = ""
        self.block_line = 0
        #: Inside a fenced code block of a reply.
        self.fenced = False

    def sid(self) -> str:
        return f"aider-{self.key}-{max(self.run, 1)}"

    def close(self) -> None:
        """Turn the open block into entries (it is complete)."""
        kind, lines = self.block_kind, self.block
        self.block, self.block_kind = [], ""
        if not lines or kind == "":
            return
        line = LineEntries(
            self.sid(), self.block_line - 1, self.started, extra={"line": self.block_line}
        )
        if kind == "user":
            typed = "\n".join(_strip_user(x) for x in lines)
            line.text("user", policy.USER_TEXT, typed)
        elif kind == "tool":
            body = "\n".join(x.rstrip() for x in lines)
            body = body[1:].lstrip() if body.startswith(">") else body
            line.result(body.strip(), tool_name="aider")
        else:
            line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(lines))
        self.parsed.entries.extend(line.out)
        self.parsed.recognised += 1

    def run_lines(self, start: int, first_line: int) -> None:
        data = self.data
        pos, lineno = start, first_line
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break  # a line still being written
            raw = clean(data[pos:nl].decode("utf-8", "replace"))
            lineno += 1
            after = nl + 1
            kind = _kind(raw)
            if self.block_kind == "text" and self.fenced:
                kind = "text"  # inside a code block of a reply: its text, whatever it holds
            if kind == "text" and _fence(raw):
                self.fenced = not self.fenced
            if kind == "header":
                self.close()
                self.run += 1
                self.started = _run_time(raw[len(HEADER) :].encode())
                self.parsed.recognised += 1
                self.mark(after, lineno)
            elif kind == "blank":
                if self.block_kind in ("user", "tool"):
                    self.close()
                    self.mark(after, lineno)
                elif self.block_kind == "text":
                    self.block.append("")
                else:
                    self.mark(after, lineno)
            elif kind == "text" and self.block_kind in ("text", "tool", "user"):
                if self.block_kind == "user":
                    self.close()
                    self.open("text", raw, lineno)
                else:
                    self.block.append(raw)
            else:
                if kind != self.block_kind or kind == "tool":
                    self.close()
                    # Everything before this line is complete.
                    self.mark(pos, lineno - 1)
                    self.open(kind, raw, lineno)
                else:
                    self.block.append(raw)
            pos = after

    def open(self, kind: str, raw: str, lineno: int) -> None:
        self.block, self.block_kind, self.block_line = [raw], kind, lineno
        self.fenced = kind == "text" and _fence(raw)

    def mark(self, offset: int, lineno: int) -> None:
        self.parsed.consumed, self.parsed.lines = offset, lineno


def _strip_user(line: str) -> str:
    body = line[4:].rstrip()
    return body[1:] if body.startswith(" ") else body


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the complete blocks of ``data[start:]``; an open block waits."""
    key = header.session_id.removeprefix("aider-").rsplit("-", 1)[0]
    parser = _Parser(data, start, first_line, path=path, key=key)
    parser.run_lines(start, first_line)
    return parser.parsed


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    label=LABEL,
    locations=LOCATIONS,
)
