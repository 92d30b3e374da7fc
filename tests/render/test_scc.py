"""Strongly connected components: the one implementation behind render cycles and deferred
rule order."""

from __future__ import annotations

from controller.render.scc import strongly_connected


def test_components_come_dependencies_first() -> None:
    # a -> b <-> c -> d ; e alone ; f -> f
    edges = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set(), "e": set(), "f": {"f"}}
    comps = strongly_connected(edges)
    assert sorted(sorted(c) for c in comps) == [["a"], ["b", "c"], ["d"], ["e"], ["f"]]
    pos = {n: i for i, c in enumerate(comps) for n in c}
    for node, succs in edges.items():
        for s in succs:
            assert pos[s] <= pos[node], (node, s)


def test_order_does_not_depend_on_insertion_order() -> None:
    one = {"x": {"y", "z"}, "y": {"x"}, "z": set()}
    two = {"z": set(), "y": {"x"}, "x": {"z", "y"}}
    assert strongly_connected(one) == strongly_connected(two)


def test_a_long_chain_needs_no_recursion() -> None:
    n = 5000
    edges = {f"n{i:05d}": {f"n{i + 1:05d}"} for i in range(n)}
    edges[f"n{n:05d}"] = {"n00000"}
    [comp] = strongly_connected(edges)
    assert len(comp) == n + 1
