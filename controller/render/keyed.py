"""Table arguments of ``fragments()`` whose keys each evaluation looked up, so a changed table
re-evaluates only the items that asked about a changed key.

``fragments('ingress-routes', facts, 'it', tls_hosts=tls_hosts, ...)``: a new TLS host
changes ``tls_hosts``, and without more knowledge every one of 10,000 Ingresses would be
evaluated again, although only those with that host could route differently. When the
snippet's every use of an argument is a key lookup, what an evaluation got from the table
is a function of the keys it asked about, and those can be recorded.

Which uses those are is decided from the snippet's syntax (:func:`keyed_names`), before
anything runs, so no path of Python or Jinja2 can read the table unrecorded: an argument
qualifies when every mention of it is

* ``key in table`` or ``key not in table`` (a comparison of one operator);
* ``table.get(key)`` or ``table.get(key, default)``, called right there;
* the test of an ``{% if %}``, ``{% elif %}``, ``x if table else y``, ``not table`` or of a
  ``{% for ... if table %}`` (emptiness);

outside any macro or call block (a macro could be exported and called after the evaluation,
against the table it closed over), in a snippet that includes, extends or imports nothing
with its context and never assigns the name. Anything else — iterating it, passing it on,
``table[key]`` (Jinja2 falls back to attributes, methods included), ``table | length`` —
leaves the argument as it was: any change evaluates every item again.

A qualifying ``dict`` argument reaches the evaluations as a :class:`Keyed` copy that notes
each key asked about (and emptiness). When the next call differs only in qualifying tables,
an entry is kept if none of the keys it asked about gets another answer
(:func:`changed_answers`; answers compared as templates can tell).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from jinja2 import nodes

__all__ = ["EMPTINESS", "Asking", "Keyed", "changed_answers", "keyed_names", "still_answers"]

EMPTINESS: Any = object()
"""The 'key' an emptiness test asked about."""

_TRUTH_TESTS = (nodes.If, nodes.CondExpr, nodes.For)
_NEVER = (nodes.Include, nodes.Extends, nodes.Block)
_DEFERRED = (nodes.Macro, nodes.CallBlock)


class Asking:
    """Where the tables of one ``fragments()`` call note what is asked of them while an
    evaluation runs (``noted``: (argument name, key) → None, in the order first asked; None
    between evaluations). One holder for all of them, so an evaluation starts and ends the
    noting with one assignment."""

    __slots__ = ("noted",)

    def __init__(self) -> None:
        self.noted: dict[tuple[str, Any], None] | None = None


class Keyed(dict[Any, Any]):
    """A copy of a table argument that notes, into its :class:`Asking` while an evaluation
    runs, each key looked up, after the lookup succeeded (a key that cannot be hashed fails
    the evaluation, which is never kept). Its own attributes start with ``_``, which the
    sandbox keeps from templates."""

    __slots__ = ("_asking", "_name")

    def __init__(self, name: str, table: dict[Any, Any], asking: Asking | None = None) -> None:
        super().__init__(table)
        self._name = name
        self._asking = asking if asking is not None else Asking()

    def __contains__(self, key: object) -> bool:
        found = dict.__contains__(self, key)
        noted = self._asking.noted
        if noted is not None:
            noted[self._name, key] = None
        return found

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, default)
        noted = self._asking.noted
        if noted is not None:
            noted[self._name, key] = None
        return value

    def __bool__(self) -> bool:
        noted = self._asking.noted
        if noted is not None:
            noted[self._name, EMPTINESS] = None
        return dict.__len__(self) > 0


def keyed_names(tree: nodes.Template, candidates: Collection[str]) -> frozenset[str]:
    """Of ``candidates``, the names the snippet uses only to look keys up (module docs)."""
    ok = set(candidates)
    if not ok or any(True for _ in tree.find_all(_NEVER)):
        return frozenset()
    for node in tree.find_all((nodes.Import, nodes.FromImport, nodes.Macro)):
        if isinstance(node, nodes.Import | nodes.FromImport) and node.with_context:
            return frozenset()
        if isinstance(node, nodes.Import):
            ok.discard(node.target)
        elif isinstance(node, nodes.Macro):
            ok.discard(node.name)
        elif isinstance(node, nodes.FromImport):
            for n in node.names:
                ok.discard(n[1] if isinstance(n, tuple) else n)
    for name, parents in _mentions(tree, ()):
        if name.name in ok and not _lookup(name, parents):
            ok.discard(name.name)
    return frozenset(ok)


def _mentions(
    node: nodes.Node, parents: tuple[nodes.Node, ...]
) -> Iterator[tuple[nodes.Name, tuple[nodes.Node, ...]]]:
    if isinstance(node, nodes.Name):
        yield node, parents
        return
    inner = (*parents, node)
    for child in node.iter_child_nodes():
        yield from _mentions(child, inner)


def _lookup(name: nodes.Name, parents: tuple[nodes.Node, ...]) -> bool:
    if name.ctx != "load" or any(isinstance(p, _DEFERRED) for p in parents):
        return False
    parent = parents[-1] if parents else None
    grand = parents[-2] if len(parents) > 1 else None
    if isinstance(parent, nodes.Operand):
        return (
            parent.op in ("in", "notin")
            and parent.expr is name
            and isinstance(grand, nodes.Compare)
            and len(grand.ops) == 1
        )
    if isinstance(parent, nodes.Getattr):
        return (
            parent.node is name
            and parent.attr == "get"
            and isinstance(grand, nodes.Call)
            and grand.node is parent
            and 1 <= len(grand.args) <= 2
            and not grand.kwargs
            and grand.dyn_args is None
            and grand.dyn_kwargs is None
        )
    if isinstance(parent, nodes.Not):
        return parent.node is name
    if isinstance(parent, _TRUTH_TESTS):
        return parent.test is name
    return False


def changed_answers(old: dict[Any, Any], new: dict[Any, Any], same: Any) -> set[Any]:
    """The keys whose lookup answers differ between two tables (``same``: equal as templates
    can tell), and :data:`EMPTINESS` when one is empty and the other not."""
    out: set[Any] = set()
    for key, value in old.items():
        if key not in new or not same(value, new[key]):
            out.add(key)
    for key in new:
        if key not in old:
            out.add(key)
    if bool(old) != bool(new):
        out.add(EMPTINESS)
    return out


def still_answers(asked: tuple[Any, ...], changed: dict[str, set[Any]]) -> bool:
    """Did none of the lookups in ``asked`` (flat name, key, name, key...) change answer?"""
    for i in range(0, len(asked), 2):
        keys = changed.get(asked[i])
        if keys is not None and asked[i + 1] in keys:
            return False
    return True
