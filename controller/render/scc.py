"""Strongly connected components of a small named graph (Tarjan, iterative).

Both the render graph (cycles among outputs) and deferred rules (reporting order among rule
owners) need the components; one implementation keeps their notion of "a cycle" the same.
Iterative so that a long chain of references cannot exhaust Python's recursion limit, and
name-ordered (roots and successors) so that the result never depends on set or dict order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

__all__ = ["strongly_connected"]


def strongly_connected(edges: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Components of ``edges`` (node → successors; every successor is a key), each emitted
    after every component it reaches: dependencies first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    work: list[tuple[str, Iterator[str]]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(edges[node]))))

    for root in sorted(edges):
        if root in index:
            continue
        visit(root)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    visit(nxt)
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)
    return out
