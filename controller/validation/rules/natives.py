"""Functions that compare whole lists and extract many values in one call, without a loop.

The runtime allows one evaluation 10,000 loop iterations over all its comprehensions, and
that limit is fixed. A rule that loops over the lines of a map (``m.lines.all(l, …)``) hits
it at a few thousand Ingresses, and then nothing can deploy. These functions do the same
work natively, in one call that the iteration budget does not count:

* ``sets.contains(list, sublist)``, ``sets.equivalent(a, b)``, ``sets.intersects(a, b)`` —
  named and defined as in cel-go's ``sets`` extension (which Kubernetes ships): equality of
  elements is CEL's, so ``1 == 1.0`` but ``true != 1``;
* ``regex.extractAll(text, pattern)`` — every match of ``pattern`` in ``text``; with one
  capture group the group's text (a match where the group took no part is left out), with
  none the whole match, more than one group is an error. Patterns use Python's ``re``
  syntax (for ordinary patterns the same as RE2's).

Their cost is linear in their input (hash sets), or — for a pattern that backtracks — worse.
Either way no iteration budget bounds them, so a rule that calls one is never "cheap": it
runs in the forked worker under the rule time budget (see ``budget.py``), like a loop.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

__all__ = ["NATIVE_LOOPS", "extension"]

NATIVE_LOOPS = frozenset(
    {"sets.contains", "sets.equivalent", "sets.intersects", "regex.extractAll"}
)
"""Function names whose work grows with their input although the expression has no loop."""

_MAX_PATTERNS = 64


def _key(value: Any) -> Hashable:
    """A hashable stand-in with CEL's equality: numbers compare by value across int, uint
    and double; bool, string, bytes and null only equal their own kind."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, Mapping):
        return ("map", frozenset((_key(k), _key(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("list", tuple(_key(v) for v in value))
    return ("other", repr(value))


def _set(values: Iterable[Any]) -> set[Hashable]:
    return {_key(v) for v in values}


def _contains(whole: list[Any], part: list[Any]) -> bool:
    have = _set(whole)
    return all(_key(v) in have for v in part)


def _equivalent(a: list[Any], b: list[Any]) -> bool:
    return _set(a) == _set(b)


def _intersects(a: list[Any], b: list[Any]) -> bool:
    have = _set(a)
    return any(_key(v) in have for v in b)


@lru_cache(maxsize=_MAX_PATTERNS)
def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    if rx.groups > 1:
        raise ValueError(
            f"regex.extractAll takes at most one capture group; {pattern!r} has {rx.groups}"
        )
    return rx


def _extract_all(text: str, pattern: str) -> list[str]:
    rx = _compiled(pattern)
    if rx.groups == 0:
        return [m.group(0) for m in rx.finditer(text)]
    return [g for m in rx.finditer(text) if (g := m.group(1)) is not None]


def extension() -> cel.CelExtension:
    """The declarations and implementations, for the rule environment."""
    lists = cel.Type.List(cel.Type.DYN)
    boolean = cel.Type.BOOL

    def pair(name: str, impl: Any) -> cel.FunctionDecl:
        overload = cel.Overload(
            f"{name.replace('.', '_')}_list_list", boolean, [lists, lists], impl=impl
        )
        return cel.FunctionDecl(name, [overload])

    extract = cel.Overload(
        "regex_extractAll_string_string",
        cel.Type.List(cel.Type.STRING),
        [cel.Type.STRING, cel.Type.STRING],
        impl=_extract_all,
    )
    return cel.CelExtension(
        "htc.natives",
        [
            pair("sets.contains", _contains),
            pair("sets.equivalent", _equivalent),
            pair("sets.intersects", _intersects),
            cel.FunctionDecl("regex.extractAll", [extract]),
        ],
    )
