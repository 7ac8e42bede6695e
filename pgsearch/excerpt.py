"""Excerpts and windows (pure).

An excerpt is cut from the *indexed* text of an entry (secrets scrubbed, tool
arguments and output left out), centred on the first matched term, measured and
cut in UTF-8 bytes on character boundaries, with matched words between
`MARK_OPEN` and `MARK_CLOSE` (two C1 controls, two bytes each, replaced where the
text itself holds them; `pgsearch.highlight.split_marks` turns them into ranges).
Typo and stem expansions count as matches, so ``databse`` marks ``database``.

The work is bounded by the excerpt, not the entry: a long text is scanned for its
first match block by block (`SCAN_BLOCK_CHARS`), a block read only when its
normalised form holds a matched term, and the excerpt is cut from a slice of a few
times its size around that match. Text of ASCII characters only is matched by one
regular expression instead of word by word.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, lru_cache
from itertools import accumulate

from pgsearch.normalize import (
    LETTER_FOLD,
    MAX_TERM_CHARS,
    is_cjk,
    normalize,
    strip_table,
    tokenize,
)

MARK_OPEN = "\x91"
MARK_CLOSE = "\x92"
#: The marks, where the text itself holds them, become U+FFFD.
_NO_MARKS = {ord(MARK_OPEN): "\ufffd", ord(MARK_CLOSE): "\ufffd"}
ELLIPSIS = "…"
_SPACE_RE = re.compile(r"\s+")


@cache
def _marks() -> str:
    """A character class body of every combining mark (category M)."""
    # All marks but 240 variation selectors lie below U+20000; one scan is ~25 ms.
    ranges: list[list[int]] = []
    for cp in range(0x20000):
        if unicodedata.category(chr(cp)).startswith("M"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    return "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges) + "\U000e0100-\U000e01ef"


@cache
def _word_re() -> re.Pattern[str]:
    """Letters and digits with any combining marks inside (``e`` + U+0301, Indic vowel
    signs): `normalize` drops such marks and keeps the word whole, so must we."""
    return re.compile(f"[^\\W_](?:[^\\W_]|[{_marks()}])*")


@cache
def _head_re() -> re.Pattern[str]:
    """The letters, digits and marks from a position on (the rest of a word)."""
    return re.compile(f"(?:[^\\W_]|[{_marks()}])*")


def _loose(text: str) -> str:
    """A cheap fold for `_may_hold`: decomposed, case-folded, marks dropped, letters
    folded. A word's normalised form, so folded, lies within its text so folded."""
    return unicodedata.normalize("NFKD", text).casefold().translate(strip_table())


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_bytes(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within `max_bytes` UTF-8 bytes (never splits a char)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


#: Text longer than this is scanned for its first match block by block of this
#: many characters, instead of being matched whole.
SCAN_BLOCK_CHARS = 1024
#: Characters of a stored entry read beyond its indexed prefix (where every match
#: lies) to cut an excerpt: room for the excerpt's tail, and for secret scrubbing
#: to see a secret whole at the cut.
READ_MARGIN_CHARS = 16_384
#: A block boundary moves at most this far to fall between two words.
_WORD_REACH = 256
#: How far `match_spans` looks for the ends of a word holding non-ASCII characters.
_LONG_REACH = 4096
#: `LETTER_FOLD` as pairs, for `str.replace` (far cheaper than `str.translate`).
_FOLDS = tuple((chr(k), str(v)) for k, v in LETTER_FOLD.items())
#: Most characters `first_match` matches word by word; a text whose blocks keep
#: looking like matches without holding one gets an excerpt from its start.
MAX_MATCHED_CHARS = 65_536


#: Characters a word of ASCII text cannot touch to be matched on its own: the ASCII
#: letters and digits, and the four other characters that a case-insensitive match of
#: them accepts (dotted and dotless i, long s, Kelvin sign).
_WORD_NEIGHBOURS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\u0130\u0131\u017f\u212a"
)
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


