"""The server chooses a word's typo expansions as the search does (one round trip).

``fuzzystrmatch`` gives ``levenshtein_less_equal``, which bounds the edit distance
of a query word and a vocabulary term in C. ``pgsearch_edit_distance(a, b, k,
transpositions)`` is the exact distance when it is at most ``k`` (``k + 1``
otherwise): Levenshtein, or with ``transpositions`` the optimal string alignment
distance (an adjacent swap is one edit), as `rapidfuzz` computes them for
`pgsearch.plan.choose_expansions`. A PL/pgSQL table walk costs tens of µs, so the
search calls it only for the few neighbours Levenshtein alone cannot decide.

On Citus both are created on the coordinator, which creates them on every worker.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EDIT_DISTANCE = r"""
CREATE OR REPLACE FUNCTION pgsearch_edit_distance(a text, b text, k int, transpositions boolean)
RETURNS int LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    n int := length(a);
    m int := length(b);
    big int := k + 1;
    x text[];
    y text[];
    before int[];
    prev int[];
    cur int[];
    best int;
    v int;
BEGIN
    IF a = b THEN
        RETURN 0;
    END IF;
    IF abs(n - m) > k THEN
        RETURN big;
    END IF;
    x := string_to_array(a, NULL);
    y := string_to_array(b, NULL);
    -- Rows of the distance table, columns 0..m; cells more than k off the diagonal
    -- stay at k + 1 (their distance exceeds k).
    prev := array_fill(big, ARRAY[m + 1], ARRAY[0]);
    FOR j IN 0..least(m, k) LOOP
        prev[j] := j;
    END LOOP;
    before := prev;
    FOR i IN 1..n LOOP
        cur := array_fill(big, ARRAY[m + 1], ARRAY[0]);
        IF i <= k THEN
            cur[0] := i;
        END IF;
        best := cur[0];
        FOR j IN greatest(1, i - k)..least(m, i + k) LOOP
            v := least(prev[j] + 1, cur[j - 1] + 1,
                       prev[j - 1] + CASE WHEN x[i] = y[j] THEN 0 ELSE 1 END);
            IF transpositions AND i > 1 AND j > 1 AND x[i] = y[j - 1] AND x[i - 1] = y[j] THEN
                v := least(v, before[j - 2] + 1);
            END IF;
            cur[j] := least(v, big);
            best := least(best, cur[j]);
        END LOOP;
        IF best > k THEN
            RETURN big;
        END IF;
        before := prev;
        prev := cur;
    END LOOP;
    RETURN prev[m];
END
$$
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch")
    op.execute(EDIT_DISTANCE)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS pgsearch_edit_distance(text, text, int, boolean)")
