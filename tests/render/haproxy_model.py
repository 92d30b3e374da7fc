"""Reference models of how HAProxy splits a configuration line and a map file line.

Written from the configuration manual (section 2.2, "Quoting and escaping") and the behaviour
of the config reader: the tests check the filters against these models for arbitrary strings,
and against the real binaries for a sample (tests that run haproxy).
"""

from __future__ import annotations

SPACE = " \t\n\v\f\r"  # C isspace() in the C locale
END = "\x00\n\r"

# Values a hostile object might carry, for the quoting filters.
HOSTILE = [
    "two words",
    "tab\there",
    "comment # here",
    "#leading",
    "it's",
    "''",
    '"double"',
    "back\\slash",
    "trailing\\",
    "\\'",
    "${HOME}",
    "$HOME",
    "%[env(HOME)]",
    "x'y\"z\\w#v$u",
    "\\x41",
    "\\n",
    "  leading spaces",
    "\x0bvertical\x0cfeed",
    "é ünï 中文",
    "if { always_true }",
    "a' b '#c",
]


class Unsupported(ValueError):
    """The line uses something this model does not cover (env expansion, hex escapes)."""


def config_args(line: str) -> list[str]:
    """The arguments HAProxy reads from one configuration line."""
    args: list[str] = []
    cur: list[str] = []
    squote = dquote = False
    started = False  # the current argument has begun (possibly empty, via quotes)
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c in END:
            break
        if c == "#" and not squote and not dquote:
            break
        if c == '"' and not squote:
            dquote = not dquote
            started = True
            i += 1
            continue
        if c == "'" and not dquote:
            squote = not squote
            started = True
            i += 1
            continue
        if c == "\\" and not squote:
            nxt = line[i + 1] if i + 1 < n else ""
            simple = {
                " ": " ",
                "\\": "\\",
                "t": "\t",
                "n": "\n",
                "r": "\r",
                "#": "#",
                "'": "'",
                '"': '"',
            }
            if nxt in simple:
                cur.append(simple[nxt])
                i += 2
            elif nxt == "$" and dquote:
                cur.append("$")
                i += 2
            elif nxt == "x":
                raise Unsupported("hex escape")
            else:
                cur.append("\\")
                i += 1
            started = True
            continue
        if c in SPACE and not squote and not dquote:
            while i < n and line[i] in SPACE:
                i += 1
            args.append("".join(cur))
            cur = []
            started = False
            continue
        if c == "$" and dquote:
            raise Unsupported("environment expansion")
        cur.append(c)
        started = True
        i += 1
    if squote or dquote:
        raise ValueError("unmatched quote")
    if cur or started:
        args.append("".join(cur))
    return args


def map_entry(line: str) -> tuple[str, str] | None:
    """(key, value) of one map file line, or None for a comment or an empty line."""
    if line.startswith("#"):
        return None
    i = 0
    while i < len(line) and line[i] in " \t":
        i += 1
    if i == len(line) or line[i] in "\x00\r\n":
        return None
    start = i
    while i < len(line) and line[i] not in " \t\n\r\x00":
        i += 1
    key = line[start:i]
    while i < len(line) and line[i] in " \t":
        i += 1
    start = i
    while i < len(line) and line[i] not in "\n\r\x00":
        i += 1
    return key, line[start:i].rstrip(" \t")
