from __future__ import annotations

from pgsearch import PgSearch, SessionQueryRequest
from tests.conftest import EXAMPLES


def test_examples_ingest_and_search(pg: PgSearch) -> None:
    report = pg.ingest_paths([EXAMPLES], workspace="demo")
    assert report.errors == []
    assert report.messages == 21
    result = pg.provider(workspace="demo").search(SessionQueryRequest(query="advisory lock"))
    assert result.matches[0].session_id == "cron-refactor"
