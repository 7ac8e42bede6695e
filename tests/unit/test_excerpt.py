"""Excerpts (UTF-8 bounded, centred on the first match, matches marked) and windows."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pgsearch.excerpt import (
    _LONG_REACH,
    ELLIPSIS,
    MARK_CLOSE,
    MARK_OPEN,
    _word_start,
    clip,
    make_excerpt,
    match_spans,
    truncate_bytes,
    utf8_len,
    window_bounds,
)
from pgsearch.normalize import tokenize
from pgsearch.types import DEFAULT_EXCERPT_BYTES, MAX_EXCERPT_BYTES, MAX_WINDOW

#: Text with one- to four-byte characters, spaces and line breaks in the mix.
MIXED = st.text(st.sampled_from(list("ab cdé\u0301ß東京タワー한😀🇯🇵\n\t ")), max_size=600)
ANY_TEXT = st.one_of(st.text(max_size=800), MIXED)


def flat(text: str) -> str:
    return unicodedata.normalize("NFC", re.sub(r"\s+", " ", text).strip())


def unmarked(excerpt: str) -> str:
    return excerpt.replace(MARK_OPEN, "").replace(MARK_CLOSE, "").strip(ELLIPSIS).strip()


# -- byte bounds and character boundaries ------------------------------------------


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, st.lists(ANY_TEXT, max_size=3), st.integers(0, MAX_EXCERPT_BYTES))
def test_excerpt_never_exceeds_max_bytes(text: str, words: list[str], max_bytes: int) -> None:
    terms = [t for w in words for t in tokenize(w)]
    assert utf8_len(make_excerpt(text, terms, max_bytes)) <= max_bytes


@settings(max_examples=300, deadline=None)
@given(MIXED, MIXED, st.integers(40, 700))
def test_excerpt_cut_never_splits_a_character(before: str, after: str, max_bytes: int) -> None:
    text = before + " needle " + after
    excerpt = make_excerpt(text, ["needle"], max_bytes)
    assert "\ufffd" not in excerpt
    # What is left, marks and ellipses aside, is a piece of the original text.
    assert unmarked(excerpt) in flat(text)


@settings(max_examples=300, deadline=None)
@given(MIXED, MIXED, st.integers(40, MAX_EXCERPT_BYTES))
def test_first_match_is_in_the_excerpt_and_marked(before: str, after: str, max_bytes: int) -> None:
    text = before + " needle " + after
    excerpt = make_excerpt(text, ["needle"], max_bytes)
    assert f"{MARK_OPEN}needle{MARK_CLOSE}" in excerpt


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(0, 3000))
def test_truncate_bytes_is_a_prefix_within_the_limit(text: str, max_bytes: int) -> None:
    cut = truncate_bytes(text, max_bytes)
    assert text.startswith(cut)
    assert utf8_len(cut) <= max_bytes
    # The longest such prefix: one more character would not fit.
    if cut != text:
        assert utf8_len(text[: len(cut) + 1]) > max_bytes


# -- centring and marking -------------------------------------------------------------


def test_excerpt_is_centred_on_the_first_match() -> None:
    text = "lorem ipsum " * 200 + "the advisory lock decision " + "dolor sit amet " * 200
    excerpt = make_excerpt(text, ["advisory"], 300)
    assert utf8_len(excerpt) <= 300
    assert excerpt.startswith(ELLIPSIS)
    assert excerpt.endswith(ELLIPSIS)
    before, _, after = excerpt.partition(f"{MARK_OPEN}advisory{MARK_CLOSE}")
    # Some context on each side, more of it after the match than before.
    assert 30 <= utf8_len(before) <= 150
    assert utf8_len(after) > utf8_len(before)


def test_excerpt_anchors_on_the_first_of_several_matches() -> None:
    text = "alpha " * 100 + "needle one " + "beta " * 300 + "needle two " + "gamma " * 100
    excerpt = make_excerpt(text, ["needle"], 200)
    assert f"{MARK_OPEN}needle{MARK_CLOSE} one" in excerpt
    assert "two" not in excerpt


def test_excerpt_starts_at_a_word_boundary() -> None:
    text = "wordy " * 100 + "needle " + "tail " * 100
    excerpt = make_excerpt(text, ["needle"], 120)
    assert excerpt.startswith(ELLIPSIS + "wordy")


def test_match_at_the_very_end() -> None:
    text = "filler " * 300 + "needle"
    excerpt = make_excerpt(text, ["needle"], 100)
    assert excerpt.endswith(f"{MARK_OPEN}needle{MARK_CLOSE}")
    assert excerpt.startswith(ELLIPSIS)


def test_short_text_is_returned_whole_with_every_match_marked() -> None:
    excerpt = make_excerpt("Keep the  cron\njob, drop the cron   loop", ["cron"], 600)
    assert excerpt == "Keep the \x91cron\x92 job, drop the \x91cron\x92 loop"


def test_no_match_gives_the_start_of_the_text() -> None:
    text = "first words " + "more " * 500
    excerpt = make_excerpt(text, ["absent"], 100)
    assert excerpt.startswith("first words")
    assert excerpt.endswith(ELLIPSIS)
    assert MARK_OPEN not in excerpt


def test_empty_and_blank_text_give_an_empty_excerpt() -> None:
    assert make_excerpt("", ["x"], 600) == ""
    assert make_excerpt(" \n\t ", ["x"], 600) == ""


def test_matches_are_found_through_normalisation() -> None:
    # Terms are normalised vocabulary terms: accents, case and typos' targets alike.
    assert make_excerpt("Add a Pokémon search", ["pokemon"], 600) == "Add a \x91Pokémon\x92 search"
    assert make_excerpt("the DATABASE is down", ["database"], 600) == "the \x91DATABASE\x92 is down"
    assert make_excerpt("resolve_dirs(config) fails", ["config"], 600) == (
        "resolve_dirs(\x91config\x92) fails"
    )


@pytest.mark.parametrize(
    "word",
    [
        "Flabe\u0301be\u0301",  # decomposed accents (NFD text, as macOS writes names)
        "Pokémon",
        "Straße",
        "हिन्दी",  # Devanagari vowel signs and virama are marks inside the word
        "ภาษาไทย",
        "Ελληνικά",
    ],
)
def test_words_with_combining_marks_are_marked_whole(word: str) -> None:
    (term,) = tokenize(word)
    shown = unicodedata.normalize("NFC", word)  # canonically equivalent to `word`
    assert make_excerpt(f"say {word} twice", [term], 600) == f"say \x91{shown}\x92 twice"


def test_decomposed_hangul_is_matched_like_composed() -> None:
    text = "say " + unicodedata.normalize("NFD", "한국어") + " twice"
    assert make_excerpt(text, ["국어"], 600) == "say 한\x91국어\x92 twice"


def test_excerpt_is_centred_on_a_decomposed_match() -> None:
    word = "Flabe\u0301be\u0301"
    text = "filler " * 300 + word + " tail" * 300
    excerpt = make_excerpt(text, tokenize(word), 200)
    assert "\x91Flabébé\x92" in excerpt


WORDISH = st.text(
    st.characters(categories=["Lu", "Ll", "Lo", "Mn", "Mc", "Nd"]), min_size=1, max_size=12
).filter(lambda w: len(tokenize(w)) == 1 and w[0].isalnum())


@settings(max_examples=300, deadline=None)
@given(WORDISH, st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
# A CJK combining mark between two digits: the tokenizer drops it and sees one
# Latin term, so the excerpt must not cut the word into CJK pieces.
@example("0\u30990", "NFC")
def test_a_matching_word_is_always_marked(word: str, form: str) -> None:
    word = unicodedata.normalize(form, word)
    terms = tokenize(word)
    if len(terms) != 1:
        return
    excerpt = make_excerpt(f"before {word} after", terms, 600)
    assert MARK_OPEN in excerpt


def test_cjk_matches_are_marked_inside_a_run() -> None:
    excerpt = make_excerpt("例えば東京タワーのグッズ", ["東京"], 600)
    assert excerpt == "例えば\x91東京\x92タワーのグッズ"


def test_match_spans_merge_adjacent_cjk_pieces() -> None:
    assert match_spans("東京タワー", ["東京", "京タ"]) == [(0, 3)]
    assert match_spans("cron and cron", ["cron"]) == [(0, 4), (9, 13)]
    assert match_spans("anything", []) == []


def test_default_and_cap_sizes() -> None:
    assert (DEFAULT_EXCERPT_BYTES, MAX_EXCERPT_BYTES) == (600, 2000)
    text = "x" * 10 + " needle " + "東京" * 2000
    assert utf8_len(make_excerpt(text, ["needle"], MAX_EXCERPT_BYTES)) <= MAX_EXCERPT_BYTES


# -- windows ---------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.integers(-5, 200), st.integers(-5, 200))
def test_window_keeps_the_anchor_and_at_most_16(before: int, after: int) -> None:
    nb, na = window_bounds(before, after, MAX_WINDOW)
    assert 0 <= nb <= max(before, 0)
    assert 0 <= na <= max(after, 0)
    assert nb + na + 1 <= MAX_WINDOW


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 200), st.integers(0, 200), st.integers(1, 60))
def test_window_uses_its_room_and_stays_centred_when_trimmed(
    before: int, after: int, max_window: int
) -> None:
    nb, na = window_bounds(before, after, max_window)
    room = max_window - 1
    assert nb + na <= room
    if before + after <= room:
        assert (nb, na) == (before, after)
        return
    # Trimmed: the window is full, and centred unless one side asked for less.
    assert nb + na == room
    half = room // 2
    if before >= half + 1 and after >= half + 1:
        assert abs(nb - na) <= 1
    if before < half:
        assert nb == before
    if after < half:
        assert na == after


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (3, 3, (3, 3)),
        (0, 0, (0, 0)),
        (15, 0, (15, 0)),
        (0, 15, (0, 15)),
        (100, 100, (7, 8)),
        (100, 0, (15, 0)),
        (0, 100, (0, 15)),
        (2, 100, (2, 13)),
        (100, 2, (13, 2)),
        (-3, 4, (0, 4)),
    ],
)
def test_window_bounds_examples(before: int, after: int, expected: tuple[int, int]) -> None:
    assert window_bounds(before, after, MAX_WINDOW) == expected


# -- clip ------------------------------------------------------------------------------------


def test_clip_leaves_short_text_alone() -> None:
    assert clip("short", 100) == "short"
    assert clip("", 0) == ""


def test_clip_cuts_and_says_how_much_was_left_out() -> None:
    text = "hello world " * 10  # 120 bytes
    clipped = clip(text, 30)
    assert utf8_len(clipped) <= 30
    kept, _, note = clipped.partition(f" {ELLIPSIS}[")
    assert text.startswith(kept)
    assert note == f"{utf8_len(text) - utf8_len(kept)} more bytes]"


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, st.integers(0, 1000))
def test_clip_never_exceeds_max_bytes(text: str, max_bytes: int) -> None:
    clipped = clip(text, max_bytes)
    assert utf8_len(clipped) <= max_bytes
    if utf8_len(text) <= max_bytes:
        assert clipped == text


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, st.integers(40, 1000))
def test_clip_note_counts_the_bytes_left_out(text: str, max_bytes: int) -> None:
    clipped = clip(text, max_bytes)
    if clipped == text:
        return
    match = re.fullmatch(rf"(.*) {ELLIPSIS}\[([\d,]+) more bytes\]", clipped, re.DOTALL)
    assert match is not None
    kept, count = match.group(1), int(match.group(2).replace(",", ""))
    assert text.startswith(kept)
    assert utf8_len(kept) + count == utf8_len(text)


# -- long texts: bounded work ---------------------------------------------------------


def test_a_huge_text_is_matched_only_around_its_first_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pgsearch.excerpt as excerpt_module

    read: list[int] = []
    real = excerpt_module.match_spans

    def counting(text: str, terms: object) -> list[tuple[int, int]]:
        read.append(len(text))
        return real(text, terms)  # type: ignore[arg-type]

    monkeypatch.setattr(excerpt_module, "match_spans", counting)
    filler = "Der Prozess schlug fehl: Zeitüberschreitung beim Öffnen der Datei. "
    text = filler * 15_000 + "the needle is here " + filler * 15_000  # about 2 MB
    excerpt = make_excerpt(text, ["needle"], MAX_EXCERPT_BYTES)
    assert f"{MARK_OPEN}needle{MARK_CLOSE} is here" in excerpt
    assert excerpt.startswith(ELLIPSIS) and excerpt.endswith(ELLIPSIS)
    assert utf8_len(excerpt) <= MAX_EXCERPT_BYTES
    assert unmarked(excerpt) in flat(text)
    # Only the block holding the match and the slice around it are matched word by word.
    assert sum(read) < 20 * MAX_EXCERPT_BYTES, read


def test_a_huge_ascii_text_is_matched_by_one_pattern() -> None:
    text = "lorem ipsum dolor " * 200_000 + "Needle_in haystack needles"
    assert match_spans(text[-40:], ["needle", "haystack"]) == [(14, 20), (24, 32)]
    excerpt = make_excerpt(text, ["needle"], 100)
    assert excerpt.endswith(f"{MARK_OPEN}Needle{MARK_CLOSE}_in haystack needles")


LONG = st.lists(st.sampled_from(["ab ", "cdé ", "e\u0301f ", "東京タワー ", "한 ", "x\n\n", "😀 "]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LONG, LONG, st.integers(1, 4), st.integers(40, MAX_EXCERPT_BYTES))
def test_long_texts_keep_every_excerpt_promise(
    before: list[str], after: list[str], repeat: int, max_bytes: int
) -> None:
    text = "".join(before) * (40 * repeat) + " needle " + "".join(after) * (40 * repeat)
    excerpt = make_excerpt(text, ["needle"], max_bytes)
    assert utf8_len(excerpt) <= max_bytes
    assert "\ufffd" not in excerpt
    assert unmarked(excerpt) in flat(text)
    if max_bytes >= 60:
        assert f"{MARK_OPEN}needle{MARK_CLOSE}" in excerpt


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(st.sampled_from(list("aB1 _-é\n")), max_size=300),
    st.sampled_from(["ab", "b1", "a" * 64]),
)
def test_the_ascii_pattern_marks_what_word_by_word_matching_marks(text: str, term: str) -> None:
    text = text.replace("é", "e")  # ASCII only: the pattern's side
    words = [
        (m.start(), m.end())
        for m in re.finditer(r"[A-Za-z0-9]+", text)
        if m.group().lower()[:64] == term
    ]
    assert match_spans(text, [term]) == words


WORDY = st.text(st.sampled_from(list("ab AB1_-.cdé\u0301ßøİ東京タ한\n\u3002😀")), max_size=400)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    WORDY,
    st.lists(st.sampled_from(["ab", "cde", "ss", "o", "i", "東京", "京", "한", "b1"]), max_size=3),
)
def test_matching_by_pattern_and_regions_marks_what_word_by_word_marks(
    text: str, terms: list[str]
) -> None:
    from pgsearch.excerpt import _merge, _word_spans

    wanted = frozenset(terms)
    assert match_spans(text, wanted) == _merge(_word_spans(text, wanted, 0, len(text)))


def test_excerpt_around_cleans_only_a_slice_around_the_match() -> None:
    from pgsearch.excerpt import READ_MARGIN_CHARS, excerpt_around

    cleaned: list[int] = []

    def clean(text: str) -> str:
        cleaned.append(len(text))
        return text.replace("hunter2", "[redacted]")

    raw = "lorem ipsum " * 20_000 + "password hunter2 then the needle here " + "dolor " * 20_000
    excerpt = excerpt_around(raw, ["needle"], 300, clean=clean)
    assert f"{MARK_OPEN}needle{MARK_CLOSE}" in excerpt
    assert "hunter2" not in excerpt and "[redacted]" in excerpt
    assert excerpt.startswith(ELLIPSIS) and excerpt.endswith(ELLIPSIS)
    assert cleaned and max(cleaned) <= 2 * READ_MARGIN_CHARS + 600
    short = excerpt_around("a short needle text", ["needle"], 300, clean=clean)
    assert short == f"a short {MARK_OPEN}needle{MARK_CLOSE} text"


def test_excerpt_of_a_long_identifier_shows_the_identifier() -> None:
    text = (
        "The cache was warm when we started. "
        + "We then looked at unrelated parts of the build for a long while. " * 6
        + "Finally test_cache_invalidation_version_mismatch failed on the second run."
    )
    terms = {"test", "cache", "invalidation", "version", "mismatch"}
    excerpt = make_excerpt(text, terms, 120)
    assert "\x91invalidation\x92" in excerpt and "\x91mismatch\x92" in excerpt
    assert "warm" not in excerpt


def test_a_word_running_from_one_non_ascii_run_into_the_next_is_one_word() -> None:
    # 'ß1ø' is one word ('ss1o'); the run 'ø😀' starts inside it.
    assert match_spans("ß1ø😀", ["o"]) == []
    assert match_spans("ß1ø😀 ø", ["o"]) == [(5, 6)]
    assert match_spans("ß1ø😀", ["ss1o"]) == [(0, 3)]


# -- matching ASCII text without a pattern per set of terms --------------------------


def _pattern_spans(
    text: str, terms: tuple[tuple[str, ...], tuple[str, ...]], start: int, end: int
) -> list[tuple[int, int]]:
    """How ASCII words were matched before: one case-insensitive pattern per set of terms."""
    from pgsearch.normalize import MAX_TERM_CHARS

    exact, prefixes = terms
    parts = [re.escape(t) + "(?![A-Za-z0-9])" for t in sorted(exact, key=len, reverse=True)]
    parts += [re.escape(t) + "[A-Za-z0-9]*" for t in sorted(prefixes)]
    assert all(len(t) >= MAX_TERM_CHARS for t in prefixes)
    pattern = re.compile("(?<![A-Za-z0-9])(?:" + "|".join(parts) + ")", re.IGNORECASE)
    return [m.span() for m in pattern.finditer(text, start, end)]


#: ASCII and the characters a case-insensitive ASCII class also accepts, around words.
EDGY = st.text(
    st.sampled_from([*"abAB1 _-.\n", "\u0130", "\u0131", "\u017f", "\u212a", "é", "東"]),
    max_size=300,
)
TERMS = st.lists(
    st.sampled_from(["a", "ab", "b1", "ba", "k", "s", "i", "1", "a" * 64, "ab" * 32, "東"]),
    max_size=4,
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EDGY, TERMS, st.data())
def test_ascii_words_are_found_as_the_pattern_found_them(
    text: str, terms: list[str], data: st.DataObject
) -> None:
    from pgsearch.excerpt import _ascii_spans, _ascii_terms

    wanted = _ascii_terms(frozenset(terms))
    if wanted is None:
        return
    # Any stretch of ASCII text, wherever it lies among the other characters.
    start = data.draw(st.integers(0, len(text)))
    end = start
    while end < len(text) and text[end].isascii():
        end += 1
    end = data.draw(st.integers(start, end))
    assert _ascii_spans(text, wanted, start, end) == _pattern_spans(text, wanted, start, end)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(EDGY, WORDY, ANY_TEXT), TERMS, st.integers(40, 700))
def test_excerpts_are_the_same_as_with_a_pattern_per_set_of_terms(
    text: str, terms: list[str], max_bytes: int
) -> None:
    from pgsearch import excerpt as module
    from pgsearch.excerpt import excerpt_around

    now = (make_excerpt(text, terms, max_bytes), match_spans(text, terms))
    around = excerpt_around(text * 3, terms, max_bytes, clean=str.upper)
    original = module._ascii_spans
    module._ascii_spans = _pattern_spans  # type: ignore[assignment]
    try:
        before = (make_excerpt(text, terms, max_bytes), match_spans(text, terms))
        assert excerpt_around(text * 3, terms, max_bytes, clean=str.upper) == around
    finally:
        module._ascii_spans = original  # type: ignore[assignment]
    assert now == before


def _lead_start_by_characters(text: str, anchor: int, lead: int) -> int:
    start, used = anchor, 0
    while start > 0:
        size = utf8_len(text[start - 1])
        if used + size > lead:
            break
        used += size
        start -= 1
    return start


def _fit_end_by_characters(text: str, start: int, marked: list[int], budget: int) -> int:
    end, total = start, 0
    for i in range(start, len(text)):
        size = utf8_len(text[i]) + 4 * marked.count(i)
        if total + size > budget:
            break
        total += size
        end = i + 1
    return end


@settings(max_examples=500, deadline=None)
@given(st.one_of(MIXED, ANY_TEXT, EDGY), st.data())
def test_excerpt_bounds_are_found_as_walking_character_by_character_found_them(
    text: str, data: st.DataObject
) -> None:
    from pgsearch.excerpt import fit_end, lead_start

    anchor = data.draw(st.integers(0, len(text)))
    lead = data.draw(st.integers(0, 300))
    assert lead_start(text, anchor, lead) == _lead_start_by_characters(text, anchor, lead)
    marked = sorted(set(data.draw(st.lists(st.integers(0, max(len(text) - 1, 0)), max_size=8))))
    budget = data.draw(st.integers(16, 700))
    assert fit_end(text, anchor, marked, budget) == _fit_end_by_characters(
        text, anchor, marked, budget
    )


_WORD_CHAR = re.compile(r"[^\W_]")


def _is_word_char(c: str) -> bool:
    return bool(_WORD_CHAR.match(c)) or unicodedata.category(c).startswith("M")


#: Runs of letters, digits and marks (some longer than `_LONG_REACH`) between others.
_RUNS = st.lists(
    st.one_of(
        st.text(
            alphabet=st.sampled_from(["a", "Z", "7", "é", "\u0301", "東", "京"]), max_size=5000
        ),
        st.text(alphabet=st.sampled_from([" ", "_", "-", "\n", "。"]), min_size=1, max_size=3),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_RUNS, st.data())
def test_word_start_is_the_start_of_the_run_ending_there(text: str, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(text)))
    floor = data.draw(st.integers(0, i))
    # By definition: step back over letters, digits and marks, to `floor` at most and
    # `_LONG_REACH` characters at most.
    start = i
    while start > max(floor, i - _LONG_REACH) and _is_word_char(text[start - 1]):
        start -= 1
    assert _word_start(text, i, floor) == start


def test_the_cjk_characters_normalising_drops_are_those_excerpts_check() -> None:
    """`excerpt._VANISHING_CJK` is exactly the CJK characters whose normalised form holds
    no CJK character: a word holding no other CJK character is one term of the rest."""
    from pgsearch.excerpt import _VANISHING_CJK
    from pgsearch.normalize import _CJK_CLASS, is_cjk, normalize

    ranges = re.findall(r"(.)-(.)", _CJK_CLASS)
    assert len(ranges) == _CJK_CLASS.count("-")
    every = [chr(cp) for a, b in ranges for cp in range(ord(a), ord(b) + 1)]
    vanishing = [ch for ch in every if not is_cjk(normalize(ch))]
    assert vanishing, "normalising drops some CJK characters"
    assert vanishing == [ch for ch in every if _VANISHING_CJK.fullmatch(ch)]
