"""Static checks of templates that the renderer itself does not report.

The renderer already settles syntax errors, missing snippets, unknown outputs and render
cycles when it is built; these checks add what is legal but probably a mistake: snippets
nothing uses, outputs read through computed names, directives the policy will refuse,
conditions that can never change, and names nothing defines.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from jinja2 import TemplateSyntaxError, meta, nodes

from controller.diagnostics import Diagnostic, Location, Phase, TemplateLocation, make
from controller.render import FRAGMENTS_CALL, MAIN_CONFIG, Renderer, parse_expression
from controller.validation.syntax.policy import DENIED_DIRECTIVES, ENV_EXPANSION

__all__ = [
    "constant_whens",
    "denied_literals",
    "dynamic_references",
    "literal_text",
    "undefined_names",
    "unused_snippets",
]

_SECTION_DENIALS = frozenset(n for n, d in DENIED_DIRECTIVES.items() if d.where == "section")
_KEYWORDS = frozenset(
    n for n, d in DENIED_DIRECTIVES.items() if d.where.startswith("keyword") and n != "program"
)
_LEADING = re.compile(r"^[ \t]*([A-Za-z][A-Za-z0-9_.-]*)(?:[ \t]+([A-Za-z0-9_.-]+))?")
_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_ENV_NAME = re.compile(r"\{?[A-Za-z_]")
"""What makes ``$`` in double quotes a variable reference (``${.LINE}`` and friends are
HAProxy's own pseudo-variables, not the environment)."""


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


def literal_text(source: str) -> str:
    """``source`` with its Jinja tags taken out, line numbers kept.

    Statements and comments (``{% %}``, ``{# #}``) produce no text, so what follows them is
    where the line's literal text starts: ``{% if tls %}lua-load x{% endif %}`` writes a
    directive. An expression (``{{ }}``) becomes a NUL: its value is unknown here, and the
    NUL keeps literal text after it from counting as the line's first word.
    """

    def blank(m: re.Match[str]) -> str:
        text = m.group()
        return "\n" * text.count("\n") + ("\0" if text.startswith("{{") else "")

    return _TAG.sub(blank, source)


def _expands_env(line: str) -> bool:
    """Does the literal line hold ``$NAME`` / ``${NAME}`` inside double quotes (before any
    comment)? HAProxy expands variables only there; ``\\$`` is a literal dollar."""
    quote: str | None = None
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote is None:
            if c == "#":
                return False
            if c in "\"'":
                quote = c
        elif c == quote:
            quote = None
        elif quote == '"' and c == "$" and _ENV_NAME.match(line, i + 1):
            return True
        i += 1
    return False


def denied_literals(renderer: Renderer, allow: Collection[str]) -> list[Diagnostic]:
    """Lines whose literal text starts with a denied directive, or expands an environment
    variable, as written in the template (not produced by ``{{ }}``).

    A directive counts when its keyword is the first word of the line's literal text (see
    :func:`literal_text`); the syntax stage remains the authority on the rendered text.
    """
    out: list[Diagnostic] = []
    for name, source, path in _templates(renderer):
        for n, line in enumerate(literal_text(source).split("\n"), start=1):
            found = _denial(line)
            if found is not None and "#" in line[: line.find(found)]:
                found = None
            if found is None and _expands_env(line):
                found = ENV_EXPANSION
            if found is None or found in allow:
                continue
            denial = DENIED_DIRECTIVES[found]
            what = (
                "an environment variable in double quotes"
                if found == ENV_EXPANSION
                else repr(found)
            )
            out.append(
                make(
                    "W8051",
                    Phase.LINT,
                    f"{name} line {n} writes {what}, which the directive policy denies "
                    f"({denial.rule_id}: it {denial.danger}); allow it with "
                    f"validation.policy.allowDirectives: [{found}]",
                    location=Location(file=path) if path else None,
                    template_location=TemplateLocation(template=name, line=n),
                )
            )
    return out


_KEPT = 4096
"""Sources whose analysis is kept (each kind apart); the oldest go all at once past it."""
_constant_of: dict[str, bool] = {}


def _constant(renderer: Renderer, source: str) -> bool:
    """Is the expression ``source`` a constant? Kept per source, as :func:`_names` is: the
    quickstart has 320 ``when`` expressions, most of them alike, and parsing them took 70 ms
    of each lint."""
    kept = _constant_of.get(source)
    if kept is not None:
        return kept
    try:
        found = isinstance(parse_expression(renderer.environment, source), nodes.Const)
    except TemplateSyntaxError:
        found = False  # the renderer reports E1009
    if len(_constant_of) >= _KEPT:
        _constant_of.clear()
    _constant_of[source] = found
    return found


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


#: Names every template may read: the render context and the names Jinja itself provides.
_CONTEXT_NAMES = frozenset(
    {"resources", "http", "extraContext", "path_for", "outputs", "loop", "caller", "varargs"}
    | {"kwargs", "self", "true", "false", "none", "True", "False", "None"}
)
_GUARDS = frozenset({"default", "d"})


@dataclass(frozen=True, slots=True)
class _Names:
    """What :func:`undefined_names` needs of one template source, found once per source.

    Parsing and Jinja's free-variable analysis are most of the lint's time (about 0.5 s for
    the quickstart's 336 templates), and a spec change (an edit under ``htc local``, a config
    proposal at the admission webhook) usually keeps all but a few sources. Everything here
    depends on the source alone: the environment's syntax is fixed, and what the spec adds
    (the globals, what other templates declare) is applied per run."""

    undeclared: frozenset[str]
    declared: frozenset[str]
    first_load: tuple[tuple[str, int], ...]
    """Each undeclared name read outside a guard, with the first line that reads it."""


_names_of: dict[str, _Names | None] = {}
_MISSING = object()


_T = TypeVar("_T")
_alike: dict[Any, Any] = {}


def _shared(value: _T) -> _T:
    """One object for equal summaries' parts: most templates read and declare the same few
    names, and the kept analyses stay in the process for good. For the quickstart they
    take 0.05 MB this way, 0.3 MB with sets and dicts of their own: it counts against the
    300 MB of issue 20."""
    return _alike.setdefault(value, value)  # type: ignore[no-any-return]


def _names(renderer: Renderer, source: str) -> _Names | None:
    """The summary of ``source`` (None: it does not parse; the renderer reports that)."""
    kept = _names_of.get(source, _MISSING)  # one look-up: another thread may clear it
    if kept is not _MISSING:
        return kept  # type: ignore[return-value]
    try:
        tree = renderer.environment.parse(source)
    except TemplateSyntaxError:
        found = None
    else:
        undeclared = frozenset(meta.find_undeclared_variables(tree))
        guarded = _guarded(tree)
        first: dict[str, int] = {}
        for node in tree.find_all(nodes.Name):
            name = node.name
            if node.ctx == "load" and name in undeclared and name not in guarded:
                first[name] = min(first.get(name, node.lineno), node.lineno)
        found = _Names(
            _shared(frozenset(undeclared)),
            _shared(frozenset(_declared(tree))),
            _shared(tuple(sorted(first.items()))),
        )
    if len(_names_of) >= _KEPT:
        _names_of.clear()
        _alike.clear()
    _names_of[source] = found
    return found


def undefined_names(renderer: Renderer) -> list[Diagnostic]:
    """W8059 per name a template reads that nothing declares (see the rule's description).

    An output is judged on its own (an included snippet's ``set`` does not leak back); a
    snippet may also read whatever a template that could include it declares, since it
    renders in that template's context. A name only read behind ``is defined`` or
    ``default(...)`` is optional on purpose.
    """
    known = _CONTEXT_NAMES | set(renderer.environment.globals)
    parsed: dict[str, _Names] = {}
    for name, source, _ in _templates(renderer):
        found = _names(renderer, source)
        if found is not None:
            parsed[name] = found
    declared_anywhere: set[str] = set()
    for summary in parsed.values():
        declared_anywhere |= summary.declared
    snippets = set(renderer.spec.template_snippets)
    out: list[Diagnostic] = []
    for name, summary in sorted(parsed.items()):
        free = summary.undeclared - known
        if name in snippets:
            free -= declared_anywhere
        first = {var: line for var, line in summary.first_load if var in free}
        for var, line in sorted(first.items(), key=lambda kv: (kv[1], kv[0])):
            names = known | summary.declared | (declared_anywhere if name in snippets else set())
            close = difflib.get_close_matches(var, names, n=1, cutoff=0.75)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            out.append(
                make(
                    "W8059",
                    Phase.LINT,
                    f"{name}: '{var}' is not defined in the render context, nor by a loop, "
                    f"`set`, macro or import{hint}",
                    template_location=TemplateLocation(template=name, line=line),
                )
            )
    return out


def _declared(tree: nodes.Template) -> set[str]:
    names: set[str] = set()
    for node in tree.find_all((nodes.Name,)):
        if node.ctx in ("store", "param"):
            names.add(node.name)
    for macro in tree.find_all((nodes.Macro,)):
        names.add(macro.name)
    for imp in tree.find_all((nodes.Import,)):
        names.add(imp.target)
    for frm in tree.find_all((nodes.FromImport,)):
        for item in frm.names:
            names.add(item[1] if isinstance(item, tuple) else item)
    # fragments('snippet', items, 'name', key=...) gives the snippet `name` and each key
    for call in tree.find_all((nodes.Call,)):
        if isinstance(call.node, nodes.Name) and call.node.name == FRAGMENTS_CALL:
            if len(call.args) > 2 and isinstance(call.args[2], nodes.Const):
                names.add(str(call.args[2].value))
            names.update(kw.key for kw in call.kwargs)
    return names


def _guarded(tree: nodes.Template) -> set[str]:
    """Names read as ``x is defined`` / ``x is undefined`` or ``x | default(...)``."""
    out: set[str] = set()
    for test in tree.find_all((nodes.Test,)):
        if test.name in ("defined", "undefined") and isinstance(test.node, nodes.Name):
            out.add(test.node.name)
    for flt in tree.find_all((nodes.Filter,)):
        if flt.name in _GUARDS and isinstance(flt.node, nodes.Name):
            out.add(flt.node.name)
    return out
