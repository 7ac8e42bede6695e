"""Hardened output paths of the `pgsearch` command: secrets, terminal control
characters, broken pipes and workspace ids, as a user meets them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pgsearch import PgSearch, SessionQueryRequest
from tests.acceptance.test_cli import ok, pgsearch
from tests.conftest import EXAMPLES


@pytest.fixture
def demo(dsn: str) -> str:
    """A migrated database with the README's example sessions in workspace ``demo``."""
    ok(pgsearch("ingest", str(EXAMPLES), "--workspace", "demo", "--quiet", dsn=dsn))
    return dsn


SECRET_TITLE = "deploy with DB_PASSWORD=hunter2-title and sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def write_session(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_session_titles_are_scrubbed_in_every_listing(dsn: str, tmp_path: Path) -> None:
    log = write_session(
        tmp_path / "s1.jsonl",
        [
            {"role": "user", "content": "deploy the billing service", "title": SECRET_TITLE},
            {"role": "assistant", "content": "deployed the billing service"},
        ],
    )
    with PgSearch.connect(dsn) as pg:
        assert pg.ingest_paths([log], workspace="w").errors == []
        (info,) = pg.sessions(workspace="w")
        found = pg.provider(workspace="w").search(SessionQueryRequest(query="billing"))
    for shown in (
        info.title or "",
        found.matches[0].title or "",
        ok(pgsearch("sessions", "-w", "w", dsn=dsn)),
        ok(pgsearch("sessions", "-w", "w", "--json", dsn=dsn)),
        ok(pgsearch("search", "billing", "-w", "w", dsn=dsn)),
        ok(pgsearch("search", "billing", "-w", "w", "--json", dsn=dsn)),
    ):
        assert "hunter2-title" not in shown
        assert "4eC39HqLyjWDarjtT1zdp7dc" not in shown
        assert "[redacted]" in shown


BAD_DSNS = [
    "host=db password=my s3cr3t phrase connect_timeout=2",
    "host=127.0.0.1 port=1 password='my s3cr3t phrase' connect_timeout=2",
    "postgresql://app:p@ss@s3cr3t@127.0.0.1:1/app?connect_timeout=2",
]


