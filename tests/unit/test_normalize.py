"""Normalisation and tokenising: one definition for documents and queries alike."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgsearch.normalize import (
    MAX_TERM_CHARS,
    iter_tokens,
    normalize,
    query_words,
    stem,
    term_counts,
    tokenize,
    tsvector_literal,
)

#: Any ``str`` at all: every category (surrogates and controls included), plus
#: a dense mix of the characters normalisation has to think about.
TRICKY = "ÉéeÅåøØßẞđĐłŁæÆþÞœ\u0131İǅﬃͅ\u0301\u0308\u20dd\u200d\ufffd\x00\x1b\t\n東京タワー한국어"
ANY_TEXT = st.one_of(
    st.text(),
    st.text(st.characters(codec=None, categories=None, exclude_categories=[])),
    st.text(st.characters(min_codepoint=0xD700, max_codepoint=0xE100)),
    st.text(st.sampled_from(TRICKY)),
)


def _has_mark(text: str) -> bool:
    return any(unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me") for ch in text)


# -- properties ---------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_normalize_is_idempotent(text: str) -> None:
    key = normalize(text)
    assert normalize(key) == key


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_normalize_never_raises_and_output_is_storable(text: str) -> None:
    key = normalize(text)
    key.encode("utf-8")  # no lone surrogates survive


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_normalized_text_has_no_combining_marks(text: str) -> None:
    assert not _has_mark(normalize(text))


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_tokenize_never_raises_and_yields_nonempty_terms(text: str) -> None:
    tokens = list(iter_tokens(text))
    assert all(tok.term for tok in tokens)
    assert all(len(tok.term) <= MAX_TERM_CHARS for tok in tokens)
    positions = [tok.position for tok in tokens]
    assert positions == sorted(positions)
    assert all(p >= 1 for p in positions)


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_tokens_of_normalized_text_are_stable(text: str) -> None:
    key = normalize(text)
    assert tokenize(text) == tokenize(key, normalized=True) == tokenize(key)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT)
def test_query_words_never_raise_and_match_document_terms(text: str) -> None:
    words, phrases = query_words(text)
    terms = set(tokenize(text.replace('"', " ")))
    # Every searchable unit of a query is a term the same text would index.
    assert {w.text for w in words} <= terms
    assert all(len(p) > 1 for p in phrases)


# -- accents and folding ----------------------------------------------------------


def test_pokemon_spellings_normalise_alike() -> None:
    assert normalize("Pokémon") == normalize("pokemon") == normalize("POKEMON") == "pokemon"
    assert tokenize("Pokémon") == tokenize("POKEMON") == ["pokemon"]


def test_decomposed_and_composed_accents_normalise_alike() -> None:
    assert normalize("Flabe\u0301be\u0301") == normalize("Flabébé") == "flabebe"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("ø", "o"),
        ("Øresund", "oresund"),
        ("ß", "ss"),
        ("Straße", "strasse"),
        ("ẞ", "ss"),
        ("đ", "d"),
        ("Đorđe", "dorde"),
        ("ł", "l"),
        ("Łódź", "lodz"),
        ("æ", "ae"),
        ("Æther", "aether"),
        ("þ", "th"),
        ("Þór", "thor"),
        ("œuvre", "oeuvre"),
        ("ﬁle", "file"),  # compatibility ligature (NFKC)
        ("".join(chr(ord(c) + 0xFEE0) for c in "Fullwidth"), "fullwidth"),
    ],
)
def test_letters_that_do_not_decompose_are_folded(text: str, key: str) -> None:
    assert normalize(text) == key


def test_ascii_is_just_lower_cased() -> None:
    assert normalize("Resolve_Dirs(CONFIG)") == "resolve_dirs(config)"


# -- CJK --------------------------------------------------------------------------


def test_cjk_unigrams_and_bigrams_share_positions() -> None:
    tokens = list(iter_tokens("東京タワー"))
    by_position: dict[int, list[str]] = {}
    for tok in tokens:
        by_position.setdefault(tok.position, []).append(tok.term)
    assert by_position == {
        1: ["東", "東京"],
        2: ["京", "京タ"],
        3: ["タ", "タワ"],
        4: ["ワ", "ワー"],
        5: ["ー"],
    }


def test_one_and_two_character_cjk_queries_are_document_terms() -> None:
    text = "日本語の商品名も検索できるようにしてください。例えば東京タワーのグッズ。"
    terms = set(tokenize(text))
    for query in ("東", "東京", "検索", "語"):
        assert all(w.text in terms for w in query_words(query)[0])


def test_cjk_next_to_latin_splits_into_both() -> None:
    assert tokenize("abc東京def") == ["abc", "東", "東京", "京", "def"]


def test_hangul_is_split_like_other_cjk() -> None:
    assert tokenize("한국어") == ["한", "한국", "국", "국어", "어"]


def test_term_counts_keep_one_position_per_cjk_slot() -> None:
    counts = term_counts(iter_tokens("東京東京"))
    assert counts["東京"] == [1, 3]
    assert counts["東"] == [1, 3]
    assert counts["京東"] == [2]


def test_tsvector_literal_form() -> None:
    assert tsvector_literal({"cron": [1, 4], "job": [2]}) == "'cron':1,4 'job':2"


# -- code-like text -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("resolve_dirs(config)", ["resolve", "dirs", "config"]),
        ("C++", ["c"]),
        ("foo-bar", ["foo", "bar"]),
        ("%", []),
        ("_", []),
        ("'", []),
        ("\\", []),
        ("it's", ["it", "s"]),
        ("C:\\Users\\me", ["c", "users", "me"]),
        ("50% off", ["50", "off"]),
        ("a_b%c'd\\e", ["a", "b", "c", "d", "e"]),
        ("/etc/pgsearch/config.toml", ["etc", "pgsearch", "config", "toml"]),
        ("'; DROP TABLE messages; --", ["drop", "table", "messages"]),
        (
            "550e8400-e29b-41d4-a716-446655440000",
            ["550e8400", "e29b", "41d4", "a716", "446655440000"],
        ),
    ],
)
def test_code_like_text_tokenizes_as_data(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms
    words, _ = query_words(text)
    assert [w.text for w in words] == terms


def test_long_runs_are_cut_to_max_term_chars() -> None:
    (term,) = tokenize("a" * 500)
    assert term == "a" * MAX_TERM_CHARS


# -- queries --------------------------------------------------------------------------


def test_query_words_plain() -> None:
    words, phrases = query_words("Cron Refactor")
    assert [w.text for w in words] == ["cron", "refactor"]
    assert phrases == []


def test_quoted_text_is_a_phrase() -> None:
    words, phrases = query_words('"advisory lock" postgres')
    assert [w.text for w in words] == ["advisory", "lock", "postgres"]
    assert phrases == [["advisory", "lock"]]


def test_quoted_single_word_is_not_a_phrase() -> None:
    words, phrases = query_words('"cron"')
    assert [w.text for w in words] == ["cron"]
    assert phrases == []


def test_unbalanced_quote_is_data() -> None:
    words, phrases = query_words('"cron job')
    assert [w.text for w in words] == ["cron", "job"]
    assert phrases == []


def test_cjk_run_becomes_a_phrase_of_bigrams() -> None:
    words, phrases = query_words("東京タワー")
    assert phrases == [["東京", "京タ", "タワ", "ワー"]]
    assert all(w.cjk and w.phrase == 0 for w in words)


def test_one_and_two_character_cjk_queries_are_single_words() -> None:
    for query in ("東", "東京"):
        words, phrases = query_words(query)
        assert [w.text for w in words] == [query]
        assert words[0].cjk
        assert words[0].phrase is None
        assert phrases == []


def test_query_is_normalised_like_documents() -> None:
    words, _ = query_words("POKÉMON Straße")
    assert [w.text for w in words] == ["pokemon", "strasse"]


def test_punctuation_only_query_has_no_words() -> None:
    assert query_words("%_'\\ ++ --") == ([], [])


# -- stems ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [("paint", "painted"), ("sunrise", "sunrises"), ("decide", "decided"), ("job", "jobs")],
)
def test_word_forms_share_a_stem(a: str, b: str) -> None:
    assert stem(a) == stem(b)


def test_stem_leaves_non_latin_and_short_terms_alone() -> None:
    assert stem("東京") == "東京"
    assert stem("c") == "c"
    assert stem("550e8400") == "550e8400"


def test_cjk_runs_are_numbered_across_the_query() -> None:
    words, phrases = query_words("東京タワー、写真 deploy")
    assert [(w.text, w.run) for w in words] == [
        ("東京", 0),
        ("京タ", 0),
        ("タワ", 0),
        ("ワー", 0),
        ("写真", 1),
        ("deploy", None),
    ]
    assert phrases == [["東京", "京タ", "タワ", "ワー", "写真"]]
