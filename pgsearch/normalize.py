"""Normalisation and tokenising: one definition, used for documents and queries alike.

`normalize` maps text to a search key: Unicode NFKC, case-folded, combining marks
stripped (``é → e``), letters that do not decompose folded (``ø → o``, ``ł → l``,
``æ → ae``, ``þ → th``). `tokenize` splits a key into terms: runs of letters and
digits, so code-like text (``resolve_dirs(config)``, ``C++``, ``foo-bar``, quotes,
``%``, backslashes) is plain data. Runs of CJK characters carry no spaces between
words, so each character is emitted as a unigram and each adjacent pair as a bigram
*at the same position*: a one- or two-character query matches exactly, and a longer
CJK query becomes a phrase of consecutive bigrams.

Everything here is pure and never raises on any ``str``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache

import snowballstemmer

#: Longest term kept; longer runs (hashes, base64) are cut to this prefix.
MAX_TERM_CHARS = 64
#: Postgres keeps positions up to this value in a tsvector.
MAX_POSITION = 16383

#: Letters that do not decompose, folded to the letters they stand for.
LETTER_FOLD = _FOLD = str.maketrans(
    {
        "ø": "o",
        "đ": "d",
        "ð": "d",
        "ł": "l",
        "æ": "ae",
        "œ": "oe",
        "þ": "th",
        "ħ": "h",
        "ı": "i",
        "ŀ": "l",
        "ŧ": "t",
        "ƒ": "f",
        "ŋ": "n",
        "ĸ": "k",
        "ɖ": "d",
        "ß": "ss",
        "ſ": "s",
    }
)

# Han, Hiragana, Katakana, Hangul (syllables and jamo), CJK compatibility ideographs.
_CJK_CLASS = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)


@cache
def _cjk_re() -> re.Pattern[str]:
    """One CJK character (compiled on the first non-ASCII text: a short command whose
    text is ASCII never pays for these classes)."""
    return re.compile(f"[{_CJK_CLASS}]")


@cache
def _cjk_split_re() -> re.Pattern[str]:
    """Runs of CJK characters and runs of anything else."""
    return re.compile(f"[{_CJK_CLASS}]+|[^{_CJK_CLASS}]+")


# Letters, digits and spacing marks (Indic vowel signs belong inside words).
_WORD_RE = re.compile(r"(?:[^\W_]|[\u0900-\u0dff\u0e00-\u0eff])+")
_ASCII_WORD_RE = re.compile(r"[a-z0-9]+")
_LATIN_WORD_RE = re.compile(r"[a-z]+")


@cache
def _marks_re() -> re.Pattern[str]:
    """Every combining character (category Mn or Me, or a non-zero combining class).

    Built once, on the first non-ASCII text (a scan of the code points below U+20000,
    where every mark but the variation selectors U+E0100-E01EF lies; ~60 ms), so
    stripping marks is one regex substitution instead of a loop over characters.
    """
    ranges: list[list[int]] = [[0xE0100, 0xE01EF]]
    for cp in range(0x20000):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Mn", "Me") or unicodedata.combining(ch):
            if ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    return re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges) + "]+")


@cache
def strip_table() -> dict[int, str | None]:
    """One `str.translate` table that drops every character `_marks_re` matches and
    folds the letters of `LETTER_FOLD`: several times faster than the substitution
    (a character class of hundreds of ranges is searched range by range)."""
    table: dict[int, str | None] = dict(_FOLD)
    pattern = _marks_re().pattern[1:-2]  # the class's ranges: "a-b" triples
    for i in range(0, len(pattern), 3):
        for cp in range(ord(pattern[i]), ord(pattern[i + 2]) + 1):
            table[cp] = None
    return table


def _strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", decomposed.translate(strip_table()))


#: A lone surrogate (valid in a Python string, in no encoding).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def normalize(text: str) -> str:
    """The search key of `text`: NFKC, case-folded, marks stripped, letters folded.

    Idempotent: ``normalize(normalize(s)) == normalize(s)``.
    """
    if text.isascii():
        return text.lower()
    # Lone surrogates cannot be encoded anywhere downstream; they carry no text.
    if LONE_SURROGATE.search(text):
        text = LONE_SURROGATE.sub("\ufffd", text)
    key = text
    # Case folding and compatibility mapping can each expose characters the other
    # maps further, so repeat until stable (at most a few rounds in practice).
    for _ in range(4):
        nxt = _strip_marks(unicodedata.normalize("NFKC", key).casefold())
        if nxt == key:
            break
        key = nxt
    return key


def is_cjk(text: str) -> bool:
    """True when `text` contains a CJK character."""
    return not text.isascii() and _cjk_re().search(text) is not None


def _words(key: str) -> list[str]:
    if key.isascii():
        return _ASCII_WORD_RE.findall(key)
    return _WORD_RE.findall(key)


@dataclass(frozen=True, slots=True)
class Token:
    term: str
    position: int
    #: Offset of the token's first character in the normalised key.
    start: int


def tokenize(text: str, *, normalized: bool = False) -> list[str]:
    """The terms of `text` in order (CJK unigrams and bigrams interleaved)."""
    return [tok.term for tok in iter_tokens(text, normalized=normalized)]


def iter_tokens(text: str, *, normalized: bool = False) -> Iterable[Token]:
    """Tokens of `text` with 1-based positions; CJK unigram and bigram share one."""
    key = text if normalized else normalize(text)
    position = 0
    if key.isascii():
        for match in _ASCII_WORD_RE.finditer(key):
            position += 1
            yield Token(match.group()[:MAX_TERM_CHARS], min(position, MAX_POSITION), match.start())
        return
    for match in _WORD_RE.finditer(key):
        word = match.group()
        if not is_cjk(word):
            position += 1
            yield Token(word[:MAX_TERM_CHARS], min(position, MAX_POSITION), match.start())
            continue
        offset = match.start()
        for part in _cjk_split_re().findall(word):
            if _cjk_re().match(part):
                for i, ch in enumerate(part):
                    position += 1
                    pos = min(position, MAX_POSITION)
                    yield Token(ch, pos, offset + i)
                    if i + 1 < len(part):
                        yield Token(part[i : i + 2], pos, offset + i)
            else:
                position += 1
                yield Token(part[:MAX_TERM_CHARS], min(position, MAX_POSITION), offset)
            offset += len(part)


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=262_144)
def stem(term: str) -> str:
    """The English Snowball stem of a Latin-letter term; other terms are their own stem."""
    if len(term) < 3 or not _LATIN_WORD_RE.fullmatch(term):
        return term
    result: str = _STEMMER.stemWord(term)
    return result


def term_counts(tokens: Iterable[Token]) -> dict[str, list[int]]:
    """Positions of each term (first 256, as Postgres keeps in a tsvector)."""
    positions: dict[str, list[int]] = {}
    for tok in tokens:
        plist = positions.get(tok.term)
        if plist is None:
            positions[tok.term] = [tok.position]
        elif len(plist) < 256 and plist[-1] != tok.position:
            plist.append(tok.position)
    return positions


def term_positions(text: str) -> dict[str, list[int]]:
    """Positions of each term of `text`; the same as ``term_counts(iter_tokens(text))``.

    Ingest calls this for every message, so plain ASCII text takes a fast path.
    """
    key = normalize(text)
    if not key.isascii():
        return term_counts(iter_tokens(key, normalized=True))
    positions: dict[str, list[int]] = {}
    for pos, term in enumerate(_ASCII_WORD_RE.findall(key), 1):
        if len(term) > MAX_TERM_CHARS:
            term = term[:MAX_TERM_CHARS]
        plist = positions.get(term)
        if plist is None:
            positions[term] = [pos if pos < MAX_POSITION else MAX_POSITION]
        elif len(plist) < 256 and pos <= MAX_POSITION:
            plist.append(pos)
    return positions


def tsvector_literal(positions: dict[str, list[int]]) -> str:
    """The text form of a tsvector holding these terms and positions."""
    return " ".join(
        [
            f"'{term}':{plist[0]}" if len(plist) == 1 else f"'{term}':{','.join(map(str, plist))}"
            for term, plist in positions.items()
        ]
    )


@dataclass(frozen=True, slots=True)
class QueryWord:
    """One searchable unit of a query: a word, or a CJK unigram/bigram."""

    text: str
    cjk: bool
    #: Index of the phrase (quoted text, CJK run, code-like chunk) it belongs to.
    phrase: int | None = None
    #: Words typed as one chunk (``resolve_dirs(config)``, ``東京タワー``, quoted text)
    #: share a unit: the candidate top-up treats a unit as all-or-nothing.
    unit: int = 0
    #: True for words inside double quotes.
    quoted: bool = False
    #: Index of the run of CJK characters the word comes from (None for other words):
    #: a run is searched as one phrase of its overlapping pairs.
    run: int | None = None


_QUOTED_RE = re.compile(r'"([^"]*)"')


def query_words(query: str) -> tuple[list[QueryWord], list[list[str]]]:
    """Words of a user query and its phrases.

    A phrase is the words of quoted text, of a CJK run (its overlapping bigrams) or of
    one whitespace-free chunk such as ``resolve_dirs(config)``, in order. A CJK run of
    one or two characters is a single word.
    """
    words: list[QueryWord] = []
    phrases: list[list[str]] = []
    chunks = [m.group(1) for m in _QUOTED_RE.finditer(query)]
    quoted = len(chunks)
    chunks.extend(_QUOTED_RE.sub(" ", query).split())
    runs = 0
    for unit, chunk in enumerate(chunks):
        terms: list[tuple[str, int | None]] = []
        for match in _WORD_RE.finditer(normalize(chunk)):
            word = match.group()
            for part in _cjk_split_re().findall(word) if is_cjk(word) else (word,):
                if is_cjk(part):
                    if len(part) <= 2:
                        terms.append((part, runs))
                    else:
                        terms.extend((part[i : i + 2], runs) for i in range(len(part) - 1))
                    runs += 1
                else:
                    terms.append((part[:MAX_TERM_CHARS], None))
        phrase = None
        if len(terms) > 1:
            phrases.append([t for t, _ in terms])
            phrase = len(phrases) - 1
        words.extend(
            QueryWord(t, run is not None, phrase, unit, unit < quoted, run) for t, run in terms
        )
    return words, phrases
