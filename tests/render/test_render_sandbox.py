"""Everything a template can do wrong comes back as a diagnostic with template and line."""

from __future__ import annotations

import time

import pytest

from controller.diagnostics import Phase
from controller.render import Renderer
from tests.render.render_kit import ingress, render, snapshot, spec

CASES = [
    # (template body on line 2, rule id, message fragment)
    ("{{ ''.__class__ }}", "E1003", "__class__"),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "E1003", "unsafe"),
    ("{{ cycler.__init__.__globals__ }}", "E1003", "unsafe"),
    ("{{ '{0.__class__}'.format(1) }}", "E1003", "__class__"),
    ("{% set l = [1, 2] %}{{ l.append(3) }}", "E1003", "append"),
    ("{% set d = {'a': 1} %}{{ d.update({'b': 2}) }}", "E1003", "update"),
    ("{{ extraContext.clear() }}", "E1003", "clear"),
    ("{{ resources.ingresses.list()[0].metadata.update({'name': 'x'}) }}", "E1003", "update"),
    ("{% for i in range(10**9) %}{% endfor %}", "E1003", "range"),
    ("{{ 'a' * 10**7 }}", "E1003", "repeating"),
    ("{{ [0] * 10**7 }}", "E1003", "repeating"),
    ("{{ 2 ** 100000 }}", "E1003", "bit"),
    ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "E1003", "recursion"),
    ("{{ nope }}", "E1002", "'nope' is undefined"),
    ("{{ resources.ingresses.list()[0].spec.nope.deeper }}", "E1002", "nope"),
    ("{{ resources.nocollection }}", "E1002", "nocollection"),
    ("{{ 1 // 0 }}", "E1004", "ZeroDivisionError"),
    ("{{ [1, 'a'] | sort }}", "E1004", "TypeError"),
    ("{{ 'not base64!' | b64decode }}", "E1004", "base64"),
    ("{{ 'a\\nb' | haproxy_arg }}", "E1004", "ends a line"),
    ("{% if %}", "E1001", "Expected an expression"),
    ("{% for x in y %}", "E1001", "endfor"),
    ("{{ x | no_such_filter }}", "E1001", "no_such_filter"),
    # nondeterministic built-ins are gone: two renders of the same inputs must be identical
    ("{{ [1, 2, 3] | random }}", "E1001", "random"),
    ("{{ lipsum() }}", "E1002", "lipsum"),
]


@pytest.mark.parametrize(("body", "rule", "fragment"), CASES)
def test_template_faults_are_diagnostics_with_template_line(
    body: str, rule: str, fragment: str
) -> None:
    s = spec("global\n" + body + "\n", extra={"k": "v"})
    r = render(s, [("ingresses", ingress("a", "a.test"))])
    assert not r.ok
    (d,) = r.diagnostics
    assert (d.rule_id, d.phase) == (rule, Phase.RENDER), d
    assert fragment in d.message, d.message
    assert d.template_location is not None
    assert (d.template_location.template, d.template_location.line) == ("haproxy.cfg", 2)
    assert d.location is not None and d.location.file == "haproxy.cfg"
    assert r.outputs["haproxy.cfg"].state == "failed"
    assert "haproxy.cfg" not in r.files


def test_stored_objects_stay_unchanged_after_attempts() -> None:
    s = spec("{{ resources.ingresses.list()[0].metadata.update({'name': 'x'}) }}")
    snap = snapshot(s, [("ingresses", ingress("a", "a.test"))])
    Renderer(s).render(snap)
    assert snap.collection("ingresses").list()[0]["metadata"]["name"] == "a"


def test_a_fault_inside_a_snippet_points_into_the_snippet() -> None:
    s = spec(
        "{% import 'lib' as lib %}\n{{ lib.boom() }}\n",
        snippets={"lib": "{% macro boom() %}\nfine\n{{ 1 // 0 }}\n{% endmacro %}"},
    )
    (d,) = render(s).diagnostics
    assert d.template_location is not None
    assert (d.template_location.template, d.template_location.line) == ("lib", 3)
    assert d.location is not None and d.location.file == "haproxy.cfg"


def test_the_object_being_rendered_is_named() -> None:
    s = spec(
        "{% for ing in resources.ingresses.list() %}\n"
        "{% for rule in ing.spec.rules %}\n"
        "{{ rule.host | map_key }}\n"
        "{% endfor %}\n"
        "{% endfor %}\n"
    )
    objs = [
        ("ingresses", ingress("good", "a.test")),
        ("ingresses", ingress("evil", "a.test b.test", ns="team")),
    ]
    (d,) = render(s, objs).diagnostics
    assert d.rule_id == "E1004"
    assert d.template_location is not None and d.template_location.line == 3
    assert d.object is not None
    assert (d.object.kind, d.object.namespace, d.object.name) == ("Ingress", "team", "evil")


def test_faults_never_escape_and_do_not_hang() -> None:
    started = time.perf_counter()
    for body, _, _ in CASES:
        r = Renderer(spec(body)).render(snapshot(spec(body)))
        assert r.diagnostics
    assert time.perf_counter() - started < 3.0


def test_absurd_nesting_is_a_syntax_diagnostic_not_a_crash() -> None:
    deep = "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}"
    r = render(spec("ok\n", maps={"deep.map": deep}))
    assert [d.rule_id for d in r.diagnostics] == ["E1001"]
    assert r.outputs["deep.map"].state == "failed"
    assert r.outputs["haproxy.cfg"].state == "rendered"
