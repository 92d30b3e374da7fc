"""The lean security gate: may ``haproxy -c`` start before the full parse has finished?

The directive policy and the file-reference rule must clear a candidate before any HAProxy
binary reads it, but they look at few lines: a keyword the policy names, a line the
file-reference rule does not skip (see the shortcuts in ``policy`` and ``filerefs``). Spans,
section hashes of every section and the schema's reading are not needed for that decision,
so the pipeline can start ``haproxy -c`` after this gate and build the full
:class:`ParsedConfig` while the binary works.

The gate only ever *allows*; it never reports. It reads a file line by line with
``str.split`` — which is exactly HAProxy's word splitting when a line holds nothing but tab and
printable ASCII other than quotes, backslash and ``#`` — and sends every other line through the
full tokenizer, as the parser does. The lines the two checks could act on, grouped in their
sections, go to the very same check functions. Whatever would make the parser's reading
differ from such a plain walk (dot directives and conditional blocks, scopes, lines HAProxy
refuses to split, text before the first section, a NUL, a missing final newline) makes the
gate answer "not established": the caller then waits for the full syntax stage as before.
So a ``True`` means the full checks will find exactly what they found here, which is
nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterator

from controller.render import FileKind, FileSet
from controller.validation.keywords import MAX_LINE_ARGS, SECTION_KEYWORDS
from controller.validation.parsed import Directive, ParsedConfig, Section, Token
from controller.validation.syntax import build
from controller.validation.syntax.filerefs import (
    CONVERTER_MARKS,
    OPTION_LINES,
    REF_KEYWORDS,
    SSL_PATH_OPTIONS,
    check_file_refs,
)
from controller.validation.syntax.parser import parse_near
from controller.validation.syntax.policy import POLICY_KEYWORDS, check_policy
from controller.validation.syntax.tokenizer import BLANKS, NEEDS_FULL, fast_tokens, tokenize

__all__ = ["lean_gate", "lean_reading"]

#: First words the policy or the file-reference rule look at by name (option lines aside).
_NAMED = frozenset({*POLICY_KEYWORDS, *REF_KEYWORDS})
_PATH_OPTIONS = frozenset(SSL_PATH_OPTIONS)


def lean_gate(files: FileSet, allow: Collection[str] = (), lean: set[str] | None = None) -> bool:
    """True only when the directive policy and the file-reference rule, run on the full
    parse of every configuration file, will report nothing; False when that is not certain
    from the cheap reading (the caller must then wait for the full checks).

    A file that differs little from one parsed shortly before (a candidate after the live
    configuration, or one admission proposal after another) has its full parse at the price
    of the difference (``parser.parse_near``), cheaper than the lean reading, which visits
    every line: then the checks read that parse itself, and the stage's own parse of the same
    text is a look-up. A parse with any syntax diagnostic is "not established", as a line the
    lean reading cannot split is. ``lean`` receives the paths cleared from the lean reading
    (no full parse behind the answer)."""
    for entry in files:
        if entry.kind is not FileKind.CONFIG:
            continue
        text = entry.content.decode("utf-8", "surrogateescape")
        near = parse_near(text, entry.path)
        if near is not None:
            if near[1]:
                return False
            parsed: ParsedConfig | None = near[0]
        else:
            parsed = lean_reading(text, entry.path)
            if lean is not None:
                lean.add(entry.path)
        if parsed is None:
            return False
        if check_policy(parsed, allow) or check_file_refs(parsed, files):
            return False
    return True


def lean_reading(text: str, file: str) -> ParsedConfig | None:
    """The sections of ``text`` with their headers and only the directives the policy or
    the file-reference rule could act on — equal, token for token and line for line, to
    those of the full parse — or None when the text is not plain enough to be sure.

    A plain line is split with ``str.split``; a line holding anything else (quotes, escapes,
    ``#``, control or non-ASCII characters) goes through the full tokenizer, exactly as the
    parser sends it, and is always kept. Section hashes are those of the full parse, so the
    checks' per-section caches mean the same thing whichever reading filled them.
    """
    if "\x00" in text or (text and not text.endswith("\n")):
        return None
    lines = text.split("\n")
    lines.pop()  # the empty string after the final newline
    hard = _line_numbers(text, NEEDS_FULL.finditer(text))
    marked = _line_numbers(text, _MARKS.finditer(text))
    sections: list[Section] = []
    # The open section: its header line's index, words and (for a hard line) tokens.
    header: tuple[int, list[str], tuple[Token, ...] | None] | None = None
    name: str | None = None  # the section name ${.SECTION} expands to
    body: list[Directive] = []
    for i, line in enumerate(lines):
        tokens: tuple[Token, ...] | None = None
        if i not in hard:
            words = line.split()
            if not words:
                continue
            first = words[0]
            if first[0] in "[." or (len(line) > _SHORTEST_REFUSED and len(words) >= MAX_LINE_ARGS):
                return None  # a scope, a dot directive or conditional, or a refused line
        else:
            if line.lstrip(BLANKS)[:1] == "[":
                return None
            tokens, error = tokenize(line, line_no=i + 1, file=file, section=name, fast=False)
            if error is not None:
                return None  # the parser reports it and drops the line
            if not tokens or not tokens[0].value:
                continue  # a comment, or a line HAProxy ignores
            first = tokens[0].value
            if first[0] == ".":
                return None
            words = []
        if first in SECTION_KEYWORDS:
            if header is not None:
                _close(sections, file, lines, header, body, i)
            header, body = (i, words, tokens), []
            if tokens is not None:
                name = tokens[1].value if len(tokens) > 1 and tokens[1].value else first
            else:
                name = words[1] if len(words) > 1 else first
        elif header is None:
            return None  # the parser reports and drops a line before any section
        elif (
            tokens is not None
            or first in _NAMED
            or i in marked
            or (first in OPTION_LINES and not _PATH_OPTIONS.isdisjoint(words))
        ):
            body.append(build.directive(file, i + 1, tokens or fast_tokens(line, words), False))
    if header is not None:
        _close(sections, file, lines, header, body, len(lines))
    return ParsedConfig(file, tuple(sections), ())


#: Lines the file-reference rule may not skip whatever their keyword (see ``filerefs``): an
#: anonymous ACL, or a word that may hold a file-naming converter (``map*``, ``jwt_verify``).
_MARKS = re.compile("|".join([r"\{", *(re.escape(m) for m in CONVERTER_MARKS)]))
#: A 64-word line is at least this long (64 one-letter words, 63 blanks between).
_SHORTEST_REFUSED = 2 * MAX_LINE_ARGS - 2


def _line_numbers(text: str, matches: Iterator[re.Match[str]]) -> set[int]:
    """0-based indexes of the lines the matches fall on."""
    out: set[int] = set()
    line = at = 0
    for m in matches:
        pos = m.start()
        line += text.count("\n", at, pos)
        at = pos
        out.add(line)
    return out


def _close(
    sections: list[Section],
    file: str,
    lines: list[str],
    header: tuple[int, list[str], tuple[Token, ...] | None],
    body: list[Directive],
    end: int,
) -> None:
    """Keep the section unless neither check can find anything in it: a plain header of a
    section other than ``program`` with no directive kept (nothing for the policy, and no
    directive for the file-reference rule to resolve)."""
    start, words, tokens = header
    if not body and tokens is None and words[0] != "program":
        return
    line = lines[start]
    head = build.directive(file, start + 1, tokens or fast_tokens(line, words), False)
    sections.append(_section(head, body, lines, start, end))


def _section(
    header: Directive, body: list[Directive], lines: list[str], start: int, end: int
) -> Section:
    text = "\n".join(lines[start:end]) + "\n"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return build.section(header, tuple(body), header.line + (end - start) - 1, digest)
