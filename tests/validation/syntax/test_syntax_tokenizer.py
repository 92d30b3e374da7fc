"""The tokenizer, rule by rule. Each expectation was checked against the 2.6 and 2.8 binaries
(the corpus test proves the same rules end to end)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.validation.syntax import quote_word, tokenize
from controller.validation.syntax.tokenizer import NEEDS_FULL, fast_tokens


def values(line: str, **kw: object) -> list[str]:
    tokens, error = tokenize(line, **kw)  # type: ignore[arg-type]
    assert error is None, error
    return [t.value for t in tokens]


def error_of(line: str) -> tuple[str, int]:
    tokens, error = tokenize(line)
    assert error is not None and tokens == ()
    return error.rule_id, error.column


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("server s1 127.0.0.1:80", ["server", "s1", "127.0.0.1:80"]),
        ("   leading and trailing   ", ["leading", "and", "trailing"]),
        ("a\tb\x0bc\x0cd", ["a", "b", "c", "d"]),
        ("a # comment", ["a"]),
        ("a#not-a-separator-but-a-comment", ["a"]),
        ("# only a comment", []),
        ("", []),
        ("a 'b # c' d", ["a", "b # c", "d"]),
        ('a "b # c" d', ["a", "b # c", "d"]),
        ("a\\#b", ["a#b"]),
        ("a\\ b", ["a b"]),
        ("a\\\\b", ["a\\b"]),
        ("\\'x\\' \\\"y\\\"", ["'x'", '"y"']),
        ("a\\x41\\x7e", ["aA~"]),
        ("a\\1b", ["a\\1b"]),  # unknown escape keeps its backslash
        ("trailing\\", ["trailing\\"]),  # no line continuation
        ('"\\t\\n\\r"', ["\t\n\r"]),
        ("'\\t $HOME ${X} \\x41'", ["\\t $HOME ${X} \\x41"]),  # single quotes are literal
        ("$HOME ${HOME}", ["$HOME", "${HOME}"]),  # no expansion outside double quotes
        ('"\\$HOME"', ["$HOME"]),  # escaped dollar inside double quotes
        ("\\$HOME", ["\\$HOME"]),  # outside double quotes \$ is not an escape
        ('"it\'s" \'say "hi"\'', ["it's", 'say "hi"']),
        ("pre\"mid\"'dle'post", ["premiddlepost"]),
        ('a ""', ["a"]),  # an empty last word is dropped
        ('a "" b', ["a", "", "b"]),  # an empty middle word is kept
        ("a\rb c", ["a"]),  # CR ends the line ...
        ("a \rb c", ["a", "b", "c"]),  # ... except inside a run of blanks
        ("\r a", ["a"]),  # leading CR is a leading blank
        ('a "b\rc"', None),  # CR ends the line inside quotes too: unterminated
    ],
)
def test_rules(line: str, expected: list[str] | None) -> None:
    if expected is None:
        assert error_of(line)[0] == "E2001"
    else:
        assert values(line) == expected


def test_non_ascii_blanks_are_word_characters() -> None:
    assert values("a\u00a0b c\x1cd") == ["a\u00a0b", "c\x1cd"]


def test_escaped_nul_ends_the_word_like_a_c_string() -> None:
    assert values("ab\\x00cd ef") == ["ab", "ef"]


@pytest.mark.parametrize(
    ("line", "rule", "column"),
    [
        ('x "open', "E2001", 3),
        ("x 'open", "E2001", 3),
        ('x "a" "b', "E2001", 7),
        ("x \\xZZ", "E2002", 3),
        ("x \\x4", "E2002", 3),
        ('x "$1"', "E2003", 5),
        ('x "${1}"', "E2003", 6),
        ('x "$"', "E2003", 5),
        ('x "${.NOPE}"', "E2003", 6),
        ('x "${FOO"', "E2004", 5),
        ('x "${FOO-default"', "E2004", 5),
        ('x "${FOO[x]}"', "E2005", 9),
    ],
)
def test_errors_carry_haproxys_position(line: str, rule: str, column: int) -> None:
    assert error_of(line) == (rule, column)


def test_escape_error_wins_over_unterminated_quote() -> None:
    assert error_of('"\\xZZ')[0] == "E2002"


def test_word_limit() -> None:
    words = ["w"] * 64
    assert len(values(" ".join(words))) == 64
    assert error_of(" ".join(words) + " ")[0] == "E2006"  # blanks start a 65th word
    assert error_of(" ".join([*words, "x"]))[0] == "E2006"
    assert len(values(" ".join(words[:63]) + " # comment")) == 63


def test_variables() -> None:
    tokens, _ = tokenize('set "${HOST}:$PORT" "${X-default value}" "${L[*]}" plain$X')
    assert [t.has_env for t in tokens] == [False, True, True, True, False]
    assert tokens[1].value == "${HOST}:$PORT"  # unknown until run time: kept as written
    assert tokens[2].value == "${X-default value}"


def test_pseudo_variables_are_expanded_statically() -> None:
    tokens, _ = tokenize(
        '"${.LINE}" "$.FILE" "${.SECTION}"', line_no=7, file="haproxy.cfg", section="be"
    )
    assert [t.value for t in tokens] == ["7", "haproxy.cfg", "be"]
    assert not any(t.has_env for t in tokens)
    assert values('"${.SECTION}"') == []  # before any section it expands to nothing


def test_spans_are_exact() -> None:
    line = '  http-request set-header X-A "two words" # c'
    tokens, _ = tokenize(line)
    for t in tokens:
        assert line[t.column - 1 : t.end_column] == t.raw
    assert [(t.column, t.end_column) for t in tokens] == [(3, 14), (16, 25), (27, 29), (31, 41)]


def test_fast_path_matches_full_path() -> None:
    for line in ["    server s1 10.0.0.1:80 check", "a  b\t c ", "\tx", "  ", "$HOME [x] y;z"]:
        assert NEEDS_FULL.search(line) is None
        fast, _ = tokenize(line, fast=True)
        full, _ = tokenize(line, fast=False)
        assert fast == full


def test_fast_tokens_are_interned() -> None:
    a = fast_tokens("    mode http", ["mode", "http"])
    b = fast_tokens("    mode http", ["mode", "http"])
    assert a == b and a[0] is b[0]


# -- properties ------------------------------------------------------------------------------

_words = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=12
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_words, min_size=1, max_size=10))
def test_quote_word_round_trips(words: list[str]) -> None:
    assume(words[-1] != "")  # HAProxy drops an empty last word: nothing can write one
    line = "keyword " + " ".join(quote_word(w) for w in words)
    tokens, error = tokenize(line)
    assert error is None
    assert [t.value for t in tokens[1:]] == words
    assert not any(t.has_env for t in tokens)
    for t in tokens:
        assert line[t.column - 1 : t.end_column] == t.raw


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\x0b\x0cabc#\"'\\$x{}[]*-.01\r", max_size=30))
def test_any_line_tokenizes_or_fails_cleanly(line: str) -> None:
    tokens, error = tokenize(line)
    if error is not None:
        assert tokens == () and 1 <= error.column <= max(1, len(line) + 1)
        return
    for t in tokens:
        assert line[t.column - 1 : t.end_column] == t.raw


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcXYZ019.:/-_=", min_size=1, max_size=8), max_size=8), st.data())
def test_fast_and_full_agree_on_plain_lines(words: list[str], data: st.DataObject) -> None:
    gaps = [data.draw(st.sampled_from([" ", "  ", "\t", " \t "])) for _ in words]
    line = data.draw(st.sampled_from(["", "    ", "\t"])) + "".join(
        w + g for w, g in zip(words, gaps, strict=True)
    )
    assert tokenize(line, fast=True) == tokenize(line, fast=False)


def test_quote_word_refuses_nul() -> None:
    with pytest.raises(ValueError):
        quote_word("a\x00b")
