"""Shared modules a later render replaced are freed by reference counting, never while in use.

A shared module's context and its macros form a reference cycle, and so did each render's
``resources`` with its shared context. Each changed render left the modules it replaced (at
10,000 Ingresses the routing table's lists, about 1.4 MB) to a collection of the whole heap.
The loader breaks those cycles once no render is in flight (``SnippetLoader.end``); these tests
show that nothing cyclic is left, and that a render in another thread still reading a module
that a newer render replaced renders exactly what a full render does.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jinja2.environment import TemplateModule
from jinja2.runtime import Context, Macro
from jinja2.utils import Namespace

from controller.diagnostics import Diagnostic
from controller.render import Renderer
from controller.render.context import RenderedOutput, Resources
from controller.render.fragments import Fragment
from controller.render.listmemo import ListMemos
from controller.render.snippets import SharedModule, SnippetLoader, SnippetTemplate
from controller.resources import Store
from tests.render.render_kit import (
    endpoint_slice,
    ingress,
    quickstart_spec,
    service,
    signature,
    spec,
)

_OURS = (Context, TemplateModule, Macro, Namespace, Resources, SharedModule, Fragment, ListMemos)


@contextmanager
def _no_collector() -> Iterator[None]:
    """The cyclic collector off, as between two renders of a long-running process: whatever
    reference counting does not free stays until :func:`_cyclic_garbage` looks."""
    gc.collect()
    resume = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if resume:
            gc.enable()


def _cyclic_garbage() -> list[str]:
    """Render objects that only the cyclic collector would free, by type name."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [type(o).__name__ for o in gc.garbage if isinstance(o, _OURS)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


def _quickstart(n: int) -> tuple[Any, Store, Renderer]:
    """The quickstart's spec, a store of ``n`` Ingresses with their Services and slices, and
    a renderer that rendered it once."""
    s = quickstart_spec()
    store = Store.from_spec(s)
    for i in range(n):
        svc = f"svc-{i}"
        store.apply("ingresses", ingress(f"app-{i}", f"app-{i}.test", ("/", "Prefix", svc, 80)))
        store.apply("services", service(svc, 80))
        slice_ = endpoint_slice(svc, 8080, (f"10.0.{i}.1", True), (f"10.0.{i}.2", False))
        store.apply("endpointslices", slice_)
    r = Renderer(s)
    assert r.render(store.snapshot()).ok
    return s, store, r


def test_changed_renders_of_the_quickstart_leave_no_cyclic_garbage() -> None:
    """Changes that evaluate the routing table again (a host), that evaluate it to the same
    exports (an Ingress of another class: the new evaluation is dropped for the old module),
    and that remove an Ingress: after each, nothing of the render is left for the collector,
    and the files are those of a full render by a new renderer."""
    s, store, r = _quickstart(6)
    changes: list[tuple[str, Any]] = [
        ("apply", ingress("app-1", "moved.test", ("/", "Prefix", "svc-1", 80))),
        ("apply", ingress("other", "other.test", ("/", "Prefix", "svc-2", 80), cls="other")),
        ("apply", ingress("app-2", "app-2.test", ("/v2", "Exact", "svc-2", 80))),
        ("delete", ("default", "app-3")),
        ("apply", ingress("other", "other2.test", ("/", "Prefix", "svc-2", 80), cls="other")),
    ]
    for what, arg in changes:
        if what == "apply":
            store.apply("ingresses", arg)
        else:
            store.delete("ingresses", arg)
        view = store.snapshot()
        with _no_collector():
            now = r.render(view)
            left = _cyclic_garbage()
        assert left == [], (what, left)
        assert now.ok
        assert signature(now) == signature(Renderer(s).render(view))


def test_a_dropped_renderer_leaves_nothing_it_kept_to_the_collector() -> None:
    """A renderer dropped (a new spec adopted, a lint pass over) frees what it kept for the
    next render at once: its shared modules, fragments and list memo (used from 64 items).
    Only its compiled templates, cycles of Jinja2's own, are left to the collector."""
    _, store, r = _quickstart(70)
    store.apply("ingresses", ingress("app-1", "moved.test", ("/", "Prefix", "svc-1", 80)))
    assert r.render(store.snapshot()).ok
    lib = r._loader.templates["routing"]
    assert isinstance(lib, SnippetTemplate) and lib._memo is not None and lib._sites is None
    facts = r._loader.templates["ingress-facts"]
    assert isinstance(facts, SnippetTemplate) and facts._sites
    assert isinstance(vars(r.environment).get("htc_lists"), ListMemos)
    with _no_collector():
        del r, lib, facts
        assert _cyclic_garbage() == []


_LIBRARY = (
    "{% set names = resources.ingresses.list() | map(attribute='metadata.name') | list %}"
    "{% macro line(n) %}{{ prefix }} {{ n }} of {{ names | length }}{% endmacro %}"
    "{% macro down(k) %}{{ k }}{% if k > 0 %},{{ down(k - 1) }}{% endif %}{% endmacro %}"
    "{% set prefix = 'host' %}"
)
"""A shared snippet whose macros read its own top-level names (through their closures) and
call themselves (a cycle of the macro alone)."""
_USER = (
    "{% import 'lib' as lib with context %}"
    "{% for n in lib.names %}{{ lib.line(n) }};{{ lib.down(2) }}\n{% endfor %}"
)


def _library_spec() -> Any:
    return spec(
        _USER, maps={"a.map": _USER, "b.map": _USER, "c.map": _USER}, snippets={"lib": _LIBRARY}
    )


