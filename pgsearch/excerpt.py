"""Excerpts and windows (pure).

An excerpt is cut from the *indexed* text of an entry (secrets scrubbed, tool
arguments and output left out), centred on the first matched term, measured and
cut in UTF-8 bytes on character boundaries, with matched words marked ``**like
this**``. Typo and stem expansions count as matches, so ``databse`` marks
``database``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from pgsearch.normalize import MAX_TERM_CHARS, is_cjk, normalize, tokenize

MARK_OPEN = "**"
MARK_CLOSE = "**"
ELLIPSIS = "…"
_SPACE_RE = re.compile(r"\s+")


@cache
def _word_re() -> re.Pattern[str]:
    """Letters and digits with any combining marks inside (``e`` + U+0301, Indic vowel
    signs): `normalize` drops such marks and keeps the word whole, so must we."""
    # All marks but 240 variation selectors lie below U+20000; one scan is ~25 ms.
    ranges: list[list[int]] = []
    for cp in range(0x20000):
        if unicodedata.category(chr(cp)).startswith("M"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    marks = "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges) + "\U000e0100-\U000e01ef"
    return re.compile(f"[^\\W_](?:[^\\W_]|[{marks}])*")


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_bytes(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within `max_bytes` UTF-8 bytes (never splits a char)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


def match_spans(text: str, terms: Iterable[str]) -> list[tuple[int, int]]:
    """Character spans of `text` whose words normalise to one of `terms`."""
    wanted = set(terms)
    if not wanted:
        return []
    spans: list[tuple[int, int]] = []
    for m in _word_re().finditer(text):
        word = m.group()
        if word.isascii():  # the common case: one token, the word lower-cased
            if word.lower()[:MAX_TERM_CHARS] in wanted:
                spans.append((m.start(), m.end()))
            continue
        if is_cjk(word):
            for i in range(len(word)):
                for width in (2, 1):
                    piece = word[i : i + width]
                    if len(piece) == width and normalize(piece) in wanted:
                        spans.append((m.start() + i, m.start() + i + width))
                        break
            continue
        if any(tok in wanted for tok in tokenize(word)):
            spans.append((m.start(), m.end()))
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def make_excerpt(text: str, terms: Iterable[str], max_bytes: int) -> str:
    """At most `max_bytes` of `text` around the first match, matches marked."""
    # Composed (NFC) so that a decomposed word (``e`` + U+0301, Hangul jamo) is cut
    # into the same pieces `normalize` sees; canonically equivalent, so it reads alike.
    flat = unicodedata.normalize("NFC", _SPACE_RE.sub(" ", text).strip())
    if not flat:
        return ""
    spans = match_spans(flat, terms)
    if utf8_len(flat) + len(spans) * 4 <= max_bytes:
        return _mark(flat, spans, 0, len(flat))
    budget = max(max_bytes - 2 * utf8_len(ELLIPSIS), 16)
    anchor = best_anchor(flat, spans, budget)
    # A third of the room before the match, the rest after it.
    start = anchor
    used = 0
    lead = budget // 3 if anchor else 0
    while start > 0:
        size = utf8_len(flat[start - 1])
        if used + size > lead:
            break
        used += size
        start -= 1
    # Do not open in the middle of a word unless that word is huge.
    if start > 0 and flat[start - 1] != " ":
        space = flat.find(" ", start, anchor)
        if space != -1:
            start = space + 1
    end = start
    total = 0
    inside = [s for s in spans if s[0] >= start]
    for ch_i in range(start, len(flat)):
        size = utf8_len(flat[ch_i])
        marks = 4 * sum(1 for s in inside if s[0] == ch_i)
        if total + size + marks > budget:
            break
        total += size + marks
        end = ch_i + 1
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        if space > start + (end - start) // 2:
            end = space
    body = _mark(flat, [s for s in spans if s[0] >= start and s[1] <= end], start, end)
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if end < len(flat) else ""
    return truncate_bytes(prefix + body.strip() + suffix, max_bytes)


def best_anchor(text: str, spans: list[tuple[int, int]], budget: int) -> int:
    """Where an excerpt of `budget` bytes centres: the match opening the stretch with
    the most distinct matched words (the first such), so that a hit on a long
    identifier (``test_cache_invalidation_version_mismatch``) shows the identifier,
    not an earlier lone ``cache``."""
    if not spans:
        return 0
    reach = max(budget * 2 // 3, 1)
    words = [text[s:e].lower() for s, e in spans]
    counts: dict[str, int] = {}
    best, best_count = spans[0][0], 0
    end = 0
    # A window of spans from i on, within `reach` of span i: two pointers, one pass.
    for i, (start, _) in enumerate(spans):
        while end < len(spans) and spans[end][0] - start <= reach:
            counts[words[end]] = counts.get(words[end], 0) + 1
            end += 1
        if len(counts) > best_count:
            best, best_count = start, len(counts)
        counts[words[i]] -= 1
        if not counts[words[i]]:
            del counts[words[i]]
    return best


def _mark(text: str, spans: list[tuple[int, int]], start: int, end: int) -> str:
    out: list[str] = []
    pos = start
    for s, e in spans:
        if s < start or e > end:
            continue
        out.append(text[pos:s])
        out.append(MARK_OPEN + text[s:e] + MARK_CLOSE)
        pos = e
    out.append(text[pos:end])
    return "".join(out)


def window_bounds(before: int, after: int, max_window: int) -> tuple[int, int]:
    """Messages to show before and after an anchor so the window fits `max_window`.

    The anchor always stays; when the request is trimmed, it stays centred unless one
    side asked for less than half.
    """
    before = max(before, 0)
    after = max(after, 0)
    room = max_window - 1
    if before + after <= room:
        return before, after
    half = room // 2
    new_before = min(before, max(half, room - after))
    new_after = min(after, room - new_before)
    return new_before, new_after


def clip(text: str, max_bytes: int) -> str:
    """`text` cut to `max_bytes` with a note of how much was left out."""
    size = utf8_len(text)
    if size <= max_bytes:
        return text
    # The note's length depends on its number, which is at most `size`: room for that.
    room = max_bytes - utf8_len(f" {ELLIPSIS}[{size:,} more bytes]")
    if room <= 0:
        return truncate_bytes(text, max_bytes)
    kept = truncate_bytes(text, room)
    return f"{kept} {ELLIPSIS}[{size - utf8_len(kept):,} more bytes]"
