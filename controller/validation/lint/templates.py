"""Static checks of templates that the renderer itself does not report.

The renderer already settles syntax errors, missing snippets, unknown outputs and render
cycles when it is built; these checks add what is legal but probably a mistake: snippets
nothing uses, outputs read through computed names, directives the policy will refuse, and
conditions that can never change.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from jinja2 import TemplateSyntaxError, nodes
from jinja2.parser import Parser

from controller.diagnostics import Diagnostic, Location, Phase, TemplateLocation, make
from controller.render import MAIN_CONFIG, Renderer
from controller.validation.syntax.policy import DENIED_DIRECTIVES

__all__ = ["constant_whens", "denied_literals", "dynamic_references", "unused_snippets"]

_SECTION_DENIALS = frozenset(n for n, d in DENIED_DIRECTIVES.items() if d.where == "section")
_KEYWORDS = frozenset(
    n for n, d in DENIED_DIRECTIVES.items() if d.where.startswith("keyword") and n != "program"
)
_LEADING = re.compile(r"^[ \t]*([A-Za-z][A-Za-z0-9_.-]*)(?:[ \t]+([A-Za-z0-9_.-]+))?")


def unused_snippets(renderer: Renderer) -> list[Diagnostic]:
    used: set[str] = set()
    for names in renderer.graph.snippets.values():
        used |= names
    return [
        make(
            "W8050",
            Phase.LINT,
            f"snippet {name!r} is not included or imported by any output",
            template_location=TemplateLocation(template=name),
        )
        for name in sorted(set(renderer.spec.template_snippets) - used)
    ]


def dynamic_references(renderer: Renderer) -> list[Diagnostic]:
    return [
        make(
            "I8053",
            Phase.LINT,
            f"{ref.template} reads outputs (or includes a snippet) with a computed name; the "
            "render graph assumes it depends on everything",
            template_location=TemplateLocation(template=ref.template, line=ref.line),
        )
        for ref in renderer.graph.dynamic
    ]


def _templates(renderer: Renderer) -> Iterator[tuple[str, str, str | None]]:
    """(template name, source, output path) of every output and snippet."""
    for name, d in sorted(renderer.outputs.items()):
        yield name, d.output.template, d.path
    for name, snippet in sorted(renderer.spec.template_snippets.items()):
        yield name, snippet.template, None


def _denial(line: str) -> str | None:
    m = _LEADING.match(line)
    if m is None:
        return None
    first, second = m.group(1), m.group(2)
    if first in _KEYWORDS:
        return first
    if first in _SECTION_DENIALS:
        return first
    if first == "option" and second == "external-check":
        return "external-check"
    return None


def denied_literals(renderer: Renderer, allow: Collection[str]) -> list[Diagnostic]:
    """Lines whose literal text starts with a denied directive (not produced by ``{{ }}``).

    A line counts when the directive keyword is its first word and no Jinja delimiter comes
    before it; the syntax stage remains the authority on the rendered text.
    """
    out: list[Diagnostic] = []
    for name, source, path in _templates(renderer):
        for n, line in enumerate(source.splitlines(), start=1):
            found = _denial(line)
            if found is None or found in allow:
                continue
            prefix = line[: line.find(found)]
            if "{" in prefix or "#" in prefix:
                continue
            denial = DENIED_DIRECTIVES[found]
            out.append(
                make(
                    "W8051",
                    Phase.LINT,
                    f"{name} line {n} writes {found!r}, which the directive policy denies "
                    f"({denial.rule_id}: it {denial.danger}); allow it with "
                    f"validation.policy.allowDirectives: [{found}]",
                    location=Location(file=path) if path else None,
                    template_location=TemplateLocation(template=name, line=n),
                )
            )
    return out


def _constant(renderer: Renderer, source: str) -> bool:
    try:
        parser = Parser(renderer.environment, source, state="variable")
        expr = parser.parse_expression()
        return parser.stream.eos and isinstance(expr, nodes.Const)
    except TemplateSyntaxError:
        return False  # the renderer reports E1009


def constant_whens(renderer: Renderer) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for name, d in sorted(renderer.outputs.items()):
        when = d.output.when
        if when is None:
            continue
        tl = TemplateLocation(template=name + "#when")
        if name == MAIN_CONFIG:
            out.append(
                make(
                    "W8058",
                    Phase.LINT,
                    f"haproxyConfig has `when: {when}`; when it is false nothing can deploy",
                    template_location=tl,
                )
            )
        if _constant(renderer, when):
            out.append(
                make(
                    "W8054",
                    Phase.LINT,
                    f"`when` of {d.spec_path} is the constant {when.strip()!r}",
                    template_location=tl,
                )
            )
    return out