def test_a_replaced_module_is_freed_at_once() -> None:
    """The module the next render replaced, with its context and its recursive macro, is
    freed when that render ends, without the collector. A module kept because its new
    evaluation exported the same is left whole (later renders use it), and that dropped
    evaluation is freed too."""
    s = _library_spec()
    store = Store.from_spec(s)
    store.apply("ingresses", ingress("a", "a.test"))
    r = Renderer(s)
    r.render(store.snapshot())
    lib = r._loader.templates["lib"]
    assert isinstance(lib, SnippetTemplate) and lib._memo is not None
    old = weakref.ref(lib._memo.context)
    store.apply("ingresses", ingress("b", "b.test"))
    view = store.snapshot()
    with _no_collector():
        now = r.render(view)
        assert old() is None
        assert _cyclic_garbage() == []
    assert signature(now) == signature(Renderer(s).render(view))

    assert lib._memo is not None
    latest = lib._memo.context
    store.apply("ingresses", ingress("b", "moved.test"))  # read again, the same names
    view = store.snapshot()
    for _ in range(2):  # evaluated again to the same exports, then kept without evaluating
        with _no_collector():
            now = r.render(view)
            assert _cyclic_garbage() == []
        assert lib._memo.context is latest
        assert signature(now) == signature(Renderer(s).render(view))


def test_a_module_assigned_to_is_freed_at_once() -> None:
    """A module that an output assigned to is never kept again (see test_render_taint); the
    ones built for each render after that are freed when the render ends."""
    shared = {
        "shared": "{% set acc = namespace(n=0) %}"
        "{% macro m(k=1) %}{{ acc.n }}{% if k %}{{ m(0) }}{% endif %}{% endmacro %}"
    }
    assigns = "{% import 'shared' as s with context %}{% set t = s.acc %}{% set t.n = t.n + 7 %}a\n"
    reads = "{% import 'shared' as s with context %}n {{ s.m() }}\n"
    s = spec(
        "{% import 'shared' as s with context %}global\n",
        maps={"a.map": assigns, "b.map": reads},
        snippets=shared,
    )
    store = Store.from_spec(s)
    store.apply("ingresses", ingress("one", "one.test"))
    r = Renderer(s)
    r.render(store.snapshot())
    for i in range(3):
        store.apply("ingresses", ingress(f"more-{i}", f"more-{i}.test"))
        view = store.snapshot()
        with _no_collector():
            now = r.render(view)
            assert _cyclic_garbage() == []
        assert signature(now) == signature(Renderer(s).render(view))


class _Paused:
    """An ``after_output`` hook that holds its render after the first output until told to
    go on: the render has obtained the shared module by then, and its other outputs still
    call that module's macros."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go_on = threading.Event()

    def __call__(self, name: str, out: RenderedOutput) -> Sequence[Diagnostic]:
        if not self.reached.is_set():
            self.reached.set()
            assert self.go_on.wait(30), "the other render never finished"
        return ()


def test_a_render_in_flight_keeps_reading_the_module_a_newer_render_replaced() -> None:
    """Thread B renders the store as it was and stops after its first output; meanwhile this
    thread renders a change, which replaces B's module and ends. B then renders its other
    outputs with that module's macros: every file is what a full render of B's view gives.
    Only once B is over is the replaced module freed (breaking it when the newer render ended,
    with B still in flight, fails B's render: its macros lose their closures)."""
    s = _library_spec()
    store = Store.from_spec(s)
    store.apply("ingresses", ingress("a", "a.test"))
    store.apply("ingresses", ingress("b", "b.test"))
    before = store.snapshot()
    r = Renderer(s)
    r.render(before)
    lib = r._loader.templates["lib"]
    assert isinstance(lib, SnippetTemplate) and lib._memo is not None
    old = weakref.ref(lib._memo.context)
    store.apply("ingresses", ingress("c", "c.test"))
    after = store.snapshot()

    hook = _Paused()
    results: dict[str, Any] = {}
    b = threading.Thread(target=lambda: results.update(b=r.render(before, after_output=hook)))
    with _no_collector():
        b.start()
        try:
            assert hook.reached.wait(30), "render B never reached its first output"
            results["a"] = r.render(after)
            assert lib._memo is not None and lib._memo.context is not old()
            assert old() is not None  # B is still in flight: spared
        finally:
            hook.go_on.set()
            b.join(30)
        assert not b.is_alive()
        assert old() is None  # B is over: freed at once
        assert _cyclic_garbage() == []

    assert signature(results["b"]) == signature(Renderer(s).render(before))
    assert signature(results["a"]) == signature(Renderer(s).render(after))
    assert b"host c of 3" in results["a"].files.get("maps/a.map").content
    assert b"host c" not in results["b"].files.get("maps/c.map").content


def test_overlapping_renders_never_hold_more_than_the_bound(monkeypatch: Any) -> None:
    """While renders keep overlapping nothing is cleared; what is remembered meanwhile stays
    bounded (the rest is left to the collector), and once they stop it is cleared."""
    monkeypatch.setattr(SnippetLoader, "RETIRED_MAX", 16)
    s = _library_spec()
    store = Store.from_spec(s)
    r = Renderer(s)
    loader = r._loader
    loader.begin()  # a render that never ends
    try:
        for i in range(40):
            store.apply("ingresses", ingress("a", f"a{i}.test"))
            view = store.snapshot()
            result = r.render(view)
            assert len(loader._retired) <= 16
        assert signature(result) == signature(Renderer(s).render(view))
    finally:
        loader.end()
    assert loader._retired == []
