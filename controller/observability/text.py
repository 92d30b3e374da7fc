"""Make untrusted text safe to print on a terminal.

Object names, label values and file names come from whoever can write a manifest. Printed
raw, an escape sequence in an Ingress name can clear the screen, recolour it or move the
cursor, and a newline can forge a whole line ("deployed …") under a rejection. Every place
that prints such text to a person — the ``htc local`` console, console-format logs, the text
and JUnit report formats, rule messages — runs it through :func:`escape_controls` first, so
they all agree on what is unsafe. JSON output needs nothing: its encoder already escapes
every control character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["escape_char", "escape_controls", "escape_value"]

# C0 controls and DEL, C1 controls, the Unicode line and paragraph separators (terminals and
# editors may break lines there), the bidirectional overrides that reorder what a reader sees
# without changing the bytes, and lone surrogates (bytes that were not UTF-8, decoded with
# surrogateescape: a UTF-8 terminal cannot even be handed them).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(char: str, *, named: bool = True) -> str:
    """The visible escape for one unsafe character.

    A surrogate from ``surrogateescape`` stands for one raw byte and is shown as that byte
    (``\\xe9``), so the reader sees what the file held. ``named=False`` writes newline, CR and
    tab as ``\\x0a`` like every other control, for formats that never used the short names.
    """
    if named:
        short = _NAMED.get(char)
        if short is not None:
            return short
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str, *, keep: str = "", named: bool = True) -> str:
    """``text`` with every unsafe character written as a visible escape (``\\x1b``).

    ``keep`` names characters to leave alone, for text that is already laid out in lines by
    trusted code (``keep="\\n"``) or whose tabs must survive for alignment (``keep="\\t"``).
    """
    if not _UNSAFE.search(text):
        return text

    def sub(m: re.Match[str]) -> str:
        char = m.group()
        return char if char in keep else escape_char(char, named=named)

    return _UNSAFE.sub(sub, text)


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
