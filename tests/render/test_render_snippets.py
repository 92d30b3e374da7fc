"""Snippets: include/import, and one evaluation per render for render-wide library snippets."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

from controller.render import Renderer
from controller.resources import Snapshot
from tests.render.render_kit import ingress, render, snapshot, spec, text

LIBRARY = (
    "{% set names = resources.ingresses.list() | map(attribute='metadata.name') | list %}"
    "{% macro line(n) %}host {{ n }}{% endmacro %}"
)


class CountingView:
    """A real snapshot that counts how often each collection is listed."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.lists = 0

    def collection(self, name: str) -> Any:
        view = self.snap.collection(name)
        outer = self

        class Counted:
            def __init__(self) -> None:
                self.name = name

            def list(self) -> builtins.list[Any]:
                outer.lists += 1
                return view.list()

            def fetch(self, *keys: str) -> builtins.list[Any]:
                return view.fetch(*keys)

            def get_single(self, *keys: str) -> Any:
                return view.get_single(*keys)

            def __len__(self) -> int:
                return len(view)

        return Counted()

    def names(self) -> list[str]:
        return self.snap.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.snap)


def _three_users(library: str) -> Any:
    user = "{% import 'lib' as lib with context %}{{ lib.names | join(',') }}\n"
    return spec(
        user, maps={"a.map": user, "b.map": user, "x.map": "x\n"}, snippets={"lib": library}
    )


def test_include_and_import_with_and_without_context() -> None:
    s = spec(
        "{% include 'head' %}{% from 'lib' import greet %}{{ greet('x') }}\n{% import 'lib' as l %}{{ l.greet('y') }}\n",
        snippets={
            "head": "# {{ extraContext.title }}\n",
            "lib": "{% macro greet(n) %}hi {{ n }}{% endmacro %}",
        },
        extra={"title": "T"},
    )
    assert text(render(s)) == "# T\nhi x\nhi y\n"


def test_a_render_wide_library_runs_once_per_render() -> None:
    s = _three_users(LIBRARY)
    snap = snapshot(
        s, [("ingresses", ingress("a", "a.test")), ("ingresses", ingress("b", "b.test"))]
    )
    view = CountingView(snap)
    r = Renderer(s).render(view)
    assert r.ok, r.diagnostics
    assert {e.path: e.content for e in r.files if e.path != "maps/x.map"} == dict.fromkeys(
        ["haproxy.cfg", "maps/a.map", "maps/b.map"], b"a,b\n"
    )
    assert view.lists == 1
    assert Renderer(s).shared_snippets == {"lib"}
    Renderer(s).render(view)
    assert view.lists == 2  # never reused across renders


def test_a_library_reading_outputs_runs_per_import() -> None:
    library = LIBRARY + "{% set seen = 'x.map' in outputs %}"
    s = _three_users(library)
    view = CountingView(snapshot(s, [("ingresses", ingress("a", "a.test"))]))
    r = Renderer(s).render(view)
    assert r.ok, r.diagnostics
    assert view.lists == 3
    assert Renderer(s).shared_snippets == frozenset()


def test_a_library_including_an_impure_snippet_runs_per_import() -> None:
    s = spec(
        "{% import 'lib' as lib with context %}{{ lib.names | join(',') }}\n",
        maps={
            "a.map": "{% import 'lib' as lib with context %}{{ lib.names | join(',') }}\n",
            "x.map": "x\n",
        },
        snippets={"lib": LIBRARY + "{% include 'peek' %}", "peek": "{{ outputs.get('x.map') }}"},
    )
    view = CountingView(snapshot(s, [("ingresses", ingress("a", "a.test"))]))
    assert Renderer(s).render(view).ok
    assert view.lists == 2


def test_an_output_that_rebinds_a_shared_name_gets_its_own_evaluation() -> None:
    s = spec(
        "{% import 'lib' as lib with context %}{{ lib.names | join(',') }}\n",
        maps={
            "a.map": "{% set extraContext = {'who': 'local'} %}"
            "{% import 'lib2' as lib2 with context %}{{ lib2.who }}\n",
            "b.map": "{% import 'lib2' as lib2 with context %}{{ lib2.who }}\n",
        },
        snippets={"lib": LIBRARY, "lib2": "{% set who = extraContext.who %}"},
        extra={"who": "spec"},
    )
    r = render(s, [("ingresses", ingress("a", "a.test"))])
    assert text(r, "maps/a.map") == "local\n"
    assert text(r, "maps/b.map") == "spec\n"
