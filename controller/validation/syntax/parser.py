"""A whole configuration file → sections, directives and syntax diagnostics.

The walk follows HAProxy's file reader: a line is first split into words (errors there count
even inside a ``.if`` block that is switched off, because HAProxy splits before it looks at
conditions), then conditional blocks decide whether the line counts, then dot directives,
then section headers and section bodies.

HAProxy 2.6 and 2.8 have no line-length limit (their read buffer grows as needed); the limit
that exists is 64 words per line, enforced by the tokenizer.

Rendered configurations change a little at a time (one Ingress → one backend), so results are
cached per section text: a file without dot directives, pseudo-variables or tricky leading
characters is cut at its section headers with one regular-expression scan, and every piece
whose text was seen before is reused, shifted to its new line numbers when it moved.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.validation.keywords import (
    CONDITIONAL_MACROS,
    MAX_LINE_ARGS,
    MAX_NESTED_CONDS,
    MESSAGE_MACROS,
    SECTION_KEYWORDS,
)
from controller.validation.parsed import Directive, ParsedConfig, Section, Token
from controller.validation.syntax import build
from controller.validation.syntax.conditions import Tri, evaluate, tri_and, tri_not, tri_or
from controller.validation.syntax.tokenizer import (
    BLANKS,
    NEEDS_FULL,
    TOKEN_PARTS,
    count_interned,
    fast_tokens,
    intern_table,
    tokenize,
)

__all__ = ["parse"]


_MAX_FATAL = 50  # HAProxy stops reading a file after 50 fatal errors
_SCOPE_NAME = re.compile(r"[A-Za-z0-9._:-]+")

_FIRST = "".join(sorted({k[0] for k in SECTION_KEYWORDS}))
#: One scan over the text (with a newline put in front) finds both the lines that start with a
#: section keyword — where the text is cut into cacheable pieces — and the lines whose first
#: word starts with a quote, backslash or dot: those may hide a dot directive, whose state
#: crosses sections, so such a file is parsed in one sequential pass instead.
_SCAN = re.compile(
    r"\n[ \t\v\f\r]*+(?=["
    + _FIRST
    + r"\"'.\\])(?:([\"'.\\])|(?:"
    + "|".join(re.escape(k) for k in sorted(SECTION_KEYWORDS, key=len, reverse=True))
    + r")(?=[ \t\v\f\r#\n]))"
)


def parse(
    text: str, file: str, *, haproxy_version: str | None = None, any_version: bool = False
) -> tuple[ParsedConfig, list[Diagnostic]]:
    """Parse one HAProxy configuration file.

    ``file`` is the path reported in diagnostics and directives (the deploy-relative path,
    e.g. ``haproxy.cfg``). ``haproxy_version`` (``2.8.25``) lets ``version_atleast()`` /
    ``version_before()`` conditions be decided and version-gated predicates be judged;
    without it such branches are treated as undecided. ``any_version`` keeps the version
    tests undecided all the same (predicates are still judged by the version): the reading
    the directive policy needs, since another HAProxy may take the branches this one skips.
    Never raises on bad input.
    """
    diagnostics: list[Diagnostic] = []
    cuts = _cuts(text)
    if cuts is None:
        walker = _Walker(file, haproxy_version, any_version=any_version)
        for number, line in _numbered_lines(text):
            if walker.stopped:
                break
            walker.feed(number, line)
        walker.finish()
        sections = tuple(walker.sections)
        macros = tuple(walker.macros)
        diagnostics.extend(walker.diagnostics)
    else:
        collected: list[Section] = []
        get = _CACHE.get
        first_line = 1
        prev = 0
        for pos in cuts:
            chunk = text[prev:pos]
            result = get(file, chunk, first_line)
            collected.extend(result.sections)
            if result.diagnostics:
                diagnostics.extend(result.diagnostics)
            first_line += chunk.count("\n")
            prev = pos
        sections = tuple(collected)
        macros = ()
    if text and not text.endswith("\n"):
        last = text.count("\n") + 1
        width = len(text) - text.rfind("\n") - 1
        diagnostics.append(
            _diag("E2008", "the file does not end with a newline", file, last, width + 1, width + 1)
        )
    return ParsedConfig(file, sections, macros), diagnostics


def _cuts(text: str) -> list[int] | None:
    """Offsets where cacheable pieces end (the last is ``len(text)``), or None when the file
    must be read in one sequential pass."""
    if text.find("\x00") >= 0:
        return None  # HAProxy stops reading at a NUL
    if text.find("$") >= 0 and ("$." in text or "${." in text):
        return None  # pseudo-variables depend on the line number and section name
    cuts = []
    for m in _SCAN.finditer("\n" + text):
        if m.group(1) is not None:
            return None
        if m.start():
            cuts.append(m.start())
    cuts.append(len(text))
    return cuts


def _numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return enumerate(lines, 1)


@dataclass(slots=True)  # not frozen: one is made per section, and nothing mutates them
class _ChunkResult:
    start: int
    sections: tuple[Section, ...]
    diagnostics: tuple[Diagnostic, ...]

    def moved(self, start: int) -> _ChunkResult:
        delta = start - self.start
        return _ChunkResult(
            start,
            tuple([_shift_section(s, delta) for s in self.sections]),
            tuple([_shift_diagnostic(d, delta) for d in self.diagnostics]),
        )


def _shift_section(s: Section, delta: int) -> Section:
    # The warm path's hottest loop. Cached pieces never hold dot directives, so nothing in
    # them is conditional, and one piece has one file.
    make = build.directive
    h = s.header
    file = h.file
    return build.section(
        make(file, h.line + delta, h.tokens, False),
        tuple([make(file, d.line + delta, d.tokens, False) for d in s.directives]),
        s.end_line + delta,
        s.text_hash,
    )


def _shift_diagnostic(d: Diagnostic, delta: int) -> Diagnostic:
    loc = d.location
    if loc is None or loc.line is None:
        return d
    end_line = loc.end_line + delta if loc.end_line is not None else None
    return d.model_copy(
        update={"location": loc.model_copy(update={"line": loc.line + delta, "end_line": end_line})}
    )


class _ChunkCache:
    """Chunk text → results by first line (a few positions each: a candidate and the live
    config often differ by a line, and alternate).

    Two generations approximate LRU without bookkeeping on every hit: entries unused for a
    whole generation are dropped.
    """

    def __init__(self, size: int = 20_000, positions: int = 4) -> None:
        self.size = size
        self.positions = positions
        self.current: dict[tuple[str, str], dict[int, _ChunkResult]] = {}
        self.previous: dict[tuple[str, str], dict[int, _ChunkResult]] = {}
        self._lock = threading.Lock()  # pipelines may parse in worker threads

    def get(self, file: str, chunk: str, start: int) -> _ChunkResult:
        with self._lock:
            return self._get(file, chunk, start)

    def _get(self, file: str, chunk: str, start: int) -> _ChunkResult:
        key = (file, chunk)
        at = self.current.get(key)
        if at is None:
            at = self.previous.get(key)
            if at is None:
                at = {start: _parse_chunk(file, chunk, start)}
            if len(self.current) >= self.size:
                self.previous, self.current = self.current, {}
            self.current[key] = at
        hit = at.get(start)
        if hit is None:
            hit = next(iter(at.values())).moved(start)
            if len(at) >= self.positions:
                del at[next(iter(at))]
            at[start] = hit
        return hit

    def clear(self) -> None:
        self.current.clear()
        self.previous.clear()


_CACHE = _ChunkCache()


def _parse_chunk(file: str, chunk: str, start: int) -> _ChunkResult:
    lines = chunk.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if NEEDS_FULL.search(chunk) is None:
        fast = _fast_section(file, chunk, lines, start)
        if fast is not None:
            return fast
    walker = _Walker(file, None)
    number = start
    for line in lines:
        walker.feed(number, line)
        number += 1
    walker.finish()
    return _ChunkResult(start, tuple(walker.sections), tuple(walker.diagnostics))


#: Token tuples of plain body lines seen before (``    balance roundrobin`` recurs per backend).
_LINES: dict[str, tuple[Token, ...]] = {}
_LINES_MAX = 50_000


_DIRECTIVE_PARTS = build.directive_parts()


def _fast_section(file: str, chunk: str, lines: list[str], start: int) -> _ChunkResult | None:
    """The common case without the general walker: one section of plain lines.

    Returns None for anything else (a scope line, a 64-word line, a second header, text
    before the header), which the walker then handles.

    This loop is the cold path: a never-seen 7,000-line config spends most of its parse
    here. So tokens and directives are built inline — the same objects ``fast_tokens`` and
    ``build.directive`` make (``test_cache_is_transparent`` compares them with the walker's)
    — without a function call per line or per token.
    """
    if not lines:
        return None
    words = lines[0].split()
    if not words or words[0] not in SECTION_KEYWORDS or len(words) >= MAX_LINE_ARGS:
        return None
    header = build.directive(file, start, fast_tokens(lines[0], words), False)
    body: list[Directive] = []
    append = body.append
    new, set_value, set_raw, set_col, set_end, set_env = TOKEN_PARTS
    _, set_file, set_line, set_tokens, set_cond = _DIRECTIVE_PARTS
    by_column = intern_table(max(map(len, lines)))
    known = _LINES
    keywords = SECTION_KEYWORDS
    created = 0
    number = start
    for i in range(1, len(lines)):
        line = lines[i]
        number += 1
        tokens = known.get(line)
        if tokens is None:
            words = line.split()
            if not words:
                continue
            first = words[0]
            if first[0] in "[." or first in keywords or len(words) >= MAX_LINE_ARGS:
                count_interned(created)
                return None
            indent = len(line) - len(line.lstrip())
            if " ".join(words) == line[indent:]:
                col = indent + 1  # single blanks between words: columns are running sums
                out = []
                for w in words:
                    column = by_column[col]
                    tok = column.get(w)
                    end = col + len(w)
                    if tok is None:
                        tok = new(Token)
                        set_value(tok, w)
                        set_raw(tok, w)
                        set_col(tok, col)
                        set_end(tok, end - 1)
                        set_env(tok, False)
                        column[w] = tok
                        created += 1
                    out.append(tok)
                    col = end + 1
                tokens = tuple(out)
            else:
                tokens = fast_tokens(line, words)
            if len(known) >= _LINES_MAX:
                known.clear()
            known[line] = tokens
        d = new(Directive)
        set_file(d, file)
        set_line(d, number)
        set_tokens(d, tokens)
        set_cond(d, False)
        append(d)
    count_interned(created)
    text = chunk if chunk.endswith("\n") else chunk + "\n"
    section = build.section(
        header, tuple(body), start + len(lines) - 1, hashlib.sha256(text.encode()).hexdigest()
    )
    return _ChunkResult(start, (section,), ())


def _diag(
    rule_id: RuleId, message: str, file: str, line: int, column: int, end_column: int
) -> Diagnostic:
    return make(
        rule_id,
        Phase.SYNTAX,
        message,
        location=Location(
            file=file, line=line, column=column, end_line=line, end_column=max(column, end_column)
        ),
    )


@dataclass(slots=True)
class _Block:
    """One open ``.if`` level."""

    parent: Tri
    active: Tri
    taken: Tri
    line: int
    seen_else: bool = False

    @property
    def effective(self) -> Tri:
        return tri_and(self.parent, self.active)


@dataclass
class _Walker:
    """Feeds lines one at a time through HAProxy's reading order."""

    file: str
    version: str | None
    any_version: bool = False
    """Leave ``version_atleast()``/``version_before()`` undecided (see :func:`parse`)."""
    sections: list[Section] = field(default_factory=list)
    macros: list[Directive] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    stopped: bool = False
    _blocks: list[_Block] = field(default_factory=list)
    _active: Tri = True
    _header: Directive | None = None
    _body: list[Directive] = field(default_factory=list)
    _lines: list[str] = field(default_factory=list)
    _last_line: int = 0
    _section_name: str | None = None
    _fatal: int = 0
    _aborted: bool = False

    # -- reporting ---------------------------------------------------------------------------

    def _report(
        self, rule_id: RuleId, message: str, line: int, column: int, end_column: int
    ) -> None:
        self.diagnostics.append(_diag(rule_id, message, self.file, line, column, end_column))
        if rule_id.startswith("E"):
            self._fatal += 1
            if self._fatal >= _MAX_FATAL:
                self.stopped = True

    def _report_at(self, rule_id: RuleId, message: str, d: Directive, active: Tri) -> None:
        """An error that holds only if the line is active: a warning when that is undecided."""
        if active is None:
            message = f"{message} (in a conditional branch that may be taken)"
            rule_id = "W2018"
        self._report(rule_id, message, d.line, d.column, d.end_column)

    # -- lines -------------------------------------------------------------------------------

    def feed(self, number: int, line: str, fast: bool | None = None) -> None:
        self._last_line = number
        if self._header is not None:
            self._lines.append(line)
        nul = line.find("\x00")
        if nul >= 0:
            self._report(
                "E2007", "NUL character: HAProxy stops reading here", number, nul + 1, nul + 1
            )
            line = line[:nul]
            self.stopped = True
            fast = False
        lead = len(line) - len(line.lstrip(BLANKS))
        if lead < len(line) and line[lead] == "[":
            self._scope(number, line, lead)
            return
        tokens, error = tokenize(
            line, line_no=number, file=self.file, section=self._section_name, fast=fast
        )
        if error is not None:
            self._report(error.rule_id, error.message, number, error.column, error.end_column)
            return
        if not tokens or not tokens[0].value:
            return
        keyword = tokens[0].value
        if keyword[0] == "." and keyword in CONDITIONAL_MACROS:
            self._conditional(Directive(self.file, number, tokens, self._active is None))
            return
        active = self._active
        if active is False:
            return
        if keyword[0] == ".":
            self._message(Directive(self.file, number, tokens, active is None), active)
            return
        directive = Directive(self.file, number, tokens, active is None)
        if keyword in SECTION_KEYWORDS:
            if self._header is not None:
                self._lines.pop()  # this line opens the next section
            self._close_section()
            self._header = directive
            self._lines = [line]
            args = directive.tokens
            self._section_name = args[1].value if len(args) > 1 and args[1].value else keyword
        elif self._header is None:
            self._report_at(
                "E2009", f"'{keyword}' appears before any section header", directive, active
            )
        else:
            self._body.append(directive)

    def finish(self) -> None:
        self._close_section()
        if self._blocks and not self._aborted:
            opened = self._blocks[-1].line
            self._report(
                "E2011",
                f"'.if' opened at line {opened} is never closed with '.endif'",
                self._last_line or opened,
                1,
                1,
            )

    def _abort(self) -> None:
        """HAProxy gives up on the file at once (``ERR_ABORT``)."""
        self.stopped = True
        self._aborted = True

    def _close_section(self) -> None:
        if self._header is None:
            return
        text = "\n".join(self._lines) + "\n"
        self.sections.append(
            Section(
                self._header,
                tuple(self._body),
                self._header.line + len(self._lines) - 1,
                hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            )
        )
        self._header = None
        self._body = []
        self._lines = []

    def _scope(self, number: int, line: str, lead: int) -> None:
        close = line.find("]", lead + 1)
        if close < 0 or close == lead + 1:
            self._report("E2010", "empty scope name", number, lead + 1, len(line))
            return
        name = line[lead + 1 : close]
        bad = _SCOPE_NAME.sub("", name)
        if bad:
            col = lead + 2 + name.index(bad[0])
            self._report(
                "E2010", f"character {bad[0]!r} is not permitted in a scope name", number, col, col
            )
            return
        rest = line[close + 1 :].lstrip(BLANKS)
        if rest and rest[0] not in "#\r":
            col = len(line) - len(rest) + 1
            self._report(
                "E2010", f"character {rest[0]!r} is not permitted after a scope", number, col, col
            )

    # -- conditional blocks ------------------------------------------------------------------

    def _condition(self, d: Directive, certain: bool) -> Tri:
        """Decide a ``.if``/``.elif``; ``certain`` says HAProxy surely evaluates it here."""
        words = d.tokens[1:]
        if any(t.has_env for t in words):
            self._report(
                "I2020",
                "condition depends on environment variables",
                d.line,
                d.column,
                d.end_column,
            )
            return None
        result = evaluate(
            " ".join(t.value for t in words), self.version, any_version=self.any_version
        )
        if result.error is not None:
            start = words[0].column if words else d.end_column
            if certain:
                self._report(
                    "E2012", f"{result.error} in '{d.keyword}'", d.line, start, d.end_column
                )
                self._abort()
            else:
                self._report(
                    "W2018",
                    f"{result.error} in '{d.keyword}' (HAProxy aborts if it evaluates this)",
                    d.line,
                    start,
                    d.end_column,
                )
            return None
        if result.value is None:
            self._report(
                "I2020",
                "condition is decided only where HAProxy runs; the lines it guards are checked "
                "as possibly active",
                d.line,
                d.column,
                d.end_column,
            )
        return result.value

    def _conditional(self, d: Directive) -> None:
        self.macros.append(d)
        kw = d.keyword
        blocks = self._blocks
        if kw == ".if":
            if len(blocks) + 1 >= MAX_NESTED_CONDS:
                self._report(
                    "E2011",
                    f"too many nested '.if' (HAProxy allows {MAX_NESTED_CONDS - 1})",
                    d.line,
                    d.column,
                    d.end_column,
                )
                self._abort()
                return
            parent = self._active
            if parent is False:
                blocks.append(_Block(False, False, True, d.line))
            else:
                value = self._condition(d, certain=parent is True)
                if self.stopped:
                    return
                blocks.append(_Block(parent, value, value, d.line))
        elif kw == ".elif":
            if not blocks:
                self._structure("lone '.elif' with no matching '.if'", d)
                return
            b = blocks[-1]
            if b.seen_else:
                self._structure("'.elif' after '.else' is not permitted", d)
                return
            if b.parent is False or b.taken is True:
                b.active = False
            else:
                value = self._condition(d, certain=b.parent is True and b.taken is False)
                if self.stopped:
                    return
                b.active = tri_and(tri_not(b.taken), value)
                b.taken = tri_or(b.taken, value)
        elif kw in (".else", ".endif"):
            if len(d.tokens) > 1 and d.tokens[1].value:
                self._structure(f"unexpected argument {d.tokens[1].value!r} for '{kw}'", d)
                return
            if not blocks:
                self._structure(f"lone '{kw}' with no matching '.if'", d)
                return
            if kw == ".endif":
                blocks.pop()
            else:
                b = blocks[-1]
                if b.seen_else:
                    self._structure("'.else' after '.else' is not permitted", d)
                    return
                b.active = tri_not(b.taken)
                b.taken = True
                b.seen_else = True
        self._active = blocks[-1].effective if blocks else True

    def _structure(self, message: str, d: Directive) -> None:
        self._report("E2011", message, d.line, d.column, d.end_column)
        self._abort()

    def _message(self, d: Directive, active: Tri) -> None:
        kw = d.keyword
        if kw not in MESSAGE_MACROS:
            self._report_at("E2014", f"unknown directive '{kw}'", d, active)
            if active is True:
                self.stopped = True
            return
        self.macros.append(d)
        tokens = d.tokens
        if len(tokens) > 2 and tokens[2].value:
            extra = tokens[2]
            msg = f"unexpected argument {extra.value!r} for '{kw}'; quote a message with spaces"
            self._report_at("E2015", msg, d, active)
            return
        text = tokens[1].value if len(tokens) > 1 else ""
        if kw == ".alert":
            if active is True:
                self._report("E2013", f"'.alert' reached: {text!r}", d.line, d.column, d.end_column)
                self._abort()
            else:
                self._report_at("E2013", f"'.alert' would stop HAProxy: {text!r}", d, active)
        elif kw == ".warning":
            self._report("W2016", f"'.warning': {text!r}", d.line, d.column, d.end_column)
        else:
            self._report("I2017", f"'{kw}': {text!r}", d.line, d.column, d.end_column)


def token_location(file: str, line: int, token: Token) -> Location:
    """The span of one token, for diagnostics of later checks."""
    return Location(
        file=file, line=line, column=token.column, end_line=line, end_column=token.end_column
    )
