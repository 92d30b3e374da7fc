"""The render graph: which output reads which, found in the templates' syntax trees.

Edges come from the source, not from running it, so the order is known before anything
renders, a cycle is reported even when the branch holding it never runs, and ``htc lint`` can
show the graph without resources. What counts as a reference:

* ``outputs['x']``, ``outputs.x``, ``outputs.get('x')`` and ``'x' in outputs`` (knowing
  whether ``x`` rendered needs ``x`` decided first) — an edge to output ``x``;
* ``{% include %}``, ``{% import %}``, ``{% from … import %}`` and ``{% extends %}`` with a
  constant name (or a list of them) — a use of that snippet, whose own references count as
  the output's, transitively.

A reference that cannot be resolved statically — ``outputs[name]``, ``outputs`` passed to a
macro or iterated, an include whose name is computed — is treated **conservatively**: the
output depends on every other output (or uses every snippet). The render order then stays
correct whatever the expression evaluates to; the price is that such an output renders last
and takes part in any cycle through it, which is reported like any other cycle. ``htc lint``
lists these references (``RenderGraph.dynamic``) so authors can make them constant.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jinja2 import nodes

from controller.render.scc import strongly_connected

OUTPUTS_VAR = "outputs"
FRAGMENTS_CALL = "fragments"
"""A call ``fragments('snippet', ...)`` references that snippet like an include does."""
_MAPPING_METHODS = frozenset({"get", "keys", "values", "items"})
DYNAMIC = "*"
"""The name of a reference whose target is computed at render time."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference written in a template: to an output or a snippet, at a line."""

    name: str
    template: str
    line: int


@dataclass(frozen=True, slots=True)
class TemplateRefs:
    """What one template (output template, ``when`` expression or snippet) refers to."""

    outputs: tuple[Reference, ...] = ()
    snippets: tuple[Reference, ...] = ()
    """Included, imported or extended: evaluated in (a copy of) this template's context."""
    fragments: tuple[Reference, ...] = ()
    """Named by ``fragments('snippet', ...)``: evaluated in a context of its own, so it does
    not make this template depend on names (controller.render.fragments)."""

    @property
    def used_snippets(self) -> tuple[Reference, ...]:
        return (*self.snippets, *self.fragments)

    @property
    def dynamic(self) -> tuple[Reference, ...]:
        return tuple(r for r in (*self.outputs, *self.used_snippets) if r.name == DYNAMIC)


def references(tree: nodes.Node, template: str) -> TemplateRefs:
    """Collect the output and snippet references of one parsed template or expression."""
    outs: list[Reference] = []
    snips: list[Reference] = []
    frags: list[Reference] = []

    def ref(kind: list[Reference], name: str, node: nodes.Node) -> None:
        kind.append(Reference(name, template, node.lineno or 1))

    def template_names(expr: nodes.Expr, node: nodes.Node, into: list[Reference]) -> None:
        if isinstance(expr, nodes.Const) and isinstance(expr.value, str):
            ref(into, expr.value, node)
        elif isinstance(expr, nodes.List | nodes.Tuple) and all(
            isinstance(i, nodes.Const) and isinstance(i.value, str) for i in expr.items
        ):
            for item in expr.items:
                ref(into, item.value, node)  # type: ignore[attr-defined]
        else:
            ref(into, DYNAMIC, node)

    def output_use(name: nodes.Name, chain: list[nodes.Node]) -> None:
        parent = chain[-1] if chain else None
        grand = chain[-2] if len(chain) > 1 else None
        if isinstance(parent, nodes.Getitem) and parent.node is name:
            arg = parent.arg
            if isinstance(arg, nodes.Const) and isinstance(arg.value, str):
                return ref(outs, arg.value, name)
        elif isinstance(parent, nodes.Getattr) and parent.node is name:
            if parent.attr not in _MAPPING_METHODS:
                return ref(outs, parent.attr, name)
            if (
                parent.attr == "get"
                and isinstance(grand, nodes.Call)
                and grand.node is parent
                and grand.args
                and isinstance(grand.args[0], nodes.Const)
                and isinstance(grand.args[0].value, str)
            ):
                return ref(outs, grand.args[0].value, name)
        elif (
            isinstance(parent, nodes.Operand)
            and parent.op in ("in", "notin")
            and isinstance(grand, nodes.Compare)
            and grand.ops
            and grand.ops[0] is parent
            and isinstance(grand.expr, nodes.Const)
            and isinstance(grand.expr.value, str)
        ):
            return ref(outs, grand.expr.value, name)
        ref(outs, DYNAMIC, name)

    def walk(node: nodes.Node, chain: list[nodes.Node]) -> None:
        if isinstance(node, nodes.Name):
            if node.name == OUTPUTS_VAR and node.ctx == "load":
                output_use(node, chain)
            return
        if isinstance(node, nodes.Include | nodes.Import | nodes.FromImport | nodes.Extends):
            template_names(node.template, node, snips)
        elif (
            isinstance(node, nodes.Call)
            and isinstance(node.node, nodes.Name)
            and node.node.name == FRAGMENTS_CALL
            and node.args
        ):
            template_names(node.args[0], node, frags)  # fragments('snippet', items, ...)
        chain.append(node)
        for child in node.iter_child_nodes():
            walk(child, chain)
        chain.pop()

    walk(tree, [])
    return TemplateRefs(tuple(outs), tuple(snips), tuple(frags))


