"""A shared module kept from the last render, then assigned to in this one.

A shared snippet module is kept across renders while nobody assigned to its namespaces.
When an output that renders again this time assigns to one, the outputs after it that read
the module must not be kept: the value they printed last time is not what a full render
prints now. The renderer notices the assignment between outputs (its taint check); these
tests fail when that check is skipped, which no other test did.
"""

from __future__ import annotations

from controller.render import Renderer
from controller.render.snippets import SnippetTemplate
from controller.resources import Store
from controller.spec.models import HAProxyTemplateConfigSpec
from tests.render.render_kit import ingress, signature, spec

_SHARED = {"shared": "{% set acc = namespace(n=0) %}"}

# a.map assigns only while an Ingress named "grab" exists; b.map reads the module alone
# (nothing from the store), so only the taint check can tell that it must render again.
_ASSIGNS = (
    "{% import 'shared' as s with context %}"
    "{% if resources.ingresses.list() | selectattr('metadata.name', 'equalto', 'grab')"
    " | list %}{% set t = s.acc %}{% set t.n = t.n + 7 %}{% endif %}"
    "a {{ resources.ingresses.list() | length }}\n"
)
_READS = "{% import 'shared' as s with context %}n {{ s.acc.n }}\n"


def _spec() -> HAProxyTemplateConfigSpec:
    return spec(
        "{% import 'shared' as s with context %}global\n",
        maps={"a.map": _ASSIGNS, "b.map": _READS},
        snippets=_SHARED,
    )


def _content(result: object, path: str) -> bytes:
    found = result.files.get(path)  # type: ignore[attr-defined]
    assert found is not None, path
    content: bytes = found.content
    return content


def test_an_output_read_after_a_new_assignment_renders_again() -> None:
    s = _spec()
    store = Store.from_spec(s)
    store.apply("ingresses", ingress("one", "one.local"))
    r = Renderer(s)
    first = r.render(store.snapshot())
    assert _content(first, "maps/b.map") == b"n 0\n"

    store.apply("ingresses", ingress("grab", "grab.local"))  # a.map now assigns
    view = store.snapshot()
    now = r.render(view)
    assert _content(now, "maps/a.map") == b"a 2\n"
    assert _content(now, "maps/b.map") == b"n 7\n"  # what a full render prints
    assert signature(now) == signature(Renderer(s).render(view))


def test_after_an_assignment_the_module_is_never_kept_again() -> None:
    """Once assigned to, the module is built afresh for every later render (a render in
    another thread could otherwise see the assignment), and the outputs agree with a full
    render after the assigning Ingress is gone as well."""
    s = _spec()
    store = Store.from_spec(s)
    store.apply("ingresses", ingress("one", "one.local"))
    r = Renderer(s)
    r.render(store.snapshot())
    module = r._loader.templates["shared"]
    assert isinstance(module, SnippetTemplate) and module.keep
    store.apply("ingresses", ingress("grab", "grab.local"))
    r.render(store.snapshot())
    assert not module.keep and module._memo is None
    store.delete("ingresses", ("default", "grab"))
    view = store.snapshot()
    later = r.render(view)
    assert _content(later, "maps/b.map") == b"n 0\n"
    assert signature(later) == signature(Renderer(s).render(view))
    again = r.render(view)
    assert signature(again) == signature(later)
