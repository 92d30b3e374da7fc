"""Make untrusted text safe to print on a terminal.

Object names, label values and file names come from whoever can write a manifest. Printed
raw, an escape sequence in an Ingress name can clear the screen, recolour it or move the
cursor, and a newline can forge a whole line ("deployed …") under a rejection. Every place
that prints such text to a person — the ``htc local`` console, console-format logs — runs it
through :func:`escape_controls` first. JSON output needs nothing: its encoder already escapes
every control character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["escape_controls", "escape_value"]

# C0 controls and DEL, C1 controls, the Unicode line and paragraph separators (terminals and
# editors may break lines there), and the bidirectional overrides that reorder what a reader
# sees without changing the bytes.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    char = m.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str, *, keep: str = "") -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``).

    ``keep`` names characters to leave alone, for text that is already laid out in lines by
    trusted code (``keep="\\n"``) and only needs its untrusted parts neutralised.
    """
    if not _UNSAFE.search(text):
        return text
    if not keep:
        return _UNSAFE.sub(_escape, text)
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


def escape_value(value: Any) -> Any:
    """:func:`escape_controls` applied to every string inside ``value`` (lists, dicts too)."""
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, Mapping):
        return {escape_value(k): escape_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(escape_value(v) for v in value)
    return value
