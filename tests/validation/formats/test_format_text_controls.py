"""The text format never passes terminal control characters through, and carets stay aligned.

A configuration word can carry ESC sequences (retitle the window, recolour the terminal, move
the cursor) into a message and into the quoted line; both are printed with ``\\xNN`` escapes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from controller.diagnostics import ObjectRef, Phase, TemplateLocation
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import format_report
from tests.validation.formats.formats_kit import Says, finding, report_with

EVIL = "option bogus\x1b]0;PWNED\x07\x1b[31mRED"
LINE = "    " + EVIL
CFG = ("global\n    maxconn 1\ndefaults\n" + LINE + "\n").encode()


def _render(content: bytes) -> RenderResult:
    return RenderResult(files=FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, content)]))


def _text(content: bytes, **kw: object) -> str:
    d = finding("E3006", Phase.SCHEMA, **kw)  # type: ignore[arg-type]
    render = _render(content)
    return format_report(report_with(Says(Phase.SCHEMA, [d]), render=render), "text", render=render)


def _no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert bad == [], bad


def test_controls_in_message_and_line_are_escaped() -> None:
    word = EVIL.split(" ", 1)[1]
    out = _text(CFG, line=4, column=12, end=4 + len(EVIL), msg=f"unknown option {word!r}")
    _no_controls(out)
    head, src, caret = out.splitlines()[:3]
    assert "bogus\\x1b]0;PWNED\\x07\\x1b[31mRED" in head
    assert src.endswith("    option bogus\\x1b]0;PWNED\\x07\\x1b[31mRED")
    start = src.index("| ") + 2
    marks = [i - start for i, c in enumerate(caret) if c == "^"]
    # Under the escaped word exactly: from the "b" of bogus to the "D" at the end.
    assert src[start + marks[0]] == "b" and src[start + marks[-1]] == "D"
    assert marks == list(range(marks[0], marks[-1] + 1))


def test_caret_after_an_escape_still_points_at_its_column() -> None:
    # Column 18 is the "]" right after the ESC at column 17.
    out = _text(CFG, line=4, column=18, end=18)
    src, caret = out.splitlines()[1:3]
    start = src.index("| ") + 2
    assert src[start + caret.index("^") - (caret.index("| ") + 2)] == "]"
    assert caret.count("^") == 1


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"caf\xe9", "caf\\xe9"),  # a byte that is not UTF-8: shown as that byte
        # U+2028 breaks lines in some terminals and log viewers; U+202E reverses what follows.
        ("a\u2028b\u202ec".encode(), "a\\u2028b\\u202ec"),
    ],
    ids=["not-utf8", "separator-and-bidi"],
)
def test_invisible_characters_show_escaped_and_keep_alignment(raw: bytes, shown: str) -> None:
    word = raw.decode("utf-8", "surrogateescape")
    cfg = b"global\n    option " + raw + b" x\n"
    out = _text(cfg, line=2, column=12, end=11 + len(word), msg=f"unknown option '{word}'")
    head, src, caret = out.splitlines()[:3]
    assert f"'{shown}'" in head and src.endswith(f"option {shown} x")
    start = src.index("| ") + 2
    marks = [i - (caret.index("| ") + 2) for i, c in enumerate(caret) if c == "^"]
    assert src[start + marks[0] : start + marks[-1] + 1] == shown


def test_template_object_and_crlf_are_safe() -> None:
    d = finding(
        "W3001",
        Phase.SCHEMA,
        line=2,
        column=5,
        end=11,
        template_location=TemplateLocation(template="t\x1b[2J", line=3),
        object=ObjectRef(kind="Ingress", namespace="n\x9b", name="x"),
    )
    render = _render(b"global\r\n    maxconn 1\r\n")
    out = format_report(report_with(Says(Phase.SCHEMA, [d]), render=render), "text", render=render)
    _no_controls(out)
    assert "template: t\\x1b[2J:3" in out and "object: Ingress n\\x9b/x" in out
    assert "    2 |     maxconn 1\n" in out  # the CR of a CRLF line is not shown


def test_junit_stays_well_formed_xml() -> None:
    d = finding("E3006", Phase.SCHEMA, line=4, msg=f"unknown {EVIL!r}")
    render = _render(CFG)
    out = format_report(report_with(Says(Phase.SCHEMA, [d]), render=render), "junit")
    root = ET.fromstring(out)
    failure = root.find(".//failure")
    assert failure is not None and "\\x1b]0;PWNED\\x07" in (failure.text or "")
