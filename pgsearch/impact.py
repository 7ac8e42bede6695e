"""Impact-ordered postings: bounded candidate work for frequent words.

For each term found in at least `MIN_DF` messages of a workspace, ``term_lists``
keeps the keys of its `MAX_POSTINGS` messages with the largest BM25 term impact
``tf / (tf + k1 (1 - b + b len / avgdl))``, best first, in chunks of `CHUNK`;
``term_list_heads`` keeps each chunk's largest impact and ``theta``, the largest
impact among the postings left out. The lists are rebuilt whole per workspace, in
one transaction (`pgsearch.db.store.build_lists`): after a bulk load, by
``pgsearch maintain``, and by a search path that finds them behind. Messages stored
since (``ingest_seq`` above the workspace's watermark, its *tail*) are read directly,
at most `TAIL_MAX` of them; a workspace further behind is searched as before.

A search whose plan caps its candidates (`plan.CandidatePlan`: ``all_words_newest``,
``any_unit_by_coverage``) reads instead the first chunks of each listed term, every
match of its other terms (rare by construction), and the tail, scores them all with
the same `ranking.Scorer`, and certifies the result: no message left unread can
score above the k-th best read (`unseen_bound`). The bound uses the statistics at
query time; the lists' order dates from their build, which the bound absorbs
(a drifted average length only loosens it), so drift can cost work, never order.
"""

from __future__ import annotations

#: Terms found in at least this many messages of a workspace get a list (a rarer
#: term's messages are all read: at most this many, plus the tail).
MIN_DF = 256
#: Postings kept per list (the best by impact).
MAX_POSTINGS = 2048
#: Keys per ``term_lists`` row.
CHUNK = 128
#: Most messages stored since a build that a search reads directly; further behind,
#: the workspace is searched without its lists until they are rebuilt.
TAIL_MAX = 2000
#: Ingest rebuilds a workspace's lists once this many messages were stored since
#: their build (`Store.keep_lists_current`), well before searches stop using them.
REBUILD_BEHIND = TAIL_MAX // 2
