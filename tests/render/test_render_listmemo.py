"""The memoized list filters (controller.render.listmemo) give, call after call over an
edited list, what the plain filters give from scratch: items, order, keys kept as first seen,
errors — whatever the edits (replace, insert, delete, move, the same object twice)."""

from __future__ import annotations

import random
import sys
from array import array
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import DictLoader
from jinja2.runtime import Context
from jinja2.utils import Namespace

from controller.render import listmemo
from controller.render.environment import TemplateEnvironment
from controller.render.filters import FILTERS, none_first
from controller.render.grown import GrownList
from controller.render.listfilters import LIST_FILTERS

EXPRESSIONS = [
    "xs | map(attribute='k') | list",
    "xs | map(attribute='sub.0') | list",
    "xs | selectattr('k') | list",
    "xs | selectattr('k', 'eq', 1) | list",
    "xs | rejectattr('k', 'in', ['a', 2]) | list",
    "xs | selectattr('k', 'string') | map(attribute='id') | list",
    "xs | unique(attribute='k') | list",
    "xs | unique(attribute='k', case_sensitive=true) | list",
    "xs | map(attribute='k') | unique | list",
    "xs | sort(attribute='k')",
    "xs | sort(attribute='k,j', case_sensitive=true)",
    "xs | sort_by('k')",
    "xs | sort_by('j', 'k')",
    "xs | sort_by('sub[1]')",
    "xs | sort_by('k') | unique(attribute='j') | sort_by('j') | list",
    "xs | group_by('k')",
    "xs | group_by('j') | map(attribute='items') | list",
    "xs | selectattr('s') | map_entries('s', 'j')",
    "xs | map_entries('s', 'j')",
    "xs | selectattr('k') | first",
    "xs | selectattr('k') | length",
    "xs | map(attribute='sub') | flatten",
    "xs | map(attribute='sub') | list + [xs] | flatten | length",
    "xs | map(attribute='k') | list | flatten",
    "xs | selectattr('m.k') | list",
    "xs | rejectattr('m.k', 'defined') | list",
    "xs | selectattr('m.k', 'eq', 1) | map(attribute='m.k') | list",
    "xs | rejectattr('m.k', 'none') | list",
    "xs | selectattr('m.k', 'in', [1, 'a']) | list",
    "xs | unique(attribute='m.k') | list",
    "xs | sort(attribute='m.k')",
]

KEYS = st.sampled_from([0, 1, 2, True, 1.0, "a", "A", "b", None, float("nan")])
SAFE_KEYS = st.sampled_from([0, 1, 2, True, 1.0, None])
TEXT_KEYS = st.sampled_from(["a", "A", "b", "x y", ""])


@st.composite
def items(draw: Any, n: int) -> dict[str, Any]:
    """An item; most have safe keys of one kind, so most sorts succeed."""
    mixed = draw(st.integers(0, 9)) == 0
    item: dict[str, Any] = {
        "id": n,
        "k": draw(KEYS if mixed else SAFE_KEYS),
        "j": draw(SAFE_KEYS),
        "s": draw(TEXT_KEYS),
        "sub": [draw(SAFE_KEYS), draw(SAFE_KEYS)],
    }
    # m.k: a path of two names, missing (or not a plain mapping) now and then.
    inner = draw(st.integers(0, 59))
    item["m"] = (
        {}
        if inner == 0
        else Namespace(k=1)
        if inner == 1
        else [1]
        if inner == 2
        else {"k": draw(KEYS if mixed else SAFE_KEYS)}
    )
    drop = draw(st.integers(0, 14))
    if drop == 0:
        del item["k"]
    elif drop == 1:
        item["k"] = Namespace(v=n)  # assignable: never memoized through
    elif drop == 2:
        item["sub"] = []
    return item


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["replace", "insert", "delete", "move", "again", "same"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=1,
    max_size=8,
)


def _env(memo: bool) -> TemplateEnvironment:
    env = TemplateEnvironment(DictLoader({e: "{{ " + e + " }}" for e in EXPRESSIONS}))
    env.cache = {}  # compile each expression once per environment
    env.filters.update(FILTERS)
    if memo:
        env.filters.update(LIST_FILTERS)
    return env


