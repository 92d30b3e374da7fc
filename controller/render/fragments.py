"""Fragments: a snippet evaluated once per item, each evaluation kept while nothing it read changed.

``fragments('ingress-routes', ours.items, 'ing', tls_hosts=tls_hosts)`` evaluates the snippet
``ingress-routes`` once for every item and returns one :class:`Fragment` per item, in order:
the names its top level set (``f.routes``) and the text it rendered (``{{ f }}``, with its
template locations, so the source map stays exact).

Each evaluation runs in a context of its own that holds only the render-wide names
(``resources``, ``http``, ``extraContext``, ``path_for``), the environment's globals, the item
(under the given name) and the keyword arguments — never the caller's variables. So its result
is a function of those and of what it read through the store view (recorded, see
:mod:`controller.render.incremental`) and of the shared modules it imported. A later render
reuses an item's fragment when

* the item is the very same object (stored objects are frozen, and a snapshot shares every
  unchanged one with the one before; a fragment that is kept is itself the same object, so
  fragments of fragments keep too);
* the keyword arguments are equal as templates can tell (same types and values, keys in the
  same order) to the previous call's, and ``http`` and ``extraContext`` are the same objects
  (the renderer keeps the previous ones while they are equal). They are compared once per
  call, not per item: a changed argument evaluates every item again, so pass what rarely
  changes — unless it is a table the snippet only looks keys up in (:mod:`.keyed`): then
  only the items that asked about a key that now answers otherwise;
* every recorded read gets the same answer, every imported shared module is the very same
  object, and no namespace it created was assigned to since.

At 10,000 Ingresses this is what makes a render after one changed Ingress cost that Ingress
and a pass over the rest, instead of a full render (``bench/render.py``). The outcome is
proven byte for byte by ``tests/render/test_render_incremental.py``: random sequences of
changes, each render compared with a full render by a fresh renderer.

Failures are never kept. A kept fragment charges the size budget what evaluating it charged;
its reads, imports and namespaces count as the caller's, so an output or module that called
``fragments`` is kept or evaluated again exactly as if it had done the work itself. The cache
holds the fragments of the latest call only, one per item.
"""

from __future__ import annotations

import keyword
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, compress, count
from operator import add, attrgetter, methodcaller, truth
from types import MappingProxyType
from typing import Any

from jinja2 import pass_context
from jinja2.nodes import EvalContext
from jinja2.runtime import Context

from controller.render.budget import current as current_meter
from controller.render.context import CURRENT
from controller.render.grown import mark_shared
from controller.render.incremental import (
    Read,
    Recorder,
    Tokens,
    TracingView,
    current_recorder,
    unchanged,
)
from controller.render.keyed import Asking, Keyed, changed_answers, still_answers
from controller.render.runs import find_item, same_ends, scattered
from controller.render.sameness import SCALARS, SEQUENCES
from controller.render.snippets import (
    SHARED_NAMES,
    Namespaces,
    SnippetLoader,
    SnippetTemplate,
    intact,
    namespaces_of,
)
from controller.render.trace import Traced

__all__ = ["Fragment", "fragments", "same_argument"]


