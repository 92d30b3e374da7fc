"""Which watched collections each output reads, found in the templates' syntax trees.

When an object fails its collection's inline rules, only the outputs built from that
collection must not render; the others can, so the report shows what is wrong and what
still works instead of an empty file set. The render graph knows which *outputs* an output
reads, not which collections, so this walks the same syntax trees for ``resources``:

* ``resources.ingresses``, ``resources['ingresses']`` and ``resources.get('ingresses')`` —
  a read of that collection;
* any other use of the name ``resources`` (iterated, passed to a macro, stored in a
  variable, a computed name) — a read of **every** collection: conservative, so a bad
  object can never reach an output through a path this walk does not understand.

An output reads what its own template, its ``when`` and every snippet it uses (the render
graph's transitive snippet set) read. Outputs that read other outputs are not listed for
their dependencies' collections: the renderer blocks them through the render graph
anyway, naming the skipped dependency. A template that cannot be walked reads everything
here (the renderer refuses it anyway).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from jinja2 import nodes

from controller.render import Renderer, parse_expression

__all__ = ["ANY_COLLECTION", "collections_read", "readers_of"]

ANY_COLLECTION = "*"
_RESOURCES = "resources"
_EVERY = frozenset({"keys", "values", "items"})
"""Mapping methods of ``resources`` that reach every collection."""


def collections_read(renderer: Renderer) -> dict[str, frozenset[str]]:
    """Output name → collection names its templates read (:data:`ANY_COLLECTION` when the
    walk cannot tell, which consumers must treat as "all of them")."""
    snippets: dict[str, frozenset[str]] = {}
    for name, snippet in renderer.spec.template_snippets.items():
        snippets[name] = _reads(renderer, snippet.template, expression=False)
    out: dict[str, frozenset[str]] = {}
    for name, d in renderer.outputs.items():
        found = set(_reads(renderer, d.output.template, expression=False))
        if d.output.when is not None:
            found |= _reads(renderer, d.output.when, expression=True)
        for s in renderer.graph.snippets.get(name, ()):
            found |= snippets.get(s, frozenset())
        out[name] = frozenset(found)
    return out


def _reads(renderer: Renderer, source: str, *, expression: bool) -> frozenset[str]:
    env = renderer.environment
    try:
        if expression:
            tree: nodes.Node = parse_expression(env, source, whole=False)
        else:
            tree = env.parse(source)
        return frozenset(_walk(tree, []))
    except Exception:  # a syntax error, nesting too deep: the walk cannot tell
        return frozenset({ANY_COLLECTION})  # unknown is "all"; the renderer refuses it anyway


def _walk(node: nodes.Node, chain: list[nodes.Node]) -> Iterator[str]:
    if isinstance(node, nodes.Name):
        if node.name == _RESOURCES and node.ctx == "load":
            yield _target(node, chain)
        return
    chain.append(node)
    for child in node.iter_child_nodes():
        yield from _walk(child, chain)
    chain.pop()


def _target(name: nodes.Name, chain: list[nodes.Node]) -> str:
    parent = chain[-1] if chain else None
    grand = chain[-2] if len(chain) > 1 else None
    if isinstance(parent, nodes.Getattr) and parent.node is name:
        if parent.attr in _EVERY:
            return ANY_COLLECTION
        if parent.attr != "get":
            return parent.attr
        if isinstance(grand, nodes.Call) and grand.node is parent and grand.args:
            return _constant(grand.args[0])
        return ANY_COLLECTION
    if isinstance(parent, nodes.Getitem) and parent.node is name:
        return _constant(parent.arg)
    return ANY_COLLECTION


def _constant(expr: nodes.Node) -> str:
    if isinstance(expr, nodes.Const) and isinstance(expr.value, str):
        return expr.value
    return ANY_COLLECTION


def readers_of(reads: Mapping[str, frozenset[str]], collection: str) -> list[str]:
    """Outputs that read ``collection`` (directly, or through a conservative reference)."""
    return sorted(n for n, cs in reads.items() if collection in cs or ANY_COLLECTION in cs)