def _outcome(env: TemplateEnvironment, expression: str, xs: list[Any]) -> str:
    try:
        return "ok " + env.get_template(expression).render(xs=xs)
    except Exception as exc:  # the error, compared by kind: the plain one comes from Jinja2
        return "error " + type(exc).__name__


PLAIN = _env(False)


@pytest.fixture(autouse=True, scope="module")
def _memo_every_list() -> Iterator[None]:
    saved = listmemo.MIN_ITEMS
    listmemo.MIN_ITEMS = 1
    yield
    listmemo.MIN_ITEMS = saved


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(0, 40), EDITS)
def test_memoized_filters_equal_plain_ones_after_any_edits(
    data: Any, size: int, edits: list[tuple[str, int, int]]
) -> None:
    serial = iter(range(10**6))
    xs = [data.draw(items(next(serial))) for _ in range(size)]
    memo = _env(True)
    plain = PLAIN
    for step in [("same", 0, 0), *edits]:
        op, a, b = step
        if op == "replace" and xs:
            xs[a % len(xs)] = data.draw(items(next(serial)))
        elif op == "insert":
            xs.insert(a % (len(xs) + 1), data.draw(items(next(serial))))
        elif op == "delete" and xs:
            del xs[a % len(xs)]
        elif op == "move" and xs:
            xs.insert(b % len(xs), xs.pop(a % len(xs)))
        elif op == "again" and xs:
            xs.insert(b % (len(xs) + 1), xs[a % len(xs)])
        for expression in EXPRESSIONS:
            got = _outcome(memo, expression, list(xs))
            assert got == _outcome(plain, expression, list(xs)), (expression, step)


def test_a_changed_item_is_all_that_is_computed_again() -> None:
    """The memo is used: after one item changes, the key of that item alone is asked for."""
    memos = listmemo.ListMemos()
    xs = [{"k": i % 7} for i in range(200)]
    asked: list[Any] = []

    def key_of(x: Any) -> Any:
        asked.append(x)
        return x["k"]

    first = listmemo.sorted_by(memos, "site", None, xs, key_of)
    assert first == sorted(xs, key=lambda x: x["k"])
    asked.clear()
    ys = list(xs)
    ys[50] = {"k": 3}
    again = listmemo.sorted_by(memos, "site", None, ys, key_of)
    assert again == sorted(ys, key=lambda x: x["k"])
    assert all(a is b for a, b in zip(again, sorted(ys, key=lambda x: x["k"]), strict=True))
    assert asked == [xs[50], ys[50]]  # the one that left and the one that came


def test_other_items_under_the_same_arguments_are_computed_in_one_batch() -> None:
    """Two call sites with the same filter and arguments (selectattr('special') over two
    lists of fragments) share the memo's key: the second one's items are not looked up one
    by one in the first one's, they are computed from scratch, as a whole."""
    memos = listmemo.ListMemos()
    xs = [{"k": i % 3} for i in range(200)]
    ys = [{"k": i % 5} for i in range(300)]
    each_calls: list[Any] = []

    def each(x: Any) -> Any:
        each_calls.append(x)
        return x["k"] > 1

    def batch(items: list[Any]) -> list[Any]:
        return [x["k"] > 1 for x in items]

    def key_of(x: Any) -> Any:
        each_calls.append(x)
        return x["k"]

    def keys(items: list[Any]) -> list[Any]:
        return [x["k"] for x in items]

    for filter_, one, many in (
        (listmemo.per_item, each, batch),
        (listmemo.unique_by, key_of, keys),
    ):
        first = filter_(memos, filter_.__name__, None, xs, one, many)
        second = filter_(memos, filter_.__name__, None, ys, one, many)
        third = filter_(memos, filter_.__name__, None, xs, one, many)
        assert not each_calls
        if filter_ is listmemo.per_item:
            assert (first, second) == (batch(xs), batch(ys))
        else:
            assert (first, second) == (xs[:3], ys[:5])
        assert third == first
        # A few items of the earlier input still come from it, the others one by one.
        zs = [*xs[:150], *({"k": 9} for _ in range(10))]
        assert filter_(memos, filter_.__name__, None, zs, one, many) is not None
        assert len(each_calls) <= 10
        each_calls.clear()