class Fragment:
    """One item's evaluation: its exported names as attributes, its text as ``str()``.

    Slotted around its exports (a ``dict`` sharing its keys table with the other fragments
    that export the same names, see :func:`_shared_keys`): at 10,000 Ingresses a render keeps
    30,000 of them."""

    __slots__ = ("_exports", "_text")  # templates cannot reach names starting with "_"

    # No __getattr__: templates read exports through the environment (its getattr and the
    # generated code go to ``_exports``, Jinja2's fallback to ``__getitem__``). With one, every
    # read of a slot (``_exports`` per export read, ``_text`` per output) would pass through
    # Python's attribute hook, which the interpreter does not specialise: about 190
    # instructions more each, 20,000 per render of haproxy.cfg's backends at 10,000 Ingresses.

    def __init__(self, exports: dict[str, Any], text: Traced, *, shared: bool = False) -> None:
        """``shared``: ``exports`` is one of :func:`_shared_keys`'s dicts already."""
        self._exports = exports if shared else _shared_keys(exports)
        self._text = text
        src = text._src
        if type(src) is list and src:
            text._src = _lean_origin(src)

    def __str__(self) -> str:
        return self._text

    def __getitem__(self, name: str) -> Any:
        """``f['routes']`` as ``f.routes`` (Jinja2 tries the item first, e.g. in ``map``).
        A grown list is marked shared, as when read from a namespace: a template that grows
        it then copies it, and the kept fragment never changes (controller.render.grown)."""
        if type(name) is not str or name[:1] == "_":
            raise KeyError(name)
        return mark_shared(self._exports[name])

    def __repr__(self) -> str:
        return f"<fragment {', '.join(self._exports)}>"


_LAYOUTS: dict[tuple[str, ...], Callable[[dict[str, Any]], Any]] = {}
"""Export names, in order → a class whose instances' dicts share those keys (see
:func:`_shared_keys`); emptied when it reaches :data:`_LAYOUTS_MAX` (templates set few
distinct sets of names, but nothing bounds them)."""
_LAYOUTS_MAX = 256
_SHARED_MAX = 30
"""CPython shares an instance dict's keys for up to 30 names; a longer one would not be
smaller than the dict it copies."""


def _layout(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Any] | None:
    """The class for exports of these names in this order (see :func:`_shared_keys`): its
    ``__init__(values)`` sets each name to ``values[name]``, in order. None when a name is
    not one a template can read (an identifier, not a keyword, not starting with ``_``).

    The ``__init__`` is written out per class, one attribute store per name: about three
    times faster than ``setattr`` in a loop (at 10,000 Ingresses, 30,000 fragments per full
    render). Only ASCII identifiers are written into its source (Python would normalize
    others: an export named ``ﬁ`` would be stored as ``fi``); exports with other names are
    kept as they are."""
    layout = _LAYOUTS.get(names)
    if layout is None:
        if not names or len(names) > _SHARED_MAX:
            return None
        for name in names:
            if (
                type(name) is not str
                or not name.isascii()  # Python source NFKC-normalizes other identifiers
                or not name.isidentifier()
                or keyword.iskeyword(name)
                or name[:1] == "_"
            ):
                return None
        stores = "".join(f"    self.{name} = values[{name!r}]\n" for name in names)
        space: dict[str, Any] = {}
        exec(f"def __init__(self, values):\n{stores}", space)  # only identifiers are written
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        layout = _LAYOUTS[names] = type("_Exports", (), {"__init__": space["__init__"]})
    return layout


def _shared_keys(exports: dict[str, Any]) -> dict[str, Any]:
    """An equal ``dict`` whose keys table is shared with every other fragment that exports
    the same names in the same order: the instance dict of an object of a class made for
    those names (CPython keeps such dicts split: one keys table per class, only the values
    per dict). It is a plain ``dict`` all the same, as the compiled attribute access and the
    list memo read it; nothing writes to it. At 10,000 Ingresses a render keeps 30,000
    fragments, whose exports dicts (8 names: 272 B) cost some 120 B less each.

    Only names a template can read are expected (identifiers not starting with ``_``);
    anything else is kept as it is."""
    layout = _layout(tuple(exports))
    if layout is None:
        return exports
    out: dict[str, Any] = layout(exports).__dict__
    return out


def _exports_of(context: Context) -> dict[str, Any]:
    """``_shared_keys(context.get_exported())`` without the dict in between: the names in
    the order ``get_exported`` gives them (its set's), their values from ``context.vars``."""
    names = tuple(context.exported_vars)
    if not names:
        return {}  # what get_exported gives (no layout is made for no names)
    layout = _LAYOUTS.get(names) or _layout(names)  # the table first: one call less
    if layout is None:
        return context.get_exported()
    out: dict[str, Any] = layout(context.vars).__dict__
    return out


