"""Where lint findings point: the config file and its YAML lines, not the deploy paths.

The renderer names a problem by template (``hosts.map`` line 3) and, for outputs, by the
file it deploys to (``maps/hosts.map``). Neither exists in the repository that holds the
config, so SARIF viewers and CI annotations could not show them. Lint has no rendered
files at all: it rewrites each finding's location to the line of the field that holds the
template (``spec.maps["hosts.map"].template``), and keeps the template location for readers
who think in templates.

The same mapping completes template locations for every other command (``htc validate``,
``htc local``): :func:`config_origin` adds the config file and line to a template location.

A template written as a literal block scalar (``template: |``) maps its line *n* to the
*n*-th line after the key, exactly; any other style (quoted, folded, plain) points at the
key, which is the best a line number can do for those.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from controller.diagnostics import Diagnostic, Location, TemplateLocation
from controller.render import MAIN_CONFIG, Renderer
from controller.spec import HAProxyTemplateConfigSpec
from controller.validation.rules.compiled import Locator, PathKey

__all__ = [
    "Origin",
    "config_origin",
    "in_config",
    "template_field",
    "template_path",
    "with_origins",
]

_WHEN = "#when"
_LITERAL = re.compile(r":[ \t]*\|[0-9+-]*[ \t]*(#.*)?$")
"""The rest of a key line that opens a literal block scalar: ``template: |`` / ``|-`` / ``|2``."""


def template_path(renderer: Renderer, template: str) -> PathKey | None:
    """The spec field holding ``template`` (an output, ``<output>#when`` or a snippet)."""
    return template_field(renderer.spec, template)


_OUTPUT_FIELDS = (("maps", "maps"), ("files", "files"), ("certificates", "certificates"))


def template_field(spec: HAProxyTemplateConfigSpec, template: str) -> PathKey | None:
    """:func:`template_path` from the spec alone, without building a renderer."""
    name, when = (template[: -len(_WHEN)], True) if template.endswith(_WHEN) else (template, False)
    base: PathKey | None = None
    if name == MAIN_CONFIG:
        base = ("spec", "haproxyConfig")
    else:
        for attr, wire in _OUTPUT_FIELDS:
            if name in getattr(spec, attr):
                base = ("spec", wire, name)
                break
    if base is not None:
        return (*base, "when" if when else "template")
    if not when and name in spec.template_snippets:
        return ("spec", "templateSnippets", name, "template")
    return None


Origin = Callable[[TemplateLocation], TemplateLocation]
"""Adds the config file and line to a template location."""


def config_origin(
    spec: HAProxyTemplateConfigSpec, locate: Locator, source_lines: Sequence[str] | None
) -> Origin:
    """Template locations → the same, with the config file's line that holds them."""
    cache: dict[tuple[str, int | None], TemplateLocation] = {}

    def origin(t: TemplateLocation) -> TemplateLocation:
        key = (t.template, t.line)
        done = cache.get(key)
        if done is not None:
            return done
        path = template_field(spec, t.template)
        where = locate(path) if path is not None else None
        if where is None:
            done = t
        else:
            line = where.line
            if line is not None and t.line and _literal_block(source_lines, line):
                line += t.line
            done = t.model_copy(update={"file": where.file, "file_line": line})
        cache[key] = done
        return done

    return origin


def with_origins(diagnostics: Iterable[Diagnostic], origin: Origin) -> list[Diagnostic]:
    """Every finding's template location completed by ``origin``."""
    out: list[Diagnostic] = []
    for d in diagnostics:
        t = d.template_location
        if t is None or t.file is not None:
            out.append(d)
            continue
        out.append(d.model_copy(update={"template_location": origin(t)}))
    return out


def in_config(
    diagnostics: Iterable[Diagnostic],
    renderer: Renderer,
    locate: Locator,
    source_lines: Sequence[str] | None = None,
) -> list[Diagnostic]:
    """Every finding about a template re-pointed at the config file's line for it."""
    out: list[Diagnostic] = []
    for d in diagnostics:
        t = d.template_location
        path = template_path(renderer, t.template) if t is not None else None
        where = locate(path) if path is not None else None
        if t is None or where is None:
            out.append(d)
            continue
        line = where.line
        if line is not None and t.line and _literal_block(source_lines, line):
            line += t.line
        out.append(d.model_copy(update={"location": Location(file=where.file, line=line)}))
    return out


def _literal_block(source_lines: Sequence[str] | None, key_line: int) -> bool:
    if source_lines is None or not 0 < key_line <= len(source_lines):
        return False
    return _LITERAL.search(source_lines[key_line - 1].rstrip()) is not None
