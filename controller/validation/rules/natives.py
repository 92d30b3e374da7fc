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
  none the whole match, more than one group is an error; empty matches are skipped. Patterns are RE2's, like those of
  CEL's own ``matches()``: no backreferences or lookaround, which RE2 leaves out so that a
  match takes time linear in the text. A pattern RE2 cannot run is an evaluation error,
  never handed to a backtracking engine instead.

The ``sets`` functions cost time linear in their input (hash sets), like ``contains``:
what bounds a loop-free expression — its size times its input (``budget.py``) — bounds
them too. ``regex.extractAll`` does not have that bound: each match is found in linear
time, but a pattern such as ``a(?:.*z)?`` scans to the end of the text for every one of
its matches, so finding them all is quadratic. It therefore looks at the evaluation's
deadline between matches (``deadline.py``): in-process it stops within one match's time
of the deadline and the batch is reported out of time; in a worker the kill does it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2
from cel_expr_python import cel

from controller.validation.rules import deadline, linelocal

__all__ = ["extension", "remember_scans"]

_CHECK_EVERY = 64
"""Matches between two looks at the deadline (one match costs at most a scan of the text)."""

_MAX_PATTERNS = 64
_MAX_PATTERN_MEMORY = 8 << 20
"""Bytes RE2 may use for one compiled pattern (its automata); past that it runs slower,
still in linear time."""


def _key(value: Any) -> Hashable:
    """A hashable stand-in with CEL's equality: numbers compare by value across int, uint
    and double; bool, string, bytes and null only equal their own kind. A string is its
    own key (the common case, and no other kind's key is a string)."""
    if type(value) is str:
        return value
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, str):
        return str(value)
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
def _compiled(pattern: str) -> re2.Pattern:
    try:
        rx = re2.compile(pattern, max_mem=_MAX_PATTERN_MEMORY)
    except re2.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    if not isinstance(rx, re2.Pattern):
        # The binding hands patterns RE2 cannot run to Python's backtracking engine; those
        # are refused instead.
        raise ValueError(
            f"regular expression {pattern!r} is not one RE2 (the engine of rule patterns) "
            "runs: it uses backreferences or lookaround, or is too large"
        )
    if rx.groups > 1:
        raise ValueError(
            f"regex.extractAll takes at most one capture group; {pattern!r} has {rx.groups}"
        )
    return rx


_scans: linelocal.Scans | None = None
"""Set in the evaluation worker only (:func:`remember_scans`): the controller keeps no texts."""


def remember_scans() -> linelocal.Scans:
    """From now on, this process answers ``regex.extractAll`` of a line-local pattern over a
    large text from the last texts it scanned (``linelocal.py``). The evaluation worker
    does, for the texts of successive proposals; it holds at most 8 MiB of them."""
    global _scans
    if _scans is None:
        _scans = linelocal.Scans()
    return _scans


def _matches(rx: re2.Pattern, text: str) -> Iterator[tuple[int, str]]:
    """Where each kept match starts, and its value. Non-empty matches only: an empty match
    (``x*`` between two characters) carries no text, and the binding reports each one
    several times inside multi-byte characters. Each step of the iteration is one search
    (linear in the text), so looking at the deadline every few matches bounds how far past
    it the call can run."""
    group = 1 if rx.groups else 0
    for count, m in enumerate(rx.finditer(text), 1):
        if m.end() > m.start() and (value := m.group(group)) is not None:
            yield m.start(), value
        if not count % _CHECK_EVERY:
            deadline.check()


def _extract_all(text: str, pattern: str) -> list[str]:
    rx = _compiled(pattern)
    deadline.check()
    scans = _scans
    if scans is not None and len(text) >= linelocal.MIN_TEXT and linelocal.line_local(pattern):
        found = scans.extract(pattern, text, lambda t: _matches(rx, t))
    else:
        found = [value for _, value in _matches(rx, text)]
    deadline.check()
    return found


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
