"""The lean gate lets ``haproxy -c`` start early only when the full checks will pass.

The pipeline starts ``haproxy -c`` as soon as :func:`lean_gate` answers True, before the full
parse has finished, so a gate that said True too often would let a denied directive or an
outside file reach the binary. These properties hold it to two promises over generated
configurations built from every denied keyword, every file-referencing keyword and option,
and the quoting, escaping, comment, conditional and scope tricks that make a line read
differently from its plain words:

* wherever the lean reading accepts a file, the policy and the file-reference rule find
  exactly what they find on the full parse (same diagnostics, same order, same locations);
* wherever the gate says True, the real syntax stage reports no policy or file-reference
  error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.diagnostics import Diagnostic, Phase
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation.stage import StageContext
from controller.validation.syntax import (
    ALLOW_NAMES,
    DENIED_DIRECTIVES,
    SyntaxStage,
    check_file_refs,
    check_policy,
    filerefs,
    parse,
    policy,
)
from controller.validation.syntax import parser as parser_module
from controller.validation.syntax.gate import lean_gate, lean_reading
from controller.validation.syntax.stage import _for_any_version
from tests.validation.syntax.syntax_kit import fileset as corpus_fileset
from tests.validation.syntax.syntax_kit import load_cases

DENIED = sorted(
    n for n, d in DENIED_DIRECTIVES.items() if d.where != "any token with a variable reference"
)
PATH_KEYWORDS = sorted(
    {*filerefs._PATH_KEYWORDS, *filerefs._BASES, "default-path", "errorfile", "acl", "filter"}
)
OPTION_LINES = sorted(filerefs.OPTION_LINES)
KEYWORDS = [
    *DENIED,
    *PATH_KEYWORDS,
    *OPTION_LINES,
    "server s1 127.0.0.1:80",
    "server-template s 3 127.0.0.1:80",
    "bind :443",
    "peer p1 127.0.0.1:1",
    "load crt",
    "use_backend be if { path -f",
    "tcp-request content reject if { src -m ip -f",
    *sorted(filerefs._HTTP_RULES),
    "http-error",
    "option external-check",
    "no option external-check",
    "option httplog",
    "use_backend",
    "log",
    "mode",
    "balance",
    "maxconn",
]
PLAIN_WORDS = [
    *sorted(filerefs.SSL_PATH_OPTIONS),
    *sorted(filerefs._RESPONSE_PATHS),
    "return",
    "deny",
    "status",
    "if",
    "{",
    "}",
    "-f",
    "-m",
    "config",
    "current",
    "origin",
    "parent",
    "x.pem",
    "certs",
    "certs/a.pem",
    "x.lua",
    "maps/a.map",
    "maps/none.map",
    "../up.pem",
    "/etc/passwd",
    "var(txn.h),map(maps/a.map,be)",
    "%[req.hdr(host),map_str(maps/none.map)]",
    "var(txn.h),jwt_verify(RS256,x.pem)",
    "%[req.hdr(a),jwt_verify(txn.a,/etc/passwd)]",
    "req.hdr(a),jwt_verify(RS256,../up.pem)",
    "external-check",
    "@system-ca",
    "$HOME",
    "${HOME}",
    "s1",
    "127.0.0.1:80",
]
#: Words that read differently from their letters: quoting, escapes, expansion, comments.
HOSTILE_WORDS = [
    '"${HOME}"',
    '"$PATH"',
    '"${.LINE}"',
    '"${.SECTION}"',
    '"x.pem"',
    "'x.pem'",
    '"/etc/passwd"',
    "'..'/up.pem",
    '"lua-load"',
    "lua\\-load",
    '"ma"p(maps/none.map)',
    ',jwt_ver"ify"(RS256,/etc/passwd)',
    "\"req.hdr(a),map('maps/a.map,/../x')\"",
    "'%[req.hdr(a),jwt_verify(RS256,\"x.pem]\")]'",
    "\\#",
    "#",
    "# lua-load x.lua",
    '"{"',
    "\\x41",
    '""',
    "\\",
    "é.pem",
    "a\rb",
    "a\vb",
]
HOSTILE_LINES = [
    ".if 1",
    ".if 0",
    ".if version_atleast(9.0)",
    ".elif 1",
    ".else",
    ".endif",
    ".notice hi",
    '".if" 1',
    '".if" 0',
    "'.endif'",
    '".else"',
    "\\.if 1",
    "[scope]",
    "  # a comment",
    '"lua-load" x.lua',
    "'setenv' A b",
    "lua-lo'ad' x.lua",
    '"backend" quoted',
    '"program" p',
    " ".join(["w"] * 64),
    " ".join(["w"] * 63) + " ",
    "x\x00y",
]
HEADERS = [
    "global",
    "defaults",
    "frontend fe",
    "backend be",
    "crt-store st",
    "ring r",
    "program p",
    "userlist u",
]
FILES = FileSet.of(
    [
        FileEntry(p, FileKind.CERT if p.endswith(".pem") else FileKind.MAP, b"x\n")
        for p in ("x.pem", "certs/a.pem", "certs/x.pem", "maps/a.map", "x.lua", "errors/503")
    ]
)


def _line(words: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(
        lambda indent, k, ws: indent + " ".join([k, *ws]),
        st.sampled_from(["    ", "\t", "", "  \t "]),
        st.sampled_from(KEYWORDS),
        st.lists(words, max_size=6),
    )


_plain_line = _line(st.sampled_from(PLAIN_WORDS))
_any_line = st.one_of(
    _plain_line,
    _line(st.sampled_from(PLAIN_WORDS + HOSTILE_WORDS)),
    st.sampled_from(HOSTILE_LINES).map(lambda s: "    " + s),
    st.sampled_from(HOSTILE_LINES).map(lambda s: "    " + s),
    st.just(""),
)


def _config(lines: st.SearchStrategy[str], *, tricks: bool = True) -> st.SearchStrategy[str]:
    """Sections of ``lines``; with ``tricks``, also text before the first section and a
    missing final newline."""
    section = st.builds(
        lambda h, body: "\n".join([h, *body]), st.sampled_from(HEADERS), st.lists(lines, max_size=8)
    )
    before = ["", "\n", "# top\n", "maxconn 1\n", "  \n"] if tricks else [""]
    ends = ["\n", "\n", "\n", ""] if tricks else ["\n"]
    return st.builds(
        lambda pre, sections, end: "".join(pre) + "\n".join(sections) + end,
        st.lists(st.sampled_from(before), max_size=2),
        st.lists(section, min_size=1, max_size=5),
        st.sampled_from(ends),
    )


_allow = st.sets(st.sampled_from(sorted(ALLOW_NAMES)), max_size=4)


def _security(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The policy's and the file-reference rule's errors (E21xx, E22xx)."""
    return [d for d in diagnostics if d.rule_id[:3] in ("E21", "E22")]


