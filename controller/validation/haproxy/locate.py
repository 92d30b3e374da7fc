"""Find a line for HAProxy messages that name an object but no location.

Post-parse checks say ``Proxy 'fe': unable to find required use_backend: 'missing'.`` without
a file:line. Pointing at the line that mentions ``'missing'`` inside ``frontend fe`` (or at
least at the section header) turns that into a message a template author can act on.
"""

from __future__ import annotations

import re

__all__ = ["locate"]

_PROXY = re.compile(r"\b(?:[Pp]roxy|frontend|backend|listen|defaults|peers|userlist) '([^']+)'")
_SERVER = re.compile(r"'server ([^'/\s]+)/([^'\s]+)'")
_QUOTED = re.compile(r"'([^'\s]+)'")
_HEADER = re.compile(r"^\s*(frontend|backend|listen|defaults|peers|userlist)\s+(\S+)")
_ANY_HEADER = re.compile(
    r"^\s*(global|defaults|frontend|backend|listen|peers|resolvers|userlist|cache|program|"
    r"mailers|ring|http-errors|crt-store|traces|log-forward|fcgi-app)\b"
)


def locate(message: str, config: str) -> int | None:
    """1-based line in ``config`` that ``message`` is most likely about, or None."""
    server = _SERVER.search(message)
    proxy = server.group(1) if server else None
    if proxy is None:
        m = _PROXY.search(message)
        proxy = m.group(1) if m else None
    if proxy is None:
        return None
    lines = config.splitlines()
    start = None
    for i, line in enumerate(lines):
        h = _HEADER.match(line)
        if h and h.group(2) == proxy:
            start = i
            break
    if start is None:
        return None
    end = len(lines)
    for j in range(start + 1, len(lines)):
        if _ANY_HEADER.match(lines[j]):
            end = j
            break
    wanted = [server.group(2)] if server else []
    wanted += [w for w in _QUOTED.findall(message) if w != proxy and w not in wanted]
    for word in wanted:
        token = re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])")
        for j in range(start + 1, end):
            code = lines[j].split("#", 1)[0]
            if token.search(code):
                return j + 1
    return start + 1