_SHAPE = "x"
"""Stands for a piece of unknown origin without a newline in a kept fragment's origin."""


def _lean_origin(pieces: list[str]) -> list[str]:
    """A fragment's pieces as :func:`controller.render.trace.line_sources` needs them: of a
    piece of unknown origin (a value, not template text or a marker) it reads only whether it
    is empty, how many newlines it holds and whether it ends with one. So one that holds none
    becomes one shared string, one that holds some a shared string of as many
    (:func:`_lines_shape`), and an empty one is left out. The fragment's text is joined
    already, and its lines keep their locations.

    Why: those values' strings stayed alive only here, for as long as the fragment is kept:
    at 10,000 backends 60,000 server lines and names, 4.6 MB. The list returned is exactly as
    long as it needs to be (a rendered body's list is over-allocated)."""
    lean = [
        p if type(p) is Traced else _SHAPE if "\n" not in p else _lines_shape(p)
        for p in pieces
        if p or type(p) is Traced
    ]
    return lean[:]


_LINES_SHAPES: dict[tuple[int, bool], str] = {}
"""Shared stand-ins for values with newlines (:func:`_lines_shape`), by newline count and
whether the value ends with one; bounded by :data:`_LINES_SHAPES_MAX`."""
_LINES_SHAPES_MAX = 256


def _lines_shape(piece: str) -> str:
    """A value with newlines as :func:`_lean_origin` keeps it: as many newlines, and
    :data:`_SHAPE` after them unless it ends with one, one shared string per shape. Such a
    value is a backend's server lines (``server_lines``), a whole block of text per kept
    fragment otherwise: at 10,000 backends 2 to 3 MB."""
    key = (piece.count("\n"), piece[-1] == "\n")
    shape = _LINES_SHAPES.get(key)
    if shape is None:
        shape = "\n" * key[0] if key[1] else "\n" * key[0] + _SHAPE
        if len(_LINES_SHAPES) < _LINES_SHAPES_MAX:
            _LINES_SHAPES[key] = shape
    return shape


class _Entry:
    """One item's fragment and what evaluating it read, imported, created and charged.
    A plain class: one is made per evaluated item, and a frozen dataclass costs twice."""

    __slots__ = (
        "asked",
        "call",
        "chars",
        "fragment",
        "item",
        "modules",
        "namespaces",
        "reads",
        "tokens",
        "used",
    )

    def __init__(
        self,
        item: Any,
        call: object,
        fragment: Fragment,
        reads: tuple[Read, ...],
        tokens: Tokens,
        used: tuple[tuple[str, Any], ...],
        modules: tuple[tuple[str, int], ...],
        namespaces: Namespaces,
        chars: int,
        asked: tuple[Any, ...],
    ) -> None:
        self.item = item
        self.call = call
        """The call-arguments token it was evaluated under (see :class:`_Site`)."""
        self.fragment = fragment
        self.reads = reads
        self.tokens = tokens
        self.used = used
        self.modules = modules
        self.namespaces = namespaces
        self.chars = chars
        self.asked = asked
        """The keys it looked up in table arguments: name, key, name, key... (see .keyed)."""


@dataclass(frozen=True, slots=True)
class _Site:
    """The latest call of one snippet under one item name: its arguments and fragments."""

    args: dict[str, Any]
    http: Any
    extra: Any
    call: object
    """A new object whenever the arguments (or ``http``, ``extraContext``) differ."""
    items: list[Any]
    order: list[_Entry]
    """The call's items and their entries, in order (all of them kept or evaluated under
    ``call``): the next call with the same arguments finds the places its items differ by
    identity, in C, and looks at those entries only (see :func:`_unchanged_run`)."""
    chars: int = 0
    """What the entries charged the size budget, together."""
    tokens: tuple[Tokens, ...] = ()
    """The distinct tokens mappings of the entries that read the store."""
    special: tuple[int, ...] = ()
    """Where the entries are that imported modules or whose namespaces are alive."""

    def by_id(self) -> dict[int, _Entry]:
        """Each item's entry by the item's ``id`` (the last one for an item listed twice)."""
        return dict(zip(map(id, self.items), self.order, strict=True))


