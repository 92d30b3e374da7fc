"""Snippets: precompiled, served by name, and evaluated once per render when that is exact.

``{% import 'routing' as routing with context %}`` runs the snippet's top level in the
importing output's context. A library snippet that computes a routing table from the
resources would therefore run once per output that imports it — the same work, the same
result, several times per render. When the result provably cannot differ, the first import
of a render is reused by the others:

* the snippet's free variables (names it reads but does not define, found in its syntax tree
  by Jinja2's ``meta.find_undeclared_variables``) are all render-wide — ``resources``,
  ``http``, ``extraContext``, ``path_for`` — or environment globals; in particular it does
  not read ``outputs``, which differs per output;
* the same holds for every snippet it includes, imports or extends, transitively, and none of
  those names is computed at render time;
* the importing output has not rebound any of those names before the import.

Everything else is evaluated as Jinja2 always does. The cache lives in the render's
:class:`~controller.render.context.Resources` object; a module is also kept for the next
render, which reuses it while nothing it read has changed (see
:mod:`controller.render.incremental`).

A module's context and its macros form a reference cycle (the context holds each macro, each
macro's closure the context's lookup). A module a later render replaced was therefore freed
only by a collection of the whole heap, with everything it held: at 10,000 Ingresses the
routing table's lists and tables, about 1.4 MB per changed render, 8 MB after a dozen
changes, and a whole-heap collection costs 0.6-0.8 s there. :class:`SnippetLoader` breaks
that cycle once no render can read the module any more (see :meth:`SnippetLoader.end`), so
reference counting frees it at once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from jinja2 import BaseLoader, Template, TemplateNotFound, nodes
from jinja2.environment import TemplateModule
from jinja2.runtime import Context, Macro
from jinja2.utils import Namespace

from controller.render.budget import BudgetExceeded
from controller.render.budget import current as current_meter
from controller.render.context import Resources
from controller.render.grown import mark_shared
from controller.render.incremental import (
    Read,
    Recorder,
    Tokens,
    TracingView,
    current_recorder,
    unchanged,
)
from controller.render.keyed import keyed_names
from controller.render.sameness import same_module

SHARED_NAMES = frozenset({"resources", "http", "extraContext", "path_for"})
"""Context variables that are the same for every output of one render."""


@dataclass(frozen=True, slots=True)
class SharedModule:
    """A shared module as one render obtained it, and what evaluating it read and cost."""

    module: TemplateModule
    reads: tuple[Read, ...]
    chars: int
    """What evaluating it charged the size budget."""
    http: Any
    extra: Any
    namespaces: Namespaces
    """Its exported namespaces and their attributes when it was built: a later output may
    assign to them, and a changed module must not be reused."""
    context: Context
    """The context it was evaluated in: every top-level name it set, exported or not."""
    used: tuple[tuple[str, TemplateModule], ...] = ()
    """The shared modules its evaluation imported, each as the very object it got: it is
    reused only while each of them is that object again (not while each read what it read:
    a module that filters a collection is evaluated again when the collection changes, but
    when that evaluation exports the same, this one stays too)."""
    own_chars: int = 0
    """What evaluating it charged the size budget, less the modules it imported that were
    first obtained in that render (those are charged as they are obtained)."""
    tokens: Tokens = field(default_factory=dict)
    """The content tokens of the collections it read (see :func:`.incremental.unchanged`)."""

    def intact(self) -> bool:
        return intact(self.namespaces)


Namespaces = tuple[tuple[Namespace, tuple[tuple[str, Any], ...]], ...]
"""Namespaces and their attributes when an evaluation ended (see :func:`namespaces_of`)."""

_GONE = object()


def intact(namespaces: Namespaces) -> bool:
    """Has no template assigned to any of ``namespaces`` since they were recorded?"""
    for ns, attrs in namespaces:
        now = object.__getattribute__(ns, "_Namespace__attrs")
        if len(now) != len(attrs) or any(now.get(k, _GONE) is not v for k, v in attrs):
            return False
    return True


def namespaces_of(created: list[Namespace]) -> Namespaces:
    """The namespaces a module's evaluation created and left alive (every one its exports
    can reach, see :func:`~controller.render.incremental.tracked_namespace`), each with its
    attributes now. A grown list held by one is marked shared, so a later append copies it
    instead of changing what the module holds."""
    out: list[tuple[Namespace, tuple[tuple[str, Any], ...]]] = []
    for ns in created:
        attrs = object.__getattribute__(ns, "_Namespace__attrs")
        for v in attrs.values():
            mark_shared(v)
        out.append((ns, tuple(attrs.items())))
    return tuple(out)


class SnippetTemplate(Template):
    """A compiled snippet; ``pure`` is set by the renderer from the analysis above."""

    pure: bool = False
    _memo: SharedModule | None = None
    """The module the latest render built (see :mod:`controller.render.incremental`)."""
    keep: bool = True
    """False once a template assigned to one of its namespaces: then it is never reused
    across renders again (a render in another thread could see the assignment)."""
    _sites: dict[str, Any] | None = None
    """``fragments()`` of this snippet: item name → the latest call (see :mod:`.fragments`)."""
    source: str | None = None
    """The snippet's text (set by the renderer), read once for :meth:`lookup_names`."""
    _lookup_names: frozenset[str] | None = None

    def lookup_names(self) -> frozenset[str]:
        """The names this snippet uses only to look keys up (see :mod:`.keyed`)."""
        if self._lookup_names is None:
            try:
                tree = self.environment.parse(self.source or "")
                names = {n.name for n in tree.find_all(nodes.Name)}
                self._lookup_names = keyed_names(tree, names)
            except Exception:  # it compiled, so this cannot fail; if it did, no name qualifies
                self._lookup_names = frozenset()
        return self._lookup_names

    def make_module(
        self,
        vars: dict[str, Any] | None = None,
        shared: bool = False,
        locals: Mapping[str, Any] | None = None,
    ) -> TemplateModule:
        if not (self.pure and vars is not None and shared):
            return super().make_module(vars, shared, locals)
        scope = vars.get("resources")
        if not isinstance(scope, Resources):
            return super().make_module(vars, shared, locals)
        scope = scope.current()
        if not _unshadowed(scope, vars, locals):
            return super().make_module(vars, shared, locals)
        name = self.name or ""
        found: SharedModule | None = scope._modules.get(name)
        rec = current_recorder().get()
        if found is None:
            found = scope._modules[name] = self._obtain(scope, vars, locals)
            if rec is not None and name not in scope._charged:
                rec.module_chars += found.chars
            scope._charged.setdefault(name, found.chars)
        if rec is not None:
            rec.modules[name] = found.chars
            # The importer depends on what the module is, not on what it read.
            rec.used[name] = found.module
            if rec.created is not None:  # a module importing this one may export these
                rec.created.extend(weakref.ref(ns) for ns, _ in found.namespaces)
        return found.module

    def _same_imports(
        self, used: tuple[tuple[str, TemplateModule], ...], vars: dict[str, Any]
    ) -> bool:
        """Is every module ``used`` the very same object in this render? Each is obtained
        now, as the module would obtain it on reaching its import: a shared module reads
        only render-wide names, which ``vars`` holds as the importer had them. One that
        fails is not the same; evaluating this module again reports the failure."""
        loader = self.environment.loader
        templates = loader.templates if isinstance(loader, SnippetLoader) else {}
        meter = current_meter().get()
        for dep, module in used:
            template = templates.get(dep)
            if not isinstance(template, SnippetTemplate):
                return False
            before = meter.used_chars if meter is not None else 0
            try:
                now = template.make_module(vars, True)
            except BudgetExceeded:
                raise
            except Exception:
                if meter is not None:
                    meter.used_chars = before
                return False
            if now is not module:
                return False
        return True

    def _obtain(
        self, scope: Resources, vars: dict[str, Any], locals: Mapping[str, Any] | None
    ) -> SharedModule:
        base = scope._base
        http, extra = base.get("http"), base.get("extraContext")
        view = scope._view
        raw = view.raw if isinstance(view, TracingView) else None
        meter = current_meter().get()
        memo = self._memo
        if (
            memo is not None
            and self.keep
            and raw is not None
            and memo.http is http
            and memo.extra is extra
            and memo.intact()
            and unchanged(raw, memo.reads, memo.tokens)
            and self._same_imports(memo.used, vars)
        ):
            if meter is not None and self.name not in scope._charged:
                meter.charge(memo.own_chars)
            return replace(memo, chars=memo.own_chars)
        recorder = Recorder(track_namespaces=True)
        token = current_recorder().set(recorder)
        before = meter.used_chars if meter is not None else 0
        already = scope._charged.get(self.name or "")
        if meter is not None and already is not None:
            meter.max_chars += already  # counted once per render, by whoever came first
        try:
            context = self.new_context(vars, True, locals)
            module = TemplateModule(self, context)  # what Template.make_module does
        finally:
            current_recorder().reset(token)
            if meter is not None and already is not None:
                meter.max_chars -= already
        chars = (meter.used_chars - before) if meter is not None else 0
        if meter is not None and already is not None:
            meter.used_chars -= chars
        reads = tuple(recorder.reads)
        used = tuple(recorder.used.items())
        own = chars - recorder.module_chars
        if (
            memo is not None
            and self.keep
            and raw is not None
            and memo.http is http
            and memo.extra is extra
            and memo.intact()
            # A fragment evaluated anew is a new object, which no template can take for
            # the old one: when the module exports it, the walk below could only say so.
            and not recorder.fresh
            and same_module(memo.context, memo.module._body_stream, context, module._body_stream)
        ):
            # Evaluated again to the very same exports: the old module stays, so outputs
            # that imported it can be kept (see controller.render.sameness).
            found = SharedModule(
                memo.module,
                reads,
                chars,
                http,
                extra,
                memo.namespaces,
                memo.context,
                used,
                own,
                recorder.tokens,
            )
        else:
            found = SharedModule(
                module,
                reads,
                chars,
                http,
                extra,
                namespaces_of(recorder.namespaces()),
                context,
                used,
                own,
                recorder.tokens,
            )
        if raw is not None and self.keep:
            loader = self.environment.loader
            if isinstance(loader, SnippetLoader):
                loader.replace(self, found, context if found.context is not context else None)
            else:
                self._memo = found
        return found


