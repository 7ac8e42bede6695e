"""Turning entries into index rows (pure): indexable text, terms, positions, lengths."""

from __future__ import annotations

from dataclasses import dataclass

from pgsearch import policy
from pgsearch.messages import Entry
from pgsearch.normalize import MAX_POSITION, term_positions, tsvector_literal
from pgsearch.settings import IndexPolicy

#: A tsvector must stay under 1 MB; stop adding new terms well before that.
MAX_TSVECTOR_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class IndexedText:
    tsvector: str
    terms: tuple[str, ...]
    length: int


EMPTY = IndexedText("", (), 0)


def index_text(text: str, *, max_chars: int, weight: str = "") -> IndexedText:
    """Terms of `text` (first `max_chars` characters) as a tsvector literal."""
    if not text:
        return EMPTY
    positions = term_positions(text[:max_chars])
    if not positions:
        return EMPTY
    kept = positions
    # A term is at most 4 bytes a character plus 10 bytes of overhead and positions
    # per occurrence; only text that could come near the tsvector limit is measured.
    if len(text) * 14 > MAX_TSVECTOR_BYTES:
        size = 0
        kept = {}
        for term, plist in positions.items():
            size += len(term.encode("utf-8")) + 2 * len(plist) + 8
            if size > MAX_TSVECTOR_BYTES:
                break
            kept[term] = plist
    length = sum(map(len, kept.values()))
    literal = tsvector_literal(kept)
    if weight:
        literal = " ".join(
            f"{part}{weight}" if ":" in part else part
            for part in literal.replace(",", f"{weight},").split(" ")
        )
    return IndexedText(literal, tuple(kept), length)


def index_entry(entry: Entry, *, index_policy: IndexPolicy, max_chars: int) -> IndexedText:
    """What of `entry` reaches the index, under `index_policy`."""
    text = policy.indexable_text(
        entry.kind,
        entry.content,
        tool_names=entry.tool_names(),
        arguments=entry.arguments,
        policy=index_policy,
    )
    return index_text(text, max_chars=max_chars)


def index_session_fields(title: str | None, summary: str | None, *, max_chars: int) -> IndexedText:
    """Title terms (weight A) and summary terms (weight B) of a session."""
    title_ix = index_text(policy.scrub_secrets(title or ""), max_chars=max_chars, weight="A")
    summary_ix = index_text(policy.scrub_secrets(summary or ""), max_chars=max_chars, weight="B")
    if not summary_ix.terms:
        return title_ix
    if not title_ix.terms:
        return summary_ix
    # Concatenating the literals merges a term's positions when the server parses it;
    # summary positions are offset so they do not collide with the title's.
    offset = title_ix.length
    shifted = []
    for part in summary_ix.tsvector.split(" "):
        term, _, plist = part.rpartition(":")
        nums = [f"{min(int(p[:-1]) + offset, MAX_POSITION)}B" for p in plist.split(",")]
        shifted.append(f"{term}:{','.join(nums)}")
    terms = tuple(dict.fromkeys(title_ix.terms + summary_ix.terms))
    return IndexedText(
        f"{title_ix.tsvector} {' '.join(shifted)}", terms, title_ix.length + summary_ix.length
    )
