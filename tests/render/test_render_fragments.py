"""``fragments()``: one snippet evaluation per item, kept across renders while nothing it read
changed (controller.render.fragments). Byte identity with a full render over random changes
is proven in test_render_incremental.py; these pin the rest: what is evaluated again, what a
template sees, errors, source map and budgets."""

from __future__ import annotations

from typing import Any

import pytest

from controller.render import Renderer
from controller.render.fragments import same_argument
from controller.resources import Store
from tests.render.render_kit import ingress, service, spec, text

PER_SVC = "{% set port = s.spec.ports[0].port %}svc {{ s.metadata.name }} {{ port }} {{ tag }}\n"
CONFIG = (
    "{% set fs = fragments('per-svc', resources.services.list(), 's', tag=extraContext.tag) %}"
    "{% for f in fs %}{{ f }}{% endfor %}"
    "sum {{ fs | map(attribute='port') | sum }}\n"
)


def _setup(config: str = CONFIG, snippets: dict[str, str] | None = None) -> tuple[Any, Store]:
    s = spec(config, snippets=snippets or {"per-svc": PER_SVC}, extra={"tag": "a"})
    store = Store.from_spec(s)
    for i in range(3):
        store.apply("services", service(f"svc-{i}", 80 + i))
    return s, store


def _count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fragment evaluation, by the item's name (wraps the real evaluation)."""
    import controller.render.fragments as mod

    seen: list[str] = []
    real = mod._Evaluator.__call__

    def counting(self: Any, item: Any) -> Any:
        seen.append(item["metadata"]["name"])
        return real(self, item)

    monkeypatch.setattr(mod._Evaluator, "__call__", counting)
    return seen


def test_fragments_export_names_and_text() -> None:
    s, store = _setup()
    out = text(Renderer(s).render(store.snapshot()))
    assert out == "svc svc-0 80 a\nsvc svc-1 81 a\nsvc svc-2 82 a\nsum 243\n"


def test_only_changed_items_are_evaluated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    s, store = _setup()
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    r.render(store.snapshot())
    assert sorted(seen) == ["svc-0", "svc-1", "svc-2"]
    seen.clear()
    store.apply("services", service("svc-1", 91))
    out = text(r.render(store.snapshot()))
    assert seen == ["svc-1"]
    assert "svc svc-1 91 a\n" in out
    seen.clear()
    store.apply("ingresses", ingress("web", "a.test"))  # read by no fragment
    r.render(store.snapshot())
    assert seen == []


def test_a_changed_argument_evaluates_every_item_again(monkeypatch: pytest.MonkeyPatch) -> None:
    s, store = _setup()
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    r.render(store.snapshot())
    seen.clear()
    out = text(r.render(store.snapshot(), extra_context={"tag": "b"}))
    assert sorted(seen) == ["svc-0", "svc-1", "svc-2"]
    assert out.count(" b\n") == 3


def test_a_store_read_inside_a_fragment_is_tracked(monkeypatch: pytest.MonkeyPatch) -> None:
    per_svc = (
        "{% set other = resources.services.get_single('default', 'svc-0') %}"
        "{{ s.metadata.name }} sees {{ other.spec.ports[0].port }}\n"
    )
    s, store = _setup(
        "{% for f in fragments('per-svc', resources.services.list(), 's') %}{{ f }}{% endfor %}",
        {"per-svc": per_svc},
    )
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    r.render(store.snapshot())
    seen.clear()
    store.apply("services", service("svc-0", 99))
    out = text(r.render(store.snapshot()))
    assert sorted(seen) == ["svc-0", "svc-1", "svc-2"]  # every one read svc-0
    assert out.count("sees 99\n") == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # found before rendering, like an include of a missing snippet (E1007)
        ("fragments('nothere', [], 'x')", "snippet 'nothere'"),
        ("fragments('per-svc', [], 'resources')", "the item's name must be a name"),
        ("fragments('per-svc', [], 'not a name')", "the item's name must be a name"),
        ("fragments('per-svc', [], 's', http=1)", "may not be named 'http'"),
        ("fragments('per-svc', [], 's', s=1)", "may not be named 's'"),
    ],
)
def test_bad_calls_are_render_errors(call: str, message: str) -> None:
    s, store = _setup("{{ " + call + " }}\n")
    result = Renderer(s).render(store.snapshot())
    assert not result.ok
    assert any(message in d.message for d in result.diagnostics), result.diagnostics


