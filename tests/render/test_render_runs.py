"""Where two lists differ, found from their pointer arrays: the same answers as walking the
items (the reference below), on both paths (pointers, and the walk where they cannot be
read)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.render import runs

POOL = [object() for _ in range(6)]


def ref_scattered(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
    at = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a is not b]
    return at if len(at) <= limit else None


def ref_same_ends(old: list[Any], new: list[Any]) -> tuple[int, int]:
    n = min(len(old), len(new))
    head = 0
    while head < n and old[head] is new[head]:
        head += 1
    if head == n:
        return head, 0
    tail = 0
    while tail < n and old[-1 - tail] is new[-1 - tail]:
        tail += 1
    return head, min(tail, n - head)


def ref_find(items: list[Any], item: Any) -> int | None:
    return next((i for i, x in enumerate(items) if x is item), None)


@st.composite
def list_pairs(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """A long list (crossing the chunk and run sizes) and an edited copy of it."""
    n = draw(st.sampled_from([0, 1, 63, 64, 65, 200, 4095, 4096, 4097, 9000]))
    old = [object() for _ in range(n)]
    new = list(old)
    for _ in range(draw(st.integers(0, 6))):
        if not new:
            break
        at = draw(st.integers(0, len(new) - 1))
        kind = draw(st.sampled_from(["replace", "insert", "delete", "same"]))
        if kind == "replace":
            new[at] = draw(st.sampled_from([object(), *POOL]))
        elif kind == "insert":
            new.insert(at, object())
        elif kind == "delete":
            del new[at]
    return old, new


@contextmanager
def reading(fast: bool) -> Iterator[None]:
    """The pointer path, or the item walk taken where pointers cannot be read."""
    saved = runs._OFFSET
    if not fast:
        runs._OFFSET = None
    try:
        yield
    finally:
        runs._OFFSET = saved


def test_item_arrays_are_read_on_this_interpreter() -> None:
    """CI runs CPython release builds: the fast path must be the one taken there."""
    items = [object(), object()]
    assert runs._OFFSET is not None
    assert runs._items_at(items) is not None
    assert runs._items_at((1, 2)) is None  # only lists
    assert runs._items_at([]) is None


@pytest.mark.parametrize("fast", [True, False])
@settings(max_examples=60, deadline=None)
@given(pair=list_pairs(), limit=st.sampled_from([0, 1, 2, 8, 100]))
def test_scattered_and_same_ends_as_item_by_item(
    fast: bool, pair: tuple[list[Any], list[Any]], limit: int
) -> None:
    old, new = pair
    same = len(old) == len(new) and ref_scattered(old, new, 0) == []
    with reading(fast):
        if len(old) == len(new):
            assert runs.scattered(old, new, limit) == ref_scattered(old, new, limit)
        assert runs.same_ends(old, new) == ref_same_ends(old, new)
        assert runs.same_items(old, new) == same


@pytest.mark.parametrize("fast", [True, False])
@settings(max_examples=60, deadline=None)
@given(pair=list_pairs(), pick=st.integers(0, 10_000))
def test_find_item_as_item_by_item(
    fast: bool, pair: tuple[list[Any], list[Any]], pick: int
) -> None:
    _, new = pair
    candidates = [*new[:3], *POOL, object()]
    if new:
        candidates.append(new[pick % len(new)])
    with reading(fast):
        for item in candidates:
            assert runs.find_item(new, item) == ref_find(new, item)


def test_an_address_found_across_two_words_is_not_a_match() -> None:
    """``bytes.find`` can match an address spanning two neighbours: only word-aligned
    matches count."""
    w = runs._WORD
    key = bytes(range(1, w + 1))
    half = w // 2
    # The key's bytes across words 0 and 1, then nowhere else; then also as word 3.
    spanning = bytes(half) + key + bytes(half) + bytes(w)
    assert runs._word(spanning, key) is None
    assert runs._word(spanning + key, key) == 3
    assert runs._word(key + spanning, key) == 0