@lru_cache(maxsize=4096)
def _ascii_terms(terms: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The terms ASCII words can match: those matched whole, and those of the longest
    kept length, which match the words they start (longer words are indexed by that
    prefix); None when there are neither."""
    exact = tuple(t for t in terms if t.isascii() and len(t) < MAX_TERM_CHARS)
    prefixes = tuple(t for t in terms if t.isascii() and len(t) >= MAX_TERM_CHARS)
    return (exact, prefixes) if exact or prefixes else None


def _ascii_spans(
    text: str, terms: tuple[tuple[str, ...], tuple[str, ...]], start: int, end: int
) -> list[tuple[int, int]]:
    """The words of ``text[start:end]`` (ASCII only) that `match_spans` marks, in order:
    a word (a run of ASCII letters and digits) equal to an exact term whatever its case,
    or starting with a prefix term. Found with `str.find`, so a search's terms need no
    pattern compiled for each message's own set of them."""
    exact, prefixes = terms
    low = text[start:end].lower()
    found: dict[int, int] = {}
    for group, whole in ((exact, True), (prefixes, False)):
        for t in group:
            i = low.find(t)
            while i != -1:
                a = start + i
                b = a + len(t)
                if a not in found and (a == 0 or text[a - 1] not in _WORD_NEIGHBOURS):
                    if whole:
                        if b == end or text[b] not in _WORD_NEIGHBOURS:
                            found[a] = b
                    else:
                        while b < end and text[b] in _ASCII_ALNUM:
                            b += 1
                        found[a] = b
                i = low.find(t, i + 1)
    return sorted(found.items())


_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=65_536)
def _normal_piece(piece: str) -> str:
    """`normalize` of a CJK character or pair (few distinct ones recur)."""
    return normalize(piece)


#: The CJK characters that normalising drops (voiced sound marks, combining or not):
#: a word is CJK as the tokenizer sees it, in its normalised form, so a word whose CJK
#: characters are only these (``0`` U+3099 ``0``) is one term of its other characters.
#: Every other CJK character normalises to CJK text (tests/unit/test_excerpt.py).
_VANISHING_CJK = re.compile("[\u3099-\u309c\uff9e\uff9f]")


def _word_spans(text: str, wanted: frozenset[str], start: int, end: int) -> list[tuple[int, int]]:
    """`match_spans` of ``text[start:end]`` word by word (words lie wholly inside)."""
    spans: list[tuple[int, int]] = []
    for m in _word_re().finditer(text, start, end):
        word = m.group()
        if word.isascii():  # one token, the word lower-cased
            if word.lower()[:MAX_TERM_CHARS] in wanted:
                spans.append((m.start(), m.end()))
            continue
        if is_cjk(word) and (_VANISHING_CJK.search(word) is None or is_cjk(normalize(word))):
            for i in range(len(word)):
                for width in (2, 1):
                    piece = word[i : i + width]
                    if len(piece) == width and _normal_piece(piece) in wanted:
                        spans.append((m.start() + i, m.start() + i + width))
                        break
            continue
        if any(tok in wanted for tok in tokenize(word)):
            spans.append((m.start(), m.end()))
    return spans


def _word_start(text: str, i: int, floor: int) -> int:
    """Where the word holding position `i` starts: the start of the run of letters,
    digits and marks that ends at `i`, not before `floor` nor `_LONG_REACH` back.
    The run is matched on the reversed text before `i` (one anchored match), the
    nearest 64 characters first."""
    lo = max(i - 64, floor)
    start = i - _run_before(text, lo, i)
    if start == lo and lo > floor:
        lo = max(i - _LONG_REACH, floor)
        start = i - _run_before(text, lo, i)
    return start


def _run_before(text: str, lo: int, i: int) -> int:
    """The length of the run of letters, digits and marks ending at `i`, within
    ``text[lo:i]``."""
    run = _head_re().match(text[lo:i][::-1])
    return 0 if run is None else run.end()


def match_spans(text: str, terms: Iterable[str]) -> list[tuple[int, int]]:
    """Character spans of `text` whose words normalise to one of `terms`.

    The words around non-ASCII characters are matched one by one; the ASCII text
    between them by finding the terms in it (`_ascii_spans`), which marks the same
    words.
    """
    wanted = frozenset(terms)
    if not wanted:
        return []
    return _merge(list(_iter_spans(text, wanted)))


