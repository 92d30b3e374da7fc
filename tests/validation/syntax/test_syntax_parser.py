"""Sections, spans, conditional blocks and file-level rules of the parser."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.diagnostics import Severity
from controller.validation.syntax import SECTION_KEYWORDS, ParsedConfig, parse, quote_word
from controller.validation.syntax import parser as parser_module

CFG = """\
global
    maxconn 100
# between sections
defaults named
    mode http
frontend fe from named
    bind 127.0.0.1:80
    default_backend be

backend be
    server s1 127.0.0.1:81 check
"""


def rules(text: str, version: str | None = None) -> list[str]:
    return [d.rule_id for d in parse(text, "haproxy.cfg", haproxy_version=version)[1]]


def sequential(text: str, version: str | None = None) -> ParsedConfig:
    """The parse without the section cache (one walker over every line)."""
    walker = parser_module._Walker("haproxy.cfg", version)
    for number, line in parser_module._numbered_lines(text):
        if walker.stopped:
            break
        walker.feed(number, line)
    walker.finish()
    return ParsedConfig("haproxy.cfg", tuple(walker.sections), tuple(walker.macros))


def test_sections_and_spans() -> None:
    parsed, diags = parse(CFG, "haproxy.cfg")
    assert diags == []
    got = [(s.keyword, s.name, s.line, s.end_line) for s in parsed.sections]
    assert got == [
        ("global", None, 1, 3),
        ("defaults", "named", 4, 5),
        ("frontend", "fe", 6, 9),
        ("backend", "be", 10, 11),
    ]
    fe = parsed.sections[2]
    assert fe.header.args == ("fe", "from", "named")
    assert [(d.line, d.keyword) for d in fe.directives] == [(7, "bind"), (8, "default_backend")]
    server = parsed.sections[3].directives[0]
    assert (server.file, server.line, server.column, server.end_column) == (
        "haproxy.cfg",
        11,
        5,
        32,
    )
    lines = CFG.split("\n")
    for section in parsed.sections:
        text = "\n".join(lines[section.line - 1 : section.end_line]) + "\n"
        assert section.text_hash == hashlib.sha256(text.encode()).hexdigest()


def test_cached_parse_equals_sequential_parse() -> None:
    parser_module._CACHE.clear()
    assert parse(CFG, "haproxy.cfg")[0] == sequential(CFG)
    assert parse(CFG, "haproxy.cfg")[0] == sequential(CFG)  # served from the cache


def test_moved_section_is_shifted_not_reparsed() -> None:
    parse(CFG, "haproxy.cfg")
    moved = CFG.replace("    maxconn 100\n", "    maxconn 100\n    nbthread 2\n")
    parsed, _ = parse(moved, "haproxy.cfg")
    assert parsed == sequential(moved)
    assert parsed.sections[3].directives[0].line == 12
    assert parsed.sections[3].text_hash == parse(CFG, "haproxy.cfg")[0].sections[3].text_hash


def test_every_section_keyword_opens_a_section() -> None:
    text = "".join(f"{k} x\n    keyword arg\n" for k in sorted(SECTION_KEYWORDS))
    parsed, diags = parse(text, "haproxy.cfg")
    assert diags == []
    assert [s.keyword for s in parsed.sections] == sorted(SECTION_KEYWORDS)
    assert all(len(s.directives) == 1 for s in parsed.sections)


def test_quoted_and_escaped_headers_open_sections() -> None:
    text = '"backend" a\n    server s 1.2.3.4:80\n\\x62ackend b\n  backend c\n'
    parsed, _ = parse(text, "haproxy.cfg")
    assert [s.name for s in parsed.sections] == ["a", "b", "c"]


def test_file_level_errors() -> None:
    assert rules("global\n    maxconn 1") == ["E2008"]
    assert rules("maxconn 1\nglobal\n") == ["E2009"]
    assert rules('global\n  a\x00b\n  c "unterminated\n') == ["E2007"]  # HAProxy stops at NUL
    assert rules("") == [] and rules("\n\n") == []


def test_errors_name_the_line_and_column() -> None:
    _, diags = parse('global\n    setenv X "open\n', "haproxy.cfg")
    (d,) = diags
    assert d.rule_id == "E2001" and d.severity is Severity.ERROR
    assert d.location is not None
    assert (d.location.file, d.location.line, d.location.column) == ("haproxy.cfg", 2, 14)


def test_scope_lines() -> None:
    assert rules("[ok]\n  [a.b:c-d_e] # fine\nglobal\n") == []
    assert rules("[]\n[a b]\n[x] y\n[open\n") == ["E2010"] * 4


# -- conditional blocks ----------------------------------------------------------------------


def test_dead_branches_are_skipped_but_still_tokenized() -> None:
    text = "global\n.if 0\n    junk keyword\n    .alert nope\n.endif\n"
    parsed, diags = parse(text, "haproxy.cfg")
    assert diags == [] and parsed.sections[0].directives == ()
    assert rules('global\n.if 0\n    x "open\n.endif\n') == ["E2001"]


def test_taken_and_dropped_branches() -> None:
    text = """global
