"""``{% set ns.x = ns.x + [...] %}`` appends in place only where no template can tell."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from controller.render import Renderer
from controller.render.grown import GrownList, grow, mark_shared
from tests.render.render_kit import render, spec, text


def rendered(template: str) -> str:
    return text(render(spec(template)))


def test_the_idiom_is_compiled_to_the_grow_hook_and_nothing_else_is() -> None:
    env = Renderer(spec("")).environment
    source = env.compile("{% set n = namespace(x=[]) %}{% set n.x = n.x + [1, 2] %}", raw=True)
    assert "environment.htc_grow(" in source and "n.x + " not in source
    for other in (
        "{% set n.x = n.y + [1] %}",  # another attribute
        "{% set n.x = [1] + n.x %}",  # prepending
        "{% set n.x = n.x + m %}",  # not a list display
        "{% set n.x = n.x ~ 'a' %}",
    ):
        assert "htc_grow" not in env.compile(
            "{% set n = namespace(x=[], y=[]) %}" + other, raw=True
        )


@pytest.mark.parametrize(
    "read",
    ["n.x", "n['x']", "n | attr('x')", "[n] | map(attribute='x') | first", "(n.x, 0)[0]"],
)
def test_a_list_read_in_between_never_changes(read: str) -> None:
    """Each way of reading the attribute must mark the list it returns (the read comes right
    after a grow, so the list is unshared until then)."""
    out = rendered(
        "{% set n = namespace(x=[]) %}"
        "{% for i in range(3) %}{% set n.x = n.x + [i] %}{% endfor %}"
        f"{{% set kept = {read} %}}"
        "{% for i in range(3, 5) %}{% set n.x = n.x + [i] %}{% endfor %}"
        "{{ kept }} {{ n.x }}\n"
    )
    assert out == "[0, 1, 2] [0, 1, 2, 3, 4]\n"


def test_the_starting_list_is_not_changed() -> None:
    out = rendered(
        "{% set base = [1] %}{% set n = namespace(x=base) %}"
        "{% set n.x = n.x + [2] %}{% set n.x = n.x + [3] %}{{ base }} {{ n.x }}\n"
    )
    assert out == "[1] [1, 2, 3]\n"


def test_an_item_that_reads_the_list_sees_it_as_it_was() -> None:
    out = rendered(
        "{% set n = namespace(x=[]) %}"
        "{% for i in range(3) %}{% set n.x = n.x + [n.x | length, n.x] %}{% endfor %}"
        "{{ n.x | length }} {{ n.x[1] }} {{ n.x[3] }}\n"
    )
    assert out == "6 [] [0, []]\n"


@pytest.mark.parametrize(
    ("template", "rule_id"),
    [
        ("{% set n = namespace() %}{% set n.x = n.x + [1] %}", "E1002"),  # undefined
        ("{% set n = namespace(x=(1,)) %}{% set n.x = n.x + [1] %}", "E1004"),  # tuple + list
        ("{% set n = 'text' %}{% set n.x = n.x + [1] %}", "E1004"),  # not a namespace
    ],
)
def test_what_the_plus_would_refuse_is_refused(template: str, rule_id: str) -> None:
    r = render(spec(template))
    assert [d.rule_id for d in r.diagnostics] == [rule_id]


STEP = st.one_of(
    st.tuples(st.just("grow"), st.integers(0, 9)),
    st.tuples(st.just("keep"), st.integers(0, 2)),
    st.tuples(st.just("show"), st.integers(0, 2)),
)


@given(st.lists(STEP, max_size=12))
@settings(max_examples=150, deadline=None)
def test_any_mix_of_growing_and_reading_renders_as_stock_jinja(
    steps: list[tuple[str, int]],
) -> None:
    parts = ["{% set n = namespace(x=[]) %}{% set k0 = [] %}{% set k1 = [] %}{% set k2 = [] %}"]
    for op, arg in steps:
        if op == "grow":
            parts.append(f"{{% set n.x = n.x + [{arg}, n.x | length] %}}")
        elif op == "keep":
            parts.append(f"{{% set k{arg} = n.x %}}")
        else:
            parts.append(f"{{{{ k{arg} }}}};{{{{ n.x }}}}\n")
    template = "".join(parts) + "{{ n.x }}\n"
    stock = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
    assert rendered(template) == stock.from_string(template).render()


def test_grow_appends_in_place_until_the_list_is_read() -> None:
    n = Namespace(x=[0])
    grow(n, "x", [1], n.x)
    first = n.x
    assert type(first) is GrownList and first == [0, 1]
    grow(n, "x", [2], n.x)
    assert n.x is first and first == [0, 1, 2]  # nobody read it: appended in place
    mark_shared(first)
    grow(n, "x", [3], n.x)
    assert first == [0, 1, 2] and n.x == [0, 1, 2, 3] and n.x is not first


def test_a_first_growth_makes_its_grown_list_without_a_call_of_its_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first growth of a plain list (twice per Ingress in the quickstart's routes) makes
    the GrownList without a call of GrownList.__init__: the same items, not shared, so the
    next growth appends in place and a read still marks it."""
    env = Renderer(spec("")).environment

    def no_init(self: GrownList, items: object = ()) -> None:
        raise AssertionError("GrownList.__init__ called")

    monkeypatch.setattr(GrownList, "__init__", no_init)
    ns = Namespace(x=[0])
    env.htc_grow(ns, "x", [1, 2])
    attrs = object.__getattribute__(ns, "_Namespace__attrs")
    grown = attrs["x"]
    assert type(grown) is GrownList and grown == [0, 1, 2] and grown._shared is False
    env.htc_grow(ns, "x", [3])
    assert attrs["x"] is grown and grown == [0, 1, 2, 3]
    assert mark_shared(grown) is grown and grown._shared is True