def _iter_spans(text: str, wanted: frozenset[str]) -> Iterator[tuple[int, int]]:
    """`match_spans`' spans in order of their start, found as they are needed."""
    pattern = _ascii_terms(wanted)
    pos = 0
    for run in _NON_ASCII_RE.finditer(text):
        if run.end() <= pos:
            continue
        # A run that starts inside the last region (its word went on past it) is
        # looked at from where that region ended: a place between two words.
        lo = _word_start(text, max(run.start(), pos), pos)
        head = _head_re().match(text, run.end(), run.end() + _LONG_REACH)
        hi = run.end() if head is None else head.end()
        if pattern is not None and lo > pos:
            yield from _ascii_spans(text, pattern, pos, lo)
        yield from _word_spans(text, wanted, lo, hi)
        pos = hi
    if pattern is not None and pos < len(text):
        yield from _ascii_spans(text, pattern, pos, len(text))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _in_word(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _word_boundary(text: str, i: int, step: int, *, reach: int = _WORD_REACH) -> int:
    """`i` moved by `step` (at most `reach` times) to a place between two words."""
    for _ in range(reach):
        if i <= 0 or i >= len(text) or not (_in_word(text[i - 1]) and _in_word(text[i])):
            return i
        i += step
    return i


def first_match(text: str, terms: Iterable[str]) -> int | None:
    """Where the first word of `text` matching `terms` starts, reading block by block
    and matching only the blocks whose normalised text holds a term; None if none."""
    wanted = frozenset(terms)
    if not wanted:
        return None
    ascii_terms = tuple(t for t in wanted if t.isascii())
    other_terms = tuple(t for t in wanted if not t.isascii())
    start = 0
    matched = 0
    while start < len(text) and matched < MAX_MATCHED_CHARS:
        end = _word_boundary(text, min(start + SCAN_BLOCK_CHARS, len(text)), 1)
        block = text[start:end]
        if _may_hold(block, ascii_terms, other_terms):
            matched += len(block)
            found = next(_iter_spans(block, wanted), None)
            if found is not None:
                return start + found[0]
        start = end
    return None


def _may_hold(block: str, ascii_terms: Sequence[str], other_terms: Sequence[str]) -> bool:
    """Whether some word of `block` could normalise to one of the terms: a term is in
    a cheaply folded form of it (a necessary condition, not a sufficient one)."""
    if block.isascii():
        low = block.lower()
        return any(t in low for t in ascii_terms)
    if ascii_terms:
        # Decomposed, lower-cased, folded, then every character but ASCII dropped:
        # ``Pokémon`` reads ``pokemon``, ``Straße`` ``strasse``.
        key = unicodedata.normalize("NFKD", block).lower()
        for letter, folded_to in _FOLDS:
            if letter in key:
                key = key.replace(letter, folded_to)
        folded = key.encode("ascii", "ignore").decode("ascii")
        if any(t in folded for t in ascii_terms):
            return True
    if other_terms:
        key = _loose(block)
        return any(_loose(t) in key for t in other_terms)
    return False


def excerpt_around(
    raw: str,
    terms: Iterable[str],
    max_bytes: int,
    *,
    clean: Callable[[str], str],
    quick: bool = False,
) -> str:
    """`make_excerpt` of ``clean(raw)``, cleaning only a slice around the first match.

    `clean` (secret scrubbing) may change lengths, so the match is found in `raw`,
    and `READ_MARGIN_CHARS` either side of it are cleaned: every character an
    excerpt can show is cleaned with that much context around it.
    """
    if len(raw) <= 2 * READ_MARGIN_CHARS:
        return make_excerpt(clean(raw), terms, max_bytes, quick=quick)
    wanted = frozenset(terms)
    anchor = 0 if quick else first_match(raw, wanted) or 0
    lo = _word_boundary(raw, max(anchor - READ_MARGIN_CHARS, 0), -1)
    hi = _word_boundary(raw, min(anchor + READ_MARGIN_CHARS, len(raw)), 1)
    return make_excerpt(
        clean(raw[lo:hi]),
        wanted,
        max_bytes,
        quick=quick,
        more_before=lo > 0,
        more_after=hi < len(raw),
    )


def make_excerpt(
    text: str,
    terms: Iterable[str],
    max_bytes: int,
    *,
    quick: bool = False,
    more_before: bool = False,
    more_after: bool = False,
) -> str:
    """At most `max_bytes` of `text` around the first match, matches marked.

    A text longer than `SCAN_BLOCK_CHARS` is cut from a slice around its first match
    (`first_match`), so the cost does not grow with the text. `quick` looks for the
    match in the first block only (when time has run out). `more_before` and
    `more_after` say that `text` is itself a slice of a longer text.
    """
    wanted = frozenset(terms)
    if quick and len(text) > SCAN_BLOCK_CHARS:
        end = _word_boundary(text, SCAN_BLOCK_CHARS, 1)
        more_after = more_after or end < len(text)
        text = text[:end]
    elif len(text) > SCAN_BLOCK_CHARS:
        anchor = first_match(text, wanted) or 0
        # An excerpt holds at most `max_bytes` characters, a third of them before
        # its match; the slice leaves room for whitespace that collapses.
        lo = _word_boundary(text, max(anchor - max_bytes // 2 - _WORD_REACH, 0), -1)
        hi = _word_boundary(text, min(anchor + max_bytes + _WORD_REACH, len(text)), 1)
        more_before, more_after = more_before or lo > 0, more_after or hi < len(text)
        text = text[lo:hi]
    # Composed (NFC) so that a decomposed word (``e`` + U+0301, Hangul jamo) is cut
    # into the same pieces `normalize` sees; canonically equivalent, so it reads alike.
    flat = unicodedata.normalize("NFC", _SPACE_RE.sub(" ", text).strip())
    if not flat:
        return ""
    if MARK_OPEN in flat or MARK_CLOSE in flat:
        flat = flat.translate(_NO_MARKS)
    spans = match_spans(flat, wanted)
    whole = not (more_before or more_after)
    if whole and utf8_len(flat) + len(spans) * 4 <= max_bytes:
        return _mark(flat, spans, 0, len(flat))
    budget = max(max_bytes - 2 * utf8_len(ELLIPSIS), 16)
    anchor = best_anchor(flat, spans, budget)
    # A third of the room before the match, the rest after it.
    start = lead_start(flat, anchor, budget // 3 if anchor else 0)
    # Do not open in the middle of a word unless that word is huge.
    if start > 0 and flat[start - 1] != " ":
        space = flat.find(" ", start, anchor)
        if space != -1:
            start = space + 1
    end = fit_end(flat, start, [s[0] for s in spans if s[0] >= start], budget)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        if space > start + (end - start) // 2:
            end = space
    body = _mark(flat, [s for s in spans if s[0] >= start and s[1] <= end], start, end)
    prefix = ELLIPSIS if start > 0 or more_before else ""
    suffix = ELLIPSIS if end < len(flat) or more_after else ""
    return truncate_bytes(prefix + body.strip() + suffix, max_bytes)


def _sizes(text: str) -> list[int]:
    """The UTF-8 size of each character of `text`."""
    if text.isascii():
        return [1] * len(text)
    return [len(ch.encode("utf-8", "surrogatepass")) for ch in text]


def lead_start(text: str, anchor: int, lead: int) -> int:
    """Where an excerpt opens: as far before `anchor` as whole characters of at most
    `lead` UTF-8 bytes in all reach."""
    if anchor <= 0 or lead <= 0:
        return anchor
    # Every character takes a byte at least: no more than `lead` of them fit.
    window = text[max(anchor - lead, 0) : anchor]
    used = list(accumulate(reversed(_sizes(window))))
    return anchor - bisect_right(used, lead)


def fit_end(text: str, start: int, marked: Sequence[int], budget: int) -> int:
    """Where an excerpt from `start` ends: after as many whole characters as fit in
    `budget` UTF-8 bytes, counting the 4 bytes of marks around each match opening at
    one of the positions `marked`."""
    window = text[start : start + budget]
    costs = _sizes(window)
    for pos in marked:
        if start <= pos < start + len(window):
            costs[pos - start] += 4  # the marks around the match
    return start + bisect_right(list(accumulate(costs)), budget)


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
