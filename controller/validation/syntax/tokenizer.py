"""One configuration line → words, by HAProxy's own rules.

HAProxy's line splitter (``parse_line``) is the ground truth; this module follows its
behaviour as observed on the 2.6 and 2.8 binaries, including the corners that look odd:

* ``\\0``, ``\\n`` and ``\\r`` end the line in every quoting state, but a ``\\r`` inside a run of
  blanks between words is skipped like any blank (so ``a \\rb`` is two words, ``a\\rb`` one);
* ``#`` starts a comment only outside quotes;
* single quotes are literal; double quotes keep backslash escapes and ``$`` expansion active;
  outside quotes ``$`` is an ordinary character;
* an unknown escape (``\\1``) keeps its backslash; ``\\x`` must be followed by two hex digits;
* ``\\$`` escapes the dollar only inside double quotes; inside them ``$NAME``, ``${NAME}``,
  ``${NAME-default}`` and ``${NAME[*]}`` (split the value into words) are references, and
  ``[*]`` is the only bracket form there is;
* an empty last word (``foo ""``) is dropped, an empty word elsewhere is kept;
* a 65th word — or a 64th word followed by blanks — is refused;
* there is no line continuation: a trailing backslash is a literal backslash.

A fast path handles the common rendered line (printable ASCII without quotes, backslashes or
``#``) with ``str.split``; tokens of such lines are interned by (word, column), because a
rendered config repeats the same words at the same columns thousands of times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.diagnostics import RuleId
from controller.validation.keywords import MAX_LINE_ARGS, PSEUDO_VARIABLES
from controller.validation.parsed import Token
from controller.validation.syntax import build

__all__ = [
    "BLANKS",
    "NEEDS_FULL",
    "TOKEN_PARTS",
    "LineError",
    "count_interned",
    "fast_tokens",
    "forget_interned",
    "intern_table",
    "quote_word",
    "tokenize",
]

#: C ``isspace`` in the C locale: the characters HAProxy treats as blanks.
BLANKS = " \t\n\v\f\r"

#: Any character that forces the full tokenizer (the fast path would split it differently):
#: everything but tab, newline and printable ASCII other than ``"``, ``#``, ``'`` and ``\``.
NEEDS_FULL = re.compile(r"[^\t\n\x20\x21\x24-\x26\x28-\x5b\x5d-\x7e]")

_PLAIN_RUN = re.compile(r"[^ \t\n\v\f\r\"'\\#\x00]+")
_SQUOTE_RUN = re.compile(r"[^'\r\n\x00]+")
_DQUOTE_RUN = re.compile(r"[^\"\\$\r\n\x00]+")
_HEX = frozenset("0123456789abcdefABCDEF")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.")
_NAME_CHAR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SIMPLE_ESCAPES = {" ": " ", "\\": "\\", "t": "\t", "n": "\n", "r": "\r", "#": "#", "'": "'"}

_BY_COLUMN: list[dict[str, Token]] = [{} for _ in range(512)]
TOKEN_PARTS = build.token_parts()
#: Tokens the table holds at most before it is emptied. What it saves is the tokens that
#: recur (``server`` at column 5 in every backend): they are found again within a few
#: thousand lines. The unique ones (addresses, names) it kept besides the parses that hold
#: them were 110,000 entries, 3.6 MB of dicts at 10,000 backends, for nothing.
_INTERN_MAX = 32_768
_interned = 0


@dataclass(frozen=True, slots=True)
class LineError:
    """Why HAProxy refuses to split a line; columns are 1-based and inclusive."""

    rule_id: RuleId
    message: str
    column: int
    end_column: int


def tokenize(
    line: str,
    *,
    line_no: int = 0,
    file: str = "",
    section: str | None = None,
    fast: bool | None = None,
) -> tuple[tuple[Token, ...], LineError | None]:
    """Split one line (without its ``\\n``) into tokens, or say why HAProxy would refuse it.

    ``line_no``, ``file`` and ``section`` feed the pseudo-variables ``${.LINE}``, ``${.FILE}``
    and ``${.SECTION}``. ``fast`` lets a caller that already scanned a whole block of lines
    skip the per-line check (None: check here).
    """
    if fast is None:
        fast = NEEDS_FULL.search(line) is None
    if fast:
        words = line.split()
        if len(words) < MAX_LINE_ARGS:
            return fast_tokens(line, words), None
    return _full(line, line_no, file, section)


def intern_table(width: int) -> list[dict[str, Token]]:
    """The (column → word → token) table, at least ``width`` + 1 columns wide, for a caller
    that interns the tokens of a whole block of lines inline; it reports what it added with
    :func:`count_interned`."""
    global _interned
    if _interned > _INTERN_MAX:
        for known in _BY_COLUMN:
            known.clear()
        _interned = 0
    if len(_BY_COLUMN) <= width:
        _BY_COLUMN.extend({} for _ in range(width + 1 - len(_BY_COLUMN)))
    return _BY_COLUMN


def count_interned(n: int) -> None:
    global _interned
    _interned += n


def forget_interned() -> None:
    """Empty the table once a parse is done. What it saves recurs within one file's lines;
    the next parse of a changed configuration reads a few sections, and between parses the
    table only held its last entries' tokens and dicts alive (1.5 MB at 10,000 backends)."""
    global _interned
    if _interned:
        for known in _BY_COLUMN:
            if known:
                known.clear()
        _interned = 0


