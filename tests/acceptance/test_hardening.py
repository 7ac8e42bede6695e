"""Hardened output paths of the `pgsearch` command: secrets, terminal control
characters, broken pipes and workspace ids, as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgsearch import PgSearch, SessionQueryRequest
from tests.acceptance.test_cli import ok, pgsearch

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
