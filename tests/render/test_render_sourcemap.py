"""Source maps: every rendered line → the template and line that produced it, exactly."""

from __future__ import annotations

from controller.cli.inputs import load_inputs, render_inputs
from controller.render import Renderer
from tests.render.render_kit import QUICKSTART, ingress, quickstart_spec, render, spec, text

MAIN = """\
global
{% import 'lib' as lib %}
{% set block %}
captured A {{ 1 }}
captured B
{% endset %}
{% for name in ['a', 'b'] %}
{{ lib.server(name) }}
{% endfor %}
{{ block }}
{% include 'inc' %}
{% call lib.wrap() %}
inside call
{% endcall %}
{% filter upper %}
filtered
{% endfilter %}
value {{ "x\\ny" }} end
last
"""

LIB = """\
{% macro server(name) %}
    server {{ name }} 127.0.0.1:80
    # of {{ name }}
{% endmacro %}
{% macro wrap() %}
before
{{ caller() }}after
{% endmacro %}
"""

INC = """\
# included
{% for i in range(2) %}
# loop {{ i }}
{% endfor %}
"""

EXPECTED = [
    ("global", "haproxy.cfg", 1),
    ("    server a 127.0.0.1:80", "lib", 2),
    ("    # of a", "lib", 3),
    ("", "haproxy.cfg", 8),
    ("    server b 127.0.0.1:80", "lib", 2),
    ("    # of b", "lib", 3),
    ("", "haproxy.cfg", 8),
    ("captured A 1", "haproxy.cfg", 4),
    ("captured B", "haproxy.cfg", 5),
    ("", "haproxy.cfg", 10),
    ("# included", "inc", 1),
    ("# loop 0", "inc", 3),
    ("# loop 1", "inc", 3),
    ("before", "lib", 6),
    ("inside call", "haproxy.cfg", 13),
    ("after", "lib", 7),
    ("FILTERED", "haproxy.cfg", 15),
    ("value x", "haproxy.cfg", 18),
    ("y end", "haproxy.cfg", 18),
    ("last", "haproxy.cfg", 19),
]


def test_every_line_maps_to_its_template_line_through_macros_includes_and_blocks() -> None:
    r = render(spec(MAIN, snippets={"lib": LIB, "inc": INC}))
    assert r.ok, r.diagnostics
    lines = text(r).splitlines()
    sources = r.source_map.lines["haproxy.cfg"]
    assert len(sources) == len(lines)
    got = [(line, loc.template, loc.line) for line, loc in zip(lines, sources, strict=True) if loc]
    assert got == EXPECTED


def test_lookup_is_one_based_and_bounded() -> None:
    r = render(spec("a\n{{ 'b' }}\nc"))
    assert r.source_map.lookup("haproxy.cfg", 1) == r.source_map.lines["haproxy.cfg"][0]
    loc = r.source_map.lookup("haproxy.cfg", 2)
    assert loc is not None and (loc.template, loc.line) == ("haproxy.cfg", 2)
    assert r.source_map.lookup("haproxy.cfg", 0) is None
    assert r.source_map.lookup("haproxy.cfg", 4) is None
    assert r.source_map.lookup("maps/none.map", 1) is None


def test_every_rendered_file_has_one_location_per_line() -> None:
    r = render_inputs(load_inputs(QUICKSTART / "config.yaml", [QUICKSTART / "resources"]))
    assert r.ok, r.diagnostics
    assert sorted(r.source_map.lines) == sorted(e.path for e in r.files)
    for entry in r.files:
        per_line = r.source_map.lines[entry.path]
        assert len(per_line) == entry.content.decode().count("\n")
        assert all(loc is not None for loc in per_line)


def test_quickstart_server_lines_point_at_the_server_line_of_the_template() -> None:
    s = quickstart_spec()
    # haproxy.cfg's backend sections are fragments of the snippet `backend`; its server
    # lines are one expression's output (server_lines), each line attributed to it
    template_lines = s.template_snippets["backend"].template.splitlines()
    server_line = 1 + next(
        i for i, t in enumerate(template_lines) if "| server_lines(" in t and "{{" in t
    )
    r = render_inputs(load_inputs(QUICKSTART / "config.yaml", [QUICKSTART / "resources"]))
    out = text(r).splitlines()
    servers = 0
    for n, line in enumerate(out, start=1):
        loc = r.source_map.lookup("haproxy.cfg", n)
        assert loc is not None
        if line.lstrip().startswith("server "):
            assert (loc.template, loc.line) == ("backend", server_line)
            servers += 1
        elif line.startswith("backend "):
            assert loc.template == "backend"
        else:
            # every other line comes from the template line that wrote its text
            assert loc.template in ("haproxy.cfg", "backend", "route-rules"), (line, loc)
    assert servers > 0
    map_loc = r.source_map.lookup("maps/hosts.map", 2)
    assert map_loc is not None and map_loc.template == "hosts.map"


def test_map_is_the_same_for_an_output_rendered_twice() -> None:
    s = spec("{% for i in resources.ingresses.list() %}{{ i.metadata.name }}\n{% endfor %}")
    renderer = Renderer(s)
    from tests.render.render_kit import snapshot

    snap = snapshot(s, [("ingresses", ingress(f"i{n}", "h.test")) for n in range(3)])
    a, b = renderer.render(snap), renderer.render(snap)
    assert a.source_map.lines["haproxy.cfg"] == b.source_map.lines["haproxy.cfg"]
    assert len(a.source_map.lines["haproxy.cfg"]) == 3


def test_inherited_blocks_keep_their_lines() -> None:
    base = "global\n{% block body %}\ndefault\n{% endblock %}\nend\n"
    child = "{% extends 'base' %}\n{% block body %}\n  child line\n{{ super() }}{% endblock %}\n"
    r = render(spec(child, snippets={"base": base}))
    assert text(r) == "global\n  child line\ndefault\nend\n"
    got = [(loc.template, loc.line) for loc in r.source_map.lines["haproxy.cfg"] if loc]
    # super() joins through environment.concat too, so the parent block's line survives
    assert got == [("base", 1), ("haproxy.cfg", 3), ("base", 3), ("base", 5)]
