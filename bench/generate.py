"""A seeded generator of agent-session corpora and queries that know their answers.

    python -m bench.generate --messages 100000 --out bench/results/corpus-100k

writes ``OUT/corpus/<workspace>/<session>.jsonl`` in pgsearch's ingest format,
``OUT/queries.jsonl`` and ``OUT/manifest.json``. The same seed and sizes always give
the same bytes.

The corpus imitates agent sessions: many workspaces of unequal size, sessions of
log-normal length, user / assistant / tool-call / tool-result / tool-error messages
whose word counts are log-normal (a few words to several KB), words drawn from a
Zipf vocabulary of English, technical terms and a long tail of made-up words, mixed
with identifiers, paths, error names, SQL, numbers and hashes. About 5 % of messages
carry accented words and about 3 % are CJK text.

Each query is drawn from one indexable source message and records it as the
relevant answer, in classes: ``exact``, ``typo`` (one edit in one word of 5+
letters), ``accent`` (accents removed from, or added to, the words), ``cjk`` (one
or two CJK characters), ``common`` (very frequent words), ``short`` (1-2 character
words), ``multi`` (4-6 words), ``browse`` (empty query), ``filtered`` (kind, role,
tool or time filter that keeps the source), ``session`` (scoped to the source's
session), and two typo classes for dense vocabularies, each with its spelled-right
twin on the same source: ``rare_typo`` (one deletion in a word of 6+ letters found in
at most 5 messages of its workspace, whose typo has other vocabulary terms one edit
away; twin ``rare_exact``) and ``realword_typo`` (a word of middling frequency typed
as a misspelling that itself occurs in 2-4 other messages of the workspace, plus a
second word of the source; twin ``realword_exact``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import string
import sys
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import words as W


def generator_version() -> str:
    """A digest of the generator's code: a corpus made by other code is regenerated."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("generate.py", "words.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:12]


QUERY_CLASSES = (
    "exact",
    "typo",
    "accent",
    "cjk",
    "common",
    "short",
    "multi",
    "browse",
    "filtered",
    "session",
    "rare_exact",
    "rare_typo",
    "realword_exact",
    "realword_typo",
)
#: Kinds a default search covers; query sources are drawn from these only.
SEARCHABLE_KINDS = ("user_text", "assistant_text", "tool_error")
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
#: Share of messages that are user or assistant text (where accents and CJK go).
TEXT_SHARE = 0.36
#: Word ranks below this are "common": never the distinctive words of a query.
COMMON_RANKS = 300
#: Most messages of its workspace a ``rare_*`` query's word is found in.
RARE_DF = 5
#: Ranks of the words people misspell in ``realword_*`` queries (middling frequency),
#: and how many messages of a workspace carry each misspelling.
REALWORD_RANKS = (COMMON_RANKS, 3000)
REALWORD_COPIES = (2, 4)


@dataclass(frozen=True, kw_only=True)
class Config:
    messages: int
    workspaces: int = 50
    seed: int = 7
    #: Mean messages per session (20k sessions at 1M messages).
    mean_session: float = 50.0
    accented_share: float = 0.05
    cjk_share: float = 0.03
    queries_per_class: int = 200

    def label(self) -> str:
        n = self.messages
        if n % 1_000_000 == 0:
            return f"{n // 1_000_000}M"
        return f"{n // 1000}k" if n % 1000 == 0 else str(n)


@dataclass(slots=True)
class Source:
    """What the query builder needs to know about a candidate source message."""

    workspace: str
    session_id: str
    seq: int
    kind: str
    role: str
    created_at: str
    tool_name: str | None
    words: list[str]
    accented: list[str] = field(default_factory=list)
    cjk: list[str] = field(default_factory=list)


def strip_accents(text: str) -> str:
    """`text` without combining marks (``é → e``); letters like ``ø`` stay as they are."""
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


def add_accents(word: str, rng: random.Random, share: float = 0.5) -> str:
    """`word` with accents on some of its accentable letters (at least one if any)."""
    spots = [i for i, c in enumerate(word) if c in W.ACCENT_MAP]
    if not spots:
        return word
    chosen = [i for i in spots if rng.random() < share] or [rng.choice(spots)]
    letters = list(word)
    for i in chosen:
        letters[i] = rng.choice(W.ACCENT_MAP[letters[i]])
    return "".join(letters)