def same_argument(a: Any, b: Any) -> bool:
    """Equal as templates can tell: same types (``1``, ``1.0`` and ``True`` print
    differently), values and key order; anything else only when it is the same object."""
    if a is b:
        return True
    tp = type(a)
    if tp is not type(b):
        return False
    try:
        if tp in SCALARS:
            return bool(a == b)
        if tp in SEQUENCES:
            return len(a) == len(b) and all(map(same_argument, a, b))
        if tp is dict:
            return len(a) == len(b) and all(
                type(ka) is type(kb) and ka == kb and same_argument(va, vb)
                for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
            )
    except RecursionError:
        return False
    return False


@pass_context
def fragments(
    context: Context, snippet: str, items: Iterable[Any], name: str, **args: Any
) -> list[Fragment]:
    """The ``fragments()`` templates call (see the module docs)."""
    loader = context.environment.loader
    templates = loader.templates if isinstance(loader, SnippetLoader) else {}
    template = templates.get(snippet)
    if not isinstance(template, SnippetTemplate):
        raise LookupError(f"fragments(): no snippet named {snippet!r}")
    if not isinstance(name, str) or not name.isidentifier() or name in SHARED_NAMES:
        raise ValueError(
            f"fragments(): the item's name must be a name other than {sorted(SHARED_NAMES)}"
        )
    clash = sorted(SHARED_NAMES.intersection(args) | ({name} & set(args)))
    if clash:
        raise ValueError(f"fragments(): an argument may not be named {clash[0]!r}")
    scope = CURRENT.get()
    if scope is None:
        raise RuntimeError("fragments() is only available while rendering")
    base = scope._base
    view = scope._view
    raw = view.raw if isinstance(view, TracingView) else None
    http, extra = base.get("http"), base.get("extraContext")

    sites = template._sites
    if sites is None:
        sites = template._sites = {}
    site: _Site | None = sites.get(name)
    lookups = template.lookup_names()
    # Set when only table arguments changed: each one's keys that now answer otherwise.
    changed: dict[str, set[Any]] | None = None
    before = site.call if site is not None else None
    if site is None or site.http is not http or site.extra is not extra:
        site = _Site(args, http, extra, object(), *((site.items, site.order) if site else ([], [])))
    elif not same_argument(site.args, args):
        changed = _changed_tables(site.args, args, lookups)
        site = _Site(args, http, extra, object(), site.items, site.order)
    call = site.call
    asking = Asking()
    tables = {k: Keyed(k, v, asking) for k, v in args.items() if k in lookups and type(v) is dict}
    variables = {**template.globals, **base, **args, **tables}
    evaluate = _Evaluator(template, variables, name, call, asking if tables else None)
    meter = current_meter().get()
    parent = current_recorder().get()
    modules_now: dict[str, Any] = {}
    tokens_now: dict[str, object | None] = {}

    def module_now(module: str) -> Any:
        if module not in modules_now:
            dep = templates.get(module)
            modules_now[module] = (
                dep.make_module(variables, True) if isinstance(dep, SnippetTemplate) else None
            )
        return modules_now[module]

    def token_now(collection: str) -> object | None:
        if collection not in tokens_now:
            try:
                coll = raw.collection(collection) if raw is not None else None
                get = getattr(coll, "content_token", None)
                tokens_now[collection] = get() if get is not None else None
            except Exception:
                tokens_now[collection] = None
        return tokens_now[collection]

    # Entries share their tokens mappings (see _Tokens), so what follows is asked once per
    # distinct mapping, not once per item: at 10,000 Ingresses a render keeps 30,000 entries.
    tokens = _Tokens(token_now)
    pending = fresh = 0

    def keep_or_evaluate(item: Any, entry: _Entry | None) -> _Entry:
        nonlocal pending, fresh
        if (
            entry is not None
            and entry.item is item
            and (
                entry.call is call
                or (
                    changed is not None
                    and entry.call is before
                    and still_answers(entry.asked, changed)
                )
            )
            and raw is not None
            # Each check only when there is something to check: most items are kept.
            and (not entry.namespaces or intact(entry.namespaces))
            and (
                not entry.reads
                or tokens.current(entry.tokens)
                or unchanged(raw, entry.reads, entry.tokens)
            )
            and (not entry.used or all(module_now(m) is module for m, module in entry.used))
        ):
            pending += entry.chars
            if pending >= _CHARGE_AT and meter is not None:
                meter.charge(pending)
                pending = 0
            moved = bool(entry.tokens) and tokens.moved(entry.tokens)
            if moved or entry.call is not call:
                # Checked against this content and these arguments now: next time the tokens
                # and the call will do. (A new entry, not a changed one: a render in another
                # thread may be reading it.)
                entry = _Entry(
                    item, call, entry.fragment, entry.reads,
                    tokens.renewed(entry.tokens) if moved else entry.tokens,
                    entry.used, entry.modules, entry.namespaces, entry.chars, entry.asked,
                )  # fmt: skip
            return entry
        if meter is not None and pending:
            meter.charge(pending)
            pending = 0
        entry = evaluate(item)
        if entry.tokens:
            entry.tokens = tokens.shared(entry.tokens)
        fresh += 1
        return entry

    run = None
    if raw is not None and site.order and call is before:
        run = _unchanged_run(site, items, tokens, module_now)
    if run is not None:
        # Only the places where the items differ from the last call's are looked at.
        seen, at, head, tail = run
        old = site.order
        gone = at if at is not None else range(head, len(old) - tail)
        pending += site.chars - sum(old[i].chars for i in gone)
        if at is not None:
            order = list(old)
            for i in at:
                order[i] = keep_or_evaluate(seen[i], _find(site, seen[i]))
            new_at: Sequence[int] = at
        else:
            new_at = range(head, len(seen) - tail)
            found = _finder(site, head, tail, len(new_at))
            middle = [keep_or_evaluate(seen[i], found(seen[i])) for i in new_at]
            order = old[:head] + middle + old[len(old) - tail :]
        fresh_order = [order[i] for i in new_at]
        chars = site.chars - sum(old[i].chars for i in gone) + sum(map(_CHARS, fresh_order))
        special = _respecial(site, run, [i for i in new_at if _special(order[i])])
        distinct = {id(t): t for t in site.tokens}
        for e in fresh_order:
            if e.reads:
                distinct.setdefault(id(e.tokens), e.tokens)
    else:
        seen, order = [], []
        if site.order:
            by_id = site.by_id()
            for item in items:
                seen.append(item)
                order.append(keep_or_evaluate(item, by_id.get(id(item))))
        else:
            # Nothing to keep (a first call, or only new items): every item evaluated, as
            # keep_or_evaluate would, without a call of it per item.
            shared = tokens.shared
            for item in items:
                seen.append(item)
                entry = evaluate(item)
                if entry.tokens:  # else the one empty mapping already
                    entry.tokens = shared(entry.tokens)
                order.append(entry)
            fresh += len(order)
        chars = sum(map(_CHARS, order))
        # Both in C: the entries that imported modules or left namespaces alive, and the
        # distinct tokens mappings of those that read the store (at 10,000 Ingresses these
        # passes go over 30,000 entries per full render).
        special = tuple(compress(count(), map(truth, map(add, map(_USED, order), map(_NS, order)))))
        read = list(compress(map(_TOKENS, order), map(_READS, order)))
        distinct = dict(zip(map(id, read), read, strict=True))
    if meter is not None and pending:
        meter.charge(pending)
    if parent is not None:
        parent.fresh += fresh
        parent.reads.extend(chain.from_iterable(map(_READS, order)))
        for t in distinct.values():
            for c in t:
                if c not in parent.tokens:
                    parent.tokens[c] = token_now(c)
        for i in special:
            entry = order[i]
            if entry.used:
                parent.used.update(entry.used)
                parent.modules.update(entry.modules)
            if entry.namespaces and parent.created is not None:
                parent.created.extend(weakref.ref(ns) for ns, _ in entry.namespaces)
    sites[name] = _Site(
        site.args, http, extra, call, seen, order, chars, tuple(distinct.values()), special
    )
    return list(map(_FRAGMENT, order))


