"""HAProxy's startup log → diagnostics.

HAProxy prints one ``[ALERT]`` line per problem it hit while loading a configuration, with
``[file:line]`` when the problem has a place. Each such line becomes one E7002 diagnostic,
located when the file is part of the deployed set. The summary lines HAProxy adds after the
real alerts ("Fatal errors found…") repeat nothing useful and are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Container

from controller.diagnostics import Diagnostic, Location, Phase, make

_ALERT = re.compile(r"^\[ALERT\]\s*(?:\(\d+\))?\s*:\s*(?P<msg>.*)$")
_WHERE = re.compile(r"\[(?P<file>[^\]\s:]+):(?P<line>\d+)\]")
_NOISE = (
    "Error(s) found in configuration file",
    "Fatal errors found in configuration",
    "Some protocols failed to start their listeners",
    "exit-on-failure",
)

__all__ = ["alerts", "diagnostics_from_log"]


def alerts(log: str) -> list[str]:
    """The alert messages of a startup log, without the HAProxy prefix."""
    out: list[str] = []
    for line in log.splitlines():
        m = _ALERT.match(line.strip())
        if m and not any(n in m.group("msg") for n in _NOISE):
            out.append(m.group("msg").strip())
    return out


def diagnostics_from_log(log: str, files: Container[str]) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    for msg in alerts(log):
        location = None
        for where in _WHERE.finditer(msg):
            if where.group("file") in files:
                location = Location(file=where.group("file"), line=int(where.group("line")))
                break
        diags.append(make("E7002", Phase.DEPLOY, msg, location=location))
    return diags