.if 1
    a
.elif nonsense(
    b
.else
    c
.endif
.if 0
    d
.elif 1
    e
.else
    f
.endif
"""
    parsed, diags = parse(text, "haproxy.cfg")
    assert diags == []  # the .elif after a taken .if is never evaluated
    assert [d.keyword for d in parsed.sections[0].directives] == ["a", "e"]
    assert [m.keyword for m in parsed.macros] == [".if", ".elif", ".else", ".endif"] * 2


def test_nested_if_in_dead_block_is_not_evaluated() -> None:
    assert rules("global\n.if 0\n.if nonsense(\n.endif\n.endif\n") == []
    assert rules("global\n.if 1\n.if nonsense(\n.endif\n.endif\n") == ["E2012"]


def test_undecided_branches_are_kept_and_marked() -> None:
    text = "global\n.if defined(FOO)\n    a\n.else\n    b\n.endif\n    c\n"
    parsed, diags = parse(text, "haproxy.cfg")
    assert [(d.keyword, d.conditional) for d in parsed.sections[0].directives] == [
        ("a", True),
        ("b", True),
        ("c", False),
    ]
    assert [d.rule_id for d in diags] == ["I2020"]


def test_errors_in_undecided_branches_are_warnings() -> None:
    text = "global\n.if defined(FOO)\n    .alert stop\n    .bogus\n.endif\n"
    assert rules(text) == ["I2020", "W2018", "W2018"]
    assert rules("global\n.if defined(FOO)\n.elif nonsense(\n.endif\n") == ["I2020", "W2018"]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (".if 1\n", "E2011"),
        (".endif\n", "E2011"),
        (".elif 1\n", "E2011"),
        (".else\n", "E2011"),
        (".if 1\n.else\n.else\n.endif\n", "E2011"),
        (".if 1\n.else\n.elif 1\n.endif\n", "E2011"),
        (".if 1\n.else x\n.endif\n", "E2011"),
        (".if 1\n.endif x\n", "E2011"),
        ("".join(".if 1\n" for _ in range(100)) + "".join(".endif\n" for _ in range(100)), "E2011"),
        (".if nope\n.endif\n", "E2012"),
        (".if defined(X\n.endif\n", "E2012"),
        (".if 1 x\n.endif\n", "E2012"),
        (".if streq(a)\n.endif\n", "E2012"),
        (".if 1 &&\n.endif\n", "E2012"),
        (".alert stop\n", "E2013"),
        (".foo\n", "E2014"),
        (".warning two words\n", "E2015"),
        (".warning hi\n", "W2016"),
        (".notice hi\n", "I2017"),
        ('.diag "hi there"\n', "I2017"),
    ],
)
def test_dot_directive_rules(text: str, rule: str) -> None:
    found = rules("global\n" + text)
    assert found and found[0] == rule, found


def test_99_nested_blocks_are_allowed() -> None:
    text = "".join(".if 1\n" for _ in range(99)) + "".join(".endif\n" for _ in range(99))
    assert rules("global\n" + text) == []


def test_version_conditions_need_the_version() -> None:
    text = "global\n.if version_atleast(2.8)\n    a\n.else\n    b\n.endif\n"
    assert [
        d.keyword for d in parse(text, "h", haproxy_version="2.8.25")[0].sections[0].directives
    ] == ["a"]
    assert [
        d.keyword
        for d in parse(text, "h", haproxy_version="2.6.12-1+deb12u4")[0].sections[0].directives
    ] == ["b"]
    undecided = parse(text, "h")[0].sections[0].directives
    assert [(d.keyword, d.conditional) for d in undecided] == [("a", True), ("b", True)]


def test_predicates_newer_than_the_binary() -> None:
    text = "global\n.if strstr(abc,b)\n.endif\n"
    assert rules(text, "2.6.12") == ["E2012"]
    assert rules(text, "2.8.25") == []
    assert rules(text) == []


def test_alert_stops_like_haproxy() -> None:
    assert rules('global\n.alert "x"\n    y "open\n') == ["E2013"]


# -- property: the section cache never changes the result ------------------------------------

_word = st.text(alphabet="abcxyz019.:-_", min_size=1, max_size=6)
_line = st.one_of(
    st.lists(_word, min_size=1, max_size=4).map(lambda ws: "    " + " ".join(ws)),
    st.sampled_from(["", "# comment", "    # indented comment", "  [scope]"]),
    st.builds(lambda k, n: f"{k} {n}", st.sampled_from(sorted(SECTION_KEYWORDS)), _word),
    st.lists(st.text(max_size=5), min_size=1, max_size=3).map(
        lambda ws: (
            "    set " + " ".join(quote_word(w) if "\x00" not in w else "x" for w in ws) + " end"
        )
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_line, max_size=25), st.lists(_line, max_size=25))
def test_cache_is_transparent(first: list[str], second: list[str]) -> None:
    a = "\n".join(first) + "\n"
    b = "\n".join(first + second) + "\n"
    for text in (a, b, a):
        parsed, diags = parse(text, "haproxy.cfg")
        ref = sequential(text)
        assert parsed.sections == ref.sections
        assert [d.rule_id for d in diags if d.rule_id != "E2008"] == [
            d.rule_id for d in _sequential_diags(text)
        ]


def _sequential_diags(text: str) -> list:  # type: ignore[type-arg]
    walker = parser_module._Walker("haproxy.cfg", None)
    for number, line in parser_module._numbered_lines(text):
        if walker.stopped:
            break
        walker.feed(number, line)
    walker.finish()
    return walker.diagnostics


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from([".if 1", ".if defined(X)", ".else", ".endif", ".elif 0", "[s]"]),
            st.sampled_from(sorted(SECTION_KEYWORDS)),
        ),
        max_size=20,
    )
)
def test_any_text_is_a_result_never_an_exception(lines: list[str]) -> None:
    text = "\n".join(lines)
    parsed, diags = parse(text, "haproxy.cfg", haproxy_version="2.8.25")
    n = text.count("\n") + 1
    for d in diags:
        assert d.location is not None and d.location.line is not None
        assert 1 <= d.location.line <= n
    for section in parsed.sections:
        assert section.line <= section.end_line <= n


def test_parsing_from_several_threads_agrees() -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [
        CFG.replace("maxconn 100", f"maxconn {i}") + "backend x\n" * (i % 3) for i in range(40)
    ]
    expected = [sequential(t) for t in texts]
    parser_module._CACHE.clear()
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: parse(t, "haproxy.cfg")[0], texts * 3))
    assert got == expected * 3