_CHARGE_AT = 1 << 16
"""Kept fragments charge the size budget together, about this many characters at a time."""
_READS = attrgetter("reads")
_TOKENS = attrgetter("tokens")
_USED = attrgetter("used")
_NS = attrgetter("namespaces")
_CHARS = attrgetter("chars")
_FRAGMENT = attrgetter("fragment")
_FEW = 8
"""Up to this many places where a call's items differ from the last call's are looked at one
by one (:func:`_unchanged_run`); more, and every item between the first and the last is."""


def _special(entry: _Entry) -> bool:
    return bool(entry.used or entry.namespaces)


def _unchanged_run(
    site: _Site,
    items: Iterable[Any],
    tokens: _Tokens,
    module_now: Callable[[str], Any],
) -> tuple[list[Any], list[int] | None, int, int] | None:
    """When the last call's entries (same arguments) are all still good for their items —
    every collection they read holds the very content it held, no namespace of theirs was
    assigned to, every module they imported is the same object: the items, then the places
    where they differ from the last call's (positions, when a few in a list of one length)
    or else the common head and tail around them. None otherwise."""
    if type(items) is not list and type(items) is not tuple:
        return None
    if not all(map(tokens.current, site.tokens)):
        return None
    for i in site.special:
        entry = site.order[i]
        if entry.namespaces and not intact(entry.namespaces):
            return None
        if entry.used and not all(module_now(m) is module for m, module in entry.used):
            return None
    seen = list(items)
    if len(seen) == len(site.items):
        at = scattered(site.items, seen, _FEW)
        if at is not None:
            return seen, at, 0, 0
    head, tail = same_ends(site.items, seen)
    return seen, None, head, tail


