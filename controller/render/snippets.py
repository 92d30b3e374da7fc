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
:class:`~controller.render.context.Resources` object, so it never outlives one render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import BaseLoader, Template, TemplateNotFound
from jinja2.environment import TemplateModule

from controller.render.context import Resources

SHARED_NAMES = frozenset({"resources", "http", "extraContext", "path_for"})
"""Context variables that are the same for every output of one render."""


class SnippetTemplate(Template):
    """A compiled snippet; ``pure`` is set by the renderer from the analysis above."""

    pure: bool = False

    def make_module(
        self,
        vars: dict[str, Any] | None = None,
        shared: bool = False,
        locals: Mapping[str, Any] | None = None,
    ) -> TemplateModule:
        if not (self.pure and vars is not None and shared):
            return super().make_module(vars, shared, locals)
        scope = vars.get("resources")
        if not isinstance(scope, Resources) or not _unshadowed(scope, vars, locals):
            return super().make_module(vars, shared, locals)
        name = self.name or ""
        found = scope._modules.get(name)
        if found is None:
            found = scope._modules[name] = super().make_module(vars, shared, locals)
        return found


def _unshadowed(
    scope: Resources, vars: Mapping[str, Any], locals: Mapping[str, Any] | None
) -> bool:
    base = scope._base
    if locals and not SHARED_NAMES.isdisjoint(locals):
        return False
    return all(vars.get(n) is base.get(n) for n in SHARED_NAMES)


class SnippetLoader(BaseLoader):
    """Serves precompiled snippets; Jinja2's own template cache is off (this is the cache)."""

    def __init__(self) -> None:
        self.templates: dict[str, Template] = {}

    def load(self, environment: Any, name: str, globals: Any = None) -> Template:
        found = self.templates.get(name)
        if found is None:
            raise TemplateNotFound(name)
        return found
