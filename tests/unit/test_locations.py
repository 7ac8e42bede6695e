"""Default log locations: the patterns adapters declare and what they expand to."""

from __future__ import annotations

from pathlib import Path

from pgsearch import adapters, locations


def test_home_and_variable_with_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert locations.expand("~/.claude/projects", {}, home) == f"{home}/.claude/projects"
    pattern = "${CODEX_HOME:-~/.codex}/sessions"
    assert locations.expand(pattern, {}, home) == f"{home}/.codex/sessions"
    # An empty variable counts as unset, as the agents themselves read it.
    assert locations.expand(pattern, {"CODEX_HOME": ""}, home) == f"{home}/.codex/sessions"
    assert locations.expand(pattern, {"CODEX_HOME": "/srv/codex"}, home) == "/srv/codex/sessions"
    assert locations.expand("${NOPE}/x", {}, home) == "/x"


def test_existing_skips_what_is_missing_and_expands_globs(tmp_path: Path) -> None:
    home = tmp_path
    (home / "a" / "one").mkdir(parents=True)
    (home / "a" / "two").mkdir()
    assert locations.existing("~/a/one", {}, home) == [home / "a" / "one"]
    assert locations.existing("~/a/none", {}, home) == []
    assert locations.existing("~/a/*", {}, home) == [home / "a" / "one", home / "a" / "two"]


def test_shown_under_home(tmp_path: Path) -> None:
    assert locations.shown(tmp_path / ".codex" / "sessions", tmp_path) == "~/.codex/sessions"
    assert locations.shown("/etc/x", tmp_path) == "/etc/x"


def test_every_agent_adapter_declares_where_its_logs_are() -> None:
    for name, adapter in adapters.ADAPTERS.items():
        if name == adapters.OPENAI:
            assert adapter.locations == ()  # pgsearch's own files live wherever you put them
            continue
        assert adapter.label, name
        assert adapter.locations, name
        for pattern in adapter.locations:
            assert pattern.startswith(("~/", "${")), pattern


def test_default_locations_found_under_a_home(tmp_path: Path) -> None:
    (tmp_path / ".claude" / "projects").mkdir(parents=True)
    custom = tmp_path / "elsewhere" / "codex"
    (custom / "sessions").mkdir(parents=True)
    found = adapters.default_locations({"CODEX_HOME": str(custom)}, tmp_path)
    by_pattern = {(loc.format, loc.pattern): loc.paths for loc in found}
    assert by_pattern[(adapters.CLAUDE_CODE, "${CLAUDE_CONFIG_DIR:-~/.claude}/projects")] == (
        tmp_path / ".claude" / "projects",
    )
    assert by_pattern[(adapters.CODEX, "${CODEX_HOME:-~/.codex}/sessions")] == (
        custom / "sessions",
    )
    assert by_pattern[(adapters.GEMINI, "${GEMINI_CLI_HOME:-~}/.gemini/tmp")] == ()
    opencode = by_pattern[(adapters.OPENCODE, "${XDG_DATA_HOME:-~/.local/share}/opencode/storage")]
    assert opencode == ()
