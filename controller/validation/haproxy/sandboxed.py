"""Messages ``haproxy -c`` prints only because it runs in the sandbox.

The sandbox withholds the network (a private network namespace whose loopback is down), so
a few checks HAProxy makes at parse time fail there and nowhere else: a ``resolvers``
section connects a UDP socket to each ``nameserver`` and warns when that fails. Reported as
warnings they would fail every ``--strict`` run of a configuration that is fine where HAProxy
runs, so known messages of this kind become info findings (``I4014``) pointing at the
directive they are about. Only warnings are reclassified: a failing exit status stays an
error whatever it printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.validation.keywords import SECTION_KEYWORDS

__all__ = ["SandboxNote", "sandbox_note"]


@dataclass(frozen=True, slots=True)
class SandboxNote:
    line: int | None
    """Line of the directive the message is about, when it was found."""
    reason: str
    """Why the message says nothing about the configuration."""


@dataclass(frozen=True, slots=True)
class _Known:
    pattern: re.Pattern[str]
    section: str
    directive: str
    reason: str


_KNOWN = (
    _Known(
        re.compile(
            r"^resolvers '(?P<section>[^']*)': can't (?:create|connect) socket for "
            r"nameserver '(?P<name>[^']*)'"
        ),
        "resolvers",
        "nameserver",
        "the validation sandbox has no network, so no socket to a nameserver can be opened "
        "there; where HAProxy runs this depends on its network",
    ),
)


def sandbox_note(text: str, config: str) -> SandboxNote | None:
    """A note when ``text`` (a message without its level and context) is a known
    sandbox-only message; ``config`` is the main configuration, to find the line."""
    for known in _KNOWN:
        m = known.pattern.match(text)
        if m is not None:
            line = _find(config, known.section, m.group("section"), known.directive, m["name"])
            return SandboxNote(line, known.reason)
    return None


def _find(config: str, section: str, name: str, directive: str, arg: str) -> int | None:
    """The 1-based line of ``directive arg`` inside ``section name``, else of the header."""
    header: int | None = None
    for number, line in enumerate(config.split("\n"), 1):
        words = line.split()
        if not words:
            continue
        if header is None:
            if words[:2] == [section, name]:
                header = number
            continue
        if words[:2] == [directive, arg]:
            return number
        if words[0] in SECTION_KEYWORDS:
            break
    return header
