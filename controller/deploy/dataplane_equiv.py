"""Does the configuration the Data Plane API stored say what the validated one said?

The API does not store raw text as given: it parses it and writes its own serialization
(two-space indentation, blank lines between sections, ``defaults`` named
``unnamed_defaults_1``, its ``# _version`` and ``# _md5hash`` comments). That is layout. What
must never happen is a changed word, a dropped or added line: then HAProxy would run a
configuration no stage of the pipeline has seen. Seen on v3.2.5: a Latin-1 byte inside a
header value is replaced by U+FFFD.

The comparison is therefore on words, not bytes: each section (its header words, with the
API's generated defaults name removed) holds a multiset of lines, each line the tuple of its
words split on blanks and tabs as HAProxy splits them, comments dropped. The order of lines
inside a section is not compared: the API keeps the order of rules of one kind, and the order
between different kinds of directive does not change what HAProxy does.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["canonical", "differences", "strip_api_comments"]

_SECTIONS = frozenset(
    {
        "global",
        "defaults",
        "frontend",
        "backend",
        "listen",
        "userlist",
        "peers",
        "resolvers",
        "mailers",
        "program",
        "http-errors",
        "ring",
        "cache",
        "log-forward",
        "fcgi-app",
        "crt-store",
        "traces",
        "acme",
    }
)
_BLANKS = re.compile(r"[ \t]+")
_UNNAMED = re.compile(r"^unnamed_defaults_\d+$")
_API_COMMENT = re.compile(r"^# _(?:version|md5hash)=")

Line = tuple[str | None, tuple[str, ...]]


def _words(line: str) -> list[str]:
    words: list[str] = []
    for word in _BLANKS.split(line.strip(" \t\r")):
        if not word:
            continue
        if word.startswith("#"):
            break
        words.append(word)
    return words


def canonical(text: str) -> Counter[Line]:
    """(section header, words) of every directive, counted."""
    out: Counter[Line] = Counter()
    section: str | None = None
    for line in text.splitlines():
        words = _words(line)
        if not words:
            continue
        if words[0] in _SECTIONS:
            if words[0] == "defaults" and len(words) > 1 and _UNNAMED.match(words[1]):
                words = words[:1] + words[2:]
            section = " ".join(words)
            continue
        out[(section, tuple(words))] += 1
    return out


def differences(validated: bytes, stored: str, limit: int = 10) -> list[str]:
    """What ``stored`` lacks or adds compared with ``validated``; empty when equivalent."""
    ours = canonical(validated.decode("utf-8", errors="surrogateescape"))
    theirs = canonical(stored)
    out: list[str] = []
    for (section, words), n in (ours - theirs).items():
        out.append(f"missing in [{section or '-'}]: {_show(words)}" + (f" (x{n})" if n > 1 else ""))
    for (section, words), n in (theirs - ours).items():
        out.append(f"added in [{section or '-'}]: {_show(words)}" + (f" (x{n})" if n > 1 else ""))
    return out[:limit]


def strip_api_comments(stored: str) -> str:
    """The stored text without the API's version and checksum comments (they change on
    every write, including one that stores the same configuration again)."""
    return "\n".join(x for x in stored.splitlines() if not _API_COMMENT.match(x)).strip() + "\n"


def _show(words: tuple[str, ...]) -> str:
    text = " ".join(words)
    return ascii(text)[1:-1] if not text.isprintable() else text
