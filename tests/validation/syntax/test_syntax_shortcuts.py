"""The cold path's shortcuts find exactly what the plain code finds.

The directive policy and the file-reference rule skip, in one set lookup and one token scan,
the directives they cannot possibly flag (most lines of a never-seen configuration), and the
syntax stage keeps the cyclic collector paused. Both checks run before ``haproxy -c`` may
start, so a shortcut that skipped too much would let a denied directive or an outside file
through: these properties compare each shortcut with the straightforward reading it replaces,
on configurations built from the very words the checks look for.
"""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.diagnostics import Diagnostic
from controller.validation import gcpause
from controller.validation.gcpause import GcPause, paused_gc
from controller.validation.parsed import ParsedConfig, Section
from controller.validation.syntax import filerefs, parse, policy

KEYWORDS = [
    "server",
    "default-server",
    "bind",
    "server-template",
    "peer",
    "load",
    "acl",
    "use_backend",
    "http-request",
    "http-response",
    "http-error",
    "errorfile",
    "filter",
    "crt-base",
    "ca-base",
    "key-base",
    "default-path",
    "lua-load",
    "wurfl-patch-file",
    "stats-file",
    "ssl-engine",
    "option",
    "option external-check",
    "no option external-check",
    "external-check",
    "setenv",
    "backing-file",
    "insecure-fork-wanted",
    "log",
    "mode",
    "balance",
]
WORDS = [
    "crt",
    "ca-file",
    "crl-file",
    "key",
    "crt-list",
    "name",
    "weight",
    "check",
    "{",
    "}",
    "-f",
    "-m",
    "config",
    "file",
    "lf-file",
    "return",
    "deny",
    "status",
    "if",
    "x.pem",
    "certs/a.pem",
    "../up.pem",
    "/etc/passwd",
    "maps/a.map",
    "var(txn.h),map(maps/h.map,be)",
    "%[req.hdr(host),map_str(maps/p.map)]",
    "var(txn.h),jwt_verify(RS256,certs/k.pem)",
    "%[req.hdr(a),jwt_verify(txn.a,/etc/passwd)]",
    "jwt_verify",
    "mapping",
    "external-check",
    '"${HOME}"',
    '"$PATH"',
    "s1",
    "127.0.0.1:80",
]
SECTIONS = ["global", "defaults", "frontend fe", "backend be", "crt-store st", "ring r"]

_line = st.builds(
    lambda k, ws: "    " + " ".join([k, *ws]),
    st.sampled_from(KEYWORDS),
    st.lists(st.sampled_from(WORDS), max_size=6),
)
_section = st.builds(
    lambda h, body: "\n".join([h, *body]), st.sampled_from(SECTIONS), st.lists(_line, max_size=8)
)
_config = st.lists(_section, min_size=1, max_size=5).map(lambda s: "\n".join(s) + "\n")


def _parsed(text: str) -> ParsedConfig:
    parsed, _ = parse(text, "haproxy.cfg")
    return parsed


def _plain_refs(parsed: ParsedConfig) -> list[filerefs.FileRef]:
    """file_references without the shortcut and without the per-section cache."""
    out: list[filerefs.FileRef] = []
    state = filerefs._State(config_dir=filerefs._dirname(parsed.file))
    for section in parsed.sections:
        state.store_crt = state.store_key = None
        for d in section.directives:
            out.extend(filerefs._refs_of(d, section.keyword, state))
    return out


def _plain_findings(section: Section) -> list[tuple[str, Diagnostic]]:
    """The policy's reading of one section, directive by directive, without the shortcut."""
    out: list[tuple[str, Diagnostic]] = []
    header = section.header
    if section.keyword == "program":
        denial = policy.DENIED_DIRECTIVES["program"]
        out.append(("program", policy._deny(denial, header, header.tokens[0], "section")))
    out.extend(policy._env(header))
    for d in section.directives:
        matched = policy._match(d)
        if matched is not None:
            out.append((matched.name, policy._deny(matched, d, d.tokens[0], "directive")))
        out.extend(policy._env(d))
    return out


@settings(max_examples=150, deadline=None)
@given(_config)
def test_file_reference_shortcut_skips_only_what_finds_nothing(text: str) -> None:
    parsed = _parsed(text)
    filerefs._SILENT.clear()
    assert filerefs.file_references(parsed) == _plain_refs(parsed)


@settings(max_examples=150, deadline=None)
@given(_config)
def test_policy_shortcut_skips_only_what_finds_nothing(text: str) -> None:
    for section in _parsed(text).sections:
        assert policy._section_findings(section) == _plain_findings(section)


def test_the_vocabulary_reaches_every_kind_of_finding() -> None:
    """So the properties above are not vacuous."""
    text = (
        "global\n    lua-load x.lua\n    setenv A b\n    crt-base certs\n"
        "defaults\n    option external-check\n"
        'backend be\n    server s1 127.0.0.1:80 crt x.pem\n    http-request set-var(txn.x) "${HOME}"\n'
        "    use_backend %[req.hdr(host),map_str(maps/p.map)]\n    errorfile 503 /etc/passwd\n"
        "    use_backend %[req.hdr(a),jwt_verify(RS256,certs/k.pem)]\n"
    )
    parsed = _parsed(text)
    names = {name for s in parsed.sections for name, _ in policy._section_findings(s)}
    assert {"lua-load", "setenv", "env-expansion", "external-check"} <= names
    options = {r.option for r in filerefs.file_references(parsed)}
    assert {"crt", "map()", "jwt_verify()", "errorfile", "lua-load"} <= options


def test_gc_pause_nests_and_restores() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    pause = GcPause().begin()
    pause.begin()  # idempotent
    pause.end()
    pause.end()
    assert gc.isenabled()


def test_gc_pauses_that_overlap_for_too_long_still_collect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Node:
        other: object = None

    outer = GcPause().begin()
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector frees it
        gone = weakref.ref(a)
        del a, b
        with paused_gc():
            assert gone() is not None  # paused: the cycle is still there
        monkeypatch.setattr(gcpause, "MAX_PAUSE_S", 0.0)
        with paused_gc():  # the collector has been off "too long": this pause collects first
            assert gone() is None
            assert not gc.isenabled()
    finally:
        outer.end()
    assert gc.isenabled()


def test_gc_pause_leaves_a_callers_choice_alone() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_gc_pauses_overlapping_across_threads_end_enabled() -> None:
    inside = threading.Barrier(4)

    def work() -> None:
        with paused_gc():
            inside.wait(timeout=5)  # all four pauses are active at once here
        for _ in range(50):
            with paused_gc():
                pass

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()
