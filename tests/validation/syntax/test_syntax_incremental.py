"""The incremental parse gives exactly the full parse.

``parse`` splices a new text from the closest of the last parses of its file (``_Base``):
pieces of the shared start are taken as they are, those of the shared end moved to their new
lines, and only the middle is cut and read. These properties hold it to the full parse —
every section, directive, token and line, every diagnostic with its location — over random
edits of real configurations: the corpus (tests/corpus) and a rendered-size generated one.
Edits insert, delete, replace and duplicate lines and whole sections, and mix in the lines
that force a sequential read (conditional blocks, pseudo-variables, NUL, quotes before a
keyword), a scope line, an unterminated quote, a missing final newline. Each edit is parsed
once incrementally (several bases kept, as in a running controller) and once with every
cache emptied, and the two must be equal; ``parse_near``, when it answers, answers the same.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.diagnostics import Diagnostic
from controller.validation.parsed import ParsedConfig
from controller.validation.syntax import parse
from controller.validation.syntax import parser as parser_module
from controller.validation.syntax.parser import parse_near
from controller.validation.textdiff import common_prefix, common_suffix
from tests.validation.syntax.bench_syntax import config
from tests.validation.syntax.syntax_kit import load_cases

SOURCES = [c.content.decode("utf-8", "surrogateescape") for c in load_cases()]
SOURCES += [config(backends=40, servers=3), config(backends=25, servers=2, changed=7, seed=1)]

#: Lines mixed into edits: real directives and headers, and every kind of line that changes
#: how (or whether) the text is cut into pieces.
EXTRA_LINES = [
    "backend extra",
    "frontend fe2",
    "defaults",
    "    server s9 127.0.0.1:9 check",
    "    balance roundrobin",
    "    timeout client 5s",
    "  backend indented",
    "backend",
    "# a comment",
    "",
    "    ",
    ".if 1",
    ".endif",
    '    http-request set-header X "${.LINE}"',
    '    log "${.SECTION}" local0',
    "    x\x00y",
    '"backend" quoted',
    "'frontend' q",
    "\\backend",
    "    [scope]",
    '    http-request return string "open',
    "maxconn 5",
    "    acl a path -f ../up.lst",
    "    " + " ".join(["w"] * 70),
    "    tcp-request content reject if { src 10.0.0.0/8 }",
    "    http-request set-header Host %[req.hdr(host)]\r",
]


@st.composite
def edited(draw: st.DrawFn, lines: list[str]) -> list[str]:
    """One random edit of ``lines``."""
    out = list(lines)
    kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate", "swap"]))
    at = draw(st.integers(0, len(out)))
    if kind == "insert":
        new = draw(st.lists(st.sampled_from(EXTRA_LINES + lines), min_size=1, max_size=8))
        out[at:at] = new
    elif kind == "delete":
        del out[at : at + draw(st.integers(1, 12))]
    elif kind == "replace" and out:
        i = min(at, len(out) - 1)
        out[i] = draw(st.sampled_from(EXTRA_LINES + lines))
    elif kind == "duplicate":
        span = draw(st.integers(1, 10))
        to = draw(st.integers(0, len(out)))
        out[to:to] = out[at : at + span]
    elif len(out) > 1:
        i, j = sorted(draw(st.lists(st.integers(0, len(out) - 1), min_size=2, max_size=2)))
        out[i], out[j] = out[j], out[i]
    return out


def _text(lines: list[str], final_newline: bool = True) -> str:
    text = "\n".join(lines)
    if final_newline and not text.endswith("\n"):
        text += "\n"
    return text


def _full(text: str) -> tuple[ParsedConfig, list[Diagnostic]]:
    parser_module._CACHE.clear()
    return parse(text, "haproxy.cfg", haproxy_version="2.8.25")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(range(len(SOURCES))), st.integers(1, 5), st.booleans())
def test_a_sequence_of_edits_parses_as_the_full_parse(
    data: st.DataObject, source: int, steps: int, drop_newline: bool
) -> None:
    lines = SOURCES[source].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    texts = [_text(lines)]
    for _ in range(steps):
        lines = data.draw(edited(lines))
        texts.append(_text(lines))
    if drop_newline:
        texts.append(_text(lines, final_newline=False).rstrip("\n"))
    # Incremental: each text parsed right after the earlier ones, with the bases they left.
    parser_module._CACHE.clear()
    incremental = []
    near = []
    for i, text in enumerate(texts):
        near.append(parse_near(text, "haproxy.cfg") if i % 2 else None)
        incremental.append(parse(text, "haproxy.cfg", haproxy_version="2.8.25"))
    for text, got, quick in zip(texts, incremental, near, strict=True):
        want = _full(text)
        assert got == want
        if quick is not None:
            assert quick == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(range(len(SOURCES))))
def test_proposals_against_one_live_base(data: st.DataObject, source: int) -> None:
    """The admission shape: many proposals, each one edit away from the same live text, parsed
    one after another (each is closer to the live text than to the proposal before)."""
    lines = SOURCES[source].split("\n")
    live = _text(lines)
    parser_module._CACHE.clear()
    parse(live, "haproxy.cfg")
    proposals = [_text(data.draw(edited(lines))) for _ in range(4)]
    got = [parse(p, "haproxy.cfg") for p in proposals]
    got.append(parse(live, "haproxy.cfg"))
    for text, result in zip([*proposals, live], got, strict=True):
        parser_module._CACHE.clear()
        assert result == parse(text, "haproxy.cfg")


def test_a_rendered_config_splices_and_keeps_the_live_base() -> None:
    """Not vacuous: near edits of a generated configuration are spliced (parse_near answers)
    and the live text stays among the bases while proposals come and go."""
    live = config(backends=200, servers=3)
    parser_module._CACHE.clear()
    parse(live, "haproxy.cfg")
    for i in range(10):
        proposal = config(backends=200, servers=3, changed=110 + i * 9)
        quick = parse_near(proposal, "haproxy.cfg")
        assert quick is not None
        assert quick == _full(proposal)
        parse(live, "haproxy.cfg")  # the live base comes back into use
        parse(proposal, "haproxy.cfg")
    bases = parser_module._CACHE.bases["haproxy.cfg"]
    assert any(b.text == live for b in bases)
    assert len(bases) <= parser_module._CACHE.bases_per_file


@given(st.text(alphabet="ab\n", max_size=40), st.text(alphabet="ab\n", max_size=40))
def test_common_prefix_and_suffix(a: str, b: str) -> None:
    p = common_prefix(a, b)
    assert a[:p] == b[:p] and (p == min(len(a), len(b)) or a[p] != b[p])
    limit = min(len(a), len(b)) - p
    s = common_suffix(a, b, limit)
    assert s <= limit and a[len(a) - s :] == b[len(b) - s :]
    assert s == limit or a[len(a) - s - 1] != b[len(b) - s - 1]
