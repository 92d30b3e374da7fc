"""The list filters' previous results, brought up to date by what changed since.

At 10,000 Ingresses one changed Ingress leaves 9,999 fragments (and their routes) the very
same objects as in the previous render; the lists built from them — 20,000 routes selected,
sorted, made unique, grouped and written as map lines several times over — differ from the
previous call's in one place. Done from scratch, those passes were most of such a render.
Here each call of a memoized filter over a long list finds the previous call with the same
filter and arguments whose input shares the longest common head and tail with this one
(compared by identity, in C), and computes only the items in between; the rest of its result
is the previous one's, spliced (in C) or, for sorts and groups, updated in place of a copy.

The result must be what the filter computes from scratch, byte for byte. That holds because a
reused per-item result depends only on the item, which is the very same object, and on the
filter's arguments, which are equal as templates can tell (:func:`same_argument`), and because
every value a result is made of cannot change while its holder stays the same object:

* an item is walked only through plain ``dict`` (templates cannot mutate one: the sandbox is
  immutable), :class:`~controller.resources.FrozenDict` (stored objects), ``list``/``tuple``,
  a :class:`~controller.render.grown.GrownList` already shared (never appended to again) and
  a :class:`~controller.render.fragments.Fragment`'s exports;
* a value that decides a result (a test's argument, a sort or group key) is a scalar;
* anything else — a namespace (assignable), a missing attribute (an undefined whose use may
  raise), a test that reads the context, a NaN — raises :class:`Unsafe`, and the filter
  computes the call the way it always has, lazily where Jinja2 is lazy, errors included.

Filters that Jinja2 makes lazy (``map``, ``selectattr``, ``unique``) stay iterators here
(:class:`Listed`: no ``len``, always true), so a template cannot tell the two paths apart;
the memoized filters read a fresh :class:`Listed` as the list it wraps.

``tests/render/test_render_listmemo.py`` compares every memoized filter with its plain
result over random edit sequences; the quickstart's incremental property test covers them in
place. Entries hold the latest few inputs and results per (filter, arguments) — about a
dozen lists of the largest collection's size — and lists under :data:`MIN_ITEMS` are never
memoized.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import chain, compress, count, islice, repeat, starmap
from operator import attrgetter, eq, is_, is_not, itemgetter
from typing import Any

from controller.render.filters import Group, none_first
from controller.render.fragments import Fragment, same_argument
from controller.render.grown import GrownList, mark_shared
from controller.render.runs import same_ends, same_items
from controller.render.runs import scattered as _scattered
from controller.resources import MISSING, FrozenDict

__all__ = [
    "MIN_ITEMS",
    "ListMemos",
    "Listed",
    "Tagged",
    "Unsafe",
    "jinja_column",
    "memos_of",
    "one_family",
    "path_column",
    "scalar",
    "scalars",
]

MIN_ITEMS = 64
"""Shorter lists are computed directly: the bookkeeping would cost more than it saves."""

_PER_KEY = 4
_MAX_KEYS = 512
_GOOD_ENOUGH = 2
"""An earlier call whose input differs from this one's by one replaced item (or less) is
taken without comparing the older ones: each comparison is a pass over the whole list, and
a memoized filter is called some thirty times per render."""


_UNIFORM = 8
"""Lists of uniform flags :class:`ListMemos` keeps at most (a few lengths, true or false)."""


class Unsafe(Exception):
    """This call's results could change while its items stay the same objects: compute it
    the plain way."""


class Listed:
    """An iterator over a finished list: what a lazy filter returns from the memoized path.

    To templates it is the generator Jinja2's filter returned: no ``len``, always true, read
    once (a second pass finds it exhausted), nothing reachable by attribute (the sandbox
    hides names starting with ``_``). The memoized filters take the list itself while it is
    unread (:meth:`_take`), and it is then used up, as a generator would be."""

    __slots__ = ("_it", "_items")

    def __init__(self, items: list[Any]) -> None:
        self._items = items
        self._it: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        if self._it is None:
            self._it = iter(self._items)
        return self._it

    def __next__(self) -> Any:
        return next(iter(self))

    def _take(self) -> list[Any] | None:
        if self._it is not None:
            return None
        self._it = iter(())
        return self._items


def as_list(value: Any) -> list[Any] | None:
    """The items of ``value`` as a list the caller may keep, or None when it is not a list,
    tuple or unread :class:`Listed` of at least :data:`MIN_ITEMS` items (a :class:`Listed`
    of fewer is left unread)."""
    tp = type(value)
    if tp is Listed:
        listed: Listed = value
        if len(listed._items) < MIN_ITEMS:
            return None
        return listed._take()
    if (tp is list or tp is tuple or tp is GrownList) and len(value) >= MIN_ITEMS:
        # A plain list is never changed in place (the sandbox has no mutating method, and
        # a namespace grows only a GrownList it made): kept as it is, not copied.
        return value if tp is list else list(value)
    return None


# -- values that cannot change under the same holder -----------------------------------------


def scalar(value: Any) -> Any:
    """``value`` if it is a scalar that keeps its order and equality (no NaN), else Unsafe."""
    tp = type(value)
    if tp is str or tp is int or tp is bool or value is None:
        return value
    if tp is float and not math.isnan(value):
        return value
    raise Unsafe


def _container(value: Any) -> int:
    """1 for a mapping, 2 for a sequence, 0 for a leaf that cannot change; Unsafe else."""
    tp = type(value)
    if tp is dict or tp is FrozenDict:
        return 1
    if tp is list or tp is tuple:
        return 2
    if tp is GrownList:
        if not value._shared:
            raise Unsafe
        return 2
    if tp is str or tp is int or tp is bool or tp is float or value is None:
        return 0
    raise Unsafe


def jinja_walk(item: Any, parts: list[Any]) -> Any:
    """What Jinja2's attribute getter (through the environment's ``getitem``) finds at
    ``parts``, when every step is an item that exists; Unsafe otherwise (an undefined, a
    method found by name, a namespace...)."""
    cur = item
    for part in parts:
        if type(cur) is Fragment:
            exports = cur._exports
            if type(part) is not str or part[:1] == "_" or part not in exports:
                raise Unsafe
            cur = mark_shared(exports[part])
            continue
        kind = _container(cur)
        if kind == 1:
            try:
                if part not in cur:
                    raise Unsafe
            except TypeError:
                raise Unsafe from None
            cur = cur[part]
        elif kind == 2 and type(part) is int and 0 <= part < len(cur):
            cur = cur[part]
        else:
            raise Unsafe
    return cur


# -- the same walks over a whole list, in C --------------------------------------------------
#
# A long list's first call (every call of a full render) walks every item. Where all items
# are of one plain kind and the path is one name, the walk is a C loop over the list; the
# result is what the walk gives item by item. Anything else answers None, and the caller
# walks item by item as before (raising Unsafe where the walk does).

_MAPPINGS: frozenset[type] = frozenset((dict, FrozenDict))
_SCALARS = frozenset({str, int, bool, type(None)})
"""The scalar types :func:`scalar` returns unchanged whatever the value (a float may be NaN)."""
_exports = attrgetter("_exports")


def scalars(values: list[Any], missing: bool = False) -> bool:
    """Would :func:`scalar` return every one of ``values`` unchanged (``missing``: MISSING
    allowed too)? Checked by type, in C; False for a float (it may be NaN)."""
    types = set(map(type, values))
    if missing and object in types:  # MISSING is a bare object
        types.discard(object)
        if any(type(v) is object and v is not MISSING for v in values):
            return False
    return types <= _SCALARS


def jinja_column(items: list[Any], parts: list[Any]) -> list[Any] | None:
    """``[jinja_walk(x, parts) for x in items]`` when ``parts`` is empty, or names that every
    item holds in turn, all of them plain dicts or stored objects at each step (``spec.x``
    over Ingresses), or one name that every fragment exports; else None."""
    if not parts:
        return list(items)
    part = parts[0]
    if type(part) is not str:
        return None
    types = set(map(type, items))
    try:
        if types <= _MAPPINGS:
            out = list(map(itemgetter(part), items))
            for part in parts[1:]:
                if type(part) is not str or not set(map(type, out)) <= _MAPPINGS:
                    return None
                out = list(map(itemgetter(part), out))
            return out
        if len(parts) == 1 and types == {Fragment} and part[:1] != "_":
            out = list(map(itemgetter(part), map(_exports, items)))
            if GrownList in set(map(type, out)):
                grown = compress(out, map(is_, map(type, out), repeat(GrownList)))
                any(map(setattr, grown, repeat("_shared"), repeat(True)))  # mark_shared, in C
            return out
    except KeyError:
        return None
    return None


def path_column(items: list[Any], path: tuple[Any, ...]) -> list[Any] | None:
    """``[path_walk(x, path) for x in items]`` when ``path`` is one name and every item is a
    plain dict or stored object; None otherwise."""
    if len(path) != 1 or type(path[0]) is not str or not set(map(type, items)) <= _MAPPINGS:
        return None
    return list(map(dict.get, items, repeat(path[0]), repeat(MISSING)))


def path_walk(item: Any, path: tuple[Any, ...]) -> Any:
    """:func:`controller.resources.lookup` (MISSING when a step does not exist), walking only
    containers that cannot change; Unsafe otherwise."""
    cur = item
    for seg in path:
        kind = _container(cur)
        if kind == 1:
            if type(seg) is not str:
                return MISSING  # lookup: an int step into a mapping does not exist
            cur = cur.get(seg, MISSING)
            if cur is MISSING:
                return MISSING
        elif type(seg) is int or isinstance(seg, int):
            if kind == 2 and seg < len(cur):
                cur = cur[seg]
            else:
                return MISSING
        else:
            return MISSING
    return cur


# -- the memo ---------------------------------------------------------------------------------


class _Entry:
    """One earlier call: its arguments, its input and what the filter kept of its work."""

    __slots__ = ("args", "items", "state")

    def __init__(self, args: Any, items: list[Any], state: Any) -> None:
        self.args = args
        self.items = items
        self.state = state


class Match:
    """How this call's input differs from an earlier call's: the items at ``old_at`` of the
    earlier input (``old``) gave way to those at ``new_at`` of this one (``new``); every other
    item is the same object, in the same order.

    Two shapes: inputs of one length that differ at a few scattered places (a changed route
    sorted into the middle of the list), and a run between a common head and tail (an item
    added or removed)."""

    __slots__ = ("entry", "head", "new", "new_at", "old", "old_at", "rest", "shift")

    def __init__(
        self, entry: _Entry, items: list[Any], at: list[int] | None, head: int = 0, tail: int = 0
    ) -> None:
        self.entry = entry
        was = entry.items
        if at is not None:
            self.old_at = self.new_at = at
            self.old = [was[i] for i in at]
            self.new = [items[i] for i in at]
            self.head, self.rest, self.shift = -1, -1, 0
        else:
            self.head, self.rest, self.shift = head, len(was) - tail, len(items) - len(was)
            self.old = was[head : self.rest]
            self.new = items[head : len(items) - tail]
            self.old_at = list(range(head, self.rest))
            self.new_at = list(range(head, head + len(self.new)))

    @property
    def changed(self) -> int:
        return len(self.old) + len(self.new)

    def splice(self, old: list[Any], values: list[Any]) -> list[Any]:
        """A list parallel to the earlier input made parallel to this one: ``values`` (one
        per new item) in place of the entries of the items that gave way."""
        if self.head < 0:
            out = list(old)
            for i, v in zip(self.new_at, values, strict=True):
                out[i] = v
            return out
        return old[: self.head] + values + old[self.rest :]

    def gone(self, q: int) -> bool:
        """Did the earlier input's item at ``q`` give way?"""
        if self.head < 0:
            return q in self.old_at
        return self.head <= q < self.rest

    def renumber(self, q: int) -> int:
        """An unchanged item's position in this input, from its position in the earlier."""
        return q if q < self.head or self.head < 0 else q + self.shift