def fast_tokens(line: str, words: list[str]) -> tuple[Token, ...]:
    """Tokens of a line that needs no unquoting (``words`` is ``line.split()``).

    Interned per (column, word): the same words recur at the same columns all over a
    rendered file, and building a frozen dataclass costs far more than a dict lookup.
    """
    try:
        return _interned_tokens(line, words)
    except IndexError:  # a line longer than any seen before
        _BY_COLUMN.extend({} for _ in range(len(line) + 1 - len(_BY_COLUMN)))
        return _interned_tokens(line, words)


def _interned_tokens(line: str, words: list[str]) -> tuple[Token, ...]:
    # The cold path's hottest loop: a never-seen 7,000-line config creates ~12,000 tokens here,
    # so they are built inline (see ``build.token``) and the counter is bumped once per line.
    global _interned
    if _interned > _INTERN_MAX:
        for known in _BY_COLUMN:
            known.clear()
        _interned = 0
    by_column = _BY_COLUMN
    new, set_value, set_raw, set_col, set_end, set_env = TOKEN_PARTS
    indent = len(line) - len(line.lstrip())
    out = []
    created = 0
    if " ".join(words) == line[indent:]:
        col = indent + 1  # single blanks between words (the rendered norm): running sums
        last = ""
        for w in words:
            known = by_column[col]
            tok = known.get(w)
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
                known[w] = tok
                created += 1
            out.append(tok)
            last = w
            col = end + 1
        _interned += created
        return tuple(out)
    make = build.token
    pos = 0
    find = line.find
    for w in words:
        pos = find(w, pos)
        known = by_column[pos + 1]
        tok = known.get(w)
        if tok is None:
            tok = known[w] = make(w, w, pos + 1, pos + len(w), False)
            created += 1
        out.append(tok)
        pos += len(w)
    _interned += created
    return tuple(out)


def _full(
    line: str, line_no: int, file: str, section: str | None
) -> tuple[tuple[Token, ...], LineError | None]:
    n = len(line)
    i = n - len(line.lstrip(BLANKS))
    words: list[Token] = []
    parts: list[str] = []
    start = i
    env = False
    squote = dquote = False
    quote_at = -1
    separators = 0
    too_many_at = -1
    error: LineError | None = None

    while i < n:
        c = line[i]
        if squote:
            m = _SQUOTE_RUN.match(line, i)
            if m:
                parts.append(m.group())
                i = m.end()
            elif c == "'":
                squote = False
                quote_at = -1
                i += 1
            else:
                break
            continue
        if dquote:
            m = _DQUOTE_RUN.match(line, i)
            if m:
                parts.append(m.group())
                i = m.end()
                continue
            if c == '"':
                dquote = False
                quote_at = -1
                i += 1
                continue
            if c == "\\":
                i, error = _escape(line, i, parts, in_dquote=True)
                if error:
                    break
                continue
            if c == "$":
                i, error, expanded = _variable(line, i, parts, line_no, file, section)
                if error:
                    break
                env = env or expanded
                continue
            break  # \r, \n or NUL: end of line even inside quotes
        m = _PLAIN_RUN.match(line, i)
        if m:
            parts.append(m.group())
            i = m.end()
            continue
        if c in "\r\n\x00#":
            break
        if c == '"':
            dquote = True
            quote_at = i
            i += 1
        elif c == "'":
            squote = True
            quote_at = i
            i += 1
        elif c == "\\":
            i, error = _escape(line, i, parts, in_dquote=False)
            if error:
                break
        else:  # a blank outside quotes: end of word
            end = i
            while i < n and line[i] in BLANKS:
                i += 1
            words.append(_token(parts, line, start, end, env))
            parts = []
            env = False
            start = i
            separators += 1
            if separators >= MAX_LINE_ARGS and too_many_at < 0:
                too_many_at = i
    if error is not None:
        return (), error
    if quote_at >= 0:
        kind = "single" if squote else "double"
        return (), LineError(
            "E2001",
            f"unterminated {kind} quote (opened at column {quote_at + 1})",
            quote_at + 1,
            max(quote_at + 1, len(line.rstrip(BLANKS))),
        )
    if too_many_at >= 0:
        return (), LineError(
            "E2006",
            f"too many words on one line: HAProxy accepts at most {MAX_LINE_ARGS}",
            too_many_at + 1,
            max(too_many_at + 1, len(line.rstrip(BLANKS))),
        )
    last = _token(parts, line, start, i, env)
    if last.value:
        words.append(last)
    return tuple(words), None


