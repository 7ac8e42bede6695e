"""The `pgsearch` command as a user runs it: a subprocess against a real PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import pytest

from pgsearch.cli import main
from pgsearch.types import SessionMatch
from tests.conftest import EXAMPLES, Databases
from tests.helpers import WRITE_EXAMPLES, check_example, doc_examples

REPO = Path(__file__).resolve().parents[2]

MATCH_FIELDS = {f.name for f in dataclasses.fields(SessionMatch)}


def pgsearch(
    *args: str,
    dsn: str | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pgsearch [--dsn DSN] ARGS`` with no PGSEARCH_* from the caller
    (and `env` added), reading no config file of the caller's."""
    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env["PYTHONIOENCODING"] = "utf-8"
    env.setdefault("PGSEARCH_CONFIG", os.devnull)
    env.update(given)
    command = [sys.executable, "-m", "pgsearch"]
    if dsn is not None:
        command += ["--dsn", dsn]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        input=stdin if stdin is not None else "",
        timeout=180,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def search_json(dsn: str, *args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(pgsearch("search", *args, "--json", dsn=dsn)))
    return data


@pytest.fixture
def demo(dsn: str) -> str:
    """A migrated database with the README's example sessions in workspace ``demo``."""
    ok(pgsearch("ingest", str(EXAMPLES), "--workspace", "demo", "--quiet", dsn=dsn))
    return dsn


@pytest.fixture(scope="module")
def shared(databases: Databases, template_db: str) -> Iterator[str]:
    """Like `demo`, shared by the tests of this module that only read."""
    name = databases.create(template=template_db, prefix="cli")
    dsn = databases.dsn(name)
    ok(pgsearch("ingest", str(EXAMPLES), "--workspace", "demo", "--quiet", dsn=dsn))
    yield dsn
    databases.drop(name)


# -- help ------------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found += _commands(command, path)
    return found


COMMANDS = _commands(main)


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_the_cli_has_the_designed_commands() -> None:
    names = {path[0] for path in COMMANDS}
    assert {"migrate", "ingest", "search", "around", "sessions", "forget", "stats"} <= names


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "pgsearch")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    command = _command(path)
    assert (command.help or "").strip(), f"{' '.join(path)} has no help text"
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"{' '.join(path)} {param.opts} has no help"
    out = ok(pgsearch(*path, "--help"))
    assert out.startswith("Usage:")
    summary = (command.help or "").strip().splitlines()[0]
    assert " ".join(summary.split()) in " ".join(out.split())


# -- the README flow ----------------------------------------------------------------------


def test_readme_flow_migrate_ingest_search(empty_dsn: str, tmp_path: Path) -> None:
    # From a fresh database, run from an unrelated directory as an installed tool.
    out = ok(pgsearch("migrate", dsn=empty_dsn, cwd=tmp_path))
    assert out.startswith("schema at revision")
    again = ok(pgsearch("migrate", dsn=empty_dsn, cwd=tmp_path))
    assert again == out

    ingested = pgsearch("ingest", str(EXAMPLES), "--workspace", "demo", dsn=empty_dsn, cwd=tmp_path)
    out = ok(ingested)
    assert (
        "3 files (0 unchanged), 3 sessions, 21 messages added, 0 already stored, "
        "0 bad lines skipped, 0 errors"
    ) in out

    out = ok(pgsearch("search", "advisory lock", "-w", "demo", dsn=empty_dsn, cwd=tmp_path))
    first, excerpt = out.splitlines()[:2]
    # One header line per hit (rank, title, session and seq, kind, time, score), then
    # the excerpt indented.
    header = re.fullmatch(
        r'1\. "Cron refactor" cron-refactor #(\d+) · user · '
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC · score \d+\.\d{3}",
        first,
    )
    assert header is not None, first
    assert excerpt.startswith("   ") and "advisory lock" in excerpt
    # Not a terminal: plain text, no marks of any kind.
    assert "Use a database advisory lock" in out and "**" not in out and "\x1b" not in out
    assert "entries searched" in out
    hint = re.search(r"open a window: pgsearch around -w demo --session (\S+) --seq (\d+)", out)
    assert hint is not None
    assert hint.group(1) == "cron-refactor"
    assert hint.group(2) == header.group(1)


