"""The code generator's shortcuts give what stock Jinja2's sandbox gives, value or error."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import StrictUndefined
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from controller.render import Renderer
from tests.render.render_kit import render, spec

CONTEXT: dict[str, Any] = {
    "path": "/api/",
    "pair": {"rstrip": "not a method", "strip": " padded "},
    "words": ["a", "b"],
    "number": 7,
}

TEMPLATES = [
    # str methods on an exact str, with positional and keyword arguments
    "{{ x.path.rstrip('/') }}|{{ x.path.split('/', maxsplit=1) }}|{{ 'a,b'.split(sep=',') }}",
    "{{ x.path.startswith(('/a', '/b')) }} {{ x.path.replace('/', '_', 1) }} {{ 'A'.lower() }}",
    # ... on a macro's result (a str subclass) and on values that are not strings at all
    "{% macro m() %} x {% endmacro %}[{{ m().strip() }}]",
    "{{ x.pair.strip }}",  # a mapping's key, not a method
    "{{ x.words.count('a') }}",  # a list method
    # the formatting methods stay the sandbox's
    "{{ '{0}-{1}'.format(1, 2) }} {{ '{a}'.format_map({'a': 3}) }}",
    # concatenation of every kind of value
    "{{ 1 ~ none ~ 'a' ~ 2.5 ~ true ~ x.words ~ x.pair.strip }}",
    "{% macro m() %}mac{% endmacro %}{{ 'pre-' ~ m() ~ '-post' }}",
    "{% set n = namespace(x=[]) %}{% for i in range(3) %}{% set n.x = n.x + [i ~ i] %}{% endfor %}{{ n.x }}",
]

FAILING = [
    "{{ x.missing.rstrip('/') }}",  # undefined object
    "{{ x.path.nomethod('/') }}",  # undefined method
    "{{ x.pair.rstrip('/') }}",  # calling a str
    "{{ 'a' ~ x.missing }}",  # undefined in a concatenation
    "{{ x.path.rstrip(1) }}",  # a TypeError inside the method
]


def ours(template: str) -> str:
    result = render(spec(template, extra={"x": CONTEXT}))
    if not result.ok:
        raise RuntimeError(" ".join(d.rule_id for d in result.diagnostics))
    entry = result.files.get("haproxy.cfg")
    assert entry is not None
    return entry.content.decode()


def stock(template: str) -> str:
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
    return env.from_string(template).render(extraContext={"x": CONTEXT})


@pytest.mark.parametrize("template", TEMPLATES)
def test_same_output_as_stock_jinja(template: str) -> None:
    template = template.replace("x.", "extraContext.x.")
    assert ours(template) == stock(template)


@pytest.mark.parametrize("template", FAILING)
def test_same_failure_as_stock_jinja(template: str) -> None:
    template = template.replace("x.", "extraContext.x.")
    with pytest.raises((UndefinedError, TypeError, SecurityError)):
        stock(template)
    with pytest.raises(RuntimeError, match=r"^E100[24]$"):
        ours(template)


def test_the_shortcuts_are_in_the_generated_code() -> None:
    env = Renderer(spec("")).environment
    source = env.compile("{{ p.rstrip('/') ~ '-' ~ q }}", raw=True)
    assert "(t_htc_c.rstrip if type(t_htc_c := " in source
    assert ") is str else environment.htc_later(context, " in source
    assert "'%s%s%s' % (" in source and "str_join((" not in source
    assert "t_htc_c.format" not in env.compile("{{ p.format(1) }}", raw=True)
