"""Field paths such as ``metadata.labels['kubernetes.io/service-name']``.

``indexBy``, ``ignoreFields`` and field selectors all name a place inside an object. Label keys
routinely contain dots and slashes, so plain dotted paths cannot reach them; a bracketed,
quoted segment can. Integer brackets (``spec.ports[0].port``) reach into lists for lookups.
Paths are parsed once, when a collection is configured, so a typo is reported up front with
the offending column instead of silently indexing every object under an empty key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Segment = str | int
"""A mapping key, or a list index."""

FieldPath = tuple[Segment, ...]

MISSING: Any = object()
"""Returned by :func:`lookup` when the path does not exist (distinct from an explicit null)."""


class FieldPathError(ValueError):
    """A field path could not be parsed; the message names the path and the column."""


def parse_path(text: str) -> FieldPath:
    """Split ``a.b['c.d'][0]`` into ``("a", "b", "c.d", 0)``."""
    segments: list[Segment] = []
    i, n = 0, len(text)
    expect_name = True  # at the start and after a dot, a bare name must follow

    def fail(reason: str, at: int) -> FieldPathError:
        return FieldPathError(f"invalid field path {text!r}: {reason} at column {at + 1}")

    if not text:
        raise FieldPathError("invalid field path '': a path must not be empty")
    while i < n:
        ch = text[i]
        if ch == "[":
            i, seg = _bracket(text, i, fail)
            segments.append(seg)
            expect_name = False
        elif ch == ".":
            if expect_name:
                raise fail("empty segment", i)
            i += 1
            expect_name = True
            if i == n:
                raise fail("path ends with a dot", i - 1)
        elif ch == "]":
            raise fail("unbalanced ']'", i)
        else:
            if not expect_name:
                raise fail("expected '.' or '['", i)
            start = i
            while i < n and text[i] not in ".[]":
                i += 1
            segments.append(text[start:i])
            expect_name = False
    return tuple(segments)


def _bracket(text: str, i: int, fail: Any) -> tuple[int, Segment]:
    """Parse ``['key']``, ``["key"]`` (backslash escapes the quote) or ``[12]`` at ``text[i]``."""
    n = len(text)
    j = i + 1
    if j < n and text[j] in "'\"":
        quote = text[j]
        j += 1
        chars: list[str] = []
        while j < n and text[j] != quote:
            if text[j] == "\\" and j + 1 < n:
                j += 1
            chars.append(text[j])
            j += 1
        if j >= n:
            raise fail("unterminated quote", i)
        j += 1
        if j >= n or text[j] != "]":
            raise fail("expected ']' after the quoted key", j)
        return j + 1, "".join(chars)
    end = text.find("]", j)
    if end < 0:
        raise fail("unterminated '['", i)
    inner = text[j:end]
    if not inner.isdigit():
        raise fail("a bracket holds a quoted key or a list index", i)
    return end + 1, int(inner)


def format_path(path: FieldPath) -> str:
    """The canonical spelling, used in messages: dotted where possible, bracketed otherwise."""
    out: list[str] = []
    for seg in path:
        if isinstance(seg, int):
            out.append(f"[{seg}]")
        elif seg and not any(c in seg for c in ".[]'\"\\"):
            out.append(f".{seg}" if out else seg)
        else:
            escaped = seg.replace("\\", "\\\\").replace("'", "\\'")
            out.append(f"['{escaped}']")
    return "".join(out)


def lookup(obj: Any, path: FieldPath) -> Any:
    """The value at ``path``, or :data:`MISSING` when any step does not exist."""
    cur = obj
    for seg in path:
        if type(seg) is str and isinstance(cur, dict):
            # Stored objects are dicts: the common step, without the generic checks below.
            cur = cur.get(seg, MISSING)
            if cur is MISSING:
                return MISSING
        elif isinstance(seg, int):
            if isinstance(cur, Sequence) and not isinstance(cur, str | bytes) and seg < len(cur):
                cur = cur[seg]
            else:
                return MISSING
        elif isinstance(cur, Mapping) and seg in cur:
            cur = cur[seg]
        else:
            return MISSING
    return cur


def scalar_text(value: Any) -> str | None:
    """The string form of a scalar for index keys and field selectors; None for non-scalars.

    Booleans are spelled as in JSON so that a label-like ``true`` and a boolean compare equal.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


StripTree = dict[str, "StripTree | None"]
"""Nested keys to remove; ``None`` marks a leaf (remove the key and everything below it)."""


def strip_tree(paths: Sequence[FieldPath]) -> StripTree:
    """Merge ignore paths into a tree so one walk over an object removes all of them."""
    tree: StripTree = {}
    for path in paths:
        node = tree
        for k, seg in enumerate(path):
            if isinstance(seg, int):
                raise FieldPathError(
                    f"invalid ignore path {format_path(path)!r}: list indexes cannot be ignored"
                )
            last = k == len(path) - 1
            if seg in node and node[seg] is None:
                break  # a shorter path already removes this subtree
            if last:
                node[seg] = None
            else:
                child = node.get(seg)
                if child is None:
                    child = {}
                    node[seg] = child
                node = child
    return tree