@dataclass(frozen=True)
class RenderGraph:
    """Outputs, what each depends on, the order to render them in, and what went wrong."""

    dependencies: Mapping[str, frozenset[str]]
    """Output → the outputs it reads (directly, in its ``when``, or through snippets)."""
    snippets: Mapping[str, frozenset[str]]
    """Output → the snippets it uses, transitively."""
    order: tuple[str, ...]
    """Every output outside a cycle and not downstream of one, dependencies first."""
    cycles: tuple[tuple[str, ...], ...] = ()
    """Each cycle as a path that returns to its start: ``("a", "b", "a")``."""
    unknown_outputs: tuple[Reference, ...] = ()
    """References to outputs the spec does not define."""
    missing_snippets: tuple[Reference, ...] = ()
    """Constant includes/imports of snippets that do not exist."""
    dynamic: tuple[Reference, ...] = ()
    """References resolved conservatively (see the module docstring)."""
    templates: Mapping[str, TemplateRefs] = field(default_factory=dict)
    """Per template name (outputs, ``<output>#when``, snippets): its references."""

    @property
    def in_cycle(self) -> frozenset[str]:
        return frozenset(n for c in self.cycles for n in c)

    def format_cycle(self, cycle: tuple[str, ...]) -> str:
        """``a.map -> b.map (via snippet 's1') -> a.map``: an edge that only a snippet makes
        names the snippet, or the author would search the output's template in vain."""
        parts = [cycle[0]]
        for src, dst in itertools.pairwise(cycle):
            via = self._via_snippet(src, dst)
            if via is not None:
                parts[-1] += f" (via snippet {via!r})"
            parts.append(dst)
        return " -> ".join(parts)

    def _via_snippet(self, src: str, dst: str) -> str | None:
        """The first snippet (by name) making the edge src → dst, if src's own templates
        do not reference dst themselves."""

        def refers(refs: TemplateRefs | None) -> bool:
            return refs is not None and any(r.name in (dst, DYNAMIC) for r in refs.outputs)

        snippets = self.snippets.get(src, frozenset())
        own = [
            refs
            for name, refs in self.templates.items()
            if (name == src or name.startswith(src + "#")) and name not in snippets
        ]
        if any(refers(r) for r in own):
            return None
        return next((s for s in sorted(snippets) if refers(self.templates.get(s))), None)