def test_an_unread_result_reads_like_a_generator() -> None:
    """A memoized lazy filter's result is, to a template, the generator it used to be."""
    env = _env(True)
    xs = [{"k": i} for i in range(100)]
    template = env.from_string(
        "{% set g = xs | selectattr('k') %}{{ g | list | length }} {{ g | list | length }}"
        " {{ g is sequence }} {{ (xs | selectattr('k')) is iterable }} {{ g._items is defined }}"
    )
    assert template.render(xs=xs) == "99 0 False True False"


def test_unique_of_moved_items_asks_only_the_new_ones_for_their_key() -> None:
    """unique after a sort, one item changed its key and sorted to far away (no earlier call
    differs from this input in few places): the others' keys are found by identity, the new
    item's is asked for, and the result is the plain one."""
    memos = listmemo.ListMemos()
    xs = [{"k": i // 2, "n": i} for i in range(100)]
    asked: list[Any] = []

    def key_of(x: Any) -> Any:
        asked.append(x)
        return x["k"]

    def plain(ys: list[Any]) -> list[Any]:
        firsts: dict[Any, Any] = {}
        for y in ys:
            firsts.setdefault(y["k"], y)
        return list(firsts.values())

    assert listmemo.unique_by(memos, "site", None, xs, key_of) == plain(xs)
    asked.clear()
    new = {"k": 3, "n": -1}
    ys = [*xs[1:6], new, *xs[6:]]  # xs[0] left the head, `new` sorted in near key 3
    ys = [*ys[:80], *ys[81:], ys[80]]  # and another moved from the middle to the end
    got = listmemo.unique_by(memos, "site", None, ys, key_of)
    assert got == plain(ys)
    assert all(a is b for a, b in zip(got, plain(ys), strict=True))
    assert asked == [new]


@pytest.mark.parametrize("direction", ["forward", "backward", "pair", "moved"])
def test_an_item_sorted_to_another_place_costs_only_itself(direction: str) -> None:
    """A changed item sorted to far away shifts every item between its two places by one:
    their results are carried over (found in C), and only the new item's is computed; an
    item that is the very same object, sorted elsewhere, keeps its result too."""
    memos = listmemo.ListMemos()
    xs = [{"k": i} for i in range(200)]
    calls: list[Any] = []

    def each(x: Any) -> Any:
        calls.append(x)
        return x["k"] * 2

    listmemo.per_item(memos, "site", None, xs, each)
    calls.clear()
    new = {"k": -1}
    expected = [new]
    if direction == "forward":  # xs[10] changed and sorted to before xs[150]
        ys = [*xs[:10], *xs[11:150], new, *xs[150:]]
    elif direction == "backward":  # xs[150] changed and sorted to before xs[10]
        ys = [*xs[:10], new, *xs[10:150], *xs[151:]]
    elif direction == "pair":  # two routes of one Ingress, each sorted elsewhere
        ys = [*xs[:10], *xs[12:100], new, *xs[100:180], xs[11], *xs[180:]]
    else:  # the very same object sorted elsewhere: its result is kept too
        ys = [*xs[:10], *xs[11:150], xs[10], *xs[150:]]
        expected = []
    got = listmemo.per_item(memos, "site", None, ys, each)
    assert got == [y["k"] * 2 for y in ys]
    assert calls == expected
    zs = list(ys)
    zs[5], zs[190] = zs[190], zs[5]  # two swapped: two places changed
    assert listmemo.per_item(memos, "site", None, zs, each) == [z["k"] * 2 for z in zs]


def test_unique_of_distinct_keys_after_replacements() -> None:
    """Every key distinct (each item first): replaced items keep it so unless a new key is
    one another item has, or two new ones are equal; many replacements in turn (past the
    overlay's size) stay equal to the plain result."""
    memos = listmemo.ListMemos()
    xs = [{"k": f"key-{i}"} for i in range(100)]

    def plain(ys: list[Any]) -> list[Any]:
        firsts: dict[Any, Any] = {}
        for y in ys:
            firsts.setdefault(y["k"], y)
        return list(firsts.values())

    def unique(ys: list[Any]) -> list[Any]:
        return listmemo.unique_by(memos, "site", None, ys, lambda x: x["k"])

    assert unique(xs) == plain(xs)
    steps: list[tuple[int, str]] = [(50, "new-50"), (50, "key-10"), (50, "key-50"), (20, "key-20")]
    steps += [(i % 100, f"round-{i}") for i in range(200)]
    steps += [(3, "round-150"), (7, "x"), (8, "x"), (7, "key-7"), (8, "key-8")]
    for at, k in steps:
        xs = list(xs)
        xs[at] = {"k": k}
        got = unique(xs)
        assert got == plain(xs), (at, k)
        assert all(a is b for a, b in zip(got, plain(xs), strict=True))


def _held_lists(memos: listmemo.ListMemos) -> list[list[Any]]:
    return [
        held for entries in memos._sites.values() for e in entries for held in listmemo._held(e)
    ]


def test_a_call_brought_up_to_date_by_identity_takes_the_earlier_ones_place() -> None:
    """Items sorted again after a change (no earlier input differs in few places): the
    latest call's results are carried over by identity, and that call is then out of date,
    so it is replaced instead of kept beside the new one. A call over other items (another
    list under the same arguments) is kept."""
    memos = listmemo.ListMemos()
    xs = [{"k": i} for i in range(200)]
    others = [{"k": -i} for i in range(200)]
    listmemo.per_item(memos, "site", None, others, lambda x: x["k"])
    listmemo.per_item(memos, "site", None, xs, lambda x: x["k"])
    for n in range(6):
        moved = {"k": 1000 + n}
        xs = [*xs[:10], *xs[11:150], moved, *xs[150:]]
        got = listmemo.per_item(memos, "site", None, xs, lambda x: x["k"])
        assert got == [x["k"] for x in xs]
        assert [len(e.items) for e in memos._sites["site"]] == [200, 200]
        assert memos._sites["site"][0].items == xs
    again = listmemo.per_item(memos, "site", None, others, lambda x: x["k"])
    assert again == [x["k"] for x in others]
    assert memos._sites["site"][1].items == xs  # the other list's entry was found, not added

    ys = [{"k": i // 3} for i in range(300)]
    listmemo.unique_by(memos, "u", None, ys, lambda x: x["k"])
    for n in range(6):
        ys = [*ys[:10], *ys[11:250], {"k": -n}, *ys[250:]]
        got = listmemo.unique_by(memos, "u", None, ys, lambda x: x["k"])
        firsts: dict[Any, Any] = {}
        for y in ys:
            firsts.setdefault(y["k"], y)
        assert got == list(firsts.values())
    assert len(memos._sites["u"]) == 1


def test_lists_with_the_very_same_items_are_held_once() -> None:
    """One list of routes passed to several filters, and a sort's result passed to the next
    filter, are copies with the same items: the memo keeps one of them. Equal but distinct
    items, or another order, are not the same list."""
    memos = listmemo.ListMemos()
    xs = [{"k": i % 50, "n": i} for i in range(300)]
    a = listmemo.per_item(memos, "a", None, list(xs), lambda x: x["k"])
    b = listmemo.per_item(memos, "b", None, list(xs), lambda x: x["k"] + 1)
    s = listmemo.sorted_by(memos, "s", None, list(xs), lambda x: x["k"])
    u = listmemo.unique_by(memos, "u", None, list(s), lambda x: x["n"])
    assert a == [x["k"] for x in xs] and b == [x["k"] + 1 for x in xs]
    assert s == sorted(xs, key=lambda x: x["k"]) and u == s
    entry = {k: memos._sites[k][0] for k in ("a", "b", "s", "u")}
    assert entry["a"].items is entry["b"].items is entry["s"].items
    assert entry["u"].items is entry["s"].state.out
    assert entry["a"].state is not entry["b"].state
    held = _held_lists(memos)
    assert len({id(h) for h in held}) < len(held)

    copies = [dict(x) for x in xs]
    listmemo.per_item(memos, "c", None, copies, lambda x: x["k"])
    listmemo.per_item(memos, "d", None, xs[::-1], lambda x: x["k"])
    assert memos._sites["c"][0].items is copies
    assert memos._sites["d"][0].items is not entry["a"].items
    # a shared list is never changed: updating one call leaves the other's input as it was
    ys = list(xs)
    ys[7] = {"k": 3, "n": -7}
    assert listmemo.per_item(memos, "a", None, ys, lambda x: x["k"]) == [y["k"] for y in ys]
    assert memos._sites["b"][0].items == xs
    assert listmemo.per_item(memos, "b", None, list(xs), lambda x: x["k"] + 1) == b


def test_held_lists_are_compared_by_item_addresses_not_item_by_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After one change, the earlier input held for this call differs from the new one in
    one place; finding that place, and looking for a held list with the very same items,
    compare the lists' item addresses (controller.render.runs), never item by item (a pass
    over 20,000 routes that touches each one: 0.75 ms and more in a large heap)."""
    from controller.render import runs

    memos = listmemo.ListMemos()
    xs = [object() for _ in range(160)]
    listmemo.per_item(memos, "a", None, xs, lambda x: 1)
    ys = list(xs)
    ys[37] = object()
    compared: list[int] = []

    def is_not(a: object, b: object) -> bool:
        compared.append(1)
        return a is not b

    monkeypatch.setattr(listmemo, "is_not", is_not)
    monkeypatch.setattr(runs, "is_not", is_not)
    asked: list[object] = []

    def one(x: object) -> int:
        asked.append(x)
        return 1

    assert listmemo.per_item(memos, "a", None, ys, one) == [1] * 160
    assert asked == [ys[37]]
    assert memos._sites["a"][0].items is ys
    assert len(compared) <= 9  # a few evenly spread probes, never a pass over all 160


def test_long_lists_are_taken_as_they_are_where_nothing_can_change_them() -> None:
    """A plain list is never changed in place (the sandbox has no mutating method): the memo
    keeps the very list it was given, and a lazy filter that keeps every item gives back
    its input, not a copy. A tuple, or a list a namespace may still grow, is copied."""
    xs = [{"k": i + 1} for i in range(100)]
    assert listmemo.as_list(xs) is xs
    grown = GrownList(xs)
    assert listmemo.as_list(grown) == xs and listmemo.as_list(grown) is not grown
    assert type(listmemo.as_list(tuple(xs))) is list
    env = _env(True)
    select = env.filters["selectattr"]
    kept = select(Context(env, {}, "t", {}), xs, "k")
    assert kept._items is xs
    some = select(Context(env, {}, "t", {}), [*xs, {"k": 0}], "k")
    assert list(some) == xs
    unique = env.filters["unique"]
    assert unique(env, xs, attribute="k")._items is xs  # every key distinct


def test_the_kept_keys_of_a_unique_list_are_a_table_sized_to_fit() -> None:
    """The set of distinct keys a unique call keeps between renders is a frozenset: a set
    grown key by key has up to twice its table (2 MB against 1 at 20,000 routes)."""
    memos = listmemo.ListMemos()
    xs = [{"k": f"host{i}"} for i in range(20000)]
    assert listmemo.unique_by(memos, "u", None, xs, lambda x: x["k"]) == xs
    members = memos._sites["u"][0].state.members
    assert type(members.base) is frozenset and len(members.base) == 20000
    grown: set[Any] = set()
    for x in xs:
        grown.add(x["k"])
    assert sys.getsizeof(members.base) < sys.getsizeof(grown)


def _sort_by_key(x: dict[str, Any]) -> tuple[Any, ...]:
    """``sort_by('a', 'b')``'s key: each value tagged as :func:`none_first` tags it."""
    return (*none_first(x.get("a")), *none_first(x.get("b")))


def _sort_by_columns(xs: list[dict[str, Any]]) -> listmemo.Tagged | None:
    columns = [[x.get(p) for x in xs] for p in ("a", "b")]
    if all(listmemo.one_family(c) for c in columns) and None not in columns[0] + columns[1]:
        return listmemo.Tagged(columns)
    return None


@pytest.mark.parametrize("seed", range(6))
def test_a_sort_kept_as_columns_is_updated_as_columns(seed: int) -> None:
    """A sort whose keys came as columns stays columns while the changed items' keys have
    that shape (no key tuple per item, positions as machine integers), and equals a fresh
    sort after any edit; a key of another shape (a missing value, a float among integers)
    turns it into keys, still equal."""
    rng = random.Random(seed)
    memos = listmemo.ListMemos()
    words = ["a", "b", "c", "B", ""]

    def item(odd: bool = False) -> dict[str, Any]:
        x: dict[str, Any] = {"a": rng.choice(words), "b": rng.choice([0, 1, 2, True, 7])}
        if odd:  # a missing value, or a float among the integers
            x.update(rng.choice([{"a": None}, {"b": None}, {"b": 1.5}]))
        return x

    xs = [item() for _ in range(300)]
    columns_kept = 0
    for step in range(60):
        odd = step > 40 and rng.random() < 0.3
        op = rng.choice(["replace", "insert", "delete", "move"])
        i = rng.randrange(len(xs))
        if op == "replace":
            xs[i] = item(odd)
        elif op == "insert":
            xs.insert(i, item(odd))
        elif op == "delete":
            del xs[i]
        else:
            xs.insert(rng.randrange(len(xs)), xs.pop(i))
        got = listmemo.sorted_by(memos, "s", None, list(xs), _sort_by_key, _sort_by_columns)
        assert got == sorted(xs, key=_sort_by_key)
        assert [id(x) for x in got] == [id(x) for x in sorted(xs, key=_sort_by_key)]
        state = memos._sites["s"][0].state
        assert type(state.pos) is array
        if state._keys is None:
            assert state.columns is not None
            columns_kept += step <= 40
    assert columns_kept > 30


def test_flags_made_as_bools_are_found_uniform_without_a_call_per_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller that makes every value True or False says so; its uniform flags are found
    by counting (in C, no call per item), and still held once. Values only equal to True
    (``1``) are never taken for flags: without the promise the test stays by identity."""
    memos = listmemo.ListMemos()
    xs = [object() for _ in range(200)]
    called: list[int] = []

    def is_not(a: object, b: object) -> bool:
        called.append(1)
        return a is not b

    monkeypatch.setattr(listmemo, "is_not", is_not)
    ys = [object() for _ in range(200)]  # other items: no list to share, no comparison
    a = listmemo.per_item(memos, "a", None, list(xs), lambda x: True, bools=True)
    listmemo.per_item(memos, "b", None, ys, lambda x: True, bools=True)
    assert called == []
    assert a == [True] * 200 and memos._sites["a"][0].state is memos._sites["b"][0].state
    mixed = listmemo.per_item(memos, "m", None, list(xs), lambda x: x is not xs[5], bools=True)
    assert mixed[5] is False and memos._sites["m"][0].state is not memos._sites["a"][0].state

    ones: list[object] = [True] * 200
    ones[100] = 1
    listmemo.per_item(memos, "o", None, list(xs), lambda x: ones[xs.index(x)])
    kept = memos._sites["o"][0].state
    assert kept[100] == 1 and type(kept[100]) is int


def test_flags_all_true_or_all_false_are_held_once() -> None:
    """A test every item passes (or none does) keeps one list of flags per length, shared by
    its calls, as does a unique of distinct keys (every item first); mixed flags are kept
    as they are."""
    memos = listmemo.ListMemos()
    xs = [{"k": f"k{i}", "n": i} for i in range(200)]
    listmemo.per_item(memos, "t", None, list(xs), lambda x: True)
    listmemo.per_item(memos, "t2", None, list(xs), lambda x: bool(x["n"] + 1))
    listmemo.per_item(memos, "f", None, list(xs), lambda x: False)
    listmemo.per_item(memos, "m", None, list(xs), lambda x: x["n"] != 100)
    listmemo.unique_by(memos, "u", None, list(xs), lambda x: x["k"])
    state = {k: memos._sites[k][0].state for k in ("t", "t2", "f", "m", "u")}
    assert state["t"] is state["t2"] is state["u"].firsts
    assert state["f"] == [False] * 200 and state["f"] is not state["t"]
    assert state["m"] is not state["t"] and state["m"].count(False) == 1
    # a later call over a changed list still gives its own flags
    ys = list(xs)
    ys[5] = {"k": "k6", "n": -1}
    flags = listmemo.per_item(memos, "t2", None, ys, lambda x: bool(x["n"] + 1))
    assert flags.count(False) == 1 and state["t"] == [True] * 200
    assert listmemo.unique_by(memos, "u", None, ys, lambda x: x["k"]) == ys[:6] + ys[7:]


def _groups_plain(xs: list[dict[str, Any]]) -> list[tuple[Any, list[Any]]]:
    by: dict[Any, list[Any]] = {}
    for x in xs:
        by.setdefault(x.get("g"), []).append(x)
    return [(k, by[k]) for k in sorted(by, key=none_first)]


@pytest.mark.parametrize("seed", range(4))
def test_groups_of_keys_of_one_family_keep_the_keys_as_their_order(seed: int) -> None:
    """Groups whose keys are all strings (or all integers) keep the keys themselves as
    their sort keys, through updates, instead of a ``(1, key)`` tuple per group; a None key
    turns them into tuples, and every result equals the plain grouping."""
    rng = random.Random(seed)
    memos = listmemo.ListMemos()

    def group(k: Any, items: list[Any]) -> tuple[Any, list[Any]]:
        return (k, items)

    def key_of(x: dict[str, Any]) -> Any:
        return x.get("g")

    xs = [{"g": rng.choice("abcdefgh"), "n": i} for i in range(200)]
    kept_plain = 0
    for step in range(40):
        i = rng.randrange(len(xs))
        if step == 30:
            xs[i] = {"n": -1}  # a missing key: None sorts first
        else:
            xs[i] = {"g": rng.choice("abcdefghij"), "n": step}
        got = listmemo.grouped_by(memos, "g", None, list(xs), key_of, group)
        assert got == _groups_plain(xs)
        state = memos._sites["g"][0].state
        if state.plain:
            assert all(type(o) is str for o in state.order)
            kept_plain += 1
        else:
            assert step >= 30 and all(type(o) is tuple for o in state.order)
    assert kept_plain >= 25


def test_another_list_of_the_same_length_is_left_out_before_a_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An earlier call over other items (another candidate's routes) differs at most of a
    few evenly spread probes: it is left out at once, not compared until the count of its
    differences passes the limit. One that differs in a place or two is compared."""
    memos = listmemo.ListMemos()
    xs = [object() for _ in range(400)]
    others = [object() for _ in range(400)]
    listmemo.per_item(memos, "a", None, others, lambda x: 1)
    listmemo.per_item(memos, "a", None, xs, lambda x: 2)
    from controller.render import runs

    compared: list[int] = []
    real = runs.scattered

    def scattered(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
        compared.append(len(old))
        return real(old, new, limit)

    monkeypatch.setattr(listmemo, "_scattered", scattered)
    ys = list(xs)
    ys[123] = object()
    match = memos.find("a", None, ys)
    assert match is not None and match.entry.items is xs and match.new_at == [123]
    assert len(compared) == 1  # xs, not others (the latest call, xs's, came first)
    compared.clear()
    zs = list(others)
    zs[5] = object()
    match = memos.find("a", None, zs)
    assert match is not None and match.entry.items is others
    assert len(compared) == 1  # others: xs was left out by its probes
