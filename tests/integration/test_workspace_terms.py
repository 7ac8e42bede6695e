"""Each workspace's own posting lists (migration 0014): the keyed terms and queries.

A message's keyed terms (``pgsearch_workspace_terms``) match a query keyed by the same
workspace exactly when its ``tsv`` matches the query, and never a query keyed by
another workspace; the query keyed in Python (`queries.keyed_tsquery`) is the one the
server keys (``pgsearch_workspace_query``), for any workspace id and terms.
"""

from __future__ import annotations

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsearch.db.queries import _quote, keyed_tsquery

# Workspace ids as `check_workspace` admits them (no control character), with the
# characters that quoting treats specially.
WORKSPACES = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))
    | st.sampled_from("'\\: |&!"),
    min_size=1,
    max_size=12,
).filter(lambda w: w.strip() != "")
TERMS = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"))
    | st.sampled_from("'\\:*"),
    min_size=1,
    max_size=10,
)


def _query(groups: list[list[str]]) -> str:
    return " & ".join("(" + " | ".join(_quote(t) for t in group) + ")" for group in groups)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    workspace=WORKSPACES,
    other=WORKSPACES,
    document=st.lists(TERMS, min_size=1, max_size=6, unique=True),
    groups=st.lists(st.lists(TERMS, min_size=1, max_size=3), min_size=1, max_size=3),
)
def test_keyed_terms_match_as_the_terms_do(
    dsn: str, workspace: str, other: str, document: list[str], groups: list[list[str]]
) -> None:
    query = _query(groups)
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT array_to_tsvector(%(doc)s::text[]) @@ %(q)s::tsquery,"
            " pgsearch_workspace_terms(%(ws)s, array_to_tsvector(%(doc)s::text[]))"
            " @@ pgsearch_workspace_query(%(ws)s, %(q)s::tsquery),"
            " pgsearch_workspace_terms(%(ws)s, array_to_tsvector(%(doc)s::text[]))"
            " @@ %(keyed)s::tsquery,"
            " pgsearch_workspace_query(%(ws)s, %(q)s::tsquery) = %(keyed)s::tsquery,"
            " pgsearch_workspace_terms(%(other)s, array_to_tsvector(%(doc)s::text[]))"
            " @@ pgsearch_workspace_query(%(ws)s, %(q)s::tsquery)",
            {
                "doc": document,
                "q": query,
                "ws": workspace,
                "other": other,
                "keyed": keyed_tsquery(workspace, query),
            },
        ).fetchone()
    assert row is not None
    plain, keyed_in_server, keyed_in_python, same_query, across = row
    assert keyed_in_server == plain
    assert keyed_in_python == plain
    assert same_query
    assert across == (plain and other == workspace)