def build_graph(
    outputs: Iterable[str],
    output_refs: Mapping[str, Iterable[TemplateRefs]],
    snippet_refs: Mapping[str, TemplateRefs | None],
    *,
    templates: Mapping[str, TemplateRefs] | None = None,
) -> RenderGraph:
    """Resolve references into edges, order the outputs and find cycles.

    ``output_refs[name]`` are the references of an output's own template and ``when``;
    ``snippet_refs`` those of every defined snippet, None for one that failed to parse (it
    still counts as used, so the caller can block the outputs that use it).
    """
    names = tuple(sorted(set(outputs)))
    known = set(names)
    unknown: list[Reference] = []
    missing: list[Reference] = []
    dynamic: list[Reference] = []
    seen_unknown: set[Reference] = set()

    def note_snippet_problems(refs: TemplateRefs) -> None:
        for r in refs.used_snippets:
            if r.name == DYNAMIC:
                dynamic.append(r)
            elif r.name not in snippet_refs and r not in seen_unknown:
                seen_unknown.add(r)
                missing.append(r)
        for r in refs.outputs:
            if r.name == DYNAMIC:
                dynamic.append(r)
            elif r.name not in known and r not in seen_unknown:
                seen_unknown.add(r)
                unknown.append(r)

    for maybe in snippet_refs.values():
        if maybe is not None:
            note_snippet_problems(maybe)

    deps: dict[str, frozenset[str]] = {}
    used: dict[str, frozenset[str]] = {}
    for name in names:
        own = list(output_refs.get(name, ()))
        for refs in own:
            note_snippet_problems(refs)
        snips = _snippet_closure(own, snippet_refs)
        targets: set[str] = set()
        wide = False
        for maybe_refs in (*own, *(snippet_refs[s] for s in snips)):
            if maybe_refs is None:
                continue
            for r in maybe_refs.outputs:
                if r.name == DYNAMIC:
                    wide = True
                elif r.name in known:
                    targets.add(r.name)
        if wide:
            targets |= known - {name}
        deps[name] = frozenset(targets)
        used[name] = frozenset(snips)

    cycles = _cycles(deps)
    cyclic = {n for c in cycles for n in c}
    order = _topological(names, deps, cyclic)
    return RenderGraph(
        dependencies=deps,
        snippets=used,
        order=order,
        cycles=cycles,
        unknown_outputs=tuple(unknown),
        missing_snippets=tuple(missing),
        dynamic=tuple(dict.fromkeys(dynamic)),
        templates=dict(templates or {}),
    )


def _snippet_closure(
    own: Iterable[TemplateRefs], snippet_refs: Mapping[str, TemplateRefs | None]
) -> set[str]:
    found: set[str] = set()
    todo: list[str] = []
    for refs in own:
        todo.extend(r.name for r in refs.used_snippets)
    while todo:
        s = todo.pop()
        if s == DYNAMIC:
            todo.extend(n for n in snippet_refs if n not in found)
            continue
        if s in found or s not in snippet_refs:
            continue
        found.add(s)
        snippet = snippet_refs[s]
        if snippet is not None:
            todo.extend(r.name for r in snippet.used_snippets)
    return found


def _cycles(deps: Mapping[str, frozenset[str]]) -> tuple[tuple[str, ...], ...]:
    """One elementary cycle per strongly connected component that has one (Tarjan)."""
    components = strongly_connected(deps)
    out: list[tuple[str, ...]] = []
    for comp in components:
        members = set(comp)
        start = min(comp)
        if len(comp) == 1 and start not in deps[start]:
            continue
        out.append(_path_back(start, members, deps))
    return tuple(sorted(out))


def _path_back(
    start: str, members: set[str], deps: Mapping[str, frozenset[str]]
) -> tuple[str, ...]:
    """The shortest path from ``start`` back to itself inside one component (BFS)."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for w in sorted(deps[node] & members):
                if w == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(prev[chain[-1]])
                    return (*reversed(chain), start)
                if w not in prev:
                    prev[w] = node
                    nxt.append(w)
        frontier = nxt
    return (start, start)  # unreachable for a real component


def _topological(
    names: tuple[str, ...], deps: Mapping[str, frozenset[str]], cyclic: set[str]
) -> tuple[str, ...]:
    """Kahn's algorithm, smallest name first among the ready ones (deterministic)."""
    waiting = {n: set(deps[n]) for n in names}
    users: dict[str, list[str]] = {n: [] for n in names}
    for n in names:
        for d in deps[n]:
            users[d].append(n)
    ready = [n for n in names if not waiting[n] and n not in cyclic]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for u in users[n]:
            waiting[u].discard(n)
            if not waiting[u] and u not in cyclic:
                heapq.heappush(ready, u)
    return tuple(order)
