"""Which collections an output reads: constant names precisely, anything else as "all"."""

from __future__ import annotations

from controller.render import Renderer
from controller.validation.rules.reads import ANY_COLLECTION, collections_read, readers_of
from tests.rules.rules_helpers import make_spec


def test_constant_references_through_templates_whens_and_snippets() -> None:
    spec = make_spec(
        cfg="global\n{% import 'lib' as lib with context %}{{ lib.x }}\n",
        templateSnippets={"lib": {"template": "{% set x = resources['services'].list() %}"}},
        maps={
            "a.map": {"template": "{{ resources.ingresses.list() | length }}\n"},
            "b.map": {"template": "k v\n", "when": "resources.get('endpoints') is not none"},
            "c.map": {"template": "{% set r = resources %}{{ r.ingresses }}\n"},
            "d.map": {"template": "{{ resources.keys() | list }}\n"},
            "e.map": {"template": "static\n"},
        },
    )
    reads = collections_read(Renderer(spec))
    assert reads == {
        "haproxy.cfg": {"services"},
        "a.map": {"ingresses"},
        "b.map": {"endpoints"},
        "c.map": {ANY_COLLECTION},
        "d.map": {ANY_COLLECTION},
        "e.map": frozenset(),
    }
    assert readers_of(reads, "ingresses") == ["a.map", "c.map", "d.map"]