def _find(site: _Site, item: Any) -> _Entry | None:
    """The last call's entry of this very item, if it had one."""
    at = find_item(site.items, item)
    return None if at is None else site.order[at]


def _finder(site: _Site, head: int, tail: int, n: int) -> Callable[[Any], _Entry | None]:
    """:func:`_find` for the ``n`` items between a common head and tail: a few are looked
    for one by one; many (an item sorted to far away shifts all those between) in a table
    of the last call's items between the two. (An item listed in the head or tail too is
    then evaluated again: the same text and exports, as a new object.)"""
    if n <= _FEW:
        return lambda item: _find(site, item)
    stop = len(site.items) - tail
    table = dict(zip(map(id, site.items[head:stop]), site.order[head:stop], strict=True))
    return lambda item: table.get(id(item))


def _respecial(
    site: _Site, run: tuple[list[Any], list[int] | None, int, int], fresh: list[int]
) -> tuple[int, ...]:
    """:attr:`_Site.special` after the places of ``run`` changed; ``fresh``: those of them
    whose new entries are special."""
    seen, at, head, tail = run
    if at is not None:
        return tuple(sorted({*(i for i in site.special if i not in at), *fresh}))
    shift = len(seen) - len(site.items)
    stop = len(site.items) - tail
    return (
        *(i for i in site.special if i < head),
        *fresh,
        *(i + shift for i in site.special if i >= stop),
    )


