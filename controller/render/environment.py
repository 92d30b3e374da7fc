"""The Jinja2 environment every template runs in.

It is Jinja2's ``ImmutableSandboxedEnvironment`` (no private attributes, no mutation of lists,
dicts and sets, no unsafe callables) with ``StrictUndefined`` (a typo is an error, not an
empty string that HAProxy might accept), autoescape off (this is not HTML), and
``trim_blocks``/``lstrip_blocks`` so that a ``{% tag %}`` alone on its line leaves no trace in
the output — configuration templates are mostly such lines. On top of the stock sandbox:

* operations whose cost a value can blow up are bounded: ``range`` (at most
  :data:`MAX_RANGE` items), sequence repetition (``*``, at most :data:`MAX_REPEAT` items) and
  ``**`` (results of at most :data:`MAX_POWER_BITS` bits); exceeding a bound is a sandbox
  violation (E1003), not a stalled controller;
* attribute access on stored objects (``ingress.spec.rules``) goes straight to the key when
  the name is not a method of the mapping type, which is what Jinja2 does anyway after a
  failed ``getattr`` — minus the cost of the exception, paid millions of times per render;
* output carries its template locations (see :mod:`controller.render.trace`);
* loops, expression output and buffer joins charge the render's time and size budget (see
  :mod:`controller.render.budget`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from types import BuiltinMethodType, FunctionType, MethodType
from typing import Any

import jinja2.filters
from jinja2 import BaseLoader, StrictUndefined
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, _PassArg

from controller.diagnostics import TemplateLocation
from controller.render.budget import metered_loop
from controller.render.context import Resources
from controller.render.filters import BARE, haproxy_arg
from controller.render.fragments import Fragment, fragments
from controller.render.grown import GrownList, grow, mark_shared
from controller.render.incremental import TracingCollection, tracked_namespace
from controller.render.keyed import Keyed
from controller.render.trace import (
    DIRECT_METHODS,
    PLAIN_FILTERS,
    Traced,
    TracingCodeGenerator,
    counted,
    join_traced,
    text_hook,
)
from controller.resources import FrozenDict

MAX_RANGE = 100_000
MAX_REPEAT = 1_000_000
MAX_POWER_BITS = 4_096

_new_list = list.__new__

OWN_PLAIN: dict[str, Callable[..., Any]] = {"haproxy_arg": haproxy_arg}
"""Our filters among trace.PLAIN_FILTERS (the others are Jinja2's stock ones)."""

_ITEM_FIRST = (dict, FrozenDict)
_TYPE_ATTRS = {tp: frozenset(dir(tp)) for tp in _ITEM_FIRST}
_RESOURCES_ATTRS = frozenset(dir(Resources))
"""Names a collection of ``resources`` may have and still not be what ``resources.<name>``
finds (a method of the mapping is found first)."""
_ABSENT: Any = object()

_DIRECT: dict[str, frozenset[type]] = {
    "get": frozenset({dict, FrozenDict, Keyed, TracingCollection}),
    **{m: frozenset({TracingCollection}) for m in DIRECT_METHODS - {"get"}},
}
"""For each method the generated code may call directly (trace.DIRECT_METHODS), the exact
receiver types on which the sandbox would do just that: the method is a public attribute
of a type that is neither internal nor a known mutable, so ``getattr`` finds it safe, and
it is a builtin method or a plain Python method (no ``pass_*``, not marked unsafe), so
``call`` calls it as it is."""
_SAFE_CACHE_SIZE = 4096

SYNC_VARIANTS = (
    "first", "groupby", "join", "list", "map", "reject", "rejectattr", "select",
    "selectattr", "slice", "sum", "unique",
)  # fmt: skip

#: Jinja2 built-ins whose output differs between two renders of the same inputs.
NONDETERMINISTIC_FILTERS = ("random",)
NONDETERMINISTIC_GLOBALS = ("lipsum",)


def bounded_range(*args: int) -> range:
    """``range`` with a size limit, reported as a sandbox violation."""
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise SecurityError(
            f"range of {len(rng)} items exceeds the sandbox limit of {MAX_RANGE} items"
        )
    return rng


def _bounded_mul(left: Any, right: Any) -> Any:
    for seq, times in ((left, right), (right, left)):
        if (
            isinstance(seq, str | list | tuple)
            and isinstance(times, int)
            and len(seq) * times > MAX_REPEAT
        ):
            raise SecurityError(
                f"repeating a {type(seq).__name__} of {len(seq)} items {times} times "
                f"exceeds the sandbox limit of {MAX_REPEAT} items"
            )
    return operator.mul(left, right)


def _bounded_pow(left: Any, right: Any) -> Any:
    big = isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
    if big and abs(left).bit_length() * right > MAX_POWER_BITS:
        raise SecurityError(
            f"{left} ** {right} exceeds the sandbox limit of {MAX_POWER_BITS}-bit results"
        )
    return operator.pow(left, right)


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {"*": _bounded_mul, "**": _bounded_pow}


class TemplateEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox; one per :class:`~controller.render.Renderer`, shared by all its renders."""

    code_generator_class = TracingCodeGenerator
    intercepted_binops = frozenset(_BINOPS)
    concat = staticmethod(join_traced)

    def __init__(self, loader: BaseLoader | None = None) -> None:
        super().__init__(
            loader=loader,
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
            cache_size=0,
        )
        self.globals["range"] = bounded_range
        self.globals["namespace"] = tracked_namespace
        self.globals["fragments"] = fragments
        # The stock filters that also have an async variant dispatch on every call (is the
        # environment async?); this one never is, so they are bound to the sync variant
        # directly — the same functions the dispatcher would call.
        for name in SYNC_VARIANTS:
            self.filters[name] = getattr(jinja2.filters, f"sync_do_{name}")
        # A render must be a pure function of its inputs: identical inputs give identical
        # bytes, or checksums, caching and "deploy only when changed" stop meaning anything.
        for name in NONDETERMINISTIC_FILTERS:
            del self.filters[name]
        for name in NONDETERMINISTIC_GLOBALS:
            del self.globals[name]
        self._locations: dict[tuple[str, int], TemplateLocation] = {}
        self._safe: dict[tuple[type, str], bool] = {}
        self._plain: dict[Any, bool] = {}
        self._callables: dict[Any, bool] = {}
        self.htc_text = text_hook(Fragment)
        self.htc_loop = metered_loop
        self.htc_mappings: frozenset[type] = frozenset(_ITEM_FIRST)
        self.htc_mapping_order: tuple[type, ...] = (FrozenDict, dict)
        """The same types, the stored objects' first (see TracingCodeGenerator)."""
        self.htc_mapping_attrs = frozenset().union(*_TYPE_ATTRS.values())
        self.htc_fragment = Fragment
        self.htc_mark = mark_shared
        self.htc_glist = GrownList
        self.htc_counted = counted
        self.htc_direct = _DIRECT
        self.htc_namespace = tracked_namespace
        self.htc_resources = Resources
        self.htc_resources_attrs = _RESOURCES_ATTRS
        self.htc_plain_filters = {
            n: jinja2.filters.FILTERS.get(n) or OWN_PLAIN[n] for n in PLAIN_FILTERS
        }
        self.htc_bare = BARE.fullmatch
        """haproxy_arg's first test (see trace.PLAIN_FILTERS): a str of these characters
        only is returned as it is (60,000 server lines and names per full render at 10,000
        Ingresses, each a call of the filter otherwise)."""

    # -- hooks the generated template code calls -------------------------------------------

    def location(self, template: str, line: int) -> TemplateLocation:
        """One shared location object per template line (source maps reference them)."""
        key = (template, line)
        loc = self._locations.get(key)
        if loc is None:
            loc = self._locations[key] = TemplateLocation(template=template, line=line)
        return loc

    def htc_chunk(self, text: str, template: str | None, line: int) -> Traced:
        name = template or "<template>"
        locs = tuple(self.location(name, line + k) for k in range(text.count("\n") + 1))
        return Traced(text, locs)

    def htc_grow(self, ns: Namespace, attr: str, items: list[Any]) -> None:
        """``{% set ns.attr = ns.attr + [...] %}`` (see :mod:`controller.render.grown`).
        The first growth of a plain list (``namespace(routes=[])``, then one route) is
        :func:`grow`'s copy into a GrownList, stored as ``ns[attr] = ...`` stores it."""
        attrs = object.__getattribute__(ns, "_Namespace__attrs")
        current = attrs[attr] if attr in attrs else self.getattr(ns, attr)
        if type(current) is list and type(ns) is Namespace:
            # GrownList(current) without its __init__: the two lists of every Ingress's
            # routes, 20,000 per full render at 10,000 Ingresses, and the call cost more.
            grown = _new_list(GrownList)
            grown.extend(current)
            grown.extend(items)
            grown._shared = False
            attrs[attr] = grown
            return
        grow(ns, attr, items, current)

    def htc_marker(self, template: str | None, line: int) -> Traced:
        return Traced("", (self.location(template or "<template>", line),))

    def htc_later(self, context: Context, obj: Any, **extra: Any) -> Callable[..., Any]:
        """``environment.call(context, obj, *args, **extra, **kwargs)`` once called with the
        arguments: a method call whose receiver the generated code does not call directly
        (see ``TracingCodeGenerator.visit_Call``)."""
        return partial(self.call, context, obj, **extra)

    # -- sandbox policy ----------------------------------------------------------------------

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        fn = _BINOPS.get(operator)
        if fn is None:
            return super().call_binop(context, operator, left, right)
        return fn(left, right)

    def getattr(self, obj: Any, attribute: str) -> Any | Undefined:
        """Jinja2's sandboxed ``getattr`` with the same outcomes, minus repeated work.

        Stored objects, namespaces and fragments go straight to their data. For everything else the
        safety verdict is cached per (type, attribute): every check the immutable sandbox
        makes (private names, internal attributes of functions, frames, generators, mutating
        methods of lists, dicts and sets) depends on nothing else.
        """
        tp = type(obj)
        names = _TYPE_ATTRS.get(tp)
        if names is not None and attribute not in names:
            value = obj.get(attribute, _ABSENT)  # dict's own get: both types are dicts
            return self.undefined(obj=obj, name=attribute) if value is _ABSENT else value
        if tp is Namespace and not attribute.startswith("_"):
            try:
                return mark_shared(object.__getattribute__(obj, "_Namespace__attrs")[attribute])
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if tp is Fragment and not attribute.startswith("_"):
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if tp is Resources and attribute not in _RESOURCES_ATTRS and attribute in obj._names:
            # What the generic path finds: not a method or slot, so Resources.__getattr__,
            # which returns the collection (a safe attribute: a public name of a mapping
            # that cannot be changed).
            return obj[attribute]
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                return self.undefined(obj=obj, name=attribute)
        if attribute in ("format", "format_map"):
            fmt = self.wrap_str_format(value)
            if fmt is not None:
                return fmt
        key = (tp, attribute)
        safe = self._safe.get(key)
        if safe is None:
            safe = self.is_safe_attribute(obj, attribute, value)
            if len(self._safe) >= _SAFE_CACHE_SIZE:
                self._safe.clear()
            self._safe[key] = safe
        return value if safe else self.unsafe_undefined(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any | Undefined:
        """Jinja2's, but a grown list read as ``ns['attr']`` is marked shared, as when read
        as ``ns.attr`` (see :mod:`controller.render.grown`). A namespace has no items, so
        that read is always Jinja2's fallback, after the item access every object gets
        first."""
        try:
            return obj[argument]
        except (TypeError, LookupError):
            pass
        # A missing key of a plain mapping (``a['canary'] | default('false')``, several per
        # object per render): Jinja2's fallback would look for a method of that name, and
        # a mapping has none of that name, so its answer is this undefined.
        names = _TYPE_ATTRS.get(type(obj))
        if names is not None and type(argument) is str and argument not in names:
            return self.undefined(obj=obj, name=argument)
        return mark_shared(super().getitem(obj, argument))

    def call(
        __self,
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Call from sandboxed code; methods of builtins, plain Python methods, and plain
        functions and classes (``namespace()``, ``range()``, ``dict()``) directly.

        For those, Jinja2's checks (not marked unsafe, no context/environment injection, not
        a string's ``format``) depend only on the underlying function or class, so the
        verdict is cached per function and the call skips the generic path. Everything else
        (macros, filters called as functions, objects marked ``pass_context``) goes through
        Jinja2's ``call``.
        """
        tp = type(__obj)
        if (
            tp is BuiltinMethodType
            or (tp is MethodType and __self._plain_method(__obj))
            or ((tp is FunctionType or tp is type) and __self._plain_callable(__obj))
        ):
            if kwargs:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
            try:
                return __obj(*args, **kwargs)
            except StopIteration:
                return __self.undefined(
                    "value was undefined because a callable raised a StopIteration exception"
                )
        return super().call(__context, __obj, *args, **kwargs)

    def _plain_callable(self, obj: Any) -> bool:
        """A function or class that Jinja2's ``call`` would call as it is: safe, and neither
        it nor its ``__call__`` asks for the context, eval context or environment."""
        verdict = self._callables.get(obj)
        if verdict is None:
            verdict = (
                self.is_safe_callable(obj)
                and _PassArg.from_obj(obj) is None
                and _PassArg.from_obj(obj.__call__) is None
            )
            if len(self._callables) >= _SAFE_CACHE_SIZE:
                self._callables.clear()
            self._callables[obj] = verdict
        return verdict

    def _plain_method(self, method: MethodType) -> bool:
        func = method.__func__
        verdict = self._plain.get(func)
        if verdict is None:
            verdict = self.is_safe_callable(method) and _PassArg.from_obj(method) is None
            if len(self._plain) >= _SAFE_CACHE_SIZE:
                self._plain.clear()
            self._plain[func] = verdict
        return verdict