def _unshadowed(
    scope: Resources, vars: Mapping[str, Any], locals: Mapping[str, Any] | None
) -> bool:
    base = scope._base
    if locals and not SHARED_NAMES.isdisjoint(locals):
        return False
    return all(vars.get(n) is base.get(n) for n in SHARED_NAMES)


class SnippetLoader(BaseLoader):
    """Serves precompiled snippets; Jinja2's own template cache is off (this is the cache).

    It also counts the renders in flight (the renderer calls :meth:`begin` and :meth:`end`
    around each; an admission judge may render in another thread while the reconcile loop
    does) and keeps the shared modules no template keeps any more (:meth:`replace`,
    :meth:`retire`), to break their reference cycles once no render is in flight."""

    RETIRED_MAX = 512
    """Retired modules remembered at most while renders overlap: beyond that the oldest are
    left to the cyclic collector (renders that never stop overlapping must not grow this)."""

    def __init__(self) -> None:
        self.templates: dict[str, Template] = {}
        self._lock = threading.Lock()
        self._renders = 0
        self._retired: list[tuple[SnippetTemplate, weakref.ref[Context]]] = []
        """Held weakly: one the collector frees meanwhile needs nothing more."""

    def begin(self) -> None:
        """A render starts."""
        with self._lock:
            self._renders += 1

    def end(self) -> None:
        """A render is over. If it was the last one in flight, each retired module that is not
        its template's latest again has its context emptied: its cycle (the context holds the
        module's macros, their closures the context) is broken, and reference counting frees
        the module with what it held as soon as nothing else holds it.

        Why this cannot change any render's output: a render obtains a shared module only
        from its own render's cache or from its template's latest (``_memo``), and every
        output, module or fragment kept from an earlier render is reused only while each
        module it imported is *the very same object* as this render's (compared by identity,
        never by reading it). With no render in flight, then, the only modules any later
        render can read are the templates' latest, which are left alone; the others are held
        at most for that identity check (an output kept from an earlier render, which then
        renders again) or by one another. While any render is in flight nothing is cleared:
        it may be reading a module another render replaced meanwhile, or have made a retired
        one its template's latest again (evaluated to the same exports)."""
        with self._lock:
            self._renders -= 1
            if self._renders or not self._retired:
                return
            retired, self._retired = self._retired, []
            for template, ref in retired:
                context = ref()
                latest = template._memo
                if context is not None and (latest is None or latest.context is not context):
                    _break_cycle(context)

    def replace(
        self,
        template: SnippetTemplate,
        found: SharedModule | None,
        discarded: Context | None = None,
    ) -> None:
        """``found`` is ``template``'s latest module now; the one before is retired, and so is
        ``discarded``, the context of an evaluation that exported the same as the latest and
        was dropped for it (see :func:`~controller.render.sameness.same_module`)."""
        with self._lock:
            old, template._memo = template._memo, found
            if old is not None and (found is None or old.context is not found.context):
                self._retire(template, old.context)
            if discarded is not None:
                self._retire(template, discarded)

    def retire(self, modules: Iterable[tuple[str, SharedModule]]) -> None:
        """The shared modules a render obtained, once it is over: those that are their
        template's latest are spared when the retired are cleared (see :meth:`end`)."""
        with self._lock:
            for name, found in modules:
                template = self.templates.get(name)
                if isinstance(template, SnippetTemplate):
                    self._retire(template, found.context)

    def forget(self) -> None:
        """Its renderer is gone (see ``controller.render.renderer``): drop what the snippets
        kept for later renders (their latest modules, their fragments), breaking the modules'
        cycles. No render can be in flight: a render holds its renderer."""
        with self._lock:
            if self._renders:
                return
            for template in self.templates.values():
                if isinstance(template, SnippetTemplate):
                    memo, template._memo, template._sites = template._memo, None, None
                    if memo is not None:
                        _break_cycle(memo.context)
            self._retired = []

    def _retire(self, template: SnippetTemplate, context: Context) -> None:
        retired = self._retired
        if len(retired) >= self.RETIRED_MAX:
            retired[:] = [r for r in retired if r[1]() is not None][-self.RETIRED_MAX // 2 :]
        retired.append((template, weakref.ref(context)))

    def load(self, environment: Any, name: str, globals: Any = None) -> Template:
        found = self.templates.get(name)
        if found is None:
            raise TemplateNotFound(name)
        return found


def _break_cycle(context: Context) -> None:
    """Empty a module's context (its top-level names), and the closures of the macros it
    defined: those hold the context's lookup and one another (a macro that calls itself holds
    itself), so this breaks every cycle its evaluation made. Only for a module no render can
    read any more (see :meth:`SnippetLoader.end`)."""
    for value in list(context.vars.values()):
        if type(value) is Macro:
            for cell in value._func.__closure__ or ():
                with suppress(ValueError):  # never assigned
                    del cell.cell_contents
    context.vars.clear()