class _Tokens:
    """The tokens mappings of one call's entries, shared among entries that read the same
    collections at the same content, and whether each is still current.

    Every mapping seen stays referenced by an entry for the whole call, so its ``id`` is not
    reused while these tables live; the mapping itself is kept beside each verdict anyway."""

    __slots__ = ("_renewed", "_shared", "_token_now", "_verdicts")

    def __init__(self, token_now: Callable[[str], object | None]) -> None:
        self._token_now = token_now
        self._verdicts: dict[int, tuple[Tokens, bool, bool]] = {}
        self._renewed: dict[int, tuple[Tokens, Tokens]] = {}
        self._shared: dict[tuple[object, ...], Tokens] = {}

    def current(self, tokens: Tokens) -> bool:
        """Does every collection these tokens name still hold the very content it held? Then
        every read of it gets the same answer (see :func:`unchanged`)."""
        return self._verdict(tokens)[1]

    def moved(self, tokens: Tokens) -> bool:
        """Is any of these tokens not the collection's token now (None included)?"""
        return not self._verdict(tokens)[2]

    def _verdict(self, tokens: Tokens) -> tuple[Tokens, bool, bool]:
        hit = self._verdicts.get(id(tokens))
        if hit is None or hit[0] is not tokens:
            now = {c: self._token_now(c) for c in tokens}
            same = all(now[c] is t for c, t in tokens.items())
            current = same and None not in now.values()
            hit = self._verdicts[id(tokens)] = (tokens, current, same)
        return hit

    def renewed(self, tokens: Tokens) -> Tokens:
        """The same collections at their content now, one mapping for all who had ``tokens``."""
        hit = self._renewed.get(id(tokens))
        if hit is None or hit[0] is not tokens:
            fresh = self.shared({c: self._token_now(c) for c in tokens})
            hit = self._renewed[id(tokens)] = (tokens, fresh)
        return hit[1]

    def shared(self, tokens: Tokens) -> Tokens:
        """An equal mapping (same collections, same token objects) seen before, or this one."""
        key = (*tokens, *map(id, tokens.values()))
        return self._shared.setdefault(key, tokens)


def _changed_tables(
    old: dict[str, Any], new: dict[str, Any], lookups: frozenset[str]
) -> dict[str, set[Any]] | None:
    """For each argument that changed, the keys that answer otherwise — when every one of
    them is a table the snippet only looks keys up in (see :mod:`.keyed`); else None."""
    if list(old) != list(new):
        return None
    out: dict[str, set[Any]] = {}
    for k, v in new.items():
        was = old[k]
        if same_argument(was, v):
            continue
        if k not in lookups or type(was) is not dict or type(v) is not dict:
            return None
        out[k] = changed_answers(was, v, same_argument)
    return out


_new = object.__new__
_str_new = str.__new__
_CALL = methodcaller("__call__")
_NO_TOKENS: Tokens = MappingProxyType({})
"""The tokens of every entry that read nothing from the store (most fragments of a library
that computes tables): one shared, unchangeable mapping instead of an empty dict each."""

_NO_TEXT = Traced("", [])
"""What a fragment that rendered nothing shows: one shared object (most fragments of a
library that computes tables render nothing)."""