def one_edit(word: str, rng: random.Random, vocabulary: set[str]) -> str | None:
    """`word` with one substitution, insertion or deletion, not itself a known word.

    Deletion is only used on words of 6+ letters, so the typo keeps 5+ letters (the
    length from which typo tolerance is promised).
    """
    for _ in range(20):
        op = rng.choice(("sub", "ins", "del") if len(word) >= 6 else ("sub", "ins"))
        i = rng.randrange(1, len(word))  # keep the first letter, as most typos do
        c = rng.choice(string.ascii_lowercase)
        if op == "sub":
            if c == word[i]:
                continue
            typo = word[:i] + c + word[i + 1 :]
        elif op == "ins":
            typo = word[:i] + c + word[i:]
        else:
            typo = word[:i] + word[i + 1 :]
        if typo != word and typo not in vocabulary:
            return typo
    return None


def one_edit_neighbours(word: str, known: dict[str, int] | set[str]) -> set[str]:
    """The terms of `known` one edit (insertion, deletion, substitution) from `word`."""
    letters = string.ascii_lowercase
    out: set[str] = set()
    for i in range(len(word) + 1):
        for c in letters:
            out.add(word[:i] + c + word[i:])
        if i < len(word):
            out.add(word[:i] + word[i + 1 :])
            for c in letters:
                out.add(word[:i] + c + word[i + 1 :])
    out.discard(word)
    return {w for w in out if w in known}


class Vocabulary:
    """Ranked words with Zipf-Mandelbrot weights, plus CJK words and token makers."""

    def __init__(self, rng: random.Random, size: int = 60_000) -> None:
        seen: set[str] = set()
        common = [w for w in W.COMMON if not (w in seen or seen.add(w))]  # type: ignore[func-returns-value]
        technical = [w for w in W.TECHNICAL if not (w in seen or seen.add(w))]  # type: ignore[func-returns-value]
        made_up: list[str] = []
        while len(made_up) < size:
            word = self._made_up(rng)
            if word not in seen and len(word) >= 3:
                seen.add(word)
                made_up.append(word)
        # Technical terms and short words are frequent in agent work: spread them over
        # the first few thousand ranks of the made-up words.
        tail = made_up[:]
        for w in technical + [s for s in W.SHORT if s not in seen]:
            tail.insert(rng.randrange(0, 3000), w)
        self.words: list[str] = common + tail
        self.rank = {w: i for i, w in enumerate(self.words)}
        weights = [1.0 / (i + 2.7) ** 1.05 for i in range(len(self.words))]
        self.cum: list[float] = []
        total = 0.0
        for w in weights:
            total += w
            self.cum.append(total)
        self.known: set[str] = set(self.words) | {strip_accents(w).lower() for w in W.ACCENTED}
        self.identifiers = [self._identifier(rng) for _ in range(20_000)]
        self.id_cum = _zipf_cum(len(self.identifiers), 1.0)
        chars = W.CJK_CHARS
        self.cjk_words = list(
            dict.fromkeys(
                "".join(rng.choice(chars) for _ in range(rng.choice((1, 2, 2, 2, 3, 4))))
                for _ in range(4000)
            )
        )
        self.cjk_cum = _zipf_cum(len(self.cjk_words), 1.0)

    @staticmethod
    def _made_up(rng: random.Random) -> str:
        n = rng.choices((1, 2, 3, 4), weights=(3, 7, 3, 1))[0]
        return "".join(
            rng.choice(W.SYLLABLE_ONSETS)
            + rng.choice(W.SYLLABLE_VOWELS)
            + rng.choice(W.SYLLABLE_CODAS)
            for _ in range(n)
        )

    def _identifier(self, rng: random.Random) -> str:
        parts = [
            self.words[min(int(rng.paretovariate(1.1) * 20), 5000)]
            for _ in range(rng.choice((2, 2, 3)))
        ]
        if rng.random() < 0.5:
            return "_".join(parts)
        return parts[0] + "".join(p.capitalize() for p in parts[1:])

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum, k=k)


def _zipf_cum(n: int, s: float) -> list[float]:
    out: list[float] = []
    total = 0.0
    for i in range(n):
        total += 1.0 / (i + 1.5) ** s
        out.append(total)
    return out


