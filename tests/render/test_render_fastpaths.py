"""The sandbox's direct paths (controller.render.environment: plain functions and classes
called directly, ``.get`` of mappings, missing keys) give what stock Jinja2's immutable
sandbox gives: the same value, or an error of the same kind — an unsafe callable stays
refused."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import StrictUndefined, pass_context, pass_environment
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from controller.render import Renderer
from controller.render.environment import TemplateEnvironment
from controller.render.keyed import Keyed
from controller.resources import FrozenDict
from tests.render.render_kit import service, snapshot, spec, text


def plain(x: Any = 1) -> str:
    return f"plain {x}"


def unsafe(x: Any = 1) -> str:
    return f"called {x}"


unsafe.unsafe_callable = True  # type: ignore[attr-defined]


def alters(x: Any = 1) -> str:
    return f"altered {x}"


alters.alters_data = True  # type: ignore[attr-defined]


@pass_context
def wants_context(context: Any, x: Any = 1) -> str:
    return f"context {type(context).__name__} {x}"


@pass_environment
def wants_environment(environment: Any, x: Any = 1) -> str:
    return f"environment {x}"


def stops() -> None:
    raise StopIteration


class Plain:
    def __init__(self, x: Any = 1) -> None:
        self.x = x

    def __str__(self) -> str:
        return f"Plain {self.x}"


class Refused(Plain):
    unsafe_callable = True


class CallsWithContext:
    @pass_context
    def __call__(self, context: Any) -> str:
        return "instance with context"


VALUES: dict[str, Any] = {
    "plain": plain,
    "unsafe": unsafe,
    "alters": alters,
    "wants_context": wants_context,
    "wants_environment": wants_environment,
    "stops": stops,
    "Plain": Plain,
    "Refused": Refused,
    "calls_with_context": CallsWithContext(),
    "d": {"a": 1, "get": "a key named get"},
    "f": FrozenDict({"a": 1}),
    "k": Keyed("k", {"a": 1}),
}

TEMPLATES = [
    "{{ plain() }} {{ plain(2) }} {{ plain(x=3) }}",
    "{{ wants_context(4) }} {{ wants_environment(5) }}",
    "{{ Plain() }} {{ Plain(x=6) }}",
    "{{ calls_with_context() }}",
    "{{ stops() is undefined }}",
    "{{ dict(a=1) }} {{ range(3) | list }} {% set n = namespace(v=1) %}{{ n.v }}",
    "{{ d.get('a') }} {{ d.get('zz', 2) }} {{ f.get('a') }} {{ k.get('a') }} {{ k.get('b', 3) }}",
    "{{ d['get'] }} {{ d.zz | default('none') }} {{ f.zz | default('none') }}",
]

REFUSED = ["{{ unsafe() }}", "{{ alters() }}", "{{ Refused() }}", "{{ d.zz.yy }}"]


def _render(env: Any, template: str) -> str:
    return str(env.from_string(template).render(**VALUES))


def _ours() -> TemplateEnvironment:
    return TemplateEnvironment()


def _stock() -> ImmutableSandboxedEnvironment:
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined)


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_same_value_as_the_stock_sandbox(template: str) -> None:
    env = _ours()
    first = _render(env, template)
    assert first == _render(_stock(), template)
    assert _render(env, template) == first  # again, with the verdicts cached


@pytest.mark.parametrize("template", REFUSED)
def test_the_same_refusal_as_the_stock_sandbox(template: str) -> None:
    env = _ours()
    with pytest.raises((SecurityError, UndefinedError)) as stock:
        _render(_stock(), template)
    for _ in range(2):  # the second time with the verdict cached
        with pytest.raises(stock.type):
            _render(env, template)


def test_resources_collections_read_as_attributes_as_the_sandbox_allows() -> None:
    """``resources.<name>`` goes straight to the collection and finds what the generic path
    finds, a collection named with a leading underscore included (Resources answers every
    collection name, as a subscript does)."""
    collections = {
        "services": {"apiVersion": "v1", "kind": "Service"},
        "_hidden": {"apiVersion": "v1", "kind": "Service"},
    }
    s = spec(
        "{{ resources.services | length }} {{ resources._hidden | length }}"
        " {{ resources['_hidden'] | length }} {{ resources.keys is defined }}\n",
        watched=collections,
    )
    view = snapshot(s, [("services", service("a", 80)), ("_hidden", service("b", 80))])
    result = Renderer(s).render(view)
    assert text(result) == "1 1 1 True\n"