class ListMemos:
    """The memo of one environment (one renderer), shared by its renders.

    Entries are never changed once stored, only replaced, so a render in another thread may
    read them at any time."""

    def __init__(self) -> None:
        self._sites: dict[Hashable, tuple[_Entry, ...]] = {}
        self._uniform: dict[tuple[int, bool], list[bool]] = {}
        """One list per length of flags that are all true, or all false (see
        :meth:`_flags`)."""

    def find(self, key: Hashable, args: Any, items: list[Any]) -> Match | None:
        """The earlier call under ``key`` with these arguments whose input differs least from
        ``items``, if it differs in few enough places to be worth updating."""
        n = len(items)
        limit = max(8, n // 16)
        probes = range(0, n, max(1, n // 8))
        best: Match | None = None
        for entry in self._sites.get(key, ()):
            if not same_argument(entry.args, args):
                continue
            if len(entry.items) == n:
                if _unlike(entry.items, items, probes):
                    continue
                at = _scattered(entry.items, items, limit)
                if at is None:
                    continue
                match = Match(entry, items, at)
            else:
                head, tail = same_ends(entry.items, items)
                match = Match(entry, items, None, head, tail)
                if match.changed > 2 * limit:
                    continue
            if best is None or match.changed < best.changed:
                best = match
                if match.changed <= _GOOD_ENOUGH:
                    break  # the latest calls come first: older ones cannot differ much less
        return best

    def latest(self, key: Hashable, args: Any) -> _Entry | None:
        """The latest call under ``key`` with these arguments."""
        for entry in self._sites.get(key, ()):
            if same_argument(entry.args, args):
                return entry
        return None

    def store(
        self,
        key: Hashable,
        args: Any,
        items: list[Any],
        state: Any,
        was: Match | _Entry | None,
        bools: bool = False,
    ) -> None:
        """Keep this call, in place of ``was`` (the earlier call it was computed from, when
        that one is now out of date). Its input is stored as a list with the very same items
        the memo holds already, if there is one (see :meth:`_shared`)."""
        entries = self._sites.get(key, ())
        if was is not None:
            stale = was.entry if type(was) is Match else was
            entries = tuple(e for e in entries if e is not stale)
        if key not in self._sites and len(self._sites) >= _MAX_KEYS:
            self._sites.clear()
        items = self._shared(items)
        if type(state) is list:
            state = self._flags(state, bools)
        elif type(state) is _Firsts:
            state.firsts = self._flags(state.firsts, True)  # True and False only, as made
        self._sites[key] = (_Entry(args, items, state), *entries[: _PER_KEY - 1])

    def _flags(self, values: list[Any], bools: bool = False) -> list[Any]:
        """One list for all the flags of one length that are all true, or all false, else
        ``values``.

        A test most routes pass (``selectattr('host')``) or none does, and ``unique`` over
        distinct keys (every item first), keep a flag per item: 160 kB at 20,000 routes each,
        and most such lists at 10,000 Ingresses are all true or all false. The test is one
        pass in C, stopped by the first flag that differs. With ``bools`` (the caller made
        every value True or False), counting the equal ones is that test: ``list.count``
        compares by identity before equality and calls nothing for a bool, about a tenth of
        a call of ``is_not`` per item (18 such lists of 20,000 per warm render at 10k). Any
        other list is tested by identity, as ``1 == True``."""
        n = len(values)
        first = values[0] if n >= MIN_ITEMS else None
        if (first is not True and first is not False) or values[-1] is not first:
            return values
        if values.count(first) != n if bools else any(map(is_not, values, repeat(first))):
            return values
        held = self._uniform.get((n, first))
        if held is None:
            if len(self._uniform) >= _UNIFORM:
                self._uniform.clear()
            held = self._uniform[n, first] = values
        return held

    def _shared(self, values: list[Any]) -> list[Any]:
        """A list the memo holds already with the very same items as ``values``, else
        ``values``.

        One list of routes is the input of half a dozen filters, and a sort's result the
        input of the next: each call kept a copy of its own, 160 kB each at 20,000 routes,
        alive only here. Lists held here are never changed (an update builds a new one), so
        any one of equal ones will do. Each is compared by its item addresses
        (:func:`~controller.render.runs.same_items`, a few microseconds), not item by item."""
        n = len(values)
        if n < MIN_ITEMS:
            return values
        for entries in self._sites.values():
            for entry in entries:
                for held in _held(entry):
                    if held is not values and len(held) == n and same_items(held, values):
                        return held
        return values


def _unlike(old: list[Any], new: list[Any], probes: range) -> bool:
    """Do most of a few evenly spread items differ? Then ``old`` holds other items (another
    candidate's routes, say), and comparing it would give up only after counting its
    differences past the limit. Leaving such an earlier call out is always right (the memo
    then updates from another, or computes), at worst slower."""
    differ = sum(map(is_not, map(old.__getitem__, probes), map(new.__getitem__, probes)))
    return 2 * differ > len(probes)


def _held(entry: _Entry) -> Iterator[list[Any]]:
    """The lists an entry holds: its input, and its state's (a list, or its slots')."""
    yield entry.items
    state = entry.state
    if type(state) is list:
        yield state
        return
    for name in getattr(type(state), "__slots__", ()):
        value = getattr(state, name, None)
        if type(value) is list:
            yield value


def memos_of(environment: Any) -> ListMemos:
    memos: ListMemos | None = getattr(environment, "htc_lists", None)
    if memos is None:
        memos = environment.htc_lists = ListMemos()
    return memos


# -- the shapes of result -------------------------------------------------------------------


_FAMILIES = (frozenset({str}), frozenset({int, bool}))
"""Scalar types that compare with each other in one total order consistent with ``==``."""


def one_family(values: Any) -> bool:
    """Are ``values`` (a list, or a dict's keys) all strings, or all integers and booleans?"""
    types = set(map(type, values))
    return any(types <= f for f in _FAMILIES)


class Tagged:
    """The keys ``sort_by`` gives a whole list (``(1, a, 1, b...)`` per item: every value
    present) as its columns ``a``, ``b``..., each of one family (:func:`one_family`).

    Sorted column by column, last first, each pass stable: the order the keys give (a tuple
    compares its values in turn, and within a family ``==`` and ``<`` agree), with values
    compared directly instead of through tuples; the keys are built once, in sorted order."""

    __slots__ = ("columns",)

    def __init__(self, columns: list[list[Any]]) -> None:
        self.columns = columns

    def sort(self, items: list[Any]) -> _Sorted:
        order = list(range(len(items)))
        for column in reversed(self.columns):
            order.sort(key=column.__getitem__)
        placed = [list(map(column.__getitem__, order)) for column in self.columns]
        return _Sorted(list(map(items.__getitem__, order)), None, _positions(order), placed)


Batch = Callable[[list[Any]], Any]
"""``[each(x) for x in xs]`` computed faster, or None where it cannot be (see the columns
above): how the filters compute a whole list from scratch."""


def _all(items: list[Any], each: Callable[[Any], Any], batch: Batch | None) -> list[Any]:
    out = batch(items) if batch is not None else None
    return [each(x) for x in items] if out is None else out


def per_item(
    memos: ListMemos,
    key: Hashable,
    args: Any,
    items: list[Any],
    each: Callable[[Any], Any],
    batch: Batch | None = None,
    bools: bool = False,
) -> list[Any]:
    """``[each(x) for x in items]``, the unchanged items' results taken from the earlier call.
    ``each`` raises Unsafe for an item whose result could change under it; ``batch``, when
    given, computes a whole list from scratch. ``bools``: both only ever give True or False
    (see :meth:`ListMemos._flags`).

    When the items moved (a list sorted again after one changed its key), each is looked up
    by identity in the latest call's instead: still a pass in C over the rest."""
    match = memos.find(key, args, items)
    stale: _Entry | None = None
    if match is not None:
        results = match.splice(match.entry.state, [each(x) for x in match.new])
    else:
        entry = memos.latest(key, args)
        if entry is None:
            results = _all(items, each, batch)
        else:
            results = _carried(entry.items, entry.state, items)
            missing = list(compress(count(), map(is_, results, repeat(_NONE))))
            if 2 * len(missing) <= len(items):
                for i in missing:
                    results[i] = each(items[i])
                stale = entry  # this call is the earlier one brought up to date
            else:  # mostly other items (another call with these arguments): from scratch
                results = _all(items, each, batch)
    memos.store(key, args, items, results, match if stale is None else stale, bools)
    return results


_NONE: Any = object()
"""No result yet (a result may be None itself)."""


def _carried(was: list[Any], values: list[Any], items: list[Any]) -> list[Any]:
    """``values`` (one per item of ``was``) carried over to ``items`` by identity, _NONE for
    an item ``was`` did not hold. Only the run between the common head and tail is looked
    at: aligned with the earlier run in C where it can be (:func:`_aligned`), else looked up
    item by item."""
    head, tail = same_ends(was, items)
    end, stop = len(was) - tail, len(items) - tail
    middle = _aligned(was, values, items, head, end, stop)
    if middle is None:
        get = dict(zip(map(id, was[head:end]), values[head:end], strict=True)).get
        middle = [get(i, _NONE) for i in map(id, items[head:stop])]
    return values[:head] + middle + values[end:]


_EDITS = 16
_WINDOW = 8


def _aligned(
    was: list[Any], values: list[Any], items: list[Any], head: int, end: int, stop: int
) -> list[Any] | None:
    """The values for ``items[head:stop]`` when it is ``was[head:end]`` with at most
    :data:`_EDITS` items taken out, put in or replaced, a few next to each other (changed
    items sorted to other places shift all those between by as many): runs of the same
    objects are matched in C and their values copied; an item put in gets the value of the
    same object taken out (one that moved), else _NONE. None when it is not such a list."""
    out: list[Any] = []
    put: list[int] = []  # where in `out` the items put in are
    taken: list[int] = []  # where in `was` the items taken out were
    i = j = head
    edits = 0
    while True:
        run = next(
            compress(count(), map(is_not, islice(was, j, end), islice(items, i, stop))), None
        )
        if run is None:
            run = min(end - j, stop - i)
        out += values[j : j + run]
        i += run
        j += run
        if i == stop or j == end:
            break
        edits += 1
        if edits > _EDITS:
            return None
        x, y = items[i], was[j]
        gone = next((d for d in range(1, _WINDOW) if j + d < end and was[j + d] is x), 0)
        if gone:
            taken += range(j, j + gone)
            j += gone
            continue
        came = next((d for d in range(1, _WINDOW) if i + d < stop and items[i + d] is y), 0)
        if came:
            put += range(len(out), len(out) + came)
            out += [_NONE] * came
            i += came
            continue
        taken.append(j)  # replaced
        put.append(len(out))
        out.append(_NONE)
        i += 1
        j += 1
    if end - j + stop - i > _WINDOW * _EDITS:
        return None
    taken += range(j, end)
    put += range(len(out), len(out) + stop - i)
    out += [_NONE] * (stop - i)
    if put and taken:
        moved = {id(was[q]): values[q] for q in taken}
        for at in put:
            out[at] = moved.get(id(items[head + at]), _NONE)
    return out


class _Sorted:
    """A stable sort's result with each item's key and its position in the input.

    The keys of a :class:`Tagged` sort are kept as its columns in sorted order, and stay so
    while later calls update the sort with keys of that shape (:func:`_recolumned`): a key
    ``(1, a, 1, b...)`` per item is a tuple of 56-72 bytes, some 4 MB over the quickstart's
    sorts at 10,000 Ingresses, where a column holds the values themselves. A key of another
    shape makes them keys (:attr:`keys`). The positions are machine integers: most are over
    256, and each of those is an object of 32 bytes in a list."""

    __slots__ = ("_keys", "columns", "out", "pos")

    def __init__(
        self,
        out: list[Any],
        keys: list[Any] | None,
        pos: array[int],
        columns: list[list[Any]] | None = None,
    ) -> None:
        self.out = out
        self._keys = keys
        self.columns = columns
        self.pos = pos

    @property
    def keys(self) -> list[Any]:
        keys = self._keys
        if keys is None:  # the same list whoever builds it first
            tagged = chain.from_iterable(map(_tag, self.columns or ()))
            keys = self._keys = list(zip(*tagged, strict=False))  # each repeat(1) is endless
        return keys


def _positions(order: Iterable[int]) -> array[int]:
    return array("i", order)


def _tag(column: list[Any]) -> tuple[Iterator[int], list[Any]]:
    return repeat(1), column


def sorted_by(
    memos: ListMemos,
    key: Hashable,
    args: Any,
    items: list[Any],
    key_of: Callable[[Any], Any],
    batch: Batch | None = None,
) -> list[Any]:
    """``sorted(items, key=key_of)`` (stable, ascending). ``key_of`` raises Unsafe for a key
    that could change; a key that cannot be compared raises TypeError, as sorting would.
    ``batch``: the keys of a whole list computed from scratch, or their :class:`Tagged`
    columns."""
    match = memos.find(key, args, items)
    state: _Sorted | None = None
    if match is not None:
        try:
            state = _resorted(match, key_of)
        except TypeError:
            state = None  # let the sort from scratch raise, or not, as it would
    if state is None:
        got = batch(items) if batch is not None else None
        if type(got) is Tagged:
            state = got.sort(items)
        else:
            keys = [key_of(x) for x in items] if got is None else got
            order = sorted(range(len(items)), key=keys.__getitem__)
            state = _Sorted(
                list(map(items.__getitem__, order)),
                list(map(keys.__getitem__, order)),
                _positions(order),
            )
    memos.store(key, args, items, state, match)
    return list(state.out)


def _resorted(match: Match, key_of: Callable[[Any], Any]) -> _Sorted:
    """The earlier sort with the items that gave way taken out and the new ones put in.

    Among equal keys the input order decides, so each item's input position is kept beside
    it: an item that gave way is found by its key, identity and position; a new one goes
    before the first of its key that comes after it in the input."""
    was: _Sorted = match.entry.state
    columns = was.columns if was._keys is None else None
    if columns:
        olds = _untagged(list(map(key_of, match.old)), columns)
        news = _untagged(list(map(key_of, match.new)), columns)
        if olds is not None and news is not None:
            return _recolumned(match, was, columns, olds, news)
    out, keys, pos = list(was.out), list(was.keys), array("i", was.pos)
    for x, q in zip(match.old, match.old_at, strict=True):
        k = key_of(x)
        lo, hi = bisect_left(keys, k), bisect_right(keys, k)
        at = next((i for i in range(lo, hi) if pos[i] == q and out[i] is x), None)
        if at is None:
            raise TypeError("an item left the sort under another key")  # cannot happen
        del out[at], keys[at], pos[at]
    if match.shift:
        pos = _positions(map(match.renumber, pos))
    for x, p in zip(match.new, match.new_at, strict=True):
        k = key_of(x)
        lo, hi = bisect_left(keys, k), bisect_right(keys, k)
        at = next((i for i in range(lo, hi) if pos[i] > p), hi)
        out.insert(at, x)
        keys.insert(at, k)
        pos.insert(at, p)
    return _Sorted(out, keys, pos)


_FAMILY_OF = {str: frozenset({str}), int: frozenset({int, bool}), bool: frozenset({int, bool})}


def _untagged(keys: list[Any], columns: list[list[Any]]) -> list[tuple[Any, ...]] | None:
    """Each key ``(1, a, 1, b...)`` as its values ``(a, b...)``; None when one has another
    shape (a missing value is ``(0, "")``) or a value is not of its column's family (a float
    among integers): the columns would not order it as the keys do."""
    tags = (1,) * len(columns)
    families = [_FAMILY_OF[type(c[0])] for c in columns]
    out = []
    for k in keys:
        if type(k) is not tuple or len(k) != 2 * len(tags) or k[::2] != tags:
            return None
        values = k[1::2]
        for v, family in zip(values, families, strict=True):
            if type(v) not in family:
                return None
        out.append(values)
    return out


def _span(columns: list[list[Any]], values: tuple[Any, ...]) -> tuple[int, int]:
    """Where the key of ``values`` starts and ends in the sorted columns: each column is
    sorted within each run of equal values of the ones before it."""
    lo, hi = 0, len(columns[0])
    for column, v in zip(columns, values, strict=True):
        lo, hi = bisect_left(column, v, lo, hi), bisect_right(column, v, lo, hi)
    return lo, hi


def _recolumned(
    match: Match,
    was: _Sorted,
    columns: list[list[Any]],
    olds: list[tuple[Any, ...]],
    news: list[tuple[Any, ...]],
) -> _Sorted:
    """:func:`_resorted` of a sort kept as columns, the keys given as their values."""
    out, pos = list(was.out), array("i", was.pos)
    columns = [list(c) for c in columns]
    for x, q, values in zip(match.old, match.old_at, olds, strict=True):
        lo, hi = _span(columns, values)
        at = next((i for i in range(lo, hi) if pos[i] == q and out[i] is x), None)
        if at is None:
            raise TypeError("an item left the sort under another key")  # cannot happen
        del out[at], pos[at]
        for column in columns:
            del column[at]
    if match.shift:
        pos = _positions(map(match.renumber, pos))
    for x, p, values in zip(match.new, match.new_at, news, strict=True):
        lo, hi = _span(columns, values)
        at = next((i for i in range(lo, hi) if pos[i] > p), hi)
        out.insert(at, x)
        pos.insert(at, p)
        for column, v in zip(columns, values, strict=True):
            column.insert(at, v)
    return _Sorted(out, None, pos, columns)


class _Firsts:
    """Each item's key, whether it is the first of its key, and the keys as a set when every
    one is distinct (the routes' map keys: each item is first)."""

    __slots__ = ("firsts", "keys", "members")

    def __init__(self, keys: list[Any], firsts: list[bool], members: _Members | None) -> None:
        self.keys = keys
        self.firsts = firsts
        self.members = members


_OVERLAY = 64


class _Members:
    """A set of keys, ``base`` minus ``gone`` plus ``extra``: a few keys replaced make a new
    one that shares ``base`` (never changed once made) instead of copying 20,000 keys."""

    __slots__ = ("base", "extra", "gone")

    def __init__(
        self,
        base: frozenset[Any],
        gone: frozenset[Any] = frozenset(),
        extra: frozenset[Any] = frozenset(),
    ) -> None:
        self.base = base
        self.gone = gone
        self.extra = extra

    def replaced(self, olds: list[Any], news: list[Any]) -> _Members | None:
        """These keys with ``olds`` (members) taken out and ``news`` put in, or None when a
        new key is a member already (then the keys are no longer distinct)."""
        gone, extra = set(self.gone), set(self.extra)
        for k in olds:
            if k in extra:
                extra.discard(k)
            else:
                gone.add(k)
        base = self.base
        for k in news:
            if k in extra or (k in base and k not in gone):
                return None
            if k in gone:
                gone.discard(k)
            else:
                extra.add(k)
        if len(gone) + len(extra) > _OVERLAY:
            return _Members((base - gone) | extra)
        return _Members(base, frozenset(gone), frozenset(extra))


def unique_by(
    memos: ListMemos,
    key: Hashable,
    args: Any,
    items: list[Any],
    key_of: Callable[[Any], Any],
    batch: Batch | None = None,
) -> list[Any]:
    """The first item of each key, in input order (Jinja2's ``unique``). Keys are scalars.

    Only the keys of the items that changed can change which item comes first: for each,
    the earlier first item (if it stayed) loses its mark and the first one now gets it."""
    match = memos.find(key, args, items)
    stale: Match | _Entry | None = match
    if match is None:
        latest = memos.latest(key, args)
        if latest is None:
            keys = _all(items, key_of, batch)
        else:  # the items moved (sorted again after one changed): their keys did not
            keys = _carried(latest.items, latest.state.keys, items)
            missing = list(compress(count(), map(is_, keys, repeat(_NONE))))
            if 2 * len(missing) <= len(items):
                for i in missing:
                    keys[i] = key_of(items[i])
                stale = latest  # this call is the earlier one brought up to date
            else:  # mostly other items (another call with these arguments): from scratch
                keys = _all(items, key_of, batch)
        # Each key's first position, in C: the pairs go in last to first, so the position
        # that stays is the first (a loop over 20,000 keys was a few ms per call).
        n = len(keys)
        first = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))
        if len(first) == n:
            firsts = [True] * n
            # A frozenset is built to fit: the table of a grown set can be twice as large,
            # 2 MB against 1 for 20,000 routes' keys, held between renders.
            members = _Members(frozenset(first))
        else:
            firsts = list(map(eq, map(first.__getitem__, keys), range(n)))
            members = None
    else:
        was: _Firsts = match.entry.state
        new_keys = [key_of(x) for x in match.new]
        keys = match.splice(was.keys, new_keys)
        members = was.members
        if members is not None:
            members = members.replaced([was.keys[q] for q in match.old_at], new_keys)
        if members is not None:  # still every key once: every item is first
            firsts = was.firsts if len(was.firsts) == len(keys) else [True] * len(keys)
            memos.store(key, args, items, _Firsts(keys, firsts, members), match)
            return items
        firsts = match.splice(was.firsts, [False] * len(new_keys))
        affected = {*(was.keys[q] for q in match.old_at), *new_keys}
        for k in affected:
            try:
                q = was.keys.index(k)
            except ValueError:
                continue
            if not match.gone(q):
                firsts[match.renumber(q)] = False
        for k in affected:
            try:
                firsts[keys.index(k)] = True
            except ValueError:
                continue
    memos.store(key, args, items, _Firsts(keys, firsts, members), stale)
    return items if members is not None else list(compress(items, firsts))


class _Groups:
    """Each item's key, and the groups in key order with their sort keys.

    When no key is None and all are of one family (:func:`one_family`), the sort keys are
    the keys themselves (``plain``), which order as their ``(1, key)`` would: a tuple per
    group was 56 bytes more, 0.5 MB for the quickstart's 10,000 backends."""

    __slots__ = ("groups", "keys", "order", "plain")

    def __init__(
        self, keys: list[Any], groups: list[Any], order: list[Any], plain: bool = False
    ) -> None:
        self.keys = keys
        self.groups = groups
        self.order = order
        self.plain = plain


def grouped_by(
    memos: ListMemos,
    key: Hashable,
    args: Any,
    items: list[Any],
    key_of: Callable[[Any], Any],
    group: Callable[[Any, list[Any]], Any],
    batch: Batch | None = None,
) -> list[Any]:
    """``group(k, its items)`` for each key, in key order (None first), items in input order.

    Only the groups of the changed items' keys are made again; the others are the earlier
    objects. Keys that cannot be compared raise TypeError, as the sort from scratch would."""
    match = memos.find(key, args, items)
    state: _Groups | None = None
    if match is not None:
        was: _Groups = match.entry.state
        new_keys = [key_of(x) for x in match.new]
        keys = match.splice(was.keys, new_keys)
        affected = {*(was.keys[q] for q in match.old_at), *new_keys}
        plain = was.plain and one_family([*was.order[:1], *affected])
        groups = list(was.groups)
        order = list(was.order) if plain or not was.plain else [(1, k) for k in was.order]
        try:
            for k in affected:
                o = k if plain else none_first(k)
                at = bisect_left(order, o)
                if at < len(order) and order[at] == o:
                    del groups[at], order[at]
                members: list[Any] = []
                first: Any = None
                i = -1
                while True:
                    try:
                        i = keys.index(k, i + 1)
                    except ValueError:
                        break
                    first = keys[i] if not members else first
                    members.append(items[i])
                if members:  # keyed by its first item's key, as a dict keeps it
                    groups.insert(at, group(first, members))
                    order.insert(at, o)
            state = _Groups(keys, groups, order, plain)
        except TypeError:
            state = None
    if state is None:
        keys = _all(items, key_of, batch)
        by: dict[Any, list[Any]] = {}
        for k, x in zip(keys, items, strict=True):
            by.setdefault(k, []).append(x)
        plain = None not in by and one_family(by)
        if plain:  # no key first: by the keys themselves
            ordered = order = sorted(by)
        else:
            ordered = sorted(by, key=none_first)
            order = [none_first(k) for k in ordered]
        pairs = zip(ordered, map(by.__getitem__, ordered), strict=True)
        if group is Group:  # a named tuple: made in C, as its __new__ makes it
            groups = list(map(tuple.__new__, repeat(Group), pairs))
        else:
            groups = list(starmap(group, pairs))
        state = _Groups(keys, groups, order, plain)
    memos.store(key, args, items, state, match)
    return list(state.groups)
