"""What a kept fragment holds: its text's origin without the values' own strings, and the
source map exactly as before (``controller.render.fragments._lean_origin``)."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest

import controller.render.fragments as fragments_mod
from controller.diagnostics import TemplateLocation
from controller.render import Renderer
from controller.render.snippets import SnippetTemplate
from controller.render.trace import Traced, line_sources
from controller.resources import Store
from tests.render.render_kit import service, spec, text

# Values with and without newlines, an empty value, a value ending in a newline, a macro's
# result (a joined, traced piece) and an include: every kind of piece a body holds.
PER_SVC = (
    "{% macro two(x) %}m1 {{ x }}\nm2 {{ x }}{% endmacro %}"
    "# {{ s.metadata.name }}{{ '' }}\n"
    "server {{ s.spec.ports[0].port }} {{ 'a\\nb' }}\n"
    "{{ 'tail\\n' }}{{ two(s.metadata.name) }}\n"
    "{% include 'inc' %}"
)
INC = "inc {{ s.metadata.name ~ '\\n\\n' }}x\n"
CONFIG = (
    "global\n{% for f in fragments('per-svc', resources.services.list(), 's') %}"
    "{{ f }}{% endfor %}end\n"
)


def _three_services(s: Any) -> Store:
    """A store of ``s``'s collections holding svc-0..svc-2 (ports 80-82)."""
    store = Store.from_spec(s)
    for i in range(3):
        store.apply("services", service(f"svc-{i}", 80 + i))
    return store


def _render_twice() -> list[tuple[str, list[Any]]]:
    s = spec(CONFIG, snippets={"per-svc": PER_SVC, "inc": INC})
    store = _three_services(s)
    r = Renderer(s)
    out = []
    for _ in range(2):  # evaluated, then kept
        result = r.render(store.snapshot())
        out.append((text(result), list(result.source_map.lines["haproxy.cfg"])))
    return out


def test_the_source_map_is_the_one_the_whole_pieces_give(monkeypatch: pytest.MonkeyPatch) -> None:
    lean = _render_twice()
    monkeypatch.setattr(fragments_mod, "_lean_origin", lambda pieces: pieces)
    whole = _render_twice()
    assert lean == whole
    rendered, lines = lean[0]
    assert rendered.count("\n") == len(lines) and "server 81 a\nb\n" in rendered
    assert {loc.template for loc in lines if loc} == {"haproxy.cfg", "per-svc", "inc"}


def test_a_kept_fragment_holds_no_value_strings() -> None:
    gc.collect()
    # Fragments other tests left alive (a module-level renderer, say) are not this one's.
    others = {id(o): o for o in gc.get_objects() if type(o) is fragments_mod.Fragment}
    s = spec(CONFIG, snippets={"per-svc": PER_SVC, "inc": INC})
    store = Store.from_spec(s)
    store.apply("services", service("svc-0", 80))
    r = Renderer(s)
    r.render(store.snapshot())
    found = [
        o
        for o in gc.get_objects()
        if type(o) is fragments_mod.Fragment and others.get(id(o)) is not o
    ]
    assert found
    for f in found:
        src = f._text._src
        assert type(src) is list
        plain = [p for p in src if type(p) is not Traced]
        # Only shapes: the shared stand-in, and newlines with it after the last unless the
        # value ended with one (``'a\nb'`` is ``'\nx'``, ``'svc-0\n\n'`` is ``'\n\n'``).
        assert plain and all(set(p) <= {"\n", fragments_mod._SHAPE} for p in plain)
        assert "\nx" in plain and "\n\n" in plain
        assert all(p is fragments_mod._lines_shape(p) for p in plain if "\n" in p)
        assert "svc-0" not in plain and "80" not in plain and "" not in plain


def _random_pieces(rng: random.Random, depth: int = 0) -> list[str]:
    loc = TemplateLocation(template="t", line=rng.randint(1, 9))
    out: list[str] = []
    for _ in range(rng.randint(0, 8)):
        kind = rng.randrange(5 if depth < 2 else 4)
        word = rng.choice(["", "a", "\n", "ab\n", "\na", "a\nb\nc", "\n\n", "x\n\n"])
        if kind == 0:
            out.append(word)  # a value: unknown origin
        elif kind == 1:
            out.append(Traced("", (loc,)))  # a marker
        elif kind == 2:
            n = word.count("\n")
            out.append(Traced(word, tuple(loc for _ in range(n + 1))))  # template text
        elif kind == 3:
            out.append(Traced(word, None))  # traced, origin unknown
        else:
            inner = _random_pieces(rng, depth + 1)
            out.append(Traced("".join(inner), inner))  # a macro's or block's result
    return out


def test_lean_pieces_give_every_line_the_same_location() -> None:
    rng = random.Random(20)
    for _ in range(3_000):
        pieces = _random_pieces(rng)
        lean = fragments_mod._lean_origin(pieces)
        assert line_sources(lean) == line_sources(pieces)
        assert len(lean) <= len(pieces)


NAMES = ("ing", "ns", "a", "regex_hosts", "tls_hosts", "tls", "canary_keys", "special")


