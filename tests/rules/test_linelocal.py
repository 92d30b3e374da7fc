"""``regex.extractAll`` from an earlier text's matches finds what a whole scan finds.

Generated patterns (RE2 syntax that crosses lines, anchors at the text's ends, classes with
and without the newline, flags) and generated sequences of texts that differ in a few
places: whenever ``line_local`` accepts a pattern, the reused answer must equal the whole
scan for every text of the sequence. Accepting a pattern that is not line-local (``a\\sb``,
``^x`` without ``m``, ``(?s).``, ``[\\t-\\r]``) makes this fail.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.validation.rules import natives
from controller.validation.rules.linelocal import Scans, line_local

ATOMS = [
    "a",
    "b",
    "é",
    " ",
    "#",
    ".",
    "\\S",
    "\\s",
    "\\d",
    "\\w",
    "\\W",
    "\\D",
    "\\b",
    "\\B",
    "^",
    "$",
    "\\A",
    "\\z",
    "\\n",
    "\n",
    "\\t",
    "[^#\\s]",
    "[^\\n]",
    "[ \\t]",
    "[a-c]",
    "[\\t-\\r]",
    "[^a]",
    "[^]a]",
    "[\\x00-z]",
    "[-a]",
    "[a-]",
    "\\.",
    "x*",
    "",
]
FLAGS = ["", "(?m)", "(?s)", "(?i)", "(?U)", "(?ms)", "(?mi)", "(?-m)"]

atom = st.sampled_from(ATOMS)
piece = st.one_of(
    atom,
    st.tuples(atom, st.sampled_from(["*", "+", "?", "{0,2}", "*?"])).map("".join),
)
sequence = st.lists(piece, min_size=1, max_size=5).map("".join)
body = st.one_of(
    sequence,
    st.tuples(sequence, sequence).map(lambda p: f"{p[0]}({p[1]})"),
    st.tuples(sequence, sequence).map(lambda p: f"(?:{p[0]}|{p[1]})"),
    st.tuples(sequence, sequence, sequence).map(lambda p: f"{p[0]}({p[1]}|{p[2]})"),
)
patterns = st.tuples(st.sampled_from(FLAGS), body).map("".join)

text = st.text(alphabet="ab é#\n\t\r.1x", max_size=120)
edit = st.tuples(st.integers(0, 200), st.integers(0, 8), text)


def _compiled(pattern: str) -> re2.Pattern | None:
    try:
        return natives._compiled(pattern)
    except ValueError:
        return None


def _whole(rx: re2.Pattern, t: str) -> list[str]:
    return [v for _, v in natives._matches(rx, t)]


def _edited(base: str, edits: list[tuple[int, int, str]]) -> Iterator[str]:
    t = base
    for at, cut, insert in edits:
        at = min(at, len(t))
        t = t[:at] + insert + t[at + cut :]
        yield t


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns, st.lists(text, min_size=1, max_size=6), st.lists(edit, max_size=6))
def test_reused_matches_are_the_whole_scan(
    pattern: str, lines: list[str], edits: list[tuple[int, int, str]]
) -> None:
    rx = _compiled(pattern)
    if rx is None or not line_local(pattern):
        return
    # As configured, and with shared blocks looked for in the middle at any size.
    for scans in (Scans(), Scans(min_block=1)):
        base = "\n".join(lines)
        for t in [base, *_edited(base, edits), base]:
            found = scans.extract(pattern, t, lambda s: natives._matches(rx, s))
            assert found == _whole(rx, t), (pattern, t)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("a\\sb", "a\nb"),
        ("^x", "x\nx"),
        ("x$", "x\nx"),
        ("(?s)x.x", "x\nx"),
        ("x[\\t-\\r]x", "x\nx"),
        ("x[^a]x", "x\nx"),
        ("x\\Wx", "x\nx"),
        ("(?m)\\Ax", "x\nx"),
        ("x(?s:.)x", "x\nx"),
    ],
)
def test_patterns_that_read_across_lines_are_refused(pattern: str, text: str) -> None:
    """Each refusal matters: by lines, these would find something else than the whole scan."""
    assert not line_local(pattern)
    rx = _compiled(pattern)
    assert rx is not None
    by_lines = [v for line in text.split("\n") for v in _whole(rx, line)]
    assert by_lines != _whole(rx, text)


def test_the_quickstart_patterns_are_reused() -> None:
    backends = r"(?m)^backend[ \t]+(\S+)"
    values = r"(?m)^[^#\s]\S*[ \t]+([^\n]*\S)"
    assert line_local(backends) and line_local(values)
    rx = _compiled(values)
    assert rx is not None
    scans = Scans()
    lines = [f"host{i}.example /p{i} be_{i}" for i in range(2000)]
    first = "\n".join(lines) + "\n"
    second = "\n".join([*lines[:1000], "new.example /n be_new", *lines[1000:]]) + "\n"
    for t in (first, second):
        assert scans.extract(values, t, lambda s: natives._matches(rx, s)) == _whole(rx, t)
    assert scans.counts["whole"] == 1 and scans.counts["reused"] == 1
    assert scans.counts["rescanned"] < 100, "only the changed line and its neighbours"


def test_changes_far_apart_rescan_little() -> None:
    """The quickstart's maps are joined into one text: a new Ingress changes paths.map and
    prefixes.map, far apart. The block between is found again, and only the changed lines'
    neighbourhood is scanned. Shifting the block's matches wrongly, or taking a block that
    differs, fails the comparison with the whole scan."""
    values = r"(?m)^[^#\s]\S*[ \t]+([^\n]*\S)"
    rx = _compiled(values)
    assert rx is not None
    paths = [f"host{i}.example/p be_{i}" for i in range(3000)]
    prefixes = [f"host{i}.example/ be_{i}" for i in range(3000)]
    scans = Scans()
    for k in range(5):
        new = f"host{1000 + 7 * k}x.example"
        t = (
            "\n".join(
                [
                    *paths[: 1000 + 7 * k],
                    f"{new}/p be_new{k}",
                    *paths[1000 + 7 * k :],
                    *prefixes[: 2000 - 5 * k],
                    f"{new}/ be_new{k}",
                    *prefixes[2000 - 5 * k :],
                ]
            )
            + "\n"
        )
        assert scans.extract(values, t, lambda s: natives._matches(rx, s)) == _whole(rx, t)
    assert scans.counts["whole"] == 1 and scans.counts["reused"] == 4
    assert scans.counts["rescanned"] < 4 * 4 * 4096, "the block between the changes is reused"


def test_remembered_texts_stay_under_their_cap() -> None:
    scans = Scans(max_chars=10_000)
    rx = _compiled("(?m)^(a+)")
    assert rx is not None
    for k in range(20):
        scans.extract(
            f"(?m)^(a+){{{k},}}", "a\n" * 2_000 + str(k), lambda s: natives._matches(rx, s)
        )
    assert scans._chars <= 10_000
    scans.extract("(?m)^(a+)", "a\n" * 6_000, lambda s: natives._matches(rx, s))
    assert scans._chars <= 10_000  # a text past half the cap is not kept at all


def test_only_the_evaluation_worker_keeps_texts() -> None:
    """The controller's own evaluations keep nothing: their memory is the controller's."""
    assert natives._scans is None