@pytest.mark.parametrize("dsn", BAD_DSNS)
@pytest.mark.parametrize(
    "args", [("search", "x", "-w", "w"), ("migrate",), ("migrate", "--create")]
)
def test_connection_errors_never_show_the_password(dsn: str, args: tuple[str, ...]) -> None:
    result = pgsearch(*args, dsn=dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("pgsearch: error: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in ("s3cr3t", "phrase", "ss@"):
        assert word not in result.stderr + result.stdout


#: Control sequences a hostile tool output could plant in a log.
HOSTILE = {
    "csi": "\x1b[2J\x1b[1;1H",  # clear the screen, move the cursor home
    "erase line": "\r\x1b[K",
    "osc 52": "\x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07",  # write the clipboard
    "osc title": "\x1b]0;owned\x1b\\",
    "c1 csi": "\x9b31m",
    "bidi override": "\u202egnp.exe",
    "isolate": "\u2066x\u2069",
    "line separator": "a\u2028b",
    "del and bell": "\x7f\x07",
}
RAW_UNSAFE = {chr(cp) for cp in __import__("pgsearch.terminal").terminal.UNSAFE}


def hostile_log(tmp_path: Path) -> Path:
    text = "cursor report " + " ".join(HOSTILE.values()) + "\tend\nsecond line"
    return write_session(
        tmp_path / "hostile.jsonl",
        [
            {"role": "user", "content": text, "title": "title " + HOSTILE["osc 52"]},
            {"role": "assistant", "content": "cursor answer " + HOSTILE["csi"]},
        ],
    )


def test_stored_control_sequences_are_shown_escaped(dsn: str, tmp_path: Path) -> None:
    ok(pgsearch("ingest", str(hostile_log(tmp_path)), "-w", "w", dsn=dsn))
    outputs = {
        "around": ok(pgsearch("around", "-w", "w", "--session", "hostile", "--seq", "0", dsn=dsn)),
        "messages": ok(pgsearch("messages", "-w", "w", "--session", "hostile", dsn=dsn)),
        "search": ok(pgsearch("search", "cursor", "-w", "w", dsn=dsn)),
        "browse": ok(pgsearch("search", "-w", "w", dsn=dsn)),
        "sessions": ok(pgsearch("sessions", "-w", "w", dsn=dsn)),
    }
    for name, out in outputs.items():
        raw = sorted(f"U+{ord(c):04X}" for c in set(out) & RAW_UNSAFE)
        assert raw == [], f"{name} printed raw {raw}"
    window = outputs["messages"]
    assert "\\x1b[2J\\x1b[1;1H" in window
    assert "\\x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\\x07" in window
    assert "\\u009b31m" in window and "\\u202egnp.exe" in window and "a\\u2028b" in window
    assert "\\r\\x1b[K" in window
    # Newlines and tabs stay readable.
    assert "\tend\n" in window and "   second line" in window
    assert "title \\x1b]52;" in outputs["sessions"]


def test_json_output_keeps_control_characters_as_json_escapes(dsn: str, tmp_path: Path) -> None:
    ok(pgsearch("ingest", str(hostile_log(tmp_path)), "-w", "w", dsn=dsn))
    for args in (
        ("messages", "-w", "w", "--session", "hostile", "--json"),
        ("around", "-w", "w", "--session", "hostile", "--seq", "0", "--json"),
        ("sessions", "-w", "w", "--json"),
        ("search", "cursor", "-w", "w", "--json"),
    ):
        out = ok(pgsearch(*args, dsn=dsn))
        assert not set(out) & RAW_UNSAFE, args
        data = json.loads(out)
        assert data
    page = json.loads(
        ok(pgsearch("messages", "-w", "w", "--session", "hostile", "--json", dsn=dsn))
    )
    stored = page["messages"][0]["content"]
    for sequence in HOSTILE.values():
        assert sequence in stored  # the parsed JSON holds the stored text exactly


def closed_pipe_run(*args: str, dsn: str | None = None) -> tuple[int, str]:
    """Run the CLI with its stdout pipe closed by the reader before it writes."""
    command = [sys.executable, "-m", "pgsearch", *(["--dsn", dsn] if dsn else []), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
    )
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace")
        return proc.wait(timeout=120), err


@pytest.mark.parametrize(
    "args",
    [
        ("tool-schema",),
        ("search", "-w", "demo"),
        ("messages", "-w", "demo", "--session", "deploy-keys"),
        ("sessions", "-w", "demo", "--json"),
    ],
)
def test_a_closed_pipe_ends_like_a_unix_filter(demo: str, args: tuple[str, ...]) -> None:
    status, err = closed_pipe_run(*args, dsn=demo)
    assert status == -signal.SIGPIPE, err  # a shell reports 141
    assert err == ""


def test_a_shell_reports_141_for_a_closed_pipe(demo: str) -> None:
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "pgsearch", "--dsn", demo))
    # `true` exits at once: pgsearch writes to a pipe whose reader is gone.
    script = f'{command} search -w demo | true; echo "${{PIPESTATUS[0]}}"'
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "141"
    assert result.stderr == ""


def test_a_workspace_typed_in_two_unicode_forms_is_one(dsn: str, tmp_path: Path) -> None:
    nfd, nfc = "cafe\u0301", "caf\u00e9"
    log = write_session(tmp_path / "s1.jsonl", [{"role": "user", "content": "espresso grinder"}])
    ok(pgsearch("ingest", str(log), "-w", nfd, dsn=dsn))
    found = json.loads(ok(pgsearch("search", "espresso", "-w", nfc, "--json", dsn=dsn)))
    assert [m["session_id"] for m in found["matches"]] == ["s1"]
    stats = json.loads(ok(pgsearch("stats", "--json", dsn=dsn)))
    assert [w["workspace_id"] for w in stats["workspaces"]] == [nfc]


@pytest.mark.parametrize("workspace", ["acme\u202egnp", "ac\u200bme", "acme\x1b[2J"])
def test_a_workspace_with_invisible_characters_is_refused(dsn: str, workspace: str) -> None:
    result = pgsearch("search", "x", "-w", workspace, dsn=dsn)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "pgsearch: error: workspace id must not contain control, format or bidirectional"
    )
    assert "Traceback" not in result.stderr
