"""What a command process imports, end to end: a real search against a real database.

A warm search is paid for mostly in imports, so a search process must load only
what searching needs: no ORM or migration code, no log-format parser or ingest
path, no MCP or HTTP server, and the secret rules compiled only as far as the
shown text asks (each rule on first sight of one of its keywords). Help must not
load the library at all. The modules are read from ``python -X importtime`` (every
import of the whole process, the command's own work included); the timings are in
``bench/startup.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Databases

#: Modules (and packages, with everything under them) a search process must not load.
NOT_FOR_SEARCH = (
    "sqlalchemy",
    "alembic",
    "pgsearch._migrations",
    "pgsearch.db.migrate",
    "pgsearch.db.schema",
    "pgsearch.db.citus",
    "pgsearch.db.diagnose",
    "pgsearch.ingest",
    "pgsearch.indexing",
    "pgsearch.messages",
    "pgsearch.sources",
    "pgsearch.watch",
    "pgsearch.adapters.common",
    "pgsearch.adapters.openai",
    "pgsearch.adapters.claude_code",
    "pgsearch.adapters.codex",
    "pgsearch.adapters.gemini",
    "pgsearch.adapters.opencode",
    "pgsearch.mcp_server",
    "pgsearch.tools",
    "pgsearch.web",
    "pgsearch.tokens",
    "mcp",
    "starlette",
    "uvicorn",
    "concurrent.futures.process",
)

#: What help may load of pgsearch: the command line and the constants it shows.
HELP_MAY_LOAD = {
    "pgsearch",
    "pgsearch.__main__",
    "pgsearch.cli",
    "pgsearch.adapters",
    "pgsearch.embedded",
    "pgsearch.errors",
    "pgsearch.policy",
    "pgsearch.settings",
    "pgsearch.terminal",
    "pgsearch.types",
}


def imported(*args: str, **variables: str) -> set[str]:
    """Every module ``python -m pgsearch ARGS`` imports, as a whole process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env.update(variables)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pgsearch", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "pgsearch.cli" in names, "importtime output not understood"
    return names


def loaded_of(names: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(n == p or n.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def searchable(databases: Databases, template_db: str) -> Iterator[str]:
    name = databases.create(template=template_db, prefix="imports")
    dsn = databases.dsn(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    subprocess.run(
        [sys.executable, "-m", "pgsearch", "--dsn", dsn, "ingest", str(EXAMPLES), "-w", "demo"],
        check=True,
        capture_output=True,
        env=env,
        timeout=180,
    )
    yield dsn
    databases.drop(name)


def test_a_search_process_loads_only_what_searching_needs(searchable: str, tmp_path: Path) -> None:
    # A typo query (fuzzy expansion runs) whose excerpts are scrubbed for secrets.
    names = imported(
        "--dsn",
        searchable,
        "search",
        "databse lock",
        "-w",
        "demo",
        PGSEARCH_CONFIG=str(tmp_path / "no-config.toml"),
    )
    assert {"pgsearch.search", "pgsearch.secrets", "psycopg"} <= names  # it did search
    assert loaded_of(names, NOT_FOR_SEARCH) == []
    # Without a config file there is no TOML to parse (the secret rules are cached).
    assert "tomllib" not in names


def test_a_search_compiles_only_the_secret_rules_its_text_needs(searchable: str) -> None:
    probe = (
        "import sys\n"
        "from pgsearch.cli import main\n"
        "main(['--dsn', sys.argv[1], 'search', 'databse lock', '-w', 'demo'],"
        " standalone_mode=False)\n"
        "from pgsearch import secrets\n"
        "print(secrets.compiled.cache_info().currsize, len(secrets.rule_set().rules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, searchable],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    compiled, rules = map(int, proc.stdout.split()[-2:])
    assert rules > 200
    assert compiled < rules // 4, f"{compiled} of {rules} rules compiled for one search"


def test_help_loads_nothing_of_the_library() -> None:
    names = imported("--help")
    ours = {n for n in names if n == "pgsearch" or n.startswith("pgsearch.")}
    assert ours <= HELP_MAY_LOAD, sorted(ours - HELP_MAY_LOAD)
    assert "psycopg" not in names and "re2" not in names
