"""Runtime settings: one frozen object, read from the environment once.

Connection parameters follow libpq: ``--dsn`` beats ``PGSEARCH_DSN``, which beats an
empty DSN (libpq then reads ``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGDATABASE``, ...).
Search limits are named here so that benchmarks and operators tune one place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pgsearch.errors import ConfigError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})

#: Hits scoring below this share of the top score are dropped (the `Settings`
#: default, and `ranking.rank`'s).
RELATIVE_FLOOR = 0.15

#: Seconds between two looks at watched files (`pgsearch.watch`, ``ingest --watch``).
DEFAULT_WATCH_INTERVAL = 2.0

#: Seconds between two rounds of the term lists' maintainer in `pgsearch serve` and
#: `pgsearch mcp` (`pgsearch.maintainer`); 0 turns it off.
DEFAULT_MAINTAIN_INTERVAL = 60.0
#: Messages stored since a workspace's lists were built past which that maintainer
#: rebuilds them: each search through the lists reads those messages directly, and a
#: rebuild costs a pass over the workspace's postings (about 0.15 s per 2,000
#: messages on the bench machine), at most once a workspace per round.
DEFAULT_MAINTAIN_BEHIND = 100

#: Kinds whose text can be indexed beyond the defaults; see `IndexPolicy`.
OPTIONAL_INDEX_KINDS = ("tool_arguments", "tool_output", "system")


@dataclass(frozen=True, kw_only=True)
class IndexPolicy:
    """What text of each kind reaches the search index.

    By default tool-call arguments (only the tool name is indexed), ordinary tool
    results and system text are stored and shown in windows but never indexed, so
    credentials that pass through tools are not findable. Secret-looking strings are
    scrubbed from indexed text of every kind whatever this policy says.
    """

    tool_arguments: bool = False
    tool_output: bool = False
    system: bool = False

    @classmethod
    def parse(cls, value: str) -> IndexPolicy:
        names = {part.strip() for part in value.split(",") if part.strip()}
        unknown = names - set(OPTIONAL_INDEX_KINDS)
        if unknown:
            raise ConfigError(
                f"PGSEARCH_INDEX: unknown entries {sorted(unknown)}; "
                f"allowed: {', '.join(OPTIONAL_INDEX_KINDS)}"
            )
        return cls(**{name: True for name in names})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything tunable about pgsearch, with defaults chosen from `bench/` runs."""

    #: Left out of ``repr`` so that a logged or printed Settings never shows a password.
    dsn: str = field(default="", repr=False)
    #: Upper bound on candidate messages re-ranked in Python per search statement.
    #: Re-ranking costs about 10-15 microseconds per candidate; 1,000 keeps the worst
    #: case near 15 ms while recall on typo and accent queries stays above 0.9.
    candidate_cap: int = 1000
    #: Most documents (by the words' document frequencies) one search may scan to pick
    #: its candidates; the rarest words are scanned first.
    candidate_scan_limit: int = 20_000
    #: The cap when every query word is stop-like (the newest matches are taken).
    stop_candidate_cap: int = 250
    #: A vocabulary term whose document frequency reaches this share of the workspace
    #: is "stop-like": it never drives an OR top-up on its own.
    stop_df_ratio: float = 0.05
    #: Hits below this share of the top score are dropped.
    relative_floor: float = RELATIVE_FLOOR
    #: Most fuzzy expansions kept per query word.
    max_expansions: int = 8
    #: Trigram neighbours read per query word before the edit-distance check.
    fuzzy_fetch: int = 32
    #: Typo distance: ``osa`` counts a transposition (``gruop``) as one edit, as
    #: Damerau did; ``levenshtein`` counts it as two.
    typo_distance: str = "osa"
    #: A word found as written fewer than this many times is still checked for a far
    #: more common spelling one edit away (people misspell in logs too); 0 (the
    #: default) disables it: it costs a trigram read and gained nothing measurable
    #: on the bench sets (``python -m bench.ablate``).
    realword_df: int = 0
    #: ... which it must outnumber this many times over to be taken as meant.
    realword_ratio: float = 10.0
    #: Each typo expansion of a word absent from the vocabulary scored with its own
    #: IDF (a rare intended word is not diluted by its common neighbours).
    per_expansion_idf: bool = True
    #: Share of the best neighbouring turn's score (the message a hit answers, or the
    #: one answering it) added to a hit's score; 0 disables.
    context_weight: float = 0.3
    #: Share of the session's evidence (its best hits' scores summed) added to each
    #: of its hits' scores; 0 disables.
    session_weight: float = 0.3
    #: Match weight of a query word naming a message's speaker (the ``name`` of a
    #: user or assistant message); 0 disables.
    speaker_weight: float = 1.0
    #: Searches whose plan caps its candidates (frequent words) read them through the
    #: workspace's term lists and certify their top results (`pgsearch.impact`), and
    #: ingest keeps the lists current; off (the default: at 100k messages it measured
    #: slower than the capped read, bench/README.md), the capped candidates are read
    #: as planned and only `pgsearch maintain` builds lists.
    impact_lists: bool = False
    #: Seconds between two rounds of the background maintainer of `pgsearch serve`
    #: and `pgsearch mcp`, which rebuilds the term lists of workspaces more than
    #: `maintain_behind` messages behind (`pgsearch.maintainer`); 0 turns it off.
    maintain_interval: float = DEFAULT_MAINTAIN_INTERVAL
    maintain_behind: int = DEFAULT_MAINTAIN_BEHIND
    #: pg_trgm similarity a vocabulary term needs before edit distance is checked.
    #: One edit leaves a 5-8 letter word at least 0.33 similar to the original (n+1
    #: padded trigrams, at most 3 changed); two edits leave a 9+ letter word at least
    #: 0.25, so this threshold misses no term the edit-distance rule would accept.
    trigram_threshold: float = 0.25
    #: Longest query accepted, in characters, and most distinct words used.
    max_query_chars: int = 2000
    max_query_terms: int = 32
    #: Per-search statement timeout in milliseconds (0 disables it); every read has it.
    statement_timeout_ms: int = 5000
    #: Statement timeout of writes in milliseconds (0 disables it): a lock held
    #: elsewhere fails an ingest or append with a clear error instead of hanging it.
    #: A bulk group (64 files, 5,000 entries) writes in well under a second.
    write_timeout_ms: int = 60_000
    #: Connections per process (`PgSearch` owns a pool; one `PgSearch` per process,
    #: shared by every thread). The least kept open, and the most. From
    #: `bench/load.py`'s pool sweep (32 clients, 2 cores): work done per CPU-second
    #: is flat from 4 to 16 connections and lower at 2 (the server idles while
    #: Python runs) and 32 (backends contend); 8 is 4 per core. One connection kept
    #: open is enough: the pool grows within a few calls, and a one-shot command
    #: opens only one.
    pool_min: int = 1
    pool_max: int = 8
    #: Seconds a call waits for a free pooled connection before failing.
    pool_timeout: float = 30.0
    #: Seconds after a call began within which it is run again, by itself, while the
    #: database cannot be reached or the connection is lost (a restart, a failover,
    #: killed backends); an append also when the connection was lost after its
    #: ``COMMIT`` was sent (its messages' keys make running it again safe). Deadlocks
    #: and serialization failures get a few attempts whatever this says.
    retry_seconds: float = 30.0
    #: Streaming standbys that serve searches, windows and listings (writes always go
    #: to `dsn`). Empty: everything runs on the primary. Hidden from ``repr``.
    read_dsns: tuple[str, ...] = field(default=(), repr=False)
    #: Read-your-writes: after a write through this process, a read on a standby
    #: first waits up to this long (milliseconds) for the standby to replay the
    #: write's commit; a standby still behind then is passed over for the primary.
    read_wait_ms: int = 200
    #: A standby whose replay lags the primary by more than this (milliseconds), or
    #: whose WAL receiver is not running, is skipped; 0 accepts any lag.
    read_max_lag_ms: int = 10_000
    #: Milliseconds a read waits for a connection to a standby before it goes to the
    #: next node (a standby that is down then costs this once per back-off period).
    read_connect_timeout_ms: int = 1000
    #: Indexed text per message is capped; the full content is always stored.
    max_indexed_chars: int = 200_000
    #: Bytes of a file ingest holds (read, parsed and indexed) at a time. A file in
    #: pgsearch's format larger than this is streamed in pieces of about this size
    #: within its one transaction, so memory stays bounded whatever the file's size.
    ingest_chunk_bytes: int = 4 * 1024 * 1024
    index_policy: IndexPolicy = field(default_factory=IndexPolicy)
    #: Bind every transaction to its workspace (``SET LOCAL pgsearch.workspace_id``)
    #: for the Row Level Security policies of migration 0002. Needed, and then
    #: enforced by the server, when the role connecting owns none of the tables.
    row_level_security: bool = False
    #: On Citus, make every transaction bound to a workspace fail any statement that
    #: would run on more than one shard (``citus.multi_task_query_log_level = error``):
    #: the proof, in staging or tests, that each workspace's work stays on one shard.
    citus_single_shard: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read ``PGSEARCH_*`` variables; keyword overrides (e.g. from the CLI) win."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        if "PGSEARCH_DSN" in env:
            values["dsn"] = env["PGSEARCH_DSN"]
        ints = {
            "candidate_cap": "PGSEARCH_CANDIDATE_CAP",
            "max_query_chars": "PGSEARCH_MAX_QUERY_CHARS",
            "max_query_terms": "PGSEARCH_MAX_QUERY_TERMS",
            "statement_timeout_ms": "PGSEARCH_STATEMENT_TIMEOUT_MS",
            "write_timeout_ms": "PGSEARCH_WRITE_TIMEOUT_MS",
            "pool_min": "PGSEARCH_POOL_MIN",
            "pool_max": "PGSEARCH_POOL_MAX",
            "max_indexed_chars": "PGSEARCH_MAX_INDEXED_CHARS",
            "ingest_chunk_bytes": "PGSEARCH_INGEST_CHUNK_BYTES",
            "read_wait_ms": "PGSEARCH_READ_WAIT_MS",
            "read_max_lag_ms": "PGSEARCH_READ_MAX_LAG_MS",
            "read_connect_timeout_ms": "PGSEARCH_READ_CONNECT_TIMEOUT_MS",
            "maintain_behind": "PGSEARCH_MAINTAIN_BEHIND",
        }
        for name, var in ints.items():
            if var in env:
                try:
                    values[name] = int(env[var])
                except ValueError:
                    raise ConfigError(f"{var} must be an integer, got {env[var]!r}") from None
        seconds = {
            "pool_timeout": "PGSEARCH_POOL_TIMEOUT",
            "retry_seconds": "PGSEARCH_RETRY_SECONDS",
            "maintain_interval": "PGSEARCH_MAINTAIN_INTERVAL",
        }
        for name, var in seconds.items():
            if var in env:
                try:
                    values[name] = float(env[var])
                except ValueError:
                    raise ConfigError(
                        f"{var} must be a number of seconds, got {env[var]!r}"
                    ) from None
        if "PGSEARCH_READ_DSN" in env:
            values["read_dsns"] = parse_read_dsns(env["PGSEARCH_READ_DSN"])
        if "PGSEARCH_INDEX" in env:
            values["index_policy"] = IndexPolicy.parse(env["PGSEARCH_INDEX"])
        if "PGSEARCH_RLS" in env:
            flag = env["PGSEARCH_RLS"].strip().lower()
            if flag not in _TRUE | _FALSE:
                raise ConfigError(f"PGSEARCH_RLS must be on or off (1/0, true/false), got {flag!r}")
            values["row_level_security"] = flag in _TRUE
        if "PGSEARCH_IMPACT_LISTS" in env:
            flag = env["PGSEARCH_IMPACT_LISTS"].strip().lower()
            if flag not in _TRUE | _FALSE:
                raise ConfigError(
                    f"PGSEARCH_IMPACT_LISTS must be on or off (1/0, true/false), got {flag!r}"
                )
            values["impact_lists"] = flag in _TRUE
        if "PGSEARCH_CITUS_SINGLE_SHARD" in env:
            flag = env["PGSEARCH_CITUS_SINGLE_SHARD"].strip().lower()
            if flag not in _TRUE | _FALSE:
                raise ConfigError(
                    f"PGSEARCH_CITUS_SINGLE_SHARD must be on or off (1/0, true/false), got {flag!r}"
                )
            values["citus_single_shard"] = flag in _TRUE
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.candidate_cap < 10:
            raise ConfigError("candidate_cap must be at least 10")
        if not 0 <= self.relative_floor < 1:
            raise ConfigError("relative_floor must be in [0, 1)")
        if self.max_query_chars < 1 or self.max_query_terms < 1:
            raise ConfigError("query limits must be positive")
        if self.statement_timeout_ms < 0:
            raise ConfigError("statement_timeout_ms must not be negative")
        if self.write_timeout_ms < 0:
            raise ConfigError("write_timeout_ms must not be negative")
        if self.pool_max < 1 or not 0 <= self.pool_min <= self.pool_max:
            raise ConfigError(
                f"the pool needs 0 <= PGSEARCH_POOL_MIN <= PGSEARCH_POOL_MAX and a maximum of "
                f"at least 1, got {self.pool_min} and {self.pool_max}"
            )
        if not self.pool_timeout > 0:
            raise ConfigError("pool_timeout must be positive")
        if not 0 <= self.retry_seconds <= 3600:
            raise ConfigError(
                f"PGSEARCH_RETRY_SECONDS must be between 0 and 3600 seconds, "
                f"got {self.retry_seconds}"
            )
        if not 0 <= self.maintain_interval <= 86_400:
            raise ConfigError(
                f"PGSEARCH_MAINTAIN_INTERVAL must be between 0 (off) and 86400 seconds, "
                f"got {self.maintain_interval}"
            )
        if self.maintain_behind < 1:
            raise ConfigError(
                f"PGSEARCH_MAINTAIN_BEHIND must be at least 1 message, got {self.maintain_behind}"
            )
        if not isinstance(self.read_dsns, tuple):
            raise ConfigError("read_dsns must be a tuple of connection strings")
        if not 0 <= self.read_wait_ms <= 60_000:
            raise ConfigError(
                f"PGSEARCH_READ_WAIT_MS must be between 0 and 60000 milliseconds, "
                f"got {self.read_wait_ms}"
            )
        if self.statement_timeout_ms and self.read_wait_ms >= self.statement_timeout_ms:
            raise ConfigError(
                f"PGSEARCH_READ_WAIT_MS ({self.read_wait_ms}) must be shorter than "
                f"PGSEARCH_STATEMENT_TIMEOUT_MS ({self.statement_timeout_ms}): the wait "
                "runs inside the read's first statement"
            )
        if self.read_max_lag_ms < 0:
            raise ConfigError(
                f"PGSEARCH_READ_MAX_LAG_MS must not be negative (0 accepts any lag), "
                f"got {self.read_max_lag_ms}"
            )
        if self.read_connect_timeout_ms < 1:
            raise ConfigError(
                f"PGSEARCH_READ_CONNECT_TIMEOUT_MS must be at least 1 millisecond, "
                f"got {self.read_connect_timeout_ms}"
            )
        if self.max_indexed_chars < 1:
            raise ConfigError("max_indexed_chars must be positive")
        if self.ingest_chunk_bytes < 64 * 1024:
            raise ConfigError("PGSEARCH_INGEST_CHUNK_BYTES must be at least 65536 (64 KiB)")
        if self.max_expansions < 1:
            raise ConfigError("max_expansions must be positive")
        if not 0 < self.trigram_threshold <= 1:
            raise ConfigError("trigram_threshold must be in (0, 1]")
        if self.typo_distance not in ("osa", "levenshtein"):
            raise ConfigError("typo_distance must be osa or levenshtein")
        if self.fuzzy_fetch < 1:
            raise ConfigError("fuzzy_fetch must be positive")
        for name in ("context_weight", "session_weight", "speaker_weight"):
            if not 0 <= getattr(self, name) <= 5:
                raise ConfigError(f"{name} must be in [0, 5]")
        if not 0 < self.stop_df_ratio <= 1:
            raise ConfigError("stop_df_ratio must be in (0, 1]")

    def with_(self, **changes: object) -> Settings:
        """A copy with some fields changed (validated)."""
        settings = replace(self, **changes)  # type: ignore[arg-type]
        settings.validate()
        return settings


#: Where one standby's connection string ends and the next begins in
#: ``PGSEARCH_READ_DSN``: a comma before a URI or before a ``keyword=`` (so that the
#: commas of a multi-host ``host=a,b`` or ``postgresql://a,b/db`` stay inside), or
#: whitespace before a URI.
_DSN_SEPARATOR = re.compile(
    r"\s*,\s*(?=postgres(?:ql)?://|[A-Za-z_]\w*\s*=)|\s+(?=postgres(?:ql)?://)"
)


def parse_read_dsns(value: str) -> tuple[str, ...]:
    """The standbys of ``PGSEARCH_READ_DSN``: connection strings separated by commas
    (URIs also by whitespace); an empty value names none. Each is checked by libpq's own
    parser when the router is built (`pgsearch.db.routing.router_for`)."""
    parts = [p.strip().strip(",").strip() for p in _DSN_SEPARATOR.split(value.strip())]
    return tuple(p for p in parts if p)