def _full_checks(text: str, allow: frozenset[str], files: FileSet) -> list[Diagnostic]:
    parsed, _ = parse(text, "haproxy.cfg")
    guarded = _for_any_version(parsed, text, "haproxy.cfg", None)
    return [*check_policy(guarded, allow), *check_file_refs(guarded, files)]


def _stage_findings(text: str, allow: frozenset[str], files: FileSet) -> list[Diagnostic]:
    entries = [FileEntry("haproxy.cfg", FileKind.CONFIG, text.encode("utf-8", "surrogateescape"))]
    entries += [files.files[p] for p in files.files]
    ctx = StageContext(render=RenderResult(files=FileSet.of(entries)), haproxy_version="2.8.25")
    outcome = asyncio.run(SyntaxStage(allow).run(ctx))
    return _security(list(outcome.diagnostics))


def _with_config(text: str, files: FileSet) -> FileSet:
    entries = [FileEntry("haproxy.cfg", FileKind.CONFIG, text.encode("utf-8", "surrogateescape"))]
    return FileSet.of(entries + [files.files[p] for p in files.files])


def _clear_caches() -> None:
    policy._CLEAN.clear()
    filerefs._SILENT.clear()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_config(_any_line), _allow, st.booleans())
def test_the_lean_reading_finds_what_the_full_parse_finds(
    text: str, allow: set[str], lean_first: bool
) -> None:
    lean = lean_reading(text, "haproxy.cfg")
    if lean is None:
        return
    allowed = frozenset(allow)
    files = _with_config(text, FILES)
    _clear_caches()  # then the caches one reading fills are read by the other
    if lean_first:
        got = [*check_policy(lean, allowed), *check_file_refs(lean, files)]
        want = _full_checks(text, allowed, files)
    else:
        want = _full_checks(text, allowed, files)
        got = [*check_policy(lean, allowed), *check_file_refs(lean, files)]
    assert got == want


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_config(_any_line), _allow)
def test_gate_clean_means_the_stage_finds_no_security_error(text: str, allow: set[str]) -> None:
    allowed = frozenset(allow)
    if lean_gate(_with_config(text, FILES), allowed):
        assert _stage_findings(text, allowed, FILES) == []