def test_an_error_inside_a_fragment_names_the_snippet_line_and_is_not_kept() -> None:
    per_svc = "ok {{ s.metadata.name }}\n{{ s.nothere if s.metadata.name == 'svc-1' else '' }}\n"
    s, store = _setup(
        "{% for f in fragments('per-svc', resources.services.list(), 's') %}{{ f }}{% endfor %}",
        {"per-svc": per_svc},
    )
    r = Renderer(s)
    for _ in range(2):  # the second render fails the same way: failures are never kept
        result = r.render(store.snapshot())
        errors = [d for d in result.diagnostics if d.severity == "error"]
        assert errors, result.diagnostics
        where = errors[0].template_location
        assert where is not None and (where.template, where.line) == ("per-svc", 2)


def test_the_source_map_points_into_the_snippet() -> None:
    per_svc = "# {{ s.metadata.name }}\nserver {{ s.spec.ports[0].port }}\n"
    s, store = _setup(
        "global\n{% for f in fragments('per-svc', resources.services.list(), 's') %}"
        "{{ f }}{% endfor %}",
        {"per-svc": per_svc},
    )
    r = Renderer(s)
    for _ in range(2):  # evaluated, then kept
        result = r.render(store.snapshot())
        lines = result.source_map.lines["haproxy.cfg"]
        where = [(loc.template, loc.line) if loc else None for loc in lines]
        assert where == [("haproxy.cfg", 1)] + [("per-svc", 1), ("per-svc", 2)] * 3


def test_a_kept_fragment_charges_the_size_budget_as_evaluated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _count_evaluations(monkeypatch)

    def fits(limit: int, incremental: bool) -> bool:
        s, store = _setup(CONFIG + "{{ resources.ingresses | length }} ingresses\n")
        render = s.render.model_copy(update={"max_output_bytes": limit})
        r = Renderer(s.model_copy(update={"render": render}))
        if incremental:
            r.render(store.snapshot())
        seen.clear()
        store.apply("ingresses", ingress("web", "a.test"))  # the output renders again
        ok = r.render(store.snapshot()).ok
        if incremental and ok:
            assert seen == []  # every fragment was kept, and charged as evaluated
        return ok

    sizes = range(40, 260, 4)
    assert [fits(n, False) for n in sizes] == [fits(n, True) for n in sizes]
    assert any(fits(n, False) for n in sizes) and not all(fits(n, False) for n in sizes)


