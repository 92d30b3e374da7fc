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

Even that scan and one cache look-up per section grow with the file (about 20 ms at 10,000
backends), so the last few chunked parses of each file are kept as *bases*: a new text is
compared with them (``textdiff``), the pieces of its common start are taken from the closest
base as they are, those of its common end as they are or shifted, and only the text between
is cut and looked up. A text equal to a base is that base's result. The result is the one the
full scan gives, piece for piece (``tests/validation/syntax/test_syntax_incremental.py``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

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
    forget_interned,
    intern_table,
    tokenize,
)
from controller.validation.textdiff import common_prefix, common_suffix

__all__ = ["parse", "parse_near"]


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
    chunked = _CACHE.chunked(file, text, near_only=False)
    if chunked is None:
        walker = _Walker(file, haproxy_version, any_version=any_version)
        for number, line in _numbered_lines(text):
            if walker.stopped:
                break
            walker.feed(number, line)
        walker.finish()
        forget_interned()
        parsed = ParsedConfig(file, tuple(walker.sections), tuple(walker.macros))
        return parsed, _with_final_newline(walker.diagnostics, text, file)
    forget_interned()
    return chunked[0], _with_final_newline(list(chunked[1]), text, file)


def parse_near(text: str, file: str) -> tuple[ParsedConfig, list[Diagnostic]] | None:
    """:func:`parse`'s result when it is cheap: ``text`` is read in pieces and differs from
    one of the last parses of ``file`` in a small part only (a quarter of the text at most).
    None otherwise, having parsed nothing. Such a text holds no conditional block, so the
    result is the same for every ``haproxy_version`` and ``any_version``; the lean gate uses
    it, and the syntax stage's own parse of the same text right after is a look-up."""
    chunked = _CACHE.chunked(file, text, near_only=True)
    if chunked is None:
        return None
    forget_interned()
    return chunked[0], _with_final_newline(list(chunked[1]), text, file)


def _with_final_newline(diagnostics: list[Diagnostic], text: str, file: str) -> list[Diagnostic]:
    if text and not text.endswith("\n"):
        last = text.count("\n") + 1
        width = len(text) - text.rfind("\n") - 1
        diagnostics.append(
            _diag("E2008", "the file does not end with a newline", file, last, width + 1, width + 1)
        )
    return diagnostics


