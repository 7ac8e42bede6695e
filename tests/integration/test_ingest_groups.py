"""Many files at once: written in groups, every stage one round trip for the group,
and still all or nothing per file."""

from __future__ import annotations

from pathlib import Path

import psycopg

from pgsearch import PgSearch
from tests.helpers import assert_statistics_exact, message_keys, write_jsonl


def _files(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_jsonl(
            folder / f"s{i:02d}.jsonl",
            [
                {"role": "user", "content": f"deploy number {i} failed on the migration lock"},
                {"role": "assistant", "content": f"retry {i} after clearing the stale worker"},
                {"role": "tool", "content": f"Error: lock held by worker {i}"},
            ],
        )
        for i in range(count)
    ]


def test_a_group_of_files_costs_a_few_round_trips(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    files = _files(tmp_path / "logs", 30)
    with pg._driver.capture() as units:
        report = pg.ingest_paths([tmp_path / "logs"], workspace="w")
    assert report.errors == [] and report.messages == 90 and report.files == 30
    writes = [u for u in units if u.write]
    # One transaction for the 30 files, its stages a round trip each (claim, open,
    # insert, finish): a file's own round trips are not paid per file.
    assert len(writes) == 1
    assert writes[0].round_trips <= 6, writes[0].round_trips
    assert sum(u.round_trips for u in units) <= 8
    assert len(message_keys(dsn, "w")) == 90
    assert_statistics_exact(dsn, "w")
    again = pg.ingest_paths(files, workspace="w")
    assert again.unchanged == 30 and again.messages == 0


def test_a_file_that_fails_in_a_group_fails_alone(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    """A file whose session holds another source's messages is refused; the group is
    written again file by file, so every other file lands whole and nothing of the
    refused one is stored or recorded."""
    files = _files(tmp_path / "logs", 6)
    pg.append(workspace="w", session_id="s03", messages=[{"role": "user", "content": "mine"}])
    report = pg.ingest_paths([tmp_path / "logs"], workspace="w")
    assert report.files == 6 and report.messages == 15
    assert [e.path for e in report.errors] == [str(files[3])]
    assert "already holds messages from API appends" in str(report.errors[0])
    keys = message_keys(dsn, "w")
    assert len(keys) == 16
    assert {sid for sid, _ in keys} == {f"s{i:02d}" for i in range(6)}
    with psycopg.connect(dsn) as conn:
        recorded = {r[0] for r in conn.execute("SELECT path FROM ingested_files").fetchall()}
    assert recorded == {str(f) for i, f in enumerate(files) if i != 3}
    assert_statistics_exact(dsn, "w")


def test_files_naming_one_session_are_never_written_together(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """Two files of one run naming the same session: the first lands, the second is
    refused as it would be a run later."""
    folder = tmp_path / "logs"
    folder.mkdir()
    first = write_jsonl(folder / "a.jsonl", [{"role": "user", "content": "one", "session_id": "x"}])
    second = write_jsonl(
        folder / "b.jsonl", [{"role": "user", "content": "two", "session_id": "x"}]
    )
    report = pg.ingest_paths([folder], workspace="w")
    assert report.messages == 1
    assert [e.path for e in report.errors] == [str(second)]
    assert f"already holds messages from {first}" in str(report.errors[0])
    assert_statistics_exact(dsn, "w")