class _Evaluator:
    """Evaluates the snippet of one ``fragments()`` call for one item at a time; what is the
    same for every item is looked up once per call (at 10,000 Ingresses a full render makes
    30,000 evaluations)."""

    __slots__ = (
        "asking", "autoescape", "blocks", "call", "context_class", "environment", "meter",
        "name", "recorder", "recording", "render", "template_name", "variables",
    )  # fmt: skip

    def __init__(
        self,
        template: SnippetTemplate,
        variables: dict[str, Any],
        name: str,
        call: object,
        asking: Asking | None,
    ) -> None:
        self.environment = template.environment
        self.context_class = template.environment.context_class
        self.render = template.root_render_func
        self.template_name = template.name
        self.blocks = template.blocks
        self.variables = variables
        self.name = name
        self.call = call
        self.asking = asking
        self.meter = current_meter().get()
        self.recording = current_recorder()
        self.recorder = Recorder(track_namespaces=True)
        """Emptied after each evaluation, for the next (one Recorder per item cost ~1 µs)."""
        # Context.__init__'s attributes are set directly (_context) when it is Jinja2's own
        # class and the eval context's autoescape is a plain value.
        auto = self.environment.autoescape
        self.autoescape = None if self.context_class is not Context or callable(auto) else auto

    def _context(self, item: Any) -> Context:
        """Template.new_context(vars, shared=True) with the item added, minus the set of the
        globals' names it builds (only imports without context read it, and these vars hold
        the globals). The item is the context's only own variable instead of a key of a copy
        of the shared variables: every lookup (``resolve``, ``get_all``, ``derived``, the
        generated code's) finds it, and the same value, first, where the copy would have it."""
        environment = self.environment
        if self.autoescape is None:
            return self.context_class(
                environment, {**self.variables, self.name: item}, self.template_name, self.blocks
            )
        context: Context = _new(Context)
        context.parent = self.variables
        context.vars = {self.name: item}
        context.environment = environment
        eval_ctx = context.eval_ctx = _new(EvalContext)
        eval_ctx.environment = environment
        eval_ctx.autoescape = self.autoescape
        eval_ctx.volatile = False
        context.exported_vars = set()
        context.name = self.template_name
        context.globals_keys = set()
        blocks = self.blocks
        context.blocks = {k: [v] for k, v in blocks.items()} if blocks else {}
        return context

    def __call__(self, item: Any) -> _Entry:
        """One item's entry. What ``Traced`` and ``Fragment`` do to the text is written out
        here, with the same result (the lean origin at once, not after the full one): at
        10,000 Ingresses this runs 30,000 times per full render, and those calls cost more
        than their own work. So did a fresh, empty ``tokens`` per item, the ``noted`` dict
        of a call without table arguments, and a generator over the namespaces created."""
        meter = self.meter
        recorder = self.recorder
        token = self.recording.set(recorder)
        before = meter.used_chars if meter is not None else 0
        asking = self.asking
        noted: dict[tuple[str, Any], None] | None = None
        if asking is not None:
            noted = asking.noted = {}
        try:
            context = self._context(item)
            body = list(self.render(context))
        except BaseException:
            self.recorder = Recorder(track_namespaces=True)
            raise
        finally:
            self.recording.reset(token)
            if asking is not None:
                asking.noted = None
        chars = (meter.used_chars - before) if meter is not None else 0
        if body:
            # Traced("".join(body), _lean_origin(body)): Fragment's lean origin at once.
            text: Traced = _str_new(Traced, "".join(body))
            text._src = _lean_origin(body)
        else:
            text = _NO_TEXT
        fragment: Fragment = _new(Fragment)  # Fragment(_exports_of(context), text, shared=True)
        fragment._exports = _exports_of(context)
        fragment._text = text
        del context  # so only the namespaces its exports reach are still alive, and recorded
        reads, used, modules, created = (
            recorder.reads,
            recorder.used,
            recorder.modules,
            recorder.created,
        )
        tokens: Tokens = recorder.tokens
        if tokens:
            recorder.tokens = {}
        else:
            tokens = _NO_TOKENS  # the recorder's empty dict stays for the next item
        alive = [ns for ns in map(_CALL, created) if ns is not None] if created else None
        # _Entry(...) with its slots set here: a call of __init__ per item cost more.
        entry: _Entry = _new(_Entry)
        entry.item = item
        entry.call = self.call
        entry.fragment = fragment
        entry.reads = tuple(reads) if reads else ()
        entry.tokens = tokens
        entry.used = tuple(used.items()) if used else ()
        entry.modules = tuple(modules.items()) if modules else ()
        entry.namespaces = namespaces_of(alive) if alive else ()
        entry.chars = chars - recorder.module_chars
        entry.asked = tuple(chain.from_iterable(noted)) if noted else ()
        if reads:
            reads.clear()
        if used:
            used.clear()
        if modules:
            modules.clear()
        if created:
            recorder.created = []
        recorder.module_chars = recorder.fresh = 0
        return entry
