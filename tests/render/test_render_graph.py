"""The render graph: edges from the syntax tree, order, cycles, unknown names, snippets."""

from __future__ import annotations

import pytest
from jinja2 import Environment

from controller.render import Renderer
from controller.render.graph import DYNAMIC, references
from tests.render.render_kit import render, spec, text


def _refs(source: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    r = references(Environment().parse(source), "t")
    return [(x.name, x.line) for x in r.outputs], [(x.name, x.line) for x in r.snippets]


def test_constant_references_in_every_spelling() -> None:
    outs, snips = _refs(
        "{{ outputs['a.map'].path }}\n"
        "{{ outputs.b }}\n"
        "{{ outputs.get('c.map') }}\n"
        "{% if 'd.map' in outputs %}{% endif %}\n"
        "{% if 'e.map' not in outputs %}{% endif %}\n"
        "{% include 'inc' %}{% import 'lib' as l %}{% from 'm' import f %}\n"
        "{% include ['p', 'q'] %}\n"
    )
    assert outs == [("a.map", 1), ("b", 2), ("c.map", 3), ("d.map", 4), ("e.map", 5)]
    assert snips == [("inc", 6), ("lib", 6), ("m", 6), ("p", 7), ("q", 7)]


@pytest.mark.parametrize(
    "source",
    [
        "{{ outputs[name] }}",
        "{% for o in outputs %}{% endfor %}",
        "{{ outputs.items() }}",
        "{{ m(outputs) }}",
        "{% set o = outputs %}",
    ],
)
def test_references_that_are_not_constant_are_dynamic(source: str) -> None:
    outs, _ = _refs(source)
    assert [n for n, _ in outs] == [DYNAMIC]


def test_computed_include_is_dynamic() -> None:
    _, snips = _refs("{% include 'lib_' ~ kind %}")
    assert snips == [(DYNAMIC, 1)]


def test_order_follows_dependencies_through_snippets() -> None:
    s = spec(
        "{% include 'frontend' %}",
        maps={
            "hosts.map": "{{ outputs['paths.map'].content | length }}",
            "paths.map": "p\n",
            "unrelated.map": "u\n",
        },
        snippets={
            "frontend": "{% import 'lib' as lib %}",
            "lib": "{{ outputs['hosts.map'].path }}",
        },
    )
    r = Renderer(s)
    g = r.graph
    assert g.dependencies["haproxy.cfg"] == {"hosts.map"}
    assert g.dependencies["hosts.map"] == {"paths.map"}
    assert g.snippets["haproxy.cfg"] == {"frontend", "lib"}
    assert g.order.index("paths.map") < g.order.index("hosts.map") < g.order.index("haproxy.cfg")
    assert set(g.order) == set(r.outputs)
    assert not g.cycles


def test_cycle_is_an_error_naming_the_cycle() -> None:
    s = spec(
        "a\n{{ outputs['hosts.map'].content }}",
        maps={
            "hosts.map": "{{ outputs['haproxy.cfg'].content }}",
            "user.map": "{{ outputs['hosts.map'].path }}",
            "free.map": "free\n",
        },
    )
    r = render(s)
    cycle = [d for d in r.diagnostics if d.rule_id == "E1005"]
    assert len(cycle) == 1
    assert cycle[0].message == "render cycle: haproxy.cfg -> hosts.map -> haproxy.cfg"
    assert cycle[0].template_location is not None
    assert (cycle[0].template_location.template, cycle[0].template_location.line) == (
        "haproxy.cfg",
        2,
    )
    states = {n: o.state for n, o in r.outputs.items()}
    assert states == {
        "haproxy.cfg": "failed",
        "hosts.map": "failed",
        "user.map": "blocked",
        "free.map": "rendered",
    }
    blocked = [d for d in r.diagnostics if d.rule_id == "E1008"]
    assert len(blocked) == 1 and "render cycle" in blocked[0].message
    assert text(r, "maps/free.map") == "free\n"


def test_longer_cycle_and_self_reference() -> None:
    three = spec(
        "{{ outputs['a.map'].content }}",
        maps={
            "a.map": "{{ outputs['b.map'].content }}",
            "b.map": "{{ outputs['haproxy.cfg'].content }}",
        },
    )
    assert Renderer(three).graph.cycles == (("a.map", "b.map", "haproxy.cfg", "a.map"),)
    own = Renderer(spec("{{ outputs['haproxy.cfg'].path }}"))
    assert own.graph.cycles == (("haproxy.cfg", "haproxy.cfg"),)
    assert [d.message for d in own.diagnostics] == ["render cycle: haproxy.cfg -> haproxy.cfg"]


def test_unknown_output_is_reported_where_it_is_written() -> None:
    r = render(spec("x\n\n{{ outputs['hots.map'].path }}", maps={"hosts.map": ""}))
    (d,) = r.diagnostics
    assert d.rule_id == "E1006"
    assert "'hots.map'" in d.message and "hosts.map" in d.message
    assert d.template_location is not None and d.template_location.line == 3
    assert d.location is not None and d.location.file == "haproxy.cfg"
    assert r.outputs["haproxy.cfg"].state == "failed"
    assert r.outputs["hosts.map"].state == "rendered"


def test_unknown_output_inside_a_snippet_blocks_its_users() -> None:
    r = render(
        spec(
            "{% include 'lib' %}",
            maps={"m.map": "{% include 'lib' %}"},
            snippets={"lib": "{{ outputs.nope }}"},
        )
    )
    assert [d.rule_id for d in r.diagnostics] == ["E1006", "E1008", "E1008"]
    first = r.diagnostics[0]
    assert first.template_location is not None and first.template_location.template == "lib"
    assert {o.state for o in r.outputs.values()} == {"blocked"}


def test_missing_snippet_has_a_location() -> None:
    r = render(spec("a\nb\n{% include 'frontnd' %}", snippets={"frontend": ""}))
    (d,) = r.diagnostics
    assert d.rule_id == "E1007"
    assert d.template_location is not None and d.template_location.line == 3
    assert "'frontnd'" in d.message and "frontend" in d.message


def test_dynamic_include_of_a_missing_snippet_fails_at_render_time() -> None:
    r = render(spec("a\n{% include 'fr' ~ 'ontnd' %}", snippets={"frontend": ""}))
    (d,) = r.diagnostics
    assert d.rule_id == "E1007"
    assert d.template_location is not None and d.template_location.line == 2


def test_snippet_syntax_error_blocks_users_only() -> None:
    r = render(
        spec(
            "{% import 'lib' as lib %}ok\n",
            maps={"m.map": "fine\n"},
            snippets={"lib": "x\n{% if %}"},
        )
    )
    assert [d.rule_id for d in r.diagnostics] == ["E1001", "E1008"]
    syntax = r.diagnostics[0]
    assert syntax.template_location is not None
    assert (syntax.template_location.template, syntax.template_location.line) == ("lib", 2)
    assert "snippet 'lib'" in r.diagnostics[1].message
    assert r.outputs["haproxy.cfg"].state == "blocked"
    assert r.outputs["m.map"].state == "rendered"


def test_dynamic_output_reference_depends_on_all_others_and_works() -> None:
    s = spec(
        "{% for n in ['a.map', 'b.map'] %}{{ outputs[n].path }} {% endfor %}",
        maps={"a.map": "a\n", "b.map": "b\n"},
    )
    r = Renderer(s)
    assert r.graph.dependencies["haproxy.cfg"] == {"a.map", "b.map"}
    assert [x.name for x in r.graph.dynamic] == [DYNAMIC]
    assert text(render(s)) == "maps/a.map maps/b.map "


def test_dynamic_reference_that_closes_a_cycle_is_reported() -> None:
    s = spec("{{ outputs['a.map'].path }}", maps={"a.map": "{% for o in outputs %}{% endfor %}"})
    r = Renderer(s)
    assert r.graph.cycles == (("a.map", "haproxy.cfg", "a.map"),)
    assert [d.rule_id for d in r.diagnostics] == ["E1005"]