@settings(max_examples=150, deadline=None)
@given(_config(_plain_line, tricks=False), _allow)
def test_on_plain_configs_the_gate_decides_exactly(text: str, allow: set[str]) -> None:
    """Without tricks the gate is not merely cautious: it says True exactly when the stage
    finds nothing (so it does shorten the path whenever it could)."""
    allowed = frozenset(allow)
    stage_clean = _stage_findings(text, allowed, FILES) == []
    assert lean_gate(_with_config(text, FILES), allowed) == stage_clean


BASE = "global\n    maxconn 10\nfrontend fe\n    bind 127.0.0.1:80 crt x.pem\n"


def test_the_gate_passes_a_clean_config_with_quotes_and_comments() -> None:
    text = BASE + '    # routed\n    http-request return status 404 string "no\\n" if { path /x }\n'
    assert lean_gate(_with_config(text, FILES))


@pytest.mark.parametrize("line", [*HOSTILE_LINES, *(f"log {w}" for w in HOSTILE_WORDS)])
def test_every_trick_is_either_read_exactly_or_declined(line: str) -> None:
    text = BASE + "    " + line + "\n"
    lean = lean_reading(text, "haproxy.cfg")
    files = _with_config(text, FILES)
    if lean is not None:
        _clear_caches()
        got = [*check_policy(lean), *check_file_refs(lean, files)]
        assert got == _full_checks(text, frozenset(), files)
    if lean_gate(files):
        assert _stage_findings(text, frozenset(), FILES) == []


@pytest.mark.parametrize(
    "line",
    [
        *(f"{name} x.lua" for name in DENIED if name != "program"),
        "option external-check",
        "crt-base /etc\n    bind 127.0.0.1:81 ssl crt x.pem",
        "errorfile 503 /etc/passwd",
        "errorfile 503 errors/none",
        "http-request set-header x %[req.hdr(host),map(maps/none.map)]",
        "use_backend %[req.hdr(a),jwt_verify(RS256,/etc/passwd)]",
        "tcp-request content set-var(txn.k) req.hdr(a),jwt_verify(RS256,../up.pem)",
        "acl a path -f ../up.lst",
        "lua-load x.lua",
        'http-request set-var(txn.x) "${HOME}"',
        '"lua-load" x.lua',
        "lua-lo'ad' x.lua",
        '"${HOME}" x',
        "server s1 127.0.0.1:80 ca-file /etc/ssl/ca.pem",
    ],
)
def test_the_gate_refuses_every_denied_or_outside_line(line: str) -> None:
    text = BASE + "    " + line + "\n"
    assert not lean_gate(_with_config(text, FILES))
    assert _stage_findings(text, frozenset(), FILES)


def test_the_gate_declines_what_it_cannot_read_plainly() -> None:
    for text in (
        ".if 1\n" + BASE + ".endif\n",
        BASE + "    [scope]\n",
        "maxconn 1\n" + BASE,
        BASE.rstrip("\n"),
        BASE + "    x\x00\n",
    ):
        assert lean_reading(text, "haproxy.cfg") is None, repr(text)
        parser_module._CACHE.clear()  # no earlier parse to take the full one from
        assert not lean_gate(_with_config(text, FILES))


#: Plain sections around an edit, so that the edit is a small part of the text.
PAD = "".join(f"backend pad{i}\n    server s 127.0.0.1:{i + 1}\n" for i in range(60))


