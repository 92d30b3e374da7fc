"""Our ``selectattr``/``rejectattr`` give what Jinja2's give: items, order, errors, laziness."""

from __future__ import annotations

from typing import Any

import jinja2.filters
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.render.environment import TemplateEnvironment
from controller.render.filters import FILTERS

ITEMS: list[Any] = [
    {"name": "http", "port": 80, "on": True, "sub": {"k": "x"}, "l": [1, 2]},
    {"name": "", "port": "80", "on": False, "sub": {"k": None}, "l": [3]},
    {"port": 8080, "on": 0, "sub": {}},
    {"name": "a\nb'\"#${x}\x00\u2028", "port": None, "on": [], "sub": {"k": "y"}, "l": []},
]

EXPRESSIONS = [
    "items | selectattr('on') | list",
    "items | rejectattr('on') | list",
    "items | selectattr('name', 'defined') | list",
    "items | rejectattr('name', 'defined') | list",
    "items | selectattr('name', 'defined') | selectattr('name', 'eq', 'http') | list",
    "items | selectattr('port', 'eq', 80) | list",
    "items | selectattr('port', '==', '80') | list",
    "items | rejectattr('port', 'equalto', 80) | list",
    "items | selectattr('port', 'in', [80, 8080]) | list",
    "items | selectattr('port', 'none') | list",
    "items | selectattr('sub.k', 'defined') | list",
    "items | selectattr('sub.k') | list",
    "items | selectattr('l.0', 'defined') | list",
    "items | selectattr('name', 'string') | map(attribute='port') | list",
    "items | selectattr('name') | list",  # undefined on a missing name: an error
    "items | selectattr('port', 'nosuchtest') | list",
    "items | selectattr('port', 'eq') | list",
    "items | selectattr('port', 'eq', 80, extra=1) | list",
    "items | selectattr('port', 'divisibleby', 40) | list",
    "items | selectattr('name', 'filter') | list",  # a test that takes the environment
    "items | selectattr() | list",
    "[] | selectattr() | list",
    "[] | selectattr('x', 'nosuchtest') | list",
    "missing | selectattr('x') | list",
    "items | selectattr('port', 'eq', 80) | first",
    "items | selectattr('port', 'eq', 80)",  # a generator, not a list, as Jinja2's
    "items | selectattr(none) | list",
    "items | selectattr(0) | list",
    "'abc' | selectattr('upper') | list",
]


def _env(ours: bool) -> TemplateEnvironment:
    env = TemplateEnvironment()
    env.filters.update(FILTERS)
    if not ours:
        env.filters["selectattr"] = jinja2.filters.sync_do_selectattr
        env.filters["rejectattr"] = jinja2.filters.sync_do_rejectattr
    return env


OURS, THEIRS = _env(True), _env(False)


def _outcome(env: TemplateEnvironment, expr: str, items: Any) -> tuple[str, str]:
    try:
        out = env.from_string("{{ " + expr + " }}").render(items=items)
    except Exception as exc:  # every error is part of the behaviour compared
        return type(exc).__name__, str(exc)
    if out.startswith("<generator object "):
        out = "<generator>"  # the address differs between any two generators
    return "ok", out


def test_ours_are_the_filters_in_use() -> None:
    assert OURS.filters["selectattr"] is FILTERS["selectattr"]
    assert THEIRS.filters["selectattr"] is jinja2.filters.sync_do_selectattr


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_same_as_jinja2(expr: str) -> None:
    assert _outcome(OURS, expr, ITEMS) == _outcome(THEIRS, expr, ITEMS)


def test_nothing_runs_before_the_first_item_is_asked_for() -> None:
    # A generator that is never iterated raises nothing, with either version.
    for env in (OURS, THEIRS):
        out = env.from_string("{% set g = items | selectattr('port', 'nosuchtest') %}ok")
        assert out.render(items=ITEMS) == "ok"


HOSTILE_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["k", "name"]), st.text(max_size=3), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["name", "port", "k"]), HOSTILE_VALUE, max_size=3),
        max_size=5,
    ),
    st.sampled_from(["name", "port", "k", "name.k", "port.0"]),
    st.sampled_from(["", ", 'defined'", ", 'eq', 80", ", 'in', ['a', 80]", ", 'none'"]),
    st.sampled_from(["selectattr", "rejectattr"]),
)
def test_same_as_jinja2_on_any_items(items: Any, attr: str, test: str, which: str) -> None:
    expr = f"items | {which}('{attr}'{test}) | list"
    assert _outcome(OURS, expr, items) == _outcome(THEIRS, expr, items)


@pytest.mark.parametrize("expr", [e for e in EXPRESSIONS if e.startswith("items")])
def test_same_as_jinja2_on_stored_objects(expr: str) -> None:
    # Stored objects are FrozenDicts, read without the environment's getitem when they
    # hold the name.
    from controller.resources.frozen import freeze

    frozen = freeze(ITEMS)
    assert _outcome(OURS, expr, frozen) == _outcome(THEIRS, expr, frozen)


def test_split_attribute_paths_are_kept_bounded() -> None:
    from controller.render import select

    for i in range(3 * select._PARTS_MAX):
        assert select._parts(f"a.{i}") == ("a", i)
    assert len(select._PARTS) <= select._PARTS_MAX

    class Name(str):
        __slots__ = ()

    assert select._parts(Name("b.1")) == ("b", 1)