class TextMaker:
    """Builds message text and remembers which vocabulary words went into it."""

    def __init__(self, vocab: Vocabulary, rng: random.Random, cfg: Config) -> None:
        self.v = vocab
        self.rng = rng
        self.cfg = cfg

    def _path(self) -> str:
        rng = self.rng
        depth = rng.choice((1, 2, 2, 3))
        parts = [self.v.words[min(int(rng.paretovariate(1.0) * 40), 8000)] for _ in range(depth)]
        return "/".join(["src", *parts]) + "." + rng.choice(W.FILE_EXTS)

    def _sql(self) -> str:
        rng = self.rng
        table = rng.choice(self.v.words[300:2000])
        col = rng.choice(self.v.words[300:3000])
        return (
            f"SELECT {col}, count(*) FROM {table} WHERE {col} = {rng.randrange(1000)} "
            f"GROUP BY {col} ORDER BY 2 DESC"
        )

    def _token(self, word: str) -> str:
        """A plain word, or now and then a technical token in its place."""
        rng = self.rng
        r = rng.random()
        if r < 0.88:
            return word
        if r < 0.935:
            ident = rng.choices(self.v.identifiers, cum_weights=self.v.id_cum)[0]
            return f"`{ident}`" if rng.random() < 0.3 else ident
        if r < 0.96:
            return self._path()
        if r < 0.972:
            return rng.choice(W.ERROR_NAMES)
        if r < 0.99:
            return str(
                rng.choice((rng.randrange(100), rng.randrange(100_000), rng.randrange(10**9)))
            )
        if r < 0.995:
            return f"{rng.getrandbits(32):08x}" if rng.random() < 0.7 else _uuid(rng)
        return self._sql()

    def latin(self, n_words: int, *, accented: bool = False) -> tuple[str, list[str], list[str]]:
        """Sentences of `n_words` words: (text, vocabulary words as written, accented words)."""
        rng = self.rng
        used = self.v.sample(rng, n_words)
        out: list[str] = []
        accents: list[str] = []
        emitted: list[str] = []
        sentence = 0
        for word in used:
            token = self._token(word)
            if accented and token == word and rng.random() < 0.12:
                if rng.random() < 0.4:
                    token = rng.choice(W.ACCENTED)
                else:
                    token = add_accents(word, rng)
                if token != word:
                    accents.append(token)
            if token == word:
                emitted.append(word)
            if sentence == 0 and token[:1].isalpha():
                token = token[:1].upper() + token[1:]
            sentence += 1
            if sentence >= rng.randint(6, 18):
                token += rng.choice((".", ".", ".", "?", "!", ":"))
                sentence = 0
            elif rng.random() < 0.05:
                token += ","
            out.append(token)
        text = " ".join(out)
        if text and text[-1].isalnum():
            text += "."
        return text, emitted, accents

    def cjk(self, n_words: int) -> tuple[str, list[str], list[str]]:
        """CJK text with a few Latin technical words: (text, Latin words, CJK words)."""
        rng = self.rng
        cjk_words = rng.choices(self.v.cjk_words, cum_weights=self.v.cjk_cum, k=max(n_words, 3))
        latin: list[str] = []
        parts: list[str] = []
        for i, w in enumerate(cjk_words):
            parts.append(w)
            if rng.random() < 0.08:
                word = self.v.sample(rng, 1)[0]
                latin.append(word)
                parts.append(f" {word} ")
            if i % 9 == 8:
                parts.append(rng.choice(("\u3002", "\uff0c", "\u3001", "\uff1f")))
        return "".join(parts) + "\u3002", latin, cjk_words

    def words_for(self, kind: str) -> int:
        """Log-normal word count per kind: medians of 15 to 60 words, tails to KBs."""
        median, sigma, cap = {
            "user": (16.0, 0.9, 1500),
            "assistant": (35.0, 1.0, 2000),
            "tool_output": (45.0, 1.2, 2500),
            "tool_error": (18.0, 0.8, 600),
            "short": (6.0, 0.6, 60),
        }[kind]
        return max(2, min(cap, int(self.rng.lognormvariate(math.log(median), sigma))))


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(slots=True)
class Stats:
    messages: int = 0
    sessions: int = 0
    bytes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    accented_messages: int = 0
    cjk_messages: int = 0
    per_workspace: dict[str, int] = field(default_factory=dict)


