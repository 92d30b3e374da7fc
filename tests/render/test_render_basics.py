"""Outputs, context, `when`, the after_output hook, determinism — over a real Store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.diagnostics import Diagnostic, Location, Phase, Severity, make
from controller.render import FileKind, RenderedOutput, Renderer
from controller.spec import Output
from tests.render.render_kit import ingress, render, service, snapshot, spec, text


def test_outputs_are_named_by_key_and_deployed_by_kind() -> None:
    s = spec(
        "global\n",
        maps={"hosts.map": "a b\n"},
        files={"503.http": "HTTP/1.0 503\n"},
        certificates={"site.pem": "PEM\n"},
    )
    r = render(s)
    assert r.ok, r.diagnostics
    assert {e.path: e.kind for e in r.files} == {
        "haproxy.cfg": FileKind.CONFIG,
        "maps/hosts.map": FileKind.MAP,
        "files/503.http": FileKind.FILE,
        "certs/site.pem": FileKind.CERT,
    }
    assert text(r, "files/503.http") == "HTTP/1.0 503\n"
    assert {n: o.state for n, o in r.outputs.items()} == dict.fromkeys(
        ["503.http", "haproxy.cfg", "hosts.map", "site.pem"], "rendered"
    )


def test_resources_lookups_reach_the_store() -> None:
    s = spec(
        "{% for i in resources.ingresses.list() %}{{ i.metadata.name }} {% endfor %}\n"
        "{{ resources.services.fetch('default', 'b')[0].spec.ports[0].port }}\n"
        "{{ resources.services.get_single('default', 'a').metadata.name }}\n"
        "{{ resources['services'] | length }} {{ resources.services.get_single('x', 'y') is none }}\n"
    )
    objs = [
        ("ingresses", ingress("two", "b.test")),
        ("ingresses", ingress("one", "a.test")),
        ("services", service("a", 80)),
        ("services", service("b", 81)),
    ]
    # trim_blocks: the newline right after a block tag is dropped
    assert text(render(s, objs)) == "one two 81\na\n2 True\n"


def test_ambiguous_get_single_is_a_diagnostic() -> None:
    s = spec("line\n{{ resources.services.get_single('default') }}\n")
    r = render(s, [("services", service("a", 80)), ("services", service("b", 81))])
    (d,) = r.diagnostics
    assert d.rule_id == "E1004"
    assert "matched 2 objects" in d.message
    assert d.template_location is not None and d.template_location.line == 2


def test_extra_context_is_the_spec_overlaid_by_the_call() -> None:
    s = spec("{{ extraContext.a }} {{ extraContext.b }}\n", extra={"a": 1, "b": 2})
    r = Renderer(s).render(snapshot(s), extra_context={"b": "over"})
    assert text(r) == "1 over\n"


def test_http_sources_are_visible_by_name() -> None:
    s = spec("{{ http['blocklist'] | trim }}\n")
    r = Renderer(s).render(snapshot(s), http={"blocklist": "10.0.0.1\n"})
    assert text(r) == "10.0.0.1\n"


def test_path_for_gives_relative_deploy_paths_of_defined_outputs() -> None:
    s = spec(
        "{{ path_for('map', 'hosts.map') }} {{ path_for('files', 'e.http') }} "
        "{{ path_for('cert', 'site.pem') }}\n",
        maps={"hosts.map": ""},
        files={"e.http": ""},
        certificates={"site.pem": ""},
    )
    r = render(s)
    assert text(r) == "maps/hosts.map files/e.http certs/site.pem\n"
    # path_for adds no render edge: the path is known before anything renders
    assert Renderer(s).graph.dependencies["haproxy.cfg"] == frozenset()


def test_path_for_an_undefined_output_fails_the_render() -> None:
    r = render(spec("ok\n{{ path_for('map', 'hots.map') }}\n", maps={"hosts.map": ""}))
    (d,) = r.diagnostics
    assert (d.rule_id, d.template_location and d.template_location.line) == ("E1006", 2)
    assert "hots.map" in d.message and "hosts.map" in d.message


def test_outputs_expose_path_and_content_of_dependencies() -> None:
    s = spec(
        "use {{ outputs['hosts.map'].path }} ({{ outputs['hosts.map'].content | length }} bytes)\n",
        maps={"hosts.map": "a.test be_a\n"},
    )
    r = render(s)
    assert text(r) == "use maps/hosts.map (12 bytes)\n"


def test_when_false_skips_the_output() -> None:
    s = spec(
        "{% if 'extra.map' in outputs %}with{% else %}without{% endif %}\n",
        maps={
            "extra.map": {"template": "x y\n", "when": "resources.ingresses | length > 0"},
        },
    )
    empty = render(s)
    assert empty.outputs["extra.map"].state == "skipped"
    assert "maps/extra.map" not in empty.files
    assert text(empty) == "without"  # trim_blocks ate the newline after endif
    full = render(s, [("ingresses", ingress("a", "a.test"))])
    assert full.outputs["extra.map"].state == "rendered"
    assert text(full) == "with"


def test_reading_a_skipped_output_says_why() -> None:
    s = spec(
        "{{ outputs['extra.map'].path }}\n", maps={"extra.map": {"template": "", "when": "false"}}
    )
    r = render(s)
    (d,) = r.diagnostics
    assert d.rule_id == "E1002"
    assert "skipped" in d.message and "when" in d.message


@pytest.mark.parametrize(
    ("when", "rule", "fragment"),
    [
        ("resources.ingresses |", "E1009", "does not parse"),
        ("true false", "E1009", "does not parse"),
        ("nope.attr", "E1009", "undefined"),
        ("1 // 0", "E1009", "ZeroDivisionError"),
    ],
)
def test_bad_when_is_a_diagnostic(when: str, rule: str, fragment: str) -> None:
    r = render(spec("x\n", maps={"m.map": {"template": "", "when": when}}))
    (d,) = r.diagnostics
    assert d.rule_id == rule and d.phase is Phase.RENDER
    assert fragment in d.message
    assert d.template_location is not None and d.template_location.template == "m.map#when"
    assert r.outputs["m.map"].state == "failed"
    assert r.outputs["haproxy.cfg"].state == "rendered"


def test_two_renders_are_byte_identical() -> None:
    s = spec(
        "{% for i in resources.ingresses.list() | sort_by('spec.rules[0].host') %}"
        "{{ i.metadata.name }}={{ i.spec.rules[0].host }}\n{% endfor %}",
        maps={
            "m.map": "{% for g in resources.ingresses.list() | group_by('metadata.namespace') %}{{ g.key }} {{ g.items | length }}\n{% endfor %}"
        },
    )
    objs = [
        ("ingresses", ingress(f"i{n}", f"h{(n * 7) % 10}.test", ns=f"ns{n % 3}")) for n in range(10)
    ]
    a = render(s, objs)
    b = render(s, list(reversed(objs)))
    assert a.ok and b.ok
    assert [e.content for e in a.files] == [e.content for e in b.files]
    assert a.files.checksum == b.files.checksum
    assert dict(a.source_map.lines) == dict(b.source_map.lines)


# -- after_output -----------------------------------------------------------------------------


def _chain_spec() -> Any:
    return spec(
        "map at {{ outputs['hosts.map'].path }}\n",
        maps={"hosts.map": "a.test be_a\n", "other.map": "b be_b\n"},
    )


def test_after_output_error_blocks_dependants_and_names_the_root_cause() -> None:
    seen: list[str] = []

    def hook(name: str, out: RenderedOutput) -> list[Diagnostic]:
        seen.append(name)
        if name == "hosts.map":
            assert out.content == "a.test be_a\n" and out.path == "maps/hosts.map"
            return [
                make(
                    "E1004",
                    Phase.RENDER,
                    "inline rule failed",
                    location=Location(file=out.path, line=1),
                )
            ]
        return []

    s = _chain_spec()
    r = Renderer(s).render(snapshot(s), after_output=hook)
    assert "haproxy.cfg" not in seen  # never rendered
    assert r.outputs["hosts.map"].state == "failed"
    assert r.outputs["other.map"].state == "rendered"
    assert r.outputs["haproxy.cfg"].state == "blocked"
    blocked = [d for d in r.diagnostics if d.rule_id == "E1008"]
    assert len(blocked) == 1
    assert "hosts.map" in blocked[0].message and "inline rule failed" in blocked[0].message
    assert not r.ok
    # the failed output stays in the file set so reports can show its lines
    assert "maps/hosts.map" in r.files and "haproxy.cfg" not in r.files


def test_after_output_warnings_block_nothing() -> None:
    def hook(name: str, out: RenderedOutput) -> list[Diagnostic]:
        return [make("W8011", Phase.RENDER, f"note about {name}")]

    s = _chain_spec()
    r = Renderer(s).render(snapshot(s), after_output=hook)
    assert all(o.state == "rendered" for o in r.outputs.values())
    assert {d.severity for d in r.diagnostics} == {Severity.WARNING}
    assert r.ok


def test_after_output_that_raises_is_contained() -> None:
    def hook(name: str, out: RenderedOutput) -> list[Diagnostic]:
        if name == "hosts.map":
            raise RuntimeError("boom")
        return []

    s = _chain_spec()
    r = Renderer(s).render(snapshot(s), after_output=hook)
    assert [d.rule_id for d in r.diagnostics if d.rule_id != "E1008"] == ["F0001"]
    assert r.outputs["haproxy.cfg"].state == "blocked"


def test_a_render_failure_blocks_dependants_transitively() -> None:
    s = spec(
        "{{ outputs['b.map'].content }}",
        maps={"a.map": "{{ nope }}", "b.map": "{{ outputs['a.map'].content }}"},
    )
    r = render(s)
    assert [o.state for o in r.outputs.values()] == ["failed", "blocked", "blocked"]
    assert [d.rule_id for d in r.diagnostics] == ["E1002", "E1008", "E1008"]
    assert all("'nope' is undefined" in d.message for d in r.diagnostics)


# -- never raises -------------------------------------------------------------------------------


class _BrokenView:
    def collection(self, name: str) -> Any:
        raise RuntimeError("store gone")

    def names(self) -> list[str]:
        raise RuntimeError("store gone")

    def __iter__(self) -> Iterator[str]:
        return iter(())


def test_a_broken_store_view_is_reported_not_raised() -> None:
    r = Renderer(spec("x\n")).render(_BrokenView())
    assert [d.rule_id for d in r.diagnostics] == ["F0001"]
    assert len(r.files) == 0


def test_output_names_that_clash_or_escape_are_refused() -> None:
    # The spec model refuses "a/b" already (tests/spec/test_names.py); a spec built without
    # validation (model_copy) must still not make the renderer write outside maps/.
    base = spec("x\n", files={"dup": "w"})
    maps = {"a/b": Output(template="y"), "dup": Output(template="z"), "..": Output(template="")}
    r = render(base.model_copy(update={"maps": maps}))
    assert sorted(d.rule_id for d in r.diagnostics) == ["E1010", "E1011", "E1011"]
    assert list(r.outputs) == ["haproxy.cfg"]