def _token(parts: list[str], line: str, start: int, end: int, env: bool) -> Token:
    value = "".join(parts)
    nul = value.find("\x00")
    if nul >= 0:  # HAProxy's words are C strings: an escaped NUL ends the word
        value = value[:nul]
    return Token(value, line[start:end], start + 1, max(start + 1, end), env)


def _escape(
    line: str, i: int, parts: list[str], *, in_dquote: bool
) -> tuple[int, LineError | None]:
    nxt = line[i + 1] if i + 1 < len(line) else ""
    simple = _SIMPLE_ESCAPES.get(nxt)
    if simple is not None:
        parts.append(simple)
        return i + 2, None
    if nxt == '"':
        parts.append('"')
        return i + 2, None
    if nxt == "$" and in_dquote:
        parts.append("$")
        return i + 2, None
    if nxt == "x":
        digits = line[i + 2 : i + 4]
        if len(digits) == 2 and digits[0] in _HEX and digits[1] in _HEX:
            parts.append(chr(int(digits, 16)))
            return i + 4, None
        return i, LineError(
            "E2002",
            "truncated or invalid hexadecimal escape: \\x needs two hex digits",
            i + 1,
            min(len(line), i + 4),
        )
    parts.append("\\")  # not an escape sequence: the backslash stays
    return i + 1, None


def _variable(
    line: str,
    i: int,
    parts: list[str],
    line_no: int,
    file: str,
    section: str | None,
) -> tuple[int, LineError | None, bool]:
    """A ``$`` inside double quotes: ``$NAME``, ``${NAME}``, ``${NAME-default}``, ``${NAME[*]}``."""
    n = len(line)
    p = i + 1
    brace = -1
    if p < n and line[p] == "{":
        brace = p
        p += 1
    if p >= n or line[p] not in _NAME_START:
        return i, _var_error("forbidden first character in variable name after '$'", p, n), False
    name_start = p
    if line[p] == ".":
        p += 1
    while p < n and line[p] in _NAME_CHAR:
        p += 1
    name = line[name_start:p]
    pseudo = name.startswith(".")
    if pseudo and name not in PSEUDO_VARIABLES:
        return (
            i,
            _var_error(
                f"unknown pseudo-variable {name!r} (known: .LINE, .FILE, .SECTION)", name_start, p
            ),
            False,
        )
    if brace >= 0 and p < n and line[p] == "[":
        if line[p + 1 : p + 3] != "*]":
            return (
                i,
                LineError(
                    "E2005",
                    "invalid word expansion: only '[*]' may follow a variable name",
                    p + 1,
                    min(n, p + 3),
                ),
                False,
            )
        p += 3
    if brace >= 0:
        if p < n and line[p] == "-":
            close = line.find("}", p)
            if close < 0:
                return i, _brace_error(brace, n), False
            p = close + 1
        elif p < n and line[p] == "}":
            p += 1
        else:
            return i, _brace_error(brace, n), False
    if not pseudo:
        parts.append(line[i:p])  # value unknown until run time: keep the reference as written
        return p, None, True
    if name == ".LINE":
        parts.append(str(line_no))
    elif name == ".FILE":
        parts.append(file)
    elif section is not None:
        parts.append(section)
    return p, None, False


def _var_error(message: str, p: int, n: int) -> LineError:
    col = min(p, max(n - 1, 0)) + 1
    return LineError("E2003", message, col, col)


def _brace_error(brace: int, n: int) -> LineError:
    return LineError("E2004", "unmatched '{' in variable reference", brace + 1, max(brace + 1, n))


_SAFE = re.compile(r"[\x21\x25-\x26\x28-\x5b\x5d-\x7e]+")


def quote_word(value: str) -> str:
    """Write ``value`` so that HAProxy reads it back as exactly one word with that value.

    The inverse of :func:`tokenize` for one word, and the tool to emit untrusted values into
    a configuration: nothing in ``value`` can end the word, start a comment or a new line, or
    expand a variable. Plain words stay bare, other values are double-quoted with escapes.
    NUL cannot be represented (HAProxy words are C strings) and is refused.
    """
    if "\x00" in value:
        raise ValueError("a HAProxy word cannot contain NUL")
    if value and _SAFE.fullmatch(value):
        return value
    out = ['"']
    for ch in value:
        if ch in '"\\$':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