class Generator:
    """Writes a corpus and collects query sources as it goes (one pass, seeded)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.vocab = Vocabulary(random.Random(cfg.seed + 1))
        self.text = TextMaker(self.vocab, self.rng, cfg)
        self.stats = Stats()
        # Keep about 4x the sources a class needs; most classes share the plain pool.
        need = 4 * cfg.queries_per_class
        text_msgs = max(cfg.messages * TEXT_SHARE, 1.0)
        self.p_plain = min(1.0, 3 * need / text_msgs)
        self.p_accent = min(1.0, need / max(text_msgs * cfg.accented_share, 1.0))
        self.p_cjk = min(1.0, need / max(text_msgs * cfg.cjk_share, 1.0))
        self.plain: list[Source] = []
        self.accent: list[Source] = []
        self.cjk: list[Source] = []
        self.sessions: list[tuple[str, str, int]] = []
        # Document frequency of each vocabulary word in its workspace's searchable
        # text, and the misspellings planted for the ``realword_*`` queries (their own
        # generator, so that the rest of the corpus is what it was without them).
        self.df: dict[str, dict[str, int]] = {}
        self.misspell_rng = random.Random(cfg.seed + 5)
        lo, hi = REALWORD_RANKS
        intended = [
            w for w in self.vocab.words[lo:hi] if len(w) >= 6 and w.isalpha() and w.isascii()
        ]
        self.misspelt: dict[str, tuple[str, int]] = {}
        for w in self.misspell_rng.sample(intended, min(len(intended), 6 * cfg.queries_per_class)):
            typo = one_edit(w, self.misspell_rng, self.vocab.known)
            if typo is not None and len(typo) >= 5:
                self.misspelt[w] = (typo, self.misspell_rng.randint(*REALWORD_COPIES))
        self.planted: dict[tuple[str, str], int] = {}
        # ``rare_*`` targets: a rare word of a source, its one-deletion typo, and terms
        # one edit from that typo planted in later messages of the workspace (a dense
        # vocabulary: generated names, identifiers, compounds), each a few times.
        self.p_rare = min(1.0, 6 * cfg.queries_per_class / max(cfg.messages * 0.12, 1.0))
        self.rare_targets: list[tuple[Source, str, str]] = []
        self.crowd_queue: dict[str, list[list[Any]]] = {}

    def _count_words(self, ws: str, words: list[str]) -> None:
        counts = self.df.setdefault(ws, {})
        for w in set(words):
            counts[w] = counts.get(w, 0) + 1

    def _plant_misspellings(self, ws: str, content: str, used: list[str]) -> tuple[str, list[str]]:
        """`content` with planted misspellings of the ``realword_*`` words it holds."""
        rng = self.misspell_rng
        for w in dict.fromkeys(used):
            if w not in self.misspelt:
                continue
            typo, copies = self.misspelt[w]
            key = (ws, w)
            if self.planted.get(key, 0) >= copies or rng.random() < 0.5:
                continue
            words = content.split(" ")
            for i, token in enumerate(words):
                if token.rstrip(".,?!:").lower() == w:
                    words[i] = token.replace(token.rstrip(".,?!:"), typo)
                    break
            else:
                continue
            content = " ".join(words)
            used = [typo if u == w else u for u in used]
            self.planted[key] = self.planted.get(key, 0) + 1
        return content, used

    def _register_rare(self, src: Source) -> None:
        rng = self.misspell_rng
        queue = self.crowd_queue.setdefault(src.workspace, [])
        if rng.random() >= self.p_rare or len(queue) > 80:
            return
        known = self.vocab.known
        tail = [
            w
            for w in dict.fromkeys(src.words)
            if len(w) >= 6 and w.isalpha() and w.isascii() and self.vocab.rank[w] >= 5000
        ]
        if not tail:
            return
        w = rng.choice(tail)
        i = rng.randrange(1, len(w))
        typo = w[:i] + w[i + 1 :]
        if typo in known:
            return
        crowd: set[str] = set()
        for _ in range(40):
            if len(crowd) >= rng.randint(4, 10):
                break
            j = rng.randrange(1, len(typo) + 1)
            c = rng.choice("aeioulnrst")
            term = typo[:j] + c + typo[j:] if rng.random() < 0.5 else typo[:j] + c + typo[j + 1 :]
            if term != w and term != typo and term not in known and len(term) >= 5:
                crowd.add(term)
        self.rare_targets.append((src, w, typo))
        queue.extend([term, rng.randint(2, 12)] for term in sorted(crowd))

    def _plant_crowd(self, ws: str, content: str, used: list[str]) -> tuple[str, list[str]]:
        """`content` with one word replaced by a pending ``rare_*`` neighbour term."""
        queue = self.crowd_queue.get(ws)
        rng = self.misspell_rng
        if not queue or rng.random() < 0.3:
            return content, used
        words = content.split(" ")
        spots = [i for i, t in enumerate(words) if t.isalpha() and t.islower() and t in used]
        if not spots:
            return content, used
        slot = rng.randrange(len(queue))
        term = queue[slot][0]
        queue[slot][1] -= 1
        if queue[slot][1] <= 0:
            queue.pop(slot)
        i = rng.choice(spots)
        old = words[i]
        words[i] = term
        kept = list(used)
        kept.remove(old)
        return " ".join(words), [*kept, term]

    def workspace_sizes(self) -> list[int]:
        """Messages per workspace: unequal (Zipf-like, exponent 0.7), summing to N."""
        n = self.cfg.workspaces
        weights = [1.0 / (i + 1) ** 0.7 for i in range(n)]
        total = sum(weights)
        sizes = [max(1, int(self.cfg.messages * w / total)) for w in weights]
        sizes[0] += self.cfg.messages - sum(sizes)
        return sizes

    def run(self, out: Path) -> Stats:
        corpus = out / "corpus"
        corpus.mkdir(parents=True, exist_ok=True)
        mu = math.log(self.cfg.mean_session) - 0.8**2 / 2
        for w_idx, size in enumerate(self.workspace_sizes()):
            ws = f"ws{w_idx:02d}"
            wdir = corpus / ws
            wdir.mkdir(exist_ok=True)
            remaining = size
            s_idx = 0
            while remaining > 0:
                n = max(2, min(int(self.rng.lognormvariate(mu, 0.8)), 2000, remaining))
                if remaining - n < 2:
                    n = remaining
                sid = f"{ws}-s{s_idx:06d}"
                start = BASE_TIME - timedelta(seconds=self.rng.randrange(365 * 86400))
                lines = list(self._session(ws, sid, n, start))
                data = "".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in lines)
                (wdir / f"{sid}.jsonl").write_text(data, encoding="utf-8")
                self.stats.bytes += len(data.encode("utf-8"))
                self.stats.sessions += 1
                self.stats.messages += len(lines)
                self.stats.per_workspace[ws] = self.stats.per_workspace.get(ws, 0) + len(lines)
                self.sessions.append((ws, sid, len(lines)))
                remaining -= len(lines)
                s_idx += 1
        return self.stats

    def _count(self, kind: str) -> None:
        self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1

    def _session(self, ws: str, sid: str, n: int, start: datetime) -> Iterator[dict[str, Any]]:
        rng = self.rng
        t = start
        seq = 0
        call = 0

        def stamp() -> str:
            nonlocal t
            t += timedelta(seconds=int(rng.expovariate(1 / 40)) + 1)
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")

        first: dict[str, Any] = {}
        if rng.random() < 0.6:
            first["title"] = " ".join(self.vocab.sample(rng, rng.randint(2, 6))).capitalize()
        if rng.random() < 0.25 and n > 2:
            yield {
                "role": "system",
                "content": "You are a coding agent working in the " + self._repo() + " repository.",
                "created_at": stamp(),
                **first,
            }
            self._count("system")
            seq += 1
            first = {}
        while seq < n:
            # A user turn, some tool calls with results, then the assistant's answer.
            obj = self._text_message(ws, sid, seq, "user", stamp())
            yield {**obj, **first}
            first = {}
            seq += 1
            calls = 0 if rng.random() < 0.35 else min(int(rng.expovariate(1 / 2.5)) + 1, 8)
            for _ in range(calls):
                if seq + 2 > n:
                    break
                call += 1
                tool = rng.choice(W.TOOLS)
                call_id = f"call_{call}"
                content = None
                if rng.random() < 0.25:
                    content, _, _ = self.text.latin(self.text.words_for("short"))
                yield {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool, "arguments": self._arguments(tool)},
                        }
                    ],
                    "created_at": stamp(),
                }
                self._count("tool_input")
                seq += 1
                yield self._tool_result(ws, sid, seq, tool, call_id, stamp())
                seq += 1
            if seq < n:
                yield self._text_message(ws, sid, seq, "assistant", stamp())
                seq += 1
            if seq < n and rng.random() < 0.02:
                text, _, _ = self.text.latin(self.text.words_for("assistant"))
                yield {
                    "role": "assistant",
                    "kind": "summary",
                    "content": "Summary so far: " + text,
                    "created_at": stamp(),
                }
                self._count("summary")
                seq += 1

    def _repo(self) -> str:
        return "/".join(self.vocab.sample(self.rng, 2))

    def _text_message(self, ws: str, sid: str, seq: int, role: str, created: str) -> dict[str, Any]:
        rng = self.rng
        kind = "user_text" if role == "user" else "assistant_text"
        n_words = self.text.words_for(role)
        r = rng.random()
        # Shares are over all messages; about 36 % of messages are user/assistant text.
        if r < self.cfg.cjk_share / TEXT_SHARE:
            content, latin, cjk = self.text.cjk(max(3, n_words // 2))
            used = latin
            self.stats.cjk_messages += 1
            if rng.random() < self.p_cjk:
                self.cjk.append(Source(ws, sid, seq, kind, role, created, None, latin, cjk=cjk))
        elif r < (self.cfg.cjk_share + self.cfg.accented_share) / TEXT_SHARE:
            content, used, accents = self.text.latin(max(n_words, 8), accented=True)
            if accents:
                self.stats.accented_messages += 1
                if rng.random() < self.p_accent:
                    self.accent.append(
                        Source(ws, sid, seq, kind, role, created, None, used, accented=accents)
                    )
        else:
            content, used, _ = self.text.latin(n_words)
            if n_words >= 8 and rng.random() < self.p_plain:
                self.plain.append(Source(ws, sid, seq, kind, role, created, None, used))
                self._register_rare(self.plain[-1])
            else:
                content, used = self._plant_misspellings(ws, content, used)
                content, used = self._plant_crowd(ws, content, used)
        self._count_words(ws, used)
        self._count(kind)
        return {"role": role, "content": content, "created_at": created}

    def _arguments(self, tool: str) -> str:
        rng = self.rng
        if tool in ("read_file", "edit_file", "write_file"):
            args: dict[str, Any] = {"path": self.text._path()}
            if tool != "read_file":
                args["content"] = self.text.latin(self.text.words_for("short"))[0]
        elif tool in ("grep", "glob"):
            args = {"pattern": rng.choice(self.vocab.identifiers[:2000]), "path": "src/"}
        elif tool == "sql_query":
            args = {"query": self.text._sql()}
        elif tool == "http_request":
            host, path = self.vocab.sample(rng, 2)
            args = {"url": f"https://{host}.internal/v1/{path}"}
            if rng.random() < 0.05:
                args["headers"] = {"Authorization": f"Bearer sk-{rng.getrandbits(160):040x}"}
        else:
            args = {"cmd": " ".join([tool, *self.vocab.sample(rng, rng.randint(1, 5))])}
        return json.dumps(args, ensure_ascii=False)

    def _tool_result(
        self, ws: str, sid: str, seq: int, tool: str, call_id: str, created: str
    ) -> dict[str, Any]:
        rng = self.rng
        obj: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "name": tool}
        if rng.random() < 0.12:
            text, used, _ = self.text.latin(self.text.words_for("tool_error"))
            style = rng.random()
            if style < 0.5:
                content = f"Error: {rng.choice(W.ERROR_NAMES)}: {text}"
            elif style < 0.75:
                content = f"{tool}: {self.text._path()}: Permission denied. {text}"
            else:
                content = f"{rng.choice(W.ERROR_NAMES)}: {text}"
                obj["is_error"] = True
            self._count("tool_error")
            self._count_words(ws, used)
            if len(used) >= 8 and rng.random() < self.p_plain:
                self.plain.append(Source(ws, sid, seq, "tool_error", "tool", created, tool, used))
        else:
            lines = []
            n_words = self.text.words_for("tool_output")
            while n_words > 0:
                k = min(n_words, rng.randint(4, 14))
                n_words -= k
                lines.append(
                    f"{self.text._path()}:{rng.randrange(1, 900)}: " + self.text.latin(k)[0]
                )
            if rng.random() < 0.01:
                lines.append(f"DATABASE_URL=postgresql://app:{rng.getrandbits(48):012x}@db/app")
            content = "\n".join(lines)
            self._count("tool_output")
        obj["content"] = content
        obj["created_at"] = created
        return obj

    # --- queries ------------------------------------------------------------------

    def queries(self) -> list[dict[str, Any]]:
        """Queries per class, each naming its source message as the relevant answer."""
        rng = random.Random(self.cfg.seed + 2)
        q = self.cfg.queries_per_class
        out: list[dict[str, Any]] = []
        plain = self.plain
        ranked = self.vocab.rank
        known = self.vocab.known

        def distinctive(src: Source, k: int) -> list[str] | None:
            words = [w for w in dict.fromkeys(src.words) if ranked.get(w, 0) >= COMMON_RANKS]
            if len(words) < k:
                return None
            rarest = sorted(words, key=lambda w: -ranked[w])[: max(k, 6)]
            picked = rng.sample(rarest, k)
            return sorted(picked, key=src.words.index)

        def add(cls: str, query: str, src: Source | None, **extra: Any) -> None:
            item: dict[str, Any] = {
                "qid": f"{cls}-{sum(1 for o in out if o['class'] == cls):05d}",
                "class": cls,
                "query": query,
                "workspace": src.workspace if src else extra.pop("workspace"),
                "relevant": [[src.session_id, src.seq]] if src else [],
            }
            item.update(extra)
            out.append(item)

        def take(n: int) -> list[Source]:
            # Each class draws its own sample; a message may serve several classes.
            return rng.sample(plain, min(n, len(plain)))

        # One word in four queries is alone: with more words an OR over the others
        # can find the source without ever matching the misspelt one.
        for src in take(q):
            words = distinctive(src, rng.choice((1, 2, 2, 3)))
            if words:
                add("exact", " ".join(words), src)
        for src in take(3 * q):
            if sum(1 for o in out if o["class"] == "typo") >= q:
                break
            words = distinctive(src, rng.choice((1, 2, 2, 3)))
            if not words:
                continue
            long = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
            if not long:
                continue
            i = rng.choice(long)
            typo = one_edit(words[i], rng, known)
            if typo is None:
                continue
            add(
                "typo", " ".join([*words[:i], typo, *words[i + 1 :]]), src, original=" ".join(words)
            )
        accent = self.accent[:]
        rng.shuffle(accent)
        for src in accent[: q // 2]:
            # Typed without the accents the message has.
            picked = rng.sample(src.accented, min(len(src.accented), rng.choice((1, 2))))
            extra = distinctive(src, 1) or []
            query = " ".join([strip_accents(w) for w in picked] + extra)
            add("accent", query, src, direction="stripped")
        for src in take(3 * q):
            if sum(1 for o in out if o["class"] == "accent") >= q:
                break
            # Typed with accents the message does not have.
            words = distinctive(src, 2)
            if words:
                add("accent", " ".join(add_accents(w, rng) for w in words), src, direction="added")
        cjk = self.cjk[:]
        rng.shuffle(cjk)
        for src in cjk[:q]:
            grams = [w for w in src.cjk if len(w) in (1, 2)]
            if grams:
                word = rng.choice(grams)
                if len(word) == 2 and rng.random() < 0.4:
                    word = word[rng.randrange(2)]
                add("cjk", word, src)
        for src in take(q):
            common = [w for w in dict.fromkeys(src.words) if ranked[w] < 40 and len(w) > 2]
            if common:
                add(
                    "common",
                    " ".join(rng.sample(common, min(len(common), rng.choice((1, 2))))),
                    src,
                )
        short_pool = [s for s in take(20 * q) if any(len(w) <= 2 for w in s.words)]
        for src in short_pool[:q]:
            shorts = [w for w in dict.fromkeys(src.words) if len(w) <= 2]
            add("short", " ".join(rng.sample(shorts, min(len(shorts), rng.choice((1, 1, 2))))), src)
        for src in take(q):
            words = [w for w in dict.fromkeys(src.words) if len(w) > 2]
            rare = [w for w in words if ranked[w] >= COMMON_RANKS]
            if len(words) < 4 or len(rare) < 2:
                continue
            k = min(len(words), rng.randint(4, 6))
            chosen = set(rng.sample(rare, 2)) | set(rng.sample(words, k - 2))
            add("multi", " ".join(w for w in words if w in chosen), src)
        workspaces = sorted({s[0] for s in self.sessions})
        for i in range(q):
            add("browse", "", None, workspace=workspaces[i % len(workspaces)])
        for src in take(q):
            words = distinctive(src, rng.choice((1, 2)))
            if not words:
                continue
            filters = self._filter_for(src, rng)
            add("filtered", " ".join(words), src, filters=filters)
        for src in take(q):
            words = [w for w in dict.fromkeys(src.words) if len(w) > 2]
            rare = [w for w in words if ranked[w] >= 100]
            if not rare:
                continue
            add(
                "session",
                " ".join(rng.sample(rare, min(len(rare), rng.choice((1, 2))))),
                src,
                session=src.session_id,
            )
        self._dense_typo_queries(add)
        return out

    def _dense_typo_queries(self, add: Any) -> None:
        """``rare_*`` and ``realword_*`` queries, each typo beside its spelled-right twin
        on the same source (their own generator: the other classes stay as they were)."""
        rng = random.Random(self.cfg.seed + 3)
        q = self.cfg.queries_per_class
        plain = self.plain[:]
        rng.shuffle(plain)
        n_rare = 0
        for src, w, typo in self.rare_targets:
            if n_rare >= q:
                break
            df = self.df.get(src.workspace, {})
            crowd = one_edit_neighbours(typo, df) - {w}
            if df.get(w, 0) > RARE_DF or typo in df or len(crowd) < 3:
                continue
            add("rare_exact", w, src)
            add("rare_typo", typo, src, original=w, neighbours=len(crowd))
            n_rare += 1
        n_real = 0
        lo, hi = REALWORD_RANKS
        ranked = self.vocab.rank
        for src in plain:
            if n_real >= q:
                break
            ws = src.workspace
            words = list(dict.fromkeys(src.words))
            misspelt = [w for w in words if self.planted.get((ws, w), 0) >= REALWORD_COPIES[0]]
            if not misspelt:
                continue
            w = rng.choice(misspelt)
            others = [o for o in words if o != w and lo <= ranked.get(o, 0) < hi and len(o) > 3]
            if not others:
                continue
            other = rng.choice(others)
            typo = self.misspelt[w][0]
            pair = sorted((w, other), key=src.words.index)
            add("realword_exact", " ".join(pair), src)
            add(
                "realword_typo",
                " ".join(typo if p == w else p for p in pair),
                src,
                original=" ".join(pair),
                typo_df=self.planted[(ws, w)],
            )
            n_real += 1

    @staticmethod
    def _filter_for(src: Source, rng: random.Random) -> dict[str, Any]:
        choice = rng.choice(
            ("kinds", "roles", "time", "tool") if src.tool_name else ("kinds", "roles", "time")
        )
        if choice == "kinds":
            return {"kinds": [src.kind]}
        if choice == "roles":
            return {"roles": [src.role]}
        if choice == "tool":
            return {"tool_name": src.tool_name, "kinds": ["tool_error"]}
        t = datetime.fromisoformat(src.created_at.replace("Z", "+00:00"))
        return {
            "since": (t - timedelta(days=rng.randint(1, 30))).isoformat(),
            "until": (t + timedelta(days=rng.randint(1, 30))).isoformat(),
        }


def generate(cfg: Config, out: Path, *, quiet: bool = False) -> dict[str, Any]:
    """Write corpus, queries and manifest under `out`; return the manifest."""
    started = time.perf_counter()
    gen = Generator(cfg)
    stats = gen.run(out)
    queries = gen.queries()
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for item in queries:
            fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    manifest = {
        "generator_version": generator_version(),
        "config": asdict(cfg),
        "stats": asdict(stats),
        "queries": {c: sum(1 for q in queries if q["class"] == c) for c in QUERY_CLASSES},
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    if not quiet:
        print(
            f"{stats.messages:,} messages in {stats.sessions:,} sessions "
            f"({stats.bytes / 1e6:,.1f} MB), {len(queries):,} queries, "
            f"{manifest['seconds']} s -> {out}"
        )
    return manifest


def ensure_corpus(cfg: Config, out: Path, *, quiet: bool = False) -> dict[str, Any]:
    """The manifest of a corpus made with `cfg` under `out`, generating it if needed."""
    path = out / "manifest.json"
    if path.is_file():
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if (
            manifest.get("config") == asdict(cfg)
            and manifest.get("generator_version") == generator_version()
        ):
            return manifest
    if out.exists() and any(out.iterdir()):
        if not path.is_file():
            raise SystemExit(f"{out} exists and is not a generated corpus; choose another --out")
        import shutil

        shutil.rmtree(out)
    return generate(cfg, out, quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries-per-class", type=int, default=200)
    parser.add_argument("--out", type=Path, help="default: bench/results/corpus-<size>")
    args = parser.parse_args(argv)
    cfg = Config(
        messages=args.messages,
        workspaces=args.workspaces,
        seed=args.seed,
        queries_per_class=args.queries_per_class,
    )
    out = args.out or Path(__file__).resolve().parent / "results" / f"corpus-{cfg.label()}"
    ensure_corpus(cfg, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
