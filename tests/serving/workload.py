"""A mixed workload for the serving suites: threads on one `PgSearch`, tasks on one
`AsyncPgSearch`, every operation checked and every append accounted for.

Each actor (a thread, or a task of the event loop that one extra thread runs) loops
over searches, appends, windows, statistics and, when asked, short-lived sessions
it forgets again. Every append carries a token no other message holds; the
`Ledger` records what became of it: acknowledged, failed before anything was
committed (`StoreUnavailable`: the driver promises nothing was stored), or of
unknown outcome (`OutcomeUnknown`). `Ledger.audit` then reads the primary: each
acknowledged token stored exactly once (unless its session was forgotten), no token
ever twice, nothing stored that was reported as not stored, forgotten sessions
gone, and the statistics equal to a full recount.

Reads check their answers too: a search for a token its actor appended (and saw
acknowledged) must find it, a window must hold the message asked for. A wrong
answer is always a failure; an error is one only where the test says so (the
fault suite allows clear `StoreError`s for the operations a fault cut).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.aio import AsyncPgSearch
from pgsearch.errors import OutcomeUnknown, StoreError, StoreUnavailable
from tests.helpers import assert_statistics_exact

TOKEN_RE = re.compile(r"\btok\d+x\d+\b")
WORDS = ("cron", "deploy", "parser", "vault", "retry", "cache", "queue", "index")


@dataclass
class Ledger:
    """What every actor did, for the audit (shared; guarded by `lock`)."""

    workspace: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, str] = field(default_factory=dict)  # token -> session
    unknown: set[str] = field(default_factory=set)
    not_stored: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)
    #: Sessions whose forget failed: they may or may not be gone.
    maybe_forgotten: set[str] = field(default_factory=set)
    ops: Counter[str] = field(default_factory=Counter)
    errors: list[tuple[str, str, BaseException]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # wrong answers, tracebacks
    slowest: float = 0.0
    slowest_op: str = ""

    def done(self, op: str, seconds: float) -> None:
        with self.lock:
            self.ops[op] += 1
            if seconds > self.slowest:
                self.slowest, self.slowest_op = seconds, op

    def error(self, actor: str, op: str, exc: BaseException) -> None:
        with self.lock:
            self.errors.append((actor, op, exc))

    def failure(self, text: str) -> None:
        with self.lock:
            self.failures.append(text)

    def appended(self, token: str, session: str, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.acked[token] = session
            elif isinstance(exc, OutcomeUnknown):
                self.unknown.add(token)
            elif isinstance(exc, StoreUnavailable):
                self.not_stored.add(token)
            else:
                self.unknown.add(token)  # e.g. a timeout: may or may not have run

    def error_kinds(self) -> Counter[str]:
        return Counter(type(e).__name__ for _, _, e in self.errors)

    def audit(self, dsn: str) -> dict[str, int]:
        """Check the stored rows against the ledger; returns figures for the report."""
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                "SELECT session_id, content FROM messages WHERE workspace_id = %s",
                (self.workspace,),
            ).fetchall()
            left = {
                str(r[0])
                for r in conn.execute(
                    "SELECT session_id FROM sessions WHERE workspace_id = %s "
                    "AND session_id = ANY(%s)",
                    (self.workspace, list(self.forgotten)),
                ).fetchall()
            }
        stored: Counter[str] = Counter()
        for _session, content in rows:
            stored.update(TOKEN_RE.findall(str(content)))
        twice = sorted(t for t, n in stored.items() if n > 1)
        assert twice == [], f"stored more than once: {twice[:10]}"
        gone = self.forgotten | self.maybe_forgotten
        lost = sorted(t for t, s in self.acked.items() if s not in gone and stored[t] != 1)
        assert lost == [], f"acknowledged but not stored: {lost[:10]}"
        phantom = sorted(t for t in self.not_stored if stored[t])
        assert phantom == [], f"reported as not stored, yet stored: {phantom[:10]}"
        known = set(self.acked) | self.unknown | self.not_stored
        strays = sorted(set(stored) - known)
        assert strays == [], f"stored but never appended: {strays[:10]}"
        assert left == set(), f"forgotten sessions still there: {sorted(left)[:10]}"
        in_forgotten = [t for t, s in self.acked.items() if s in self.forgotten and stored[t]]
        assert in_forgotten == [], f"messages of forgotten sessions remain: {in_forgotten[:10]}"
        assert_statistics_exact(dsn, self.workspace)
        return {
            "acknowledged": len(self.acked),
            "unknown": len(self.unknown),
            "unknown_stored": sum(1 for t in self.unknown if stored[t]),
            "not_stored": len(self.not_stored),
            "messages": len(rows),
        }


@dataclass
class Mix:
    """Shares of each operation (the rest of the draw is a search)."""

    append: float = 0.3
    window: float = 0.2
    stats: float = 0.05
    forget: float = 0.0
    #: Seconds any one call may take before it counts as hanging.
    call_limit: float = 30.0


class _Actor:
    """State one actor keeps: its session, its acknowledged tokens and their seqs."""

    def __init__(self, name: str, ledger: Ledger, mix: Mix, seed: int) -> None:
        self.name = name
        self.id = seed
        self.ledger = ledger
        self.mix = mix
        self.rng = random.Random(seed)
        self.session = f"main-{name}"
        self.n = 0
        #: Acknowledged tokens of the current session, in seq order (a window at
        #: seq i holds mine[i]), and every acknowledged token (searches look for them).
        self.mine: list[str] = []
        self.searchable: list[str] = []
        self.churn = 0
        self.sessions = 0

    def append_failed(self) -> None:
        """An append failed and may have been stored: seqs of the session are no longer
        known, so windows move on to a fresh session."""
        self.sessions += 1
        self.session = f"main-{self.name}-{self.sessions}"
        self.mine = []

    def append_acked(self, token: str) -> None:
        self.mine.append(token)
        self.searchable.append(token)

    def next_op(self) -> str:
        r = self.rng.random()
        m = self.mix
        for op, share in (
            ("append", m.append),
            ("window", m.window),
            ("stats", m.stats),
            ("forget", m.forget),
        ):
            if r < share:
                return op
            r -= share
        return "search"

    def new_token(self) -> str:
        self.n += 1
        return f"tok{self.id}x{self.n}"

    def message(self, token: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"{self.rng.choice(WORDS)} work on {token}"}]

    def check_search(self, token: str | None, matches: Any) -> None:
        if token is not None and not any(token in m.excerpt for m in matches):
            self.ledger.failure(f"{self.name}: a search for its own {token} missed it")

    def check_window(self, seq: int, token: str, window: Any) -> None:
        hit = [m for m in window.messages if m.seq == seq]
        if not hit or token not in hit[0].content:
            self.ledger.failure(f"{self.name}: window at seq {seq} lacks {token}")


def run_thread(pg: PgSearch, actor: _Actor, stop: threading.Event) -> None:
    provider = pg.provider(workspace=actor.ledger.workspace)
    ws = actor.ledger.workspace
    while not stop.is_set():
        op = actor.next_op()
        began = time.monotonic()
        try:
            if op == "append":
                token = actor.new_token()
                try:
                    pg.append(workspace=ws, session_id=actor.session, messages=actor.message(token))
                except StoreError as exc:
                    actor.ledger.appended(token, actor.session, exc)
                    actor.append_failed()
                    raise
                actor.ledger.appended(token, actor.session, None)
                actor.append_acked(token)
            elif op == "window" and actor.mine:
                seq = actor.rng.randrange(len(actor.mine))
                window = pg.around(workspace=ws, session_id=actor.session, seq=seq)
                actor.check_window(seq, actor.mine[seq], window)
            elif op == "stats":
                stats = pg.stats(workspace=ws)
                if stats.messages < len(actor.searchable):
                    actor.ledger.failure(f"{actor.name}: stats count fewer than it appended")
            elif op == "forget":
                actor.churn += 1
                session = f"churn-{actor.name}-{actor.churn}"
                token = actor.new_token()
                try:
                    pg.append(workspace=ws, session_id=session, messages=actor.message(token))
                except StoreError as exc:
                    actor.ledger.appended(token, session, exc)
                    raise
                actor.ledger.appended(token, session, None)
                try:
                    pg.forget(workspace=ws, session_id=session)
                except StoreError:
                    with actor.ledger.lock:
                        actor.ledger.maybe_forgotten.add(session)
                    raise
                with actor.ledger.lock:
                    actor.ledger.forgotten.add(session)
            else:
                token = actor.rng.choice(actor.searchable) if actor.searchable else None
                query = token or actor.rng.choice(WORDS)
                found = provider.search(SessionQueryRequest(query=query, per_session=False))
                actor.check_search(token, found.matches)
        except StoreError as exc:
            actor.ledger.error(actor.name, op, exc)
        except Exception:
            actor.ledger.failure(f"{actor.name} {op}:\n{traceback.format_exc()}")
        actor.ledger.done(op, time.monotonic() - began)


async def run_task(pg: AsyncPgSearch, actor: _Actor, stop: threading.Event) -> None:
    ws = actor.ledger.workspace
    provider = pg.provider(workspace=ws)
    while not stop.is_set():
        op = actor.next_op()
        began = time.monotonic()
        try:
            if op == "append":
                token = actor.new_token()
                try:
                    await pg.append(
                        workspace=ws, session_id=actor.session, messages=actor.message(token)
                    )
                except StoreError as exc:
                    actor.ledger.appended(token, actor.session, exc)
                    actor.append_failed()
                    raise
                actor.ledger.appended(token, actor.session, None)
                actor.append_acked(token)
            elif op == "window" and actor.mine:
                seq = actor.rng.randrange(len(actor.mine))
                window = await pg.around(workspace=ws, session_id=actor.session, seq=seq)
                actor.check_window(seq, actor.mine[seq], window)
            elif op == "stats":
                stats = await pg.stats(workspace=ws)
                if stats.messages < len(actor.searchable):
                    actor.ledger.failure(f"{actor.name}: stats count fewer than it appended")
            elif op == "forget":
                actor.churn += 1
                session = f"churn-{actor.name}-{actor.churn}"
                token = actor.new_token()
                try:
                    await pg.append(workspace=ws, session_id=session, messages=actor.message(token))
                except StoreError as exc:
                    actor.ledger.appended(token, session, exc)
                    raise
                actor.ledger.appended(token, session, None)
                try:
                    await pg.forget(workspace=ws, session_id=session)
                except StoreError:
                    with actor.ledger.lock:
                        actor.ledger.maybe_forgotten.add(session)
                    raise
                with actor.ledger.lock:
                    actor.ledger.forgotten.add(session)
            else:
                token = actor.rng.choice(actor.searchable) if actor.searchable else None
                query = token or actor.rng.choice(WORDS)
                found = await provider.search(SessionQueryRequest(query=query, per_session=False))
                actor.check_search(token, found.matches)
        except StoreError as exc:
            actor.ledger.error(actor.name, op, exc)
        except Exception:
            actor.ledger.failure(f"{actor.name} {op}:\n{traceback.format_exc()}")
        actor.ledger.done(op, time.monotonic() - began)
        await asyncio.sleep(0)


@dataclass
class Workload:
    """`threads` actors on `pg`, `tasks` actors on an `AsyncPgSearch` of `dsn`."""

    pg: PgSearch
    async_connect: Callable[[], Any]
    ledger: Ledger
    threads: int
    tasks: int
    mix: Mix = field(default_factory=Mix)
    stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _loop_ready: threading.Event = field(default_factory=threading.Event)
    async_error: list[str] = field(default_factory=list)

    def start(self) -> None:
        for i in range(self.threads):
            actor = _Actor(f"t{i}", self.ledger, self.mix, seed=i)
            t = threading.Thread(target=run_thread, args=(self.pg, actor, self.stop), daemon=True)
            self._workers.append(t)
        if self.tasks:
            t = threading.Thread(target=self._run_loop, daemon=True)
            self._workers.append(t)
        for t in self._workers:
            t.start()
        if self.tasks:
            assert self._loop_ready.wait(60), "the event loop did not start"

    def _run_loop(self) -> None:
        async def main() -> None:
            apg: AsyncPgSearch = await self.async_connect()
            try:
                self._loop_ready.set()
                actors = [
                    _Actor(f"a{i}", self.ledger, self.mix, seed=1000 + i) for i in range(self.tasks)
                ]
                await asyncio.gather(*(run_task(apg, a, self.stop) for a in actors))
            finally:
                await apg.close()

        try:
            asyncio.run(main())
        except BaseException:
            self.async_error.append(traceback.format_exc())
            self._loop_ready.set()

    def finish(self, timeout: float = 90.0) -> None:
        """Stop every actor; each must return (a call that hangs fails here)."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self._workers:
            t.join(max(0.1, deadline - time.monotonic()))
        hung = [t.name for t in self._workers if t.is_alive()]
        assert hung == [], f"actors still running {timeout} s after the stop: {hung}"
        assert self.async_error == [], self.async_error[0]
        assert self.ledger.failures == [], "\n".join(self.ledger.failures[:5])
        assert self.ledger.slowest < self.mix.call_limit, (
            f"a {self.ledger.slowest_op} took {self.ledger.slowest:.1f} s"
        )
