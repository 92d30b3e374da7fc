"""Is a shared module, evaluated again, indistinguishable from the one before?

A shared snippet (the quickstart's routing table) reads every Ingress, so any change to any
Ingress evaluates it again — also one the templates ignore (another ingress class, a status
write, an annotation nobody reads). When the new evaluation exports exactly what the old one
did, the renderer keeps the *old* module, and every output that imported it can be kept too
(see :mod:`controller.render.incremental`). "Exactly" means that no template could tell the
two apart:

* scalars of the same type and value (``1``, ``1.0`` and ``True`` are equal in Python but
  print differently);
* containers (lists, tuples, dicts in key order, namespaces) matched element by element,
  *and* one to one: an object that appears twice in the old module appears twice in the new
  one as one object, because ``is sameas`` can tell;
* template text (:class:`~controller.render.trace.Traced`) with the same template locations,
  so the source map stays exact;
* macros compiled from the same code whose closures hold matching values, the module's own
  context standing for the other module's;
* ``resources`` of two renders over the same collections: a module kept from an earlier
  render reads the store of the render that calls it (:meth:`Resources.current
  <controller.render.context.Resources.current>`);
* everything else — stored objects above all — only when it is the very same object.

Anything else, including a value this module does not know, counts as different: the cost of
a wrong "different" is one render of the outputs, the cost of a wrong "same" a wrong file.

The comparison walks every value the module holds, and so costs a fraction of evaluating it:
at 1,000 Ingresses (about 58,000 values in the quickstart's routing table) a tenth of it,
repaid when the outputs are kept (the render of an ignored Ingress took 60% of the CPU time
of one that changed a route, measured on a loaded machine). At 10,000 Ingresses a full
comparison would cost a tenth of a render even when one Ingress *did* change — the common
case. So it gives up, as "different", after :data:`MAX_VALUES` values (about 2,000
Ingresses of the quickstart).
"""

from __future__ import annotations

from itertools import compress
from operator import is_not
from types import CellType, MethodType
from typing import Any

from jinja2.runtime import Context, Macro
from jinja2.utils import Namespace

from controller.diagnostics import TemplateLocation
from controller.render.context import Resources
from controller.render.grown import GrownList
from controller.render.trace import Traced

__all__ = ["SCALARS", "SEQUENCES", "same_module"]

SCALARS = frozenset({str, int, float, bool, type(None), bytes, TemplateLocation})
"""Types compared by value (with their type: ``1`` and ``True`` print differently)."""
SEQUENCES = frozenset({list, tuple, GrownList})
"""Types compared item by item, in order."""
_MACRO_FIELDS = ("name", "arguments", "catch_kwargs", "catch_varargs", "caller")

MAX_VALUES = 120_000
"""Values compared at most before two modules count as different (see above)."""

_PAIRED = frozenset({dict, Traced, Namespace, Macro, Resources, MethodType, Context}) | SEQUENCES
"""Types whose objects are paired one to one when compared (``is sameas`` can tell two equal
ones apart). Of any other type, an object is equal only to itself or compared by value, so
the very same object on both sides decides nothing further."""
_LONG = 64


def same_module(old_context: Context, old_body: Any, new_context: Context, new_body: Any) -> bool:
    """Do two evaluations of one module (their contexts and body text) match (see above)?"""
    if old_context.exported_vars != new_context.exported_vars:
        return False
    iso = _Isomorphism(old_context, new_context)
    return iso.same(old_context.vars, new_context.vars) and iso.same(old_body, new_body)