def test_same_argument_tells_apart_what_templates_can() -> None:
    assert same_argument({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not same_argument(1, True)
    assert not same_argument(1, 1.0)
    assert not same_argument({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same_argument([1], (1,))
    assert not same_argument(object(), object())
    assert same_argument(float("inf"), float("inf"))


def test_a_snippet_named_by_fragments_is_a_reference() -> None:
    """Like an include: a snippet that does not compile blocks the outputs that name it,
    and a module that calls fragments() on a snippet reading other names stays shared."""
    s, store = _setup(snippets={"per-svc": "{% if %}"})
    result = Renderer(s).render(store.snapshot())
    assert {d.rule_id for d in result.diagnostics} == {"E1001", "E1008"}
    table = "{% set fs = fragments('per-svc', resources.services.list(), 's', tag='x') %}"
    s, _ = _setup("{% import 'table' as t with context %}{{ t.fs | length }}\n",
                  {"per-svc": PER_SVC, "table": table})  # fmt: skip
    assert Renderer(s).shared_snippets == {"table"}


@pytest.mark.parametrize(
    "expr", ["f._text", "f.__class__", "f['_text']", "f.__dict__", "f.__str__"]
)
def test_a_fragment_shows_templates_only_its_exports(expr: str) -> None:
    config = "{% set f = fragments('per-svc', resources.services.list(), 's', tag='x')[0] %}"
    s, store = _setup(config + "{{ " + expr + " }}\n")
    result = Renderer(s).render(store.snapshot())
    assert not result.ok
    assert {d.rule_id for d in result.diagnostics} <= {"E1002", "E1003"}, result.diagnostics


# -- table arguments only looked up in (controller.render.keyed) -------------------------------

HOSTS = (
    "{% set c = namespace(h=[]) %}{% for i in resources.ingresses.list() %}"
    "{% set c.h = c.h + [i.spec.rules[0].host] %}{% endfor %}"
    "{% for f in fragments('per-svc', resources.services.list(), 's',"
    " hosts=dict.fromkeys(c.h)) %}{{ f }}{% endfor %}"
)


def _hosts_setup(per_svc: str) -> tuple[Any, Store]:
    s, store = _setup(HOSTS, {"per-svc": per_svc})
    store.apply("ingresses", ingress("web", "a.test"))
    return s, store


def test_a_changed_table_evaluates_only_the_items_that_asked_about_a_changed_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, store = _hosts_setup(
        "{{ s.metadata.name }} {{ 'routed' if (s.metadata.name ~ '.test') in hosts else 'idle' }}\n"
    )
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    assert text(r.render(store.snapshot())).count("idle") == 3
    seen.clear()
    store.apply("ingresses", ingress("web", "svc-1.test"))  # a.test goes, svc-1.test comes
    out = text(r.render(store.snapshot()))
    assert seen == ["svc-1"]
    assert out == "svc-0 idle\nsvc-1 routed\nsvc-2 idle\n"
    seen.clear()
    store.apply("ingresses", ingress("other", "b.test"))  # a key no item asked about
    assert text(r.render(store.snapshot())) == out
    assert seen == []


def test_a_table_emptiness_is_a_lookup_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    s, store = _hosts_setup("{{ s.metadata.name }} {{ 'some' if hosts else 'none' }}\n")
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    r.render(store.snapshot())
    seen.clear()
    store.apply("ingresses", ingress("other", "b.test"))  # still not empty
    r.render(store.snapshot())
    assert seen == []
    store.delete("ingresses", "default/other")
    store.delete("ingresses", "default/web")
    assert text(r.render(store.snapshot())).count("none") == 3
    assert sorted(seen) == ["svc-0", "svc-1", "svc-2"]


def test_a_table_used_otherwise_evaluates_every_item_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, store = _hosts_setup("{{ s.metadata.name }} {{ hosts | length }}\n")
    seen = _count_evaluations(monkeypatch)
    r = Renderer(s)
    r.render(store.snapshot())
    seen.clear()
    store.apply("ingresses", ingress("other", "b.test"))
    assert text(r.render(store.snapshot())).count(" 2\n") == 3
    assert sorted(seen) == ["svc-0", "svc-1", "svc-2"]


@pytest.mark.parametrize(
    ("source", "lookups"),
    [
        ("{{ 'a' in t }}{{ 'b' not in t }}", True),
        ("{{ t.get('a') }}{{ t.get('a', 0) }}", True),
        ("{% if t %}x{% elif not t %}y{% endif %}{{ 1 if t else 2 }}", True),
        ("{% for x in y if t %}{{ x in t }}{% endfor %}", True),
        ("{{ t['a'] }}", False),  # falls back to attributes, methods included
        ("{{ t.a }}", False),
        ("{{ t.items() }}", False),
        ("{{ t | length }}", False),
        ("{% for k in t %}{% endfor %}", False),
        ("{{ t and 1 }}", False),  # `and` can hand the table itself on
        ("{{ 'a' in t == u }}", False),  # the table is compared with u too
        ("{{ t in u }}", False),
        ("{{ t is defined }}", False),
        ("{{ t.get('a', *u) }}", False),
        ("{{ f(t) }}", False),
        ("{% set u = t %}", False),
        ("{% set t = 1 %}{{ 'a' in t }}", False),
        ("{% for t in u %}{% endfor %}", False),
        ("{% import 'x' as t %}", False),
        ("{% macro m() %}{{ 'a' in t }}{% endmacro %}", False),  # callable after the evaluation
        ("{% call m() %}{{ 'a' in t }}{% endcall %}", False),
        ("{% include 'x' %}{{ 'a' in t }}", False),  # the included template sees the table
        ("{% from 'x' import y with context %}{{ 'a' in t }}", False),
    ],
)
def test_which_arguments_count_as_tables_only_looked_up_in(source: str, lookups: bool) -> None:
    from jinja2 import Environment

    from controller.render.keyed import keyed_names

    assert keyed_names(Environment().parse(source), {"t"}) == (
        frozenset({"t"}) if lookups else frozenset()
    )


def test_a_table_notes_each_lookup_while_an_evaluation_runs() -> None:
    from controller.render.keyed import (
        EMPTINESS,
        Asking,
        Keyed,
        changed_answers,
        still_answers,
    )

    asking = Asking()
    t = Keyed("t", {"a": 1, "b": 2}, asking)
    assert "a" in t and t.get("z") is None and t  # nothing noted outside an evaluation
    asking.noted = {}
    assert "a" in t and t.get("z", 5) == 5 and t and "a" in t
    assert list(asking.noted) == [("t", "a"), ("t", "z"), ("t", EMPTINESS)]  # each once
    changed = changed_answers({"a": 1, "b": 2, "c": 1}, {"a": 1, "b": True, "d": 4}, same_argument)
    assert changed == {"b", "c", "d"}  # 2 became true; c went; d came
    assert changed_answers({"a": 1}, {}, same_argument) == {"a", EMPTINESS}
    assert still_answers(("t", "a", "u", "b"), {"t": {"b"}})
    assert not still_answers(("t", "a", "u", "b"), {"u": {"b"}})


# -- one evaluation: its context, and the recorder it empties for the next -------------------


def _evaluator(source: str, **variables: Any) -> Any:
    """An evaluator of ``source`` as a snippet, for item name ``it``."""
    import controller.render.fragments as mod

    r = Renderer(spec("x", snippets={"per": source}))
    template = r.environment.loader.templates["per"]  # type: ignore[union-attr]
    variables = {**template.globals, **variables}
    return mod._Evaluator(template, variables, "it", object(), None)


def test_an_evaluation_context_finds_what_new_context_finds() -> None:
    """Set directly (the item its only own variable) instead of by Context.__init__ over a
    copy of the shared variables: the same attributes, lookups, merged names in the same
    order, and derived context."""
    ev = _evaluator("{{ it }}", range=1, tag="a", it_is="b")
    ours = ev._context("item")
    stock = ev.context_class(
        ev.environment, {**ev.variables, "it": "item"}, ev.template_name, ev.blocks
    )
    assert type(ours) is type(stock)
    assert vars(ours).keys() == vars(stock).keys()
    assert vars(ours.eval_ctx) == vars(stock.eval_ctx)
    assert ours.eval_ctx is not ev._context("other").eval_ctx
    for name in ("it", "range", "tag", "it_is", "namespace", "zz"):
        assert ours.resolve_or_missing(name) is stock.resolve_or_missing(name)
    assert list(ours.get_all().items()) == list(stock.get_all().items())
    assert list(ours.derived({"x": 1}).get_all().items()) == list(
        stock.derived({"x": 1}).get_all().items()
    )
    assert ours.exported_vars == set() and ours.blocks == {} and ours.globals_keys == set()
    assert ours.vars is not ev._context("other").vars
    # An item named like a shared variable shadows it, where the copy had it.
    shadow = _evaluator("{{ it }}", it=0, tag="a")
    assert list(shadow._context("item").get_all().items()) == list(
        {**shadow.variables, "it": "item"}.items()
    )


def test_each_evaluation_starts_with_an_empty_recorder() -> None:
    """The recorder is emptied after each evaluation: an item's entry holds only what it
    read and created, also after an evaluation that failed."""
    from controller.render.incremental import current_recorder

    def note(x: Any) -> Any:
        rec = current_recorder().get()
        assert rec is not None
        rec.reads.append(("c", "get", (x,), x))
        rec.tokens.setdefault("c", "token")
        rec.used[f"m{x}"] = x
        rec.modules[f"m{x}"] = 1
        return x

    source = (
        "{% if it != 0 %}{% set r = note(it) %}{% set n = namespace(v=it) %}{% endif %}"
        "{% if it < 0 %}{{ 1 // 0 }}{% endif %}{{ it }}"
    )
    ev = _evaluator(source, note=note)
    first = ev(1)
    assert first.reads == (("c", "get", (1,), 1),) and first.tokens == {"c": "token"}
    assert first.used == (("m1", 1),) and first.modules == (("m1", 1),)
    assert len(first.namespaces) == 1
    for _ in range(2):
        second = ev(0)
        assert second.reads == () and second.tokens == {} and second.tokens is not first.tokens
        assert second.used == () and second.modules == () and second.namespaces == ()
        with pytest.raises(ZeroDivisionError):  # after noting a read, a module, a namespace
            ev(-1)
    third = ev(2)
    assert third.reads == (("c", "get", (2,), 2),) and third.tokens is not first.tokens
    assert third.used == (("m2", 2),) and len(third.namespaces) == 1
    assert first.reads == (("c", "get", (1,), 1),) and first.tokens == {"c": "token"}
    assert str(first.fragment) == "1" and str(second.fragment) == "0"
