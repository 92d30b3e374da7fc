"""Where lint findings point: the config file and its YAML lines, not the deploy paths.

The renderer names a problem by template (``hosts.map`` line 3) and, for outputs, by the
file it deploys to (``maps/hosts.map``). Neither exists in the repository that holds the
config, so SARIF viewers and CI annotations could not show them. Lint has no rendered
files at all: it rewrites each finding's location to the line of the field that holds the
template (``spec.maps["hosts.map"].template``), and keeps the template location for readers
who think in templates.

A template written as a literal block scalar (``template: |``) maps its line *n* to the
*n*-th line after the key, exactly; any other style (quoted, folded, plain) points at the
key, which is the best a line number can do for those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from controller.diagnostics import Diagnostic, Location
from controller.render import MAIN_CONFIG, Renderer
from controller.validation.rules.compiled import Locator, PathKey

__all__ = ["in_config", "template_path"]

_WHEN = "#when"
_LITERAL = re.compile(r":[ \t]*\|[0-9+-]*[ \t]*(#.*)?$")
"""The rest of a key line that opens a literal block scalar: ``template: |`` / ``|-`` / ``|2``."""


def template_path(renderer: Renderer, template: str) -> PathKey | None:
    """The spec field holding ``template`` (an output, ``<output>#when`` or a snippet)."""
    name, when = (template[: -len(_WHEN)], True) if template.endswith(_WHEN) else (template, False)
    d = renderer.outputs.get(name)
    if d is not None:
        base: PathKey = (
            ("spec", "haproxyConfig")
            if name == MAIN_CONFIG
            else ("spec", d.spec_path.split("[", 1)[0], name)
        )
        return (*base, "when" if when else "template")
    if not when and name in renderer.spec.template_snippets:
        return ("spec", "templateSnippets", name, "template")
    return None


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