def test_near_an_earlier_parse_the_gate_reads_the_full_parse() -> None:
    """After a parse of a close text the gate judges the full parse itself (a scope line is
    then no obstacle), and declines whatever has a syntax diagnostic."""
    parser_module._CACHE.clear()
    parse(BASE, "haproxy.cfg")
    text = BASE + "    [scope]\n"
    assert lean_gate(_with_config(text, FILES))
    assert _stage_findings(text, frozenset(), FILES) == []
    for bad in (BASE + '    log "open\n', BASE.rstrip("\n"), BASE + "maxconn\n    lua-load x\n"):
        parse(BASE, "haproxy.cfg")
        assert not lean_gate(_with_config(bad, FILES)), repr(bad)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_config(_any_line), _config(_any_line), _allow)
def test_gate_clean_near_an_earlier_parse_means_the_stage_finds_nothing(
    before: str, after: str, allow: set[str]
) -> None:
    """The gate's full-parse path: a text spliced from an earlier one (the two share their
    start) is cleared only when the stage finds no policy or file-reference error."""
    allowed = frozenset(allow)
    parser_module._CACHE.clear()
    parse(BASE + PAD + before + "\n" + PAD, "haproxy.cfg")
    text = BASE + PAD + after + "\n" + PAD
    if lean_gate(_with_config(text, FILES), allowed):
        assert _stage_findings(text, allowed, FILES) == []


def test_a_program_section_is_refused_unless_allowed() -> None:
    text = BASE + "program p\n    command true\n"
    assert not lean_gate(_with_config(text, FILES))
    assert lean_gate(_with_config(text, FILES), {"program"})


CORPUS = load_cases()


@pytest.mark.parametrize("allow", [frozenset(), ALLOW_NAMES], ids=["deny", "allow-all"])
def test_the_corpus_agrees(allow: frozenset[str]) -> None:
    read = passed = 0
    for case in CORPUS:
        files = corpus_fileset(case.content)
        text = case.content.decode("utf-8", "surrogateescape")
        lean = lean_reading(text, "haproxy.cfg")
        if lean is not None:
            read += 1
            _clear_caches()
            got = [*check_policy(lean, allow), *check_file_refs(lean, files)]
            assert got == _full_checks(text, allow, files), case.name
        if lean_gate(files, allow):
            passed += 1
            ctx = StageContext(render=RenderResult(files=files), haproxy_version=None)
            outcome = asyncio.run(SyntaxStage(allow).run(ctx))
            assert _security(list(outcome.diagnostics)) == [], case.name
    assert read >= len(CORPUS) // 2 and passed >= 10  # not vacuous


def test_a_lean_cleared_file_fills_the_checks_caches_for_the_next_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A candidate unlike the recent ones is cleared from the lean reading, which holds only
    the sections the checks could act on. The stage's own run checks its full parse too
    (while haproxy -c runs), so the next candidate's gate, which reads a near parse of
    every section, finds them known and checks only what changed, before haproxy -c starts."""
    _clear_caches()
    backends = "".join(
        f"backend lean-fill-{i}\n    server s{i} 127.0.0.1:{1000 + i}\n" for i in range(60)
    )
    base = "global\n    maxconn 100\ndefaults\n    mode http\n" + backends
    stage = SyntaxStage()

    def candidate(text: str) -> StageContext:
        return StageContext(render=RenderResult(files=_with_config(text, FileSet.of([]))))

    cold = candidate(base)
    assert stage.gate(cold) is True
    assert cold.lean_read == frozenset({"haproxy.cfg"})
    cold.cleared = frozenset({Phase.SYNTAX})  # what the pipeline records for a True gate
    assert asyncio.run(stage.run(cold)).diagnostics == []

    looked: list[str] = []
    real = policy._section_findings

    def counting(section: Any) -> Any:
        looked.append(section.keyword)
        return real(section)

    monkeypatch.setattr(policy, "_section_findings", counting)
    warm = candidate(base.replace("127.0.0.1:1030", "127.0.0.1:2030"))
    assert stage.gate(warm) is True
    assert warm.lean_read == frozenset()  # a near parse: no lean reading
    assert looked == ["backend"]  # only the changed section; the other 61 were known
