"""Turn what ``haproxy -c`` prints into messages with a level and a rendered location.

HAProxy 2.6 and 2.8 print one message per line, ``[LEVEL]   (pid) : context : text``, where
the text often starts with ``parsing [file:line] :`` (the parser found it; some parsers write
``Parsing``) or ``[file:line] :`` (a later check found it), and post-parse checks name a
location inline, ``'f' (file:line)`` or ``(declared at file:line)``.
Long messages continue on lines starting with ``   |``; a message whose text itself holds a
newline continues on a line with no indent at all — the jwt_verify check prints
``parsing [f:9] : file not found (k.pem)`` and then a line that is just ``.`` — so any line
that does not start a message continues the message before it, and the location is always
read from the first line. Older releases put a date before the pid; both forms are accepted.
A few lines carry no level at all (``Configuration file is valid``, ``Warnings were found.``);
they, and lines shaped like a log record (``[warning] 335/005856 (7) : ...``, what Lua's
``core.Warning`` prints), start messages of their own. Anything else — a Lua ``print``, a
library complaining — is kept as unclassified output rather than dropped, because it may be
the only clue; such output is line-based, so it never absorbs the lines after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Level", "Message", "parse_output"]


class Level(StrEnum):
    ALERT = "ALERT"
    WARNING = "WARNING"
    NOTICE = "NOTICE"
    DIAG = "DIAG"
    OUTPUT = "OUTPUT"
    """A line without a level (summaries, program output)."""


_HEAD = re.compile(
    r"^\[(?P<level>ALERT|WARNING|NOTICE|DIAG)\]\s+(?:\d+/\d+\s+)?\(\d+\)\s*:\s?(?P<rest>.*)$"
)
_CONTEXT = re.compile(r"^(?P<ctx>[a-z][\w.-]*) : (?P<rest>.*)$")
# Some messages omit the space before the colon ("parsing [haproxy.cfg:12]: ..."), and some
# parsers capitalise the word ("Parsing [haproxy.cfg:12]: backend 'be' has the same name ...").
_PARSING = re.compile(
    r"^parsing \[(?P<file>[^\]\n]+):(?P<line>\d+)\] ?: ?(?P<rest>.*)$", re.IGNORECASE
)
_BRACKET = re.compile(r"^\[(?P<file>[^\]\n]+):(?P<line>\d+)\] ?: ?(?P<rest>.*)$")
_INLINE = re.compile(r"\((?P<file>[^()\s:]+):(?P<line>\d+)\)")
# Post-parse checks that name the line of a rule: "... ignored on HTTP proxies (declared at
# haproxy.cfg:10)." After a "parsing [...]" prefix the same words name the *other* definition
# of a duplicate, so they only count when nothing else gave a location.
_DECLARED = re.compile(r"\bdeclared at (?P<file>[^()\s]+):(?P<line>\d+)\b", re.IGNORECASE)
_CONTINUATION = re.compile(r"^\s+\| ?(?P<text>.*)$")
# Lines that start a message although they carry no HAProxy level: the check's own summaries
# (printed on stdout, but a caller may have merged the streams) and log-shaped records.
_OTHER_START = re.compile(
    r"^(?:Configuration file |Warnings were found|Some warnings were found|\[[A-Za-z]+\]\s)"
)
_JOINS_BACK = tuple(".,;:!?)]")
"""A continuation starting with one of these belongs to the word before it (``... (k.pem).``)."""
_NULLS = re.compile(r"^(?:\(null\))+")
"""HAProxy prints ``(null)`` for messages it could not format, typically out of memory."""


@dataclass
class Message:
    level: Level
    text: str
    context: str | None = None
    file: str | None = None
    line: int | None = None
    parsing: bool = False
    """Reported by the configuration parser (``parsing [file:line]``)."""
    continuation: list[str] = field(default_factory=list)

    @property
    def full_text(self) -> str:
        text = self.text
        for part in self.continuation:
            if part:
                text += part if part.startswith(_JOINS_BACK) else " " + part
        return text.strip()


def parse_output(*streams: str) -> list[Message]:
    """Messages of every stream, in order (stderr first is the natural call)."""
    out: list[Message] = []
    for stream in streams:
        out.extend(_parse(stream.splitlines()))
    return out


def _parse(lines: Iterable[str]) -> list[Message]:
    messages: list[Message] = []
    last: Message | None = None
    for raw in lines:
        line = _NULLS.sub("", raw.rstrip())
        if not line.strip():
            continue
        head = _HEAD.match(line)
        if head:
            last = _message(Level(head.group("level")), head.group("rest"))
            messages.append(last)
            continue
        cont = _CONTINUATION.match(line)
        if cont and last is not None:
            last.continuation.append(cont.group("text").strip())
            continue
        if last is not None and last.level is not Level.OUTPUT and not _OTHER_START.match(line):
            last.continuation.append(line.strip())
            continue
        last = Message(Level.OUTPUT, line.strip())
        messages.append(last)
    return messages


def _message(level: Level, rest: str) -> Message:
    msg = Message(level, rest.strip())
    ctx = _CONTEXT.match(msg.text)
    if ctx:
        msg.context = ctx.group("ctx")
        msg.text = ctx.group("rest").strip()
    msg.text = _NULLS.sub("", msg.text)
    parsing = _PARSING.match(msg.text)
    if parsing:
        msg.parsing = True
        msg.file, msg.line = parsing.group("file"), int(parsing.group("line"))
        msg.text = parsing.group("rest").strip()
        return msg
    bracket = _BRACKET.match(msg.text)
    if bracket:
        msg.file, msg.line = bracket.group("file"), int(bracket.group("line"))
        msg.text = bracket.group("rest").strip()
        return msg
    inline = _INLINE.search(msg.text) or _DECLARED.search(msg.text)
    if inline:
        msg.file, msg.line = inline.group("file"), int(inline.group("line"))
    return msg