def _cuts(text: str, start: int = 0, end: int | None = None) -> list[int] | None:
    """Offsets where cacheable pieces of ``text[start:end]`` end (the last is ``end``), or
    None when the file must be read in one sequential pass. ``start`` is where a line starts
    and ``end`` where one ends (or the text's end); a region is scanned when the rest of the
    text is known to be clean. Its look for NULs and pseudo-variables reaches two characters
    past each side, although a ``${.`` cannot straddle a line border: a margin that costs
    nothing."""
    if end is None:
        end = len(text)
    around = text if start == 0 and end == len(text) else text[max(start - 2, 0) : end + 2]
    if around.find("\x00") >= 0:
        return None  # HAProxy stops reading at a NUL
    if around.find("$") >= 0 and ("$." in around or "${." in around):
        return None  # pseudo-variables depend on the line number and section name
    cuts = []
    for m in _SCAN.finditer("\n" + text[start:end]):
        if m.group(1) is not None:
            return None
        if m.start():
            cuts.append(start + m.start())
    cuts.append(end)
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
    key: str
    """The piece's :func:`_chunk_key`."""

    def moved(self, start: int) -> _ChunkResult:
        delta = start - self.start
        return _ChunkResult(
            start,
            tuple([_shift_section(s, delta) for s in self.sections]),
            tuple([_shift_diagnostic(d, delta) for d in self.diagnostics]),
            self.key,
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


#: One cache entry: the piece's result at the one line it was seen at, or at a few lines.
_Entry = _ChunkResult | dict[int, _ChunkResult]


def _chunk_key(chunk: str) -> str:
    """A piece's cache key: the sha256 of its text, as :class:`Section` ``text_hash`` has it.

    Keying by the text itself kept a second copy of every piece of the configuration (3 MB
    at 10,000 backends) beside the bases' texts; the digest of a plain section is the very
    string its ``Section`` keeps anyway (see :func:`_fast_section`). A piece without its
    final newline (the file's last) shares the key of the one with it, and their results
    are the same: both are split into the same lines."""
    text = chunk if chunk.endswith("\n") else chunk + "\n"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _ChunkCache:
    """Chunk text → results by first line (a few positions each: a candidate and the live
    config often differ by a line, and alternate).

    What is worth keeping is the pieces of the kept bases, at the lines the bases have them
    (found again when they move, or when a text returns), and a few recent others. So once
    :attr:`spare` pieces or lines were added, only the bases' pieces at the bases' lines stay
    (:meth:`_prune`): a stream of changes that each move the whole file (a backend inserted
    near the top) would otherwise keep up to four moved copies of every section. Two generations
    of 20,000 entries each, as before, let a long-running controller at 10,000 backends
    keep the results of up to ~30,000 past versions of changed sections (~2 kB each). An
    entry seen at one line only (nearly all of them) is the result itself, not a dict of
    one: 2.3 MB less at 10,000 backends.
    """

    def __init__(self, spare: int = 4_096, positions: int = 4, bases: int = 3) -> None:
        self.spare = spare
        self.positions = positions
        self.current: dict[tuple[str, str], _Entry] = {}
        self._added = 0
        """Pieces and lines added since the last prune."""
        self.bases_per_file = bases
        self.bases: dict[str, list[_Base]] = {}
        """File → its last chunked parses, the one made last first."""
        self._lock = threading.Lock()  # pipelines may parse in worker threads

    def chunked(
        self, file: str, text: str, *, near_only: bool
    ) -> tuple[ParsedConfig, tuple[Diagnostic, ...]] | None:
        """The sections and diagnostics of ``text`` read in pieces, or None when it must be
        read sequentially. ``near_only``: also None, before any reading, when no base of
        ``file`` shares all but a quarter of the text. The lock is held throughout: the work
        holds the GIL anyway, and a base must not change while it is being spliced."""
        with self._lock:
            base, prefix, suffix = self._nearest(file, text)
            if base is not None and prefix == len(text) == len(base.text):
                self._remember(file, base, base)
                return base.parsed, base.diagnostics
            if near_only and (
                base is None
                or len(text) - prefix - suffix > len(text) // 4
                or self._costly_move(file, text, base, prefix, suffix)
            ):
                return None
            made = None if base is None else self._splice(file, text, base, prefix, suffix)
            if made is None:
                cuts = _cuts(text)
                if cuts is None:
                    return None
                made = self._pieces(file, text, cuts, 0, 1)
            cuts, results = made
            sections = tuple(chain.from_iterable([r.sections for r in results]))
            found = tuple(chain.from_iterable([r.diagnostics for r in results]))
            new = _Base(text, cuts, results, ParsedConfig(file, sections, ()), found)
            self._remember(file, new, base)
            return new.parsed, new.diagnostics

    def _nearest(self, file: str, text: str) -> tuple[_Base | None, int, int]:
        """The base of ``file`` sharing the most of ``text`` at its start and end, with the
        lengths shared (the two never overlap)."""
        best: tuple[_Base | None, int, int] = (None, 0, 0)
        for base in self.bases.get(file, ()):
            prefix = common_prefix(text, base.text)
            if prefix == len(text) == len(base.text):
                return base, prefix, 0
            suffix = common_suffix(text, base.text, min(len(text), len(base.text)) - prefix)
            if best[0] is None or prefix + suffix > best[1] + best[2]:
                best = (base, prefix, suffix)
        return best

    def _remember(self, file: str, new: _Base, used: _Base | None) -> None:
        """Keep ``new`` first and the base it came from second: during an admission burst
        every proposal is closest to the live configuration, which must stay."""
        kept = [new]
        if used is not None and used is not new:
            kept.append(used)
        for base in self.bases.get(file, ()):
            if len(kept) >= self.bases_per_file:
                break
            if base is not new and base is not used:
                kept.append(base)
        if file not in self.bases and len(self.bases) >= _BASE_FILES:
            del self.bases[next(iter(self.bases))]
        self.bases[file] = kept
        if self._added > self.spare:
            self._prune()

    def _prune(self) -> None:
        """Keep only the bases' pieces, each at the lines the bases have it. About 3 ms at
        10,000 backends, once per :attr:`spare` pieces or lines added."""
        kept: dict[tuple[str, str], _Entry] = {}
        for file, bases in self.bases.items():
            for base in bases:
                for r in base.results:
                    key = (file, r.key)
                    at = kept.get(key)
                    if at is None:
                        kept[key] = r
                    elif isinstance(at, _ChunkResult):
                        if at.start != r.start:
                            kept[key] = {at.start: at, r.start: r}
                    else:
                        at.setdefault(r.start, r)
        self.current = kept
        self._added = 0

    def _splice(
        self, file: str, text: str, base: _Base, prefix: int, suffix: int
    ) -> tuple[list[int], list[_ChunkResult]] | None:
        """``text`` read as ``base`` with its middle replaced: the pieces wholly inside the
        shared start are the base's, those of the shared end the base's moved by the change
        in line count, and the text between is cut and looked up. None when the middle must
        be read sequentially (then so must the whole text).

        Why the borders are safe: a cut is decided by the line it starts and the newline
        before it. A base piece whose *next* piece also ends inside the shared start has its
        own text and both its borders' header lines there, so it is the same piece of
        ``text``; the scan restarts at the start of the first piece that is not. A base cut
        whose preceding newline lies in the shared end is a cut of ``text`` at the same
        distance from the end, and so is every later one.
        """
        cuts, results = base.cuts, base.results
        moved = len(text) - len(base.text)
        keep, start, tail, end = _borders(base, text, prefix, suffix)
        middle = _cuts(text, start, end)
        if middle is None:
            return None
        made = self._pieces(file, text, middle, start, results[keep].start)
        new_cuts = cuts[:keep] + made[0]
        new_results = results[:keep] + made[1]
        if tail < len(cuts):
            shift = results[keep].start + text.count("\n", start, end) - results[tail].start
            new_cuts += [c + moved for c in cuts[tail:]]
            if shift == 0:
                new_results += results[tail:]
            else:
                at = end
                for i in range(tail, len(cuts)):
                    nxt = cuts[i] + moved
                    piece = self._get(file, text[at:nxt], results[i].start + shift, results[i])
                    new_results.append(piece)
                    at = nxt
        return new_cuts, new_results

    def _costly_move(self, file: str, text: str, base: _Base, prefix: int, suffix: int) -> bool:
        """Whether splicing would build new objects for more than half the base's pieces,
        and more than :data:`_MOVES_CHEAP`: the pieces of the shared end change lines, and
        the first of them is not known at its new line yet (then the others are most likely
        not either). Then building them costs more than the lean reading of the whole file
        (measured at 10,000 backends: 100 ms against 55), so the lean gate does not wait for
        it before ``haproxy -c`` may start; the stage's own parse does it meanwhile. Below
        that the gate takes the spliced parse, which saves the lean reading's CPU."""
        keep, start, tail, end = _borders(base, text, prefix, suffix)
        cuts, results = base.cuts, base.results
        moving = len(cuts) - tail
        if tail >= len(cuts) or 2 * moving <= len(cuts) or moving <= _MOVES_CHEAP:
            return False
        line = results[keep].start + text.count("\n", start, end)
        if line == results[tail].start:
            return False
        at = self.current.get(
            (file, _chunk_key(text[end : cuts[tail] + len(text) - len(base.text)]))
        )
        if at is None:
            return True
        return at.start != line if isinstance(at, _ChunkResult) else line not in at

    def _pieces(
        self, file: str, text: str, cuts: list[int], start: int, first_line: int
    ) -> tuple[list[int], list[_ChunkResult]]:
        """The pieces of ``text`` from ``start`` ending at ``cuts``, the first on line
        ``first_line``."""
        out = []
        line = first_line
        prev = start
        for pos in cuts:
            chunk = text[prev:pos]
            out.append(self._get(file, chunk, line))
            line += chunk.count("\n")
            prev = pos
        return list(cuts), out

    def _get(
        self, file: str, chunk: str, start: int, like: _ChunkResult | None = None
    ) -> _ChunkResult:
        """The result of ``chunk`` starting on line ``start``. ``like``: the result of the
        same text on another line (a base's piece of a shared end), moved when the piece is
        not cached rather than read again."""
        digest = _chunk_key(chunk)
        key = (file, digest)
        at = self.current.get(key)
        if at is None:
            at = like if like is not None else _parse_chunk(file, chunk, start, digest)
            self.current[key] = at
            self._added += 1
        if isinstance(at, _ChunkResult):
            if at.start == start:
                return at
            hit = at.moved(start)
            self.current[key] = {at.start: at, start: hit}
            self._added += 1
            return hit
        found = at.get(start)
        if found is None:
            self._added += 1
            found = next(iter(at.values())).moved(start)
            if len(at) >= self.positions:
                del at[next(iter(at))]
            at[start] = found
        return found

    def clear(self) -> None:
        with self._lock:
            self.current.clear()
            self.bases.clear()
            self._added = 0


def _borders(base: _Base, text: str, prefix: int, suffix: int) -> tuple[int, int, int, int]:
    """How ``text`` splits against ``base`` (see ``_ChunkCache._splice``): the number of base
    pieces taken as they are, where the middle starts and ends in ``text``, and the first base
    piece of the shared end (``len(base.cuts)`` when there is none)."""
    cuts = base.cuts
    keep = max(bisect_right(cuts, prefix) - 1, 0)
    start = cuts[keep - 1] if keep else 0
    tail = min(bisect_left(cuts, len(base.text) - suffix + 1) + 1, len(cuts))
    end = cuts[tail - 1] + len(text) - len(base.text) if tail < len(cuts) else len(text)
    return keep, start, tail, end


@dataclass(slots=True)
class _Base:
    """One chunked parse kept to splice the next texts of its file from."""

    text: str
    cuts: list[int]
    results: list[_ChunkResult]
    """One per piece, in order: the piece ending at ``cuts[i]`` starts at ``results[i].start``."""
    parsed: ParsedConfig
    diagnostics: tuple[Diagnostic, ...]


#: Pieces the gate's spliced parse may move to new lines whatever the file's size (at 1,000
#: backends moving them all costs about what the lean reading does).
_MOVES_CHEAP = 3_000
#: Files with bases at most (a controller renders one or two configuration files).
_BASE_FILES = 8


_CACHE = _ChunkCache()


def _parse_chunk(file: str, chunk: str, start: int, digest: str) -> _ChunkResult:
    """``digest``: :func:`_chunk_key` of ``chunk``."""
    lines = chunk.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if NEEDS_FULL.search(chunk) is None:
        fast = _fast_section(file, digest, lines, start)
        if fast is not None:
            return fast
    walker = _Walker(file, None)
    number = start
    for line in lines:
        walker.feed(number, line)
        number += 1
    walker.finish()
    return _ChunkResult(start, tuple(walker.sections), tuple(walker.diagnostics), digest)


#: Token tuples of plain body lines seen before (``    balance roundrobin`` recurs per backend).
_LINES: dict[str, tuple[Token, ...]] = {}
#: Emptied when this full: a recurring line recurs within a few sections, and most lines of a
#: large file are unique (``server`` lines), which 50,000 entries kept as ~6 MB of strings.
_LINES_MAX = 4_096


_DIRECTIVE_PARTS = build.directive_parts()


def _fast_section(file: str, digest: str, lines: list[str], start: int) -> _ChunkResult | None:
    """The common case without the general walker: one section of plain lines (``digest``:
    the sha256 of their text, which is the section's ``text_hash``).

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
                last = ""
                for w in words:
                    column = by_column[col]
                    tok = column.get(w)
                    end = col + len(w)
                    if tok is None:
                        if w == last:
                            w = last  # ``server a:80 a:80``: one string for both words
                        tok = new(Token)
                        set_value(tok, w)
                        set_raw(tok, w)
                        set_col(tok, col)
                        set_end(tok, end - 1)
                        set_env(tok, False)
                        column[w] = tok
                        created += 1
                    out.append(tok)
                    last = w
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
    section = build.section(header, tuple(body), start + len(lines) - 1, digest)
    return _ChunkResult(start, (section,), (), digest)


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