class _Isomorphism:
    """A one-to-one matching of the old module's objects to the new one's, grown as the
    values are compared (iteratively: a deep value must not exhaust the stack)."""

    __slots__ = ("_back", "_left", "_pairs")

    def __init__(self, old_context: Context, new_context: Context) -> None:
        self._pairs: dict[int, int] = {id(old_context): id(new_context)}
        self._back: dict[int, int] = {id(new_context): id(old_context)}
        self._left = MAX_VALUES

    def same(self, old: Any, new: Any) -> bool:
        # Two parallel stacks rather than one of pairs, and scalars inside a container
        # compared on the spot: at 10,000 Ingresses a module holds about a million values,
        # and a tuple per pair would also wake the cyclic collector over and over.
        todo_a: list[Any] = [old]
        todo_b: list[Any] = [new]
        pairs, back = self._pairs, self._back
        while todo_a:
            a, b = todo_a.pop(), todo_b.pop()
            tp = type(a)
            if tp is not type(b):
                return False
            if tp in SCALARS:
                if a is not b and a != b:
                    return False
                continue
            ia, ib = id(a), id(b)
            got = pairs.get(ia)
            if got is not None:
                if got != ib:
                    return False
                continue
            if ib in back:
                return False
            pairs[ia] = ib
            back[ib] = ia
            if a is b:
                continue  # the very same object (a stored one, http, extraContext, ...)
            self._left -= len(a) if tp is dict or tp in SEQUENCES else 1
            if self._left < 0:
                return False  # too big to be worth it (see MAX_VALUES)
            if tp is dict:
                if len(a) != len(b):
                    return False
                for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
                    if type(ka) is str and type(kb) is str:
                        if ka != kb:
                            return False
                    else:
                        todo_a.append(ka)
                        todo_b.append(kb)
                    tv = type(va)
                    if tv in SCALARS and tv is type(vb):
                        if va is not vb and va != vb:
                            return False
                    else:
                        todo_a.append(va)
                        todo_b.append(vb)
            elif tp in SEQUENCES:
                if len(a) != len(b):
                    return False
                if len(a) >= _LONG and _PAIRED.isdisjoint(set(map(type, a))):
                    # Scalars and objects only identity vouches for (stored ones): an item
                    # that is the very same object matches and pairs with nothing else, so
                    # only the others are looked at, found in C (10,000 Ingresses listed).
                    pairs_ab = zip(a, b, strict=True)
                    pairs_ab = compress(pairs_ab, map(is_not, a, b))  # type: ignore[assignment]
                else:
                    pairs_ab = zip(a, b, strict=True)
                for va, vb in pairs_ab:
                    tv = type(va)
                    if tv in SCALARS and tv is type(vb):
                        if va is not vb and va != vb:
                            return False
                    else:
                        todo_a.append(va)
                        todo_b.append(vb)
            else:
                parts = _parts(tp, a, b)
                if parts is None:
                    return False
                for pa, pb in parts:
                    todo_a.append(pa)
                    todo_b.append(pb)
        return True


def _parts(tp: type, a: Any, b: Any) -> list[tuple[Any, Any]] | None:
    """The parts still to compare of two distinct objects of type ``tp`` (not a dict or a
    sequence); None when they differ already or are of a kind that only identity can vouch
    for."""
    if tp is Traced:
        return None if str.__ne__(a, b) else [(a._src, b._src)]
    if tp is Namespace:
        return [
            (
                object.__getattribute__(a, "_Namespace__attrs"),
                object.__getattribute__(b, "_Namespace__attrs"),
            )
        ]
    if tp is Macro:
        return _macro_parts(a, b)
    if tp is Resources:
        return [] if a._names == b._names else None
    if tp is MethodType:
        return None if a.__func__ is not b.__func__ else [(a.__self__, b.__self__)]
    return None


def _macro_parts(a: Macro, b: Macro) -> list[tuple[Any, Any]] | None:
    fa, fb = a._func, b._func
    if (
        fa.__code__ is not fb.__code__
        or fa.__globals__ is not fb.__globals__
        or fa.__defaults__ != fb.__defaults__
        or any(getattr(a, f) != getattr(b, f) for f in _MACRO_FIELDS)
    ):
        return None
    parts: list[tuple[Any, Any]] = []
    for ca, cb in zip(fa.__closure__ or (), fb.__closure__ or (), strict=True):
        va, vb = _cell(ca), _cell(cb)
        if (va is _EMPTY) != (vb is _EMPTY):
            return None
        if va is not _EMPTY:
            parts.append((va, vb))
    return parts


_EMPTY = object()


def _cell(cell: CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not assigned (yet)
        return _EMPTY