@pytest.mark.parametrize(
    ("query", "session"),
    [
        ("pokemon", "pokemon-i18n"),
        ("POKÉMON", "pokemon-i18n"),
        ("東京", "pokemon-i18n"),
        ("idempotant", "cron-refactor"),  # one typo
        ("registered", "cron-refactor"),
        ("permission denied", "deploy-keys"),
        ("kubectl", "deploy-keys"),
    ],
)
def test_search_finds_across_accents_cjk_typos_and_tools(
    shared: str, query: str, session: str
) -> None:
    result = search_json(shared, query, "-w", "demo")
    assert result["matches"], f"nothing found for {query!r}"
    assert result["matches"][0]["session_id"] == session


@pytest.mark.parametrize(
    "query", ["resolve_dirs(config)", "C++", "foo-bar", "%", "_", "'", "\\", '"', "--", "-x"]
)
def test_code_like_queries_never_error(shared: str, query: str) -> None:
    result = pgsearch("search", "-w", "demo", "--", query, dsn=shared)
    ok(result)


def test_secrets_in_tool_output_are_not_findable(shared: str) -> None:
    for query in ("Bearer", "hunter2", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"):
        result = search_json(shared, query, "-w", "demo", "--all-hits")
        assert all("hunter2" not in m["excerpt"] for m in result["matches"])
        assert all(m["kind"] != "tool_output" for m in result["matches"])
    assert not search_json(shared, "hunter2", "-w", "demo")["matches"]


# -- JSON output ---------------------------------------------------------------------------


def test_json_output_has_the_result_fields(shared: str) -> None:
    result = search_json(shared, "cron", "-w", "demo")
    assert {"matches", "searched", "next_cursor", "candidates_capped"} <= set(result)
    assert isinstance(result["searched"], int) and result["searched"] > 0
    assert isinstance(result["candidates_capped"], bool)
    assert result["matches"]
    for match in result["matches"]:
        assert set(match) == MATCH_FIELDS
        assert match["workspace_id"] == "demo"
        assert isinstance(match["seq"], int)
        assert isinstance(match["score"], float)
        assert datetime.fromisoformat(match["created_at"]).tzinfo is not None


def test_json_paging_with_cursors_never_repeats_or_skips(shared: str) -> None:
    everything = search_json(shared, "", "-w", "demo", "--all-hits", "--limit", "50")
    expected = [(m["session_id"], m["seq"]) for m in everything["matches"]]
    assert len(expected) > 5
    seen: list[tuple[str, int]] = []
    cursor: str | None = None
    for _ in range(len(expected) + 1):
        args = ["", "-w", "demo", "--all-hits", "--limit", "4"]
        if cursor:
            args += ["--cursor", cursor]
        page = search_json(shared, *args)
        seen += [(m["session_id"], m["seq"]) for m in page["matches"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == expected


def test_tampered_cursor_is_a_one_line_error(shared: str) -> None:
    result = pgsearch("search", "", "-w", "demo", "--cursor", "not-a-cursor", dsn=shared)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("pgsearch: error:")


def test_browse_lists_newest_first(shared: str) -> None:
    result = search_json(shared, "", "-w", "demo", "--all-hits", "--limit", "50")
    times = [datetime.fromisoformat(m["created_at"]) for m in result["matches"]]
    assert times == sorted(times, reverse=True)


def test_kind_filter_reaches_bookkeeping(shared: str) -> None:
    result = search_json(shared, "catalogue", "-w", "demo", "--kind", "summary")
    assert [m["kind"] for m in result["matches"]] == ["summary"]


# -- ingest errors -----------------------------------------------------------------------


def test_ingest_rejects_a_malformed_file_whole_and_keeps_the_good_one(
    dsn: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / "nested").mkdir(parents=True)
    (logs / "good.jsonl").write_text(
        '{"role": "user", "content": "the zeppelin hangar needs a new roof"}\n'
        '{"role": "assistant", "content": "I will order the zeppelin roof panels."}\n',
        encoding="utf-8",
    )
    (logs / "nested" / "bad.jsonl").write_text(
        '{"role": "user", "content": "the bad file mentions the zeppelin too"}\n'
        '{"role": "user", "content": "unterminated\n'
        '{"role": "user", "content": "never reached"}\n',
        encoding="utf-8",
    )
    result = pgsearch("ingest", str(logs), "--workspace", "w1", dsn=dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("pgsearch: error:")]
    assert len(errors) == 1
    assert re.search(r"bad\.jsonl:2: .*invalid JSON", errors[0])
    assert "1 errors" in result.stdout

    found = search_json(dsn, "zeppelin", "-w", "w1", "--all-hits")
    assert {m["session_id"] for m in found["matches"]} == {"good"}
    sessions = ok(pgsearch("sessions", "-w", "w1", dsn=dsn))
    assert [line.split("\t")[0] for line in sessions.splitlines()] == ["good"]


def test_ingest_of_a_missing_path_is_a_one_line_error(dsn: str, tmp_path: Path) -> None:
    result = pgsearch("ingest", str(tmp_path / "nowhere"), "-w", "w1", dsn=dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pgsearch: error:")
    assert "nowhere" in lines[0]


def test_reingest_changes_nothing(demo: str) -> None:
    before = json.loads(ok(pgsearch("stats", "-w", "demo", "--json", dsn=demo)))
    out = ok(pgsearch("ingest", str(EXAMPLES), "-w", "demo", "--quiet", dsn=demo))
    assert out.startswith("3 files (3 unchanged), 0 sessions, 0 messages added, 0 already stored")
    after = json.loads(ok(pgsearch("stats", "-w", "demo", "--json", dsn=demo)))
    assert after["workspaces"] == before["workspaces"]


# -- scope and schema ----------------------------------------------------------------------


def test_unknown_workspace_is_an_error_listing_the_existing_ones(shared: str) -> None:
    done = pgsearch("search", "cron", "-w", "nobody", dsn=shared)
    assert done.returncode == 1 and done.stdout == ""
    assert "no workspace 'nobody' (from --workspace); existing: demo" in done.stderr
    assert pgsearch("search", "cron", "-w", "nobody", "--json", dsn=shared).returncode == 1


@pytest.mark.parametrize(
    "args",
    [
        ("search", "cron", "-w", "demo"),
        ("ingest", str(EXAMPLES), "-w", "demo"),
        ("around", "-w", "demo", "--session", "cron-refactor", "--seq", "1"),
        ("sessions", "-w", "demo"),
        ("stats",),
        ("forget", "-w", "demo", "--session", "cron-refactor"),
    ],
    ids=lambda args: args[0],
)
def test_unmigrated_database_names_the_fix(empty_dsn: str, args: tuple[str, ...]) -> None:
    result = pgsearch(*args, dsn=empty_dsn)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgsearch: error:")
    assert "pgsearch migrate" in lines[0]


def test_unreachable_server_is_a_one_line_error_without_the_password() -> None:
    result = pgsearch(
        "stats", dsn="postgresql://alice:hunter2@127.0.0.1:1/nowhere?connect_timeout=2"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "hunter2" not in result.stderr


# -- around, sessions, forget, stats ------------------------------------------------------


def test_around_marks_the_anchor(shared: str) -> None:
    out = ok(
        pgsearch("around", "-w", "demo", "--session", "cron-refactor", "--seq", "5", dsn=shared)
    )
    headers = [line for line in out.splitlines() if re.match(r"^(>>|--) seq=\d+ ", line)]
    assert [re.search(r"seq=(\d+)", h).group(1) for h in headers] == [  # type: ignore[union-attr]
        str(seq) for seq in range(2, 9)
    ]
    anchors = [h for h in headers if h.startswith(">>")]
    assert len(anchors) == 1
    assert anchors[0].startswith(">> seq=5 ")
    # Windows show raw content, tool output included.
    assert "register_job(nightly_backup)" in out


def test_around_json_window_is_capped_with_the_anchor_inside(shared: str) -> None:
    out = ok(
        pgsearch(
            "around",
            "-w",
            "demo",
            "--session",
            "cron-refactor",
            "--seq",
            "0",
            "--before",
            "50",
            "--after",
            "50",
            "--json",
            dsn=shared,
        )
    )
    window = json.loads(out)
    seqs = [m["seq"] for m in window["messages"]]
    assert len(seqs) <= 16
    assert seqs == sorted(seqs)
    assert [m["seq"] for m in window["messages"] if m["anchor"]] == [0]
    assert window["anchor_seq"] == 0


def test_around_a_missing_message_is_a_one_line_error(shared: str) -> None:
    result = pgsearch("around", "-w", "demo", "--session", "nope", "--seq", "0", dsn=shared)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_sessions_lists_the_workspace(shared: str) -> None:
    out = ok(pgsearch("sessions", "-w", "demo", "--json", dsn=shared))
    sessions = {s["session_id"]: s for s in json.loads(out)}
    assert set(sessions) == {"cron-refactor", "deploy-keys", "pokemon-i18n"}
    assert sessions["cron-refactor"]["title"] == "Cron refactor"
    assert sessions["cron-refactor"]["message_count"] == 10


def test_a_session_without_a_title_is_named_by_its_first_prompt(dsn: str, tmp_path: Path) -> None:
    """Hits, browsing and the session list name an untitled session by its first
    prompt, cleaned and cut; `--json` carries it as the title."""
    log = tmp_path / "login.jsonl"
    lines = [
        {"role": "system", "content": "You are a coding agent.", "created_at": "2026-03-02T09:00Z"},
        {"role": "user", "content": "please push the fix for the **flaky** login test"},
        {"role": "assistant", "content": "Pushed: the login test waits for the session cookie."},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    ok(pgsearch("ingest", str(log), "--workspace", "w", "--quiet", dsn=dsn))
    title = "please push the fix for the flaky login test"
    out = ok(pgsearch("search", "cookie", "-w", "w", dsn=dsn))
    assert out.splitlines()[0].startswith(f'1. "{title}" login #2 · assistant · '), out
    browse = ok(pgsearch("search", "", "-w", "w", "--limit", "1", dsn=dsn))
    assert browse.splitlines()[1].startswith(f'1. "{title}" login #'), browse
    assert search_json(dsn, "cookie", "-w", "w")["matches"][0]["title"] == title
    listed = ok(pgsearch("sessions", "-w", "w", dsn=dsn))
    assert listed.rstrip("\n").endswith(f'\t"{title}"'), listed
    assert json.loads(ok(pgsearch("sessions", "-w", "w", "--json", dsn=dsn)))[0]["title"] == title


def test_forget_then_stats(demo: str) -> None:
    def stats() -> dict[str, Any]:
        data = json.loads(ok(pgsearch("stats", "--json", dsn=demo)))
        by_ws: dict[str, Any] = {w["workspace_id"]: w for w in data["workspaces"]}
        return by_ws

    assert (stats()["demo"]["sessions"], stats()["demo"]["messages"]) == (3, 21)
    out = ok(pgsearch("forget", "-w", "demo", "--session", "cron-refactor", dsn=demo))
    assert out.strip() == "forgot session 'cron-refactor': 10 messages deleted"
    after = stats()["demo"]
    assert (after["sessions"], after["messages"]) == (2, 11)
    assert not search_json(demo, "advisory", "-w", "demo")["matches"]

    text = ok(pgsearch("stats", "-w", "demo", dsn=demo))
    assert re.search(r"^demo\t2\t11\t", text, re.MULTILINE)
    assert "table\ttable size\tindex size" in text


def test_forget_a_workspace_asks_first(demo: str) -> None:
    refused = pgsearch("forget", "-w", "demo", dsn=demo, stdin="n\n")
    assert refused.returncode == 1
    assert "nothing deleted" in refused.stderr
    assert search_json(demo, "cron", "-w", "demo")["matches"]

    out = ok(pgsearch("forget", "-w", "demo", "--yes", dsn=demo))
    assert "21 messages deleted" in out
    assert search_json(demo, "", "-w", "demo")["matches"] == []
    assert "no sessions" in ok(pgsearch("sessions", "-w", "demo", dsn=demo))


# -- agent logs as a user ingests them ----------------------------------------------

AGENT_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_a_bad_line_in_an_agent_log_is_a_warning_and_the_file_lands(dsn: str) -> None:
    log = AGENT_FIXTURES / "claude-code" / "commands" / "9b1d4e7a-2c3f-4a5b-8c6d-7e8f9a0b1c2d.jsonl"
    result = pgsearch("ingest", str(log), "-w", "w1", dsn=dsn)
    out = ok(result)
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    assert warnings == [
        f"pgsearch: warning: {log}:8: invalid JSON: Unterminated string starting at column 156",
        f"pgsearch: warning: {log}:13: 'timestamp' '2025-13-45T99:00:00Z' is not an ISO 8601 time",
    ]
    assert "1 files (0 unchanged), 1 sessions, 15 messages added" in out
    assert "2 bad lines skipped, 0 errors" in out


def test_a_wrong_format_exits_1_naming_what_the_file_looks_like(dsn: str) -> None:
    log = AGENT_FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
    result = pgsearch("ingest", str(log), "-w", "w1", "--format", "codex", dsn=dsn)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"pgsearch: error: {log}: no messages in format codex; it looks like claude-code"
    )
    out = ok(pgsearch("ingest", str(log), "-w", "w1", dsn=dsn))  # nothing was recorded
    assert "19 messages added" in out


def test_another_programs_file_is_named_as_such(dsn: str, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text(
        '{"display": "fix the flaky test", "pastedContents": {}, "timestamp": 1759000000000}\n',
        encoding="utf-8",
    )
    result = pgsearch("ingest", str(history), "-w", "w1", dsn=dsn)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"pgsearch: error: {history}: not a format pgsearch reads")
    assert "Claude Code's prompt history" in line and "opencode" in line


def test_explain_says_whether_the_result_is_exact(shared: str) -> None:
    text = ok(pgsearch("search", "advisory lock", "-w", "demo", "--explain", dsn=shared))
    assert "result: exact (every hit the rules define was ranked)" in text
    data = search_json(shared, "advisory lock", "-w", "demo", "--explain")
    assert data["approximate"] is False
    assert data["plan"]["approximate"] is False and data["plan"]["approximate_because"] == []


def test_search_json_names_the_parent_of_a_sub_agent_session(dsn: str) -> None:
    logs = AGENT_FIXTURES / "claude-code" / "subagents"
    ok(pgsearch("ingest", str(logs), "-w", "w1", "--quiet", dsn=dsn))
    found = search_json(dsn, "onQueryChange", "-w", "w1", "--all-hits")
    parents = {m["session_id"]: m["parent_session_id"] for m in found["matches"]}
    main = "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
    assert parents[f"{main}/agent-a3f9c21"] == main
    assert parents[main] is None
    text = ok(pgsearch("search", "onQueryChange", "-w", "w1", dsn=dsn))
    assert re.search(rf"^\d+\. {main}/agent-a3f9c21 #\d+ \(in {main}\) · ", text, re.M), text


# -- the README's JSON examples -----------------------------------------------------------


@pytest.mark.parametrize("doc", ["README.md", "docs/search.md"])
def test_json_examples_of_commands_are_a_real_runs_output(shared: str, doc: str) -> None:
    path = REPO / doc
    for command in doc_examples(path):
        argv = shlex.split(command)
        assert argv[0] == "pgsearch", command
        actual = json.loads(ok(pgsearch(*argv[1:], dsn=shared)))
        check_example(path, command, actual, volatile=("next_cursor",))


def test_the_text_example_of_search_is_a_real_runs_output(shared: str) -> None:
    """docs/search.md shows the text layout of hits as a real run prints it (rewritten
    with PGSEARCH_WRITE_EXAMPLES=1)."""
    path = REPO / "docs" / "search.md"
    text = path.read_text()
    found = re.search(r"<!-- text output of: (.+?) -->\n```text\n(.*?)```", text, re.S)
    assert found is not None, f"{path} has no text example"
    argv = shlex.split(found.group(1))
    assert argv[0] == "pgsearch", found.group(1)
    actual = ok(pgsearch(*argv[1:], dsn=shared))
    if WRITE_EXAMPLES:
        path.write_text(text[: found.start(2)] + actual + text[found.end(2) :])
        return
    assert found.group(2) == actual, f"{path.name}: the text example differs from a real run"


def test_search_on_a_terminal_shows_matches_in_colour(shared: str) -> None:
    """On a terminal the matched words are bold and coloured, the rest plain."""
    import pty

    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgsearch",
            "--dsn",
            shared,
            "search",
            "advisory lock",
            "-w",
            "demo",
        ],
        stdout=secondary,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
    os.close(primary)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0, out
    assert "\x1b[1;33madvisory\x1b[0m \x1b[1;33mlock\x1b[0m" in out
    assert "**" not in out
    # The header: rank and title bold, where and when dim.
    assert out.startswith('\x1b[1m1. "Cron refactor" \x1b[0m\x1b[2mcron-refactor #'), out
    assert " · user · \x1b[2m" in out.splitlines()[0]


def test_browsing_says_newest_entries_and_shows_no_scores(shared: str) -> None:
    out = ok(pgsearch("search", "", "-w", "demo", "--limit", "3", dsn=shared))
    assert out.startswith("newest entries:")
    assert "score" not in out
    hits = out.splitlines()[1:7]
    for rank, (header, excerpt) in enumerate(zip(hits[::2], hits[1::2], strict=True), 1):
        assert re.fullmatch(
            rf"{rank}\. (\"[^\"]+\" )?\S+ #\d+ · [a-z ]+(\S+)? · \d{{4}}-\d\d-\d\d \d\d:\d\d UTC",
            header,
        ), header
        assert excerpt.startswith("   ") and excerpt.strip(), excerpt
    assert "3 entries, 17 entries searched" in out


def test_one_match_is_one_match(shared: str) -> None:
    out = ok(pgsearch("search", "kubectl", "-w", "demo", dsn=shared))
    assert "\n1 match, " in out


# -- which workspace ------------------------------------------------------------------------


def test_an_unknown_workspace_is_an_error_naming_the_closest(shared: str) -> None:
    done = pgsearch("search", "advisory lock", "-w", "dmeo", dsn=shared)
    assert done.returncode == 1, done.stdout
    assert "no workspace 'dmeo' (from --workspace); closest: demo" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for argv in (
        ("sessions", "-w", "dmeo"),
        ("around", "-w", "dmeo", "--session", "cron-refactor", "--seq", "6"),
        ("messages", "-w", "dmeo", "--session", "cron-refactor"),
        ("stats", "-w", "dmeo"),
    ):
        done = pgsearch(*argv, dsn=shared)
        assert done.returncode == 1 and "closest: demo" in done.stderr, argv


def test_the_workspace_comes_from_the_environment_or_the_config_file(
    shared: str, tmp_path: Path
) -> None:
    out = ok(pgsearch("search", "advisory lock", dsn=shared, env={"PGSEARCH_WORKSPACE": "demo"}))
    assert out.startswith('1. "Cron refactor" cron-refactor #')
    config = tmp_path / "config.toml"
    config.write_text('workspace = "demo"\n')
    out = ok(pgsearch("sessions", dsn=shared, env={"PGSEARCH_CONFIG": str(config)}))
    assert "cron-refactor" in out
    wrong = pgsearch("search", "lock", dsn=shared, env={"PGSEARCH_WORKSPACE": "demp"})
    assert wrong.returncode == 1
    assert "no workspace 'demp' (from PGSEARCH_WORKSPACE); closest: demo" in wrong.stderr
    default = pgsearch("search", "lock", dsn=shared)
    assert default.returncode == 1
    assert "no workspace 'default' (from the default); existing: demo" in default.stderr


# -- logs found by themselves ---------------------------------------------------------------


def test_ingest_with_no_path_reads_every_agents_default_locations(
    empty_dsn: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    claude = home / ".claude" / "projects" / "-work-app"
    claude.mkdir(parents=True)
    shutil.copy(
        AGENT_FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl", claude
    )
    codex = home / ".codex" / "sessions" / "2025" / "07" / "14"
    codex.mkdir(parents=True)
    rollout = (
        AGENT_FIXTURES
        / "codex"
        / "rollout-2025-09-14T10-21-07-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
    )
    shutil.copy(rollout, codex)
    env = {"HOME": str(home)}
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME"):
        env[name] = ""
    ok(pgsearch("migrate", dsn=empty_dsn))
    done = pgsearch("ingest", "-w", "mine", dsn=empty_dsn, env=env)
    out = ok(done)
    assert "found Claude Code logs: ~/.claude/projects" in done.stderr
    assert "found Codex CLI logs: ~/.codex/sessions" in done.stderr
    assert "none found for: " in done.stderr and "Gemini CLI" in done.stderr
    assert "2 files (0 unchanged), 2 sessions" in out

    bare = tmp_path / "bare"
    bare.mkdir()
    nothing = pgsearch("ingest", "-w", "mine", dsn=empty_dsn, env={**env, "HOME": str(bare)})
    assert nothing.returncode == 1
    assert "no agent logs in their default locations" in nothing.stderr


def test_the_quick_start_search_shows_the_typo_found(shared: str) -> None:
    """The README's demo query has a typo; its top hit holds the word it meant."""
    readme = (REPO / "README.md").read_text()
    assert 'pgsearch search "databse lock"' in readme
    top = search_json(shared, "databse lock", "-w", "demo")["matches"][0]
    assert "database" in top["excerpt"].lower()
    assert top["session_id"] == "cron-refactor"
    assert "database" in [top["excerpt"][a:b].lower() for a, b in top["highlights"]]


def test_windows_show_tool_calls_as_keywords(shared: str) -> None:
    out = ok(
        pgsearch("around", "-w", "demo", "--session", "cron-refactor", "--seq", "3", dsn=shared)
    )
    assert '   grep(pattern="register_job", path="scheduler/")' in out
    data = json.loads(
        ok(
            pgsearch(
                "around",
                "-w",
                "demo",
                "--session",
                "cron-refactor",
                "--seq",
                "3",
                "--json",
                dsn=shared,
            )
        )
    )
    anchor = next(m for m in data["messages"] if m["anchor"])
    assert (
        '{"pattern": "register_job", "path": "scheduler/"}' in anchor["content"]
    )  # --json as stored