def test_exports_are_an_equal_dict_in_the_same_order() -> None:
    values: list[Any] = [object(), "default", {}, [], (), [1], None, False]
    exports = dict(zip(NAMES, values, strict=True))
    shared = fragments_mod._shared_keys(dict(exports))
    assert type(shared) is dict and shared == exports and list(shared) == list(NAMES)
    assert all(shared[k] is v for k, v in exports.items())
    again = fragments_mod._shared_keys(dict(zip(NAMES, range(8), strict=True)))
    assert list(again) == list(NAMES) and again["special"] == 7 and "x" not in again
    other = fragments_mod._shared_keys({"special": 1, "ing": 2})
    assert list(other) == ["special", "ing"]


@pytest.mark.parametrize(
    "exports",
    [
        {},
        {"_hidden": 1},
        {"not an identifier": 1},
        {"__class__": 1},
        {"class": 1, "a": 2},
        {f"n{i}": i for i in range(31)},
    ],
)
def test_exports_a_class_dict_cannot_hold_stay_as_they_are(exports: dict[str, Any]) -> None:
    assert fragments_mod._shared_keys(exports) is exports


def test_exports_of_one_layout_share_their_keys() -> None:
    """Measured, not assumed: 2,000 dicts of eight names cost clearly less shared."""
    import tracemalloc

    def cost(make: Any) -> int:
        tracemalloc.start()
        kept = [make(dict.fromkeys(NAMES, i)) for i in range(2_000)]
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(kept) == 2_000
        return used

    plain, shared = cost(dict), cost(fragments_mod._shared_keys)
    assert shared < plain * 0.75, (shared, plain)


def test_the_layout_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fragments_mod, "_LAYOUTS", {})
    for i in range(fragments_mod._LAYOUTS_MAX * 2 + 3):
        out = fragments_mod._shared_keys({f"k{i}": i, "b": 1})
        assert out == {f"k{i}": i, "b": 1}
        assert len(fragments_mod._LAYOUTS) <= fragments_mod._LAYOUTS_MAX


@pytest.mark.parametrize(
    "names",
    [
        NAMES,
        ("special", "ing"),
        ("x",),
        (),
        ("class", "a"),
        ("_a", "b"),
        tuple(f"n{i}" for i in range(31)),
    ],
)
def test_exports_read_from_a_context_are_get_exported(names: tuple[str, ...]) -> None:
    """An evaluation's exports come from its context directly: equal to ``get_exported()``,
    names in the same order, the same values."""
    from jinja2.runtime import Context

    from controller.render.environment import TemplateEnvironment

    context = Context(TemplateEnvironment(), {}, "t", {})
    for i, name in enumerate(names):
        context.vars[name] = [i]
        context.exported_vars.add(name)
    context.vars["_private"] = 1
    got = fragments_mod._exports_of(context)
    want = context.get_exported()
    assert got == want and list(got) == list(want)
    assert all(got[k] is want[k] for k in want)


def test_entries_that_read_nothing_share_one_empty_tokens_mapping() -> None:
    """An evaluation that read nothing from the store gets the one shared, unchangeable
    empty mapping as its tokens, not an empty dict of its own (30,000 per full render at
    10,000 Ingresses); one that read keeps its own. The output is the same either way."""
    snippets = {"per-svc": "{{ s.metadata.name }} ", "reads": "{{ resources.services | length }}"}
    config = (
        "{% for f in fragments('per-svc', resources.services.list(), 's') %}{{ f }}{% endfor %}"
        "{% for f in fragments('reads', resources.services.list(), 's') %}{{ f }}{% endfor %}\n"
    )
    s = spec(config, snippets=snippets)
    store = _three_services(s)
    r = Renderer(s)
    assert text(r.render(store.snapshot())) == "svc-0 svc-1 svc-2 333"
    templates = r._loader.templates

    def order(name: str) -> list[Any]:
        template = templates[name]
        assert isinstance(template, SnippetTemplate) and template._sites is not None
        return list(template._sites["s"].order)

    quiet = order("per-svc")
    assert all(e.tokens is fragments_mod._NO_TOKENS for e in quiet)
    reading = order("reads")
    assert all(e.tokens and e.tokens is not fragments_mod._NO_TOKENS for e in reading)
    assert len({id(e.tokens) for e in reading}) == 1  # shared among equal ones, as before


def test_an_evaluation_makes_no_call_it_can_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per evaluation (30,000 per full render at 10,000 Ingresses) the entry's slots are set
    directly, not by _Entry.__init__, and a layout already made is taken from the table, not
    from _layout; no exported name needs no layout at all. The fragments are the same."""
    snippets = {"two": "{% set a, b = s.metadata.name, 1 %}", "none": "{{ s.metadata.name }}"}
    config = (
        "{% for f in fragments('two', resources.services.list(), 's') %}{{ f.a }}{% endfor %}"
        "{% for f in fragments('none', resources.services.list(), 's') %}{{ f }}{% endfor %}"
    )
    s = spec(config, snippets=snippets)
    store = _three_services(s)
    assert Renderer(s).render(store.snapshot()).ok  # the layout of a and b is made

    def spared(*_: Any) -> Any:
        raise AssertionError("called")

    monkeypatch.setattr(fragments_mod, "_layout", spared)
    monkeypatch.setattr(fragments_mod._Entry, "__init__", spared)
    r = Renderer(s).render(store.snapshot())
    assert r.ok and text(r) == "svc-0svc-1svc-2" * 2
