"""``fragments()`` called again with the same arguments looks only at the places where its
items differ from the last call's (controller.render.fragments, ``_unchanged_run``). Each
check it makes once per call instead of once per item must still send the items it concerns
to be evaluated again: these fail if one is left out."""

from __future__ import annotations

from typing import Any

import pytest

from controller.render import Renderer
from controller.resources import Store
from tests.render.render_kit import ingress, service, signature, spec, text
from tests.render.test_render_fragments import _count_evaluations


def _store(s: Any, n: int = 5) -> Store:
    store = Store.from_spec(s)
    for i in range(n):
        store.apply("services", service(f"svc-{i}", 80 + i))
    return store


def _same_as_full(r: Renderer, s: Any, store: Store) -> str:
    got = r.render(store.snapshot())
    assert signature(got) == signature(Renderer(s).render(store.snapshot()))
    return text(got)


def test_a_kept_fragment_whose_namespace_was_assigned_is_evaluated_again() -> None:
    """The output assigns to the first fragment's namespace; the next render, with another
    item changed, must not reuse that fragment."""
    s = spec(
        "{% set fs = fragments('per-svc', resources.services.list(), 's') %}"
        "{% for f in fs %}{{ f.acc.n }}\n{% endfor %}"
        "{% set g = fs[0].acc %}{% set g.n = g.n + 1000 %}",
        snippets={"per-svc": "{% set acc = namespace(n=s.spec.ports[0].port) %}"},
    )
    store = _store(s)
    r = Renderer(s)
    assert text(r.render(store.snapshot())).startswith("80\n")
    store.apply("services", service("svc-3", 99))
    out = _same_as_full(r, s, store)
    assert out.startswith("80\n") and "99\n" in out


def test_a_module_that_changed_evaluates_its_importers_again() -> None:
    """Every fragment imports a shared module that counts the Ingresses: one Ingress more
    (read by no fragment itself) and one Service changed evaluates all of them again."""
    s = spec(
        "{% for f in fragments('per-svc', resources.services.list(), 's') %}{{ f }}{% endfor %}",
        snippets={
            "count": "{% set n = resources.ingresses | length %}",
            "per-svc": "{% import 'count' as c with context %}"
            "svc {{ s.metadata.name }} {{ s.spec.ports[0].port }} {{ c.n }}\n",
        },
    )
    store = _store(s)
    r = Renderer(s)
    r.render(store.snapshot())
    store.apply("ingresses", ingress("web", "a.test"))
    store.apply("services", service("svc-1", 91))
    out = _same_as_full(r, s, store)
    assert out.count(" 1\n") == 5


def test_a_store_read_that_changed_evaluates_its_fragment_again() -> None:
    """Fragments read a collection other than their items' (the Ingresses): one Ingress more
    and one Service changed evaluate every fragment again."""
    s = spec(
        "{% for f in fragments('per-svc', resources.services.list(), 's') %}{{ f }}{% endfor %}",
        snippets={
            "per-svc": "svc {{ s.metadata.name }} {{ resources.ingresses.list() | length }}\n"
        },
    )
    store = _store(s)
    r = Renderer(s)
    r.render(store.snapshot())
    store.apply("ingresses", ingress("web", "a.test"))
    store.apply("services", service("svc-1", 91))
    assert _same_as_full(r, s, store).count(" 1\n") == 5


@pytest.mark.parametrize(
    "edit",
    ["replace", "add-first", "add-last", "remove", "move", "twice", "many"],
)
def test_items_that_changed_are_all_that_is_evaluated(
    edit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replaced, added, removed, moved and repeated items: only items that are new objects
    are evaluated, and the output is the full render's."""
    seen = _count_evaluations(monkeypatch)
    s = spec(
        "{% set xs = resources.services.list() | sort(attribute='spec.ports.0.port') %}"
        "{% set xs = xs + xs[:1] if resources.ingresses.list() else xs %}"
        "{% for f in fragments('per-svc', xs, 's') %}{{ f }}{% endfor %}",
        snippets={"per-svc": "svc {{ s.metadata.name }} {{ s.spec.ports[0].port }}\n"},
    )
    store = _store(s, 40)
    r = Renderer(s)
    r.render(store.snapshot())
    seen.clear()
    if edit == "replace":
        store.apply("services", service("svc-7", 107))
    elif edit == "add-first":
        store.apply("services", service("svc-x", 1))
    elif edit == "add-last":
        store.apply("services", service("svc-x", 1000))
    elif edit == "remove":
        store.delete("services", ("default", "svc-7"))
    elif edit == "move":
        store.apply("services", service("svc-7", 1000))
    elif edit == "twice":  # the first item listed again, at the end
        store.apply("ingresses", ingress("web", "a.test"))
    else:
        for i in range(0, 40, 3):
            store.apply("services", service(f"svc-{i}", 200 + i))
    got = r.render(store.snapshot())
    evaluated = sorted(seen)
    want = Renderer(s).render(store.snapshot())
    assert signature(got) == signature(want)
    expected = {
        "replace": ["svc-7"],
        "add-first": ["svc-x"],
        "add-last": ["svc-x"],
        "remove": [],
        "move": ["svc-7"],
        "twice": [],
        "many": [f"svc-{i}" for i in range(0, 40, 3)],
    }[edit]
    assert evaluated == sorted(expected)
