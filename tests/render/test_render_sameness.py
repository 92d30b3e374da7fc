"""same_module: two evaluations of one module match only when no template could tell them
apart (controller/render/sameness.py). Each case evaluates a real template twice in the
sandbox, with inputs that differ in one way."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2.environment import TemplateModule

from controller.render.environment import TemplateEnvironment
from controller.render.sameness import same_module
from controller.resources.frozen import freeze

ENV = TemplateEnvironment()


def _same(source: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    template = ENV.from_string(source)
    a_ctx = template.new_context(dict(old))
    b_ctx = template.new_context(dict(new))
    a, b = TemplateModule(template, a_ctx), TemplateModule(template, b_ctx)
    return same_module(a_ctx, a._body_stream, b_ctx, b._body_stream)


def test_the_same_inputs_give_the_same_module() -> None:
    source = (
        "{% macro m(x) %}{{ x ~ n }}{% endmacro %}{% set n = v * 2 %}"
        "{% set ns = namespace(items=[]) %}{% for i in range(3) %}"
        "{% set ns.items = ns.items + [{'i': i, 't': (i, 'a')}] %}{% endfor %}"
        "{% set shown %}{{ m(1) }}{% endset %}body {{ n }}\n"
    )
    assert _same(source, {"v": 1}, {"v": 1})


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (1, True),  # equal in Python, printed "1" and "True"
        (1, 1.0),
        ("a", "b"),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # key order shows in a loop
        ([1, 2], (1, 2)),
    ],
)
def test_values_a_template_can_tell_apart_differ(old: object, new: object) -> None:
    assert not _same("{% set x = v %}", {"v": old}, {"v": new})


def test_one_object_twice_is_not_two_equal_objects() -> None:
    source = "{% set x = [1] %}{% set pair = [x, x] if twice else [x, [1]] %}"
    assert not _same(source, {"twice": True}, {"twice": False})
    assert _same(source, {"twice": True}, {"twice": True})


def test_stored_objects_match_only_themselves() -> None:
    obj = freeze({"metadata": {"name": "a"}})
    twin = freeze({"metadata": {"name": "a"}})
    assert _same("{% set o = v %}", {"v": obj}, {"v": obj})
    assert not _same("{% set o = v %}", {"v": obj}, {"v": twin})


def test_text_from_another_template_line_differs() -> None:
    source = (
        "{% set label = none %}{% if first %}{% set label %}a{% endset %}{% else %}\n"
        "{% set label %}a{% endset %}{% endif %}"
    )
    assert not _same(source, {"first": True}, {"first": False})


def test_a_macro_closing_over_a_different_value_differs() -> None:
    source = "{% set n = v %}{% macro m() %}{{ n }}{% endmacro %}"
    assert _same(source, {"v": 3}, {"v": 3})
    assert not _same(source, {"v": 3}, {"v": 4})


def test_module_text_counts() -> None:
    assert not _same("{{ v }}", {"v": 1}, {"v": 2})


@pytest.mark.parametrize("where", [0, 50, 99])
def test_a_long_list_of_stored_objects_matches_item_by_item(where: int) -> None:
    """A long list of stored objects (the Ingresses of our class) is compared in C where its
    items are the same objects: one other object anywhere still makes it differ, the very
    same objects match, and so do lists that differ only in equal scalars."""
    objs = [freeze({"metadata": {"name": f"o-{i}"}}) for i in range(100)]
    other = list(objs)
    other[where] = freeze({"metadata": {"name": f"o-{where}"}})
    source = "{% set items = v %}"
    assert _same(source, {"v": objs}, {"v": list(objs)})
    assert not _same(source, {"v": objs}, {"v": other})
    mixed = [*objs[:50], "x" * 3, *objs[50:]]
    assert _same(source, {"v": mixed}, {"v": [*objs[:50], "".join("xxx"), *objs[50:]]})
    assert not _same(source, {"v": mixed}, {"v": [*objs[:50], "xxy", *objs[50:]]})


def test_a_long_list_holding_the_same_container_twice_is_paired() -> None:
    """Containers in a long list are still paired one to one, also when both modules hold
    the very same one: the same list twice is not that list and an equal one."""
    x, y = [1], [1]
    head = [str(i) for i in range(100)]
    source = "{% set items = v %}"
    assert _same(source, {"v": [*head, x, x]}, {"v": [*head, x, x]})
    assert not _same(source, {"v": [*head, x, x]}, {"v": [*head, x, y]})
    assert not _same(source, {"v": [*head, x, y]}, {"v": [*head, x, x]})
